#include <fmt/format.h>

#include "core/error.hpp"
#include "core/partition/partitioners.hpp"

namespace pipetwin {

std::vector<std::string> partitioner_names() { return {"uniform", "balance-time", "balance-size", "autopipe",
                                                   "optimal", "pipedream-dp", "mixed-pipe", "metis"}; }

std::unique_ptr<Partitioner> make_partitioner(const std::string& name) {
  if (name == "uniform") return make_uniform_partitioner();
  if (name == "balance-time") return make_balance_time_partitioner();
  if (name == "balance-size") return make_balance_size_partitioner();
  if (name == "optimal") return make_optimal_partitioner();
  if (name == "pipedream-dp") return make_pipedream_dp_partitioner();
  if (name == "mixed-pipe") return make_mixed_pipe_partitioner();
  if (name == "metis") return make_metis_partitioner();
  if (name == "autopipe") return make_autopipe_partitioner();
  std::string known;
  for (const auto& n : partitioner_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError(fmt::format("unknown partitioner \"{}\" (known: {})", name, known));
}

}  // namespace pipetwin
