#include "python/bindings/zoo_api.hpp"

#include "profiles/zoo/zoo.hpp"
#include "python/bindings/options.hpp"

namespace pipetwin::python {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

py::list zoo_list() {
  py::list rows;
  for (const auto& name : zoo::zoo_names()) {
    const zoo::ZooModel m = zoo::describe_model(name);
    py::dict row;
    row["name"] = name;
    row["layers"] = m.num_layers();
    row["params"] = m.parameters();
    row["published_params"] = m.unique_parameters();
    row["gflops_per_sample"] = m.forward_flops() / 1e9;
    row["description"] = m.description;
    rows.append(row);
  }
  return rows;
}

py::list layer_rows(const zoo::ZooModel& m, double elem) {
  py::list rows;
  for (int i = 0; i < m.num_layers(); ++i) {
    const auto& l = m.layers[static_cast<size_t>(i)];
    py::dict row;
    row["index"] = i;
    row["layer"] = l.name;
    row["kind"] = l.kind;
    row["params"] = l.params;
    row["gflops_per_sample"] = l.forward_flops / 1e9;
    row["output_mib_per_sample"] = l.output_elems * elem / kMiB;
    row["saved_mib_per_sample"] = l.saved_elems * elem / kMiB;
    rows.append(row);
  }
  return rows;
}

py::list edge_rows(const zoo::ZooModel& m, double elem) {
  py::list rows;
  for (const auto& e : m.edges) {
    py::dict row;
    row["from"] = e.from;
    row["to"] = e.to;
    row["mib_per_sample"] = e.elems * (e.tokens ? 8.0 : elem) / kMiB;
    row["skip"] = e.to != e.from + 1;
    rows.append(row);
  }
  return rows;
}

// `pipetwin zoo NAME`'s model, as data.
py::dict zoo_model(const std::string& name, const std::string& dtype) {
  const zoo::ZooModel m = zoo::describe_model(name, "zoo");
  const double elem = dtype_bytes(dtype, "--dtype");
  py::dict out;
  out["name"] = m.name;
  out["family"] = m.family;
  out["description"] = m.description;
  out["params"] = m.parameters();
  out["published_params"] = m.unique_parameters();
  out["tied_params"] = m.tied_params;
  out["gflops_per_sample"] = m.forward_flops() / 1e9;
  out["dtype"] = dtype;
  out["layers"] = layer_rows(m, elem);
  out["edges"] = edge_rows(m, elem);
  return out;
}

py::object zoo_verb(const py::kwargs& kwargs) {
  Options o("zoo", kwargs);
  std::string name, dtype = "float32";
  o.text("name", name);
  o.text("dtype", dtype);
  o.finish();
  if (name.empty()) return zoo_list();
  return zoo_model(name, dtype);
}

}  // namespace

void bind_zoo(py::module_& m) {
  m.def("_zoo", &zoo_verb);
}

}  // namespace pipetwin::python
