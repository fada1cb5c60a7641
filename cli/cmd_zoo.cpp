// `pipetwin zoo [NAME]`: the analytic model zoo (profiles/zoo/zoo.hpp). Without a name it lists the
// zoo's preset names with their parameter counts; with one it prints the model's layers (name,
// kind, parameters, forward GFLOPs per sample, output and saved activation MiB per sample in the
// chosen dtype), the edges that skip layers, and the totals.
#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/table.hpp"
#include "profiles/zoo/zoo.hpp"

namespace pipetwin::cli {

namespace {

struct ZooArgs {
  std::string name, dtype = "float32";
};

std::string count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f}k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

void list_zoo() {
  Table t({"name", "layers", "params", "GFLOPs/sample", "description"});
  for (const auto& name : zoo::zoo_names()) {
    const zoo::ZooModel m = zoo::describe_model(name);
    t.add({name, std::to_string(m.num_layers()), count(static_cast<double>(m.unique_parameters())),
           fmt::format("{:.3f}", m.forward_flops() / 1e9), m.description});
  }
  std::fputs(t.render().c_str(), stdout);
  std::puts(
      "any preset takes options (e.g. bert:large,seq=384; t5:3b,enc_seq=512,dec_seq=4); "
      "`pipetwin zoo NAME` lists the layers");
}

void show_model(const ZooArgs& a) {
  const zoo::ZooModel m = zoo::describe_model(a.name, "zoo");
  const double elem = dtype_bytes(a.dtype, "--dtype");
  const double mib = 1024.0 * 1024.0;
  std::printf("%s: %s\n", m.name.c_str(), m.description.c_str());
  Table t(
      {"#", "layer", "kind", "params", "GFLOPs/sample", "output MiB/sample", "saved MiB/sample"});
  double output = 0, saved = 0;
  for (int i = 0; i < m.num_layers(); ++i) {
    const auto& l = m.layers[static_cast<size_t>(i)];
    t.add({std::to_string(i), l.name, l.kind, count(static_cast<double>(l.params)),
           fmt::format("{:.4f}", l.forward_flops / 1e9),
           fmt::format("{:.3f}", l.output_elems * elem / mib),
           fmt::format("{:.3f}", l.saved_elems * elem / mib)});
    output += l.output_elems;
    saved += l.saved_elems;
  }
  t.add({"", "total", "", count(static_cast<double>(m.parameters())),
         fmt::format("{:.4f}", m.forward_flops() / 1e9), fmt::format("{:.3f}", output * elem / mib),
         fmt::format("{:.3f}", saved * elem / mib)});
  std::fputs(t.render().c_str(), stdout);
  int skips = 0;
  for (const auto& e : m.edges) skips += e.to != e.from + 1;
  std::printf("parameters: %s as built", count(static_cast<double>(m.parameters())).c_str());
  if (m.tied_params > 0) {
    std::printf(", %s published (%s tied to the input embedding)",
                count(static_cast<double>(m.unique_parameters())).c_str(),
                count(static_cast<double>(m.tied_params)).c_str());
  }
  std::printf("\nedges: %s, %d skipping layers; activations in %s\n",
              m.edges.empty() ? "a chain" : std::to_string(m.edges.size()).c_str(), skips,
              a.dtype.c_str());
}

}  // namespace

void add_zoo_command(CLI::App& app) {
  auto args = std::make_shared<ZooArgs>();
  CLI::App* cmd = app.add_subcommand("zoo", "List the analytic model zoo, or one model's layers");
  cmd->add_option("name", args->name, "model name (e.g. bert:large, t5:3b,enc_seq=512,dec_seq=4)");
  cmd->add_option("--dtype", args->dtype, "element type for activation sizes")
      ->capture_default_str();
  cmd->callback([args] {
    if (args->name.empty()) {
      list_zoo();
    } else {
      show_model(*args);
    }
  });
}

}  // namespace pipetwin::cli
