// Factories of the partitioners, one per file (registry.cpp maps names to them).
#pragma once

#include <memory>

#include "core/partition/partitioner.hpp"

namespace pipetwin {

std::unique_ptr<Partitioner> make_uniform_partitioner();
std::unique_ptr<Partitioner> make_balance_time_partitioner();
std::unique_ptr<Partitioner> make_balance_size_partitioner();
std::unique_ptr<Partitioner> make_optimal_partitioner();
std::unique_ptr<Partitioner> make_pipedream_dp_partitioner();
std::unique_ptr<Partitioner> make_mixed_pipe_partitioner();
std::unique_ptr<Partitioner> make_metis_partitioner();
std::unique_ptr<Partitioner> make_autopipe_partitioner();  // core/partition/autopipe.cpp

}  // namespace pipetwin
