#include "core/framework.hpp"

#include <array>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin {

namespace {

constexpr std::array<const char*, kFrameworkTerms> kTermNames = {
    "iteration_s",   "micro_batch_s",       "layer_launch_s",
    "compute_scale", "communication_scale", "transfer_host_s", "contention_scale"};
// The members in the same order.
constexpr std::array<double Framework::*, kFrameworkTerms> kTermMembers = {
    &Framework::iteration_s,   &Framework::micro_batch_s,       &Framework::layer_launch_s,
    &Framework::compute_scale, &Framework::communication_scale, &Framework::transfer_host_s,
    &Framework::contention_scale};

}  // namespace

const char* framework_term_name(FrameworkTerm term) {
  return kTermNames[static_cast<size_t>(term)];
}

double& framework_term(Framework& f, FrameworkTerm term) {
  return f.*kTermMembers[static_cast<size_t>(term)];
}

double framework_term(const Framework& f, FrameworkTerm term) {
  return f.*kTermMembers[static_cast<size_t>(term)];
}

double framework_term_neutral(FrameworkTerm term) {
  return term == FrameworkTerm::kCompute || term == FrameworkTerm::kCommunication ||
                 term == FrameworkTerm::kContention
             ? 1.0
             : 0.0;
}

FrameworkTerm parse_framework_term(const std::string& name, const std::string& flag) {
  for (int i = 0; i < kFrameworkTerms; ++i) {
    const std::string full = kTermNames[static_cast<size_t>(i)];
    const std::string shortened = full.substr(0, full.rfind('_'));  // "micro_batch", "compute"
    if (name == full || name == shortened) return FrameworkTerm(i);
  }
  throw InputError(fmt::format(
      "{}: unknown framework term \"{}\" (iteration, micro_batch, layer_launch, compute, "
      "communication, transfer_host, contention)",
      flag, name));
}

Json framework_to_json(const Framework& f) {
  Json doc = json_document("pipetwin.framework", 1);
  doc["name"] = f.name;
  if (!f.description.empty()) doc["description"] = f.description;
  if (!f.source.empty()) doc["source"] = f.source;
  Json terms = Json::object();
  for (int i = 0; i < kFrameworkTerms; ++i)
    terms[kTermNames[static_cast<size_t>(i)]] = framework_term(f, FrameworkTerm(i));
  doc["terms"] = terms;
  if (!f.fit.is_null()) doc["fit"] = f.fit;
  return doc;
}

Framework framework_from_json(const JsonView& doc) {
  doc.check_format("pipetwin.framework", 1);
  doc.allow_only({"format", "version", "name", "description", "source", "terms", "fit"});
  Framework f;
  f.name = doc.string("name");
  f.description = doc.string_or("description", "");
  f.source = doc.string_or("source", "");
  const JsonView terms = doc.at("terms");
  terms.allow_only(std::vector<std::string_view>(kTermNames.begin(), kTermNames.end()));
  for (int i = 0; i < kFrameworkTerms; ++i) {
    const auto term = FrameworkTerm(i);
    const char* name = kTermNames[static_cast<size_t>(i)];
    const double neutral = framework_term_neutral(term);
    // Overheads may be 0; a scale must be positive (a zero scale would make time free).
    framework_term(f, term) =
        neutral == 0 ? terms.nonneg_or(name, neutral) : terms.positive_or(name, neutral);
  }
  if (auto fit = doc.find("fit")) f.fit = fit->raw();
  return f;
}

Framework load_framework(const std::string& path) {
  return load_json_as(path, framework_from_json);
}

void save_framework(const Framework& f, const std::string& path) {
  save_json_file(path, framework_to_json(f));
}

}  // namespace pipetwin
