// Factories of the reproduction entries, one per file (registry.cpp lists them in order).
#pragma once

#include <memory>

#include "studies/reproduce/reproduce.hpp"

namespace pipetwin::sim {

std::unique_ptr<ReproEntry> make_epfl_entry();
std::unique_ptr<ReproEntry> make_pipetransformer_entry();
std::unique_ptr<ReproEntry> make_torchgpipe_entry();
std::unique_ptr<ReproEntry> make_ftpipe_entry();
std::unique_ptr<ReproEntry> make_pipedream_entry();

}  // namespace pipetwin::sim
