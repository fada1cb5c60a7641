// The reproduction entries in the order `pipetwin reproduce all` runs them.
#include <fmt/format.h>

#include "core/error.hpp"
#include "studies/reproduce/entries.hpp"

namespace pipetwin::sim {

const std::vector<std::unique_ptr<ReproEntry>>& repro_entries() {
  static const std::vector<std::unique_ptr<ReproEntry>> entries = [] {
    std::vector<std::unique_ptr<ReproEntry>> e;
    e.push_back(make_epfl_entry());
    e.push_back(make_pipetransformer_entry());
    e.push_back(make_torchgpipe_entry());
    e.push_back(make_ftpipe_entry());
    e.push_back(make_pipedream_entry());
    return e;
  }();
  return entries;
}

const ReproEntry& find_repro_entry(const std::string& id) {
  std::string known;
  for (const auto& e : repro_entries()) {
    if (e->id() == id) return *e;
    known += (known.empty() ? "" : ", ") + e->id();
  }
  throw InputError(fmt::format("reproduce: unknown entry \"{}\" (known: {}, all)", id, known));
}

}  // namespace pipetwin::sim
