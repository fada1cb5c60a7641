// Profile: what one model costs, layer by layer, on the device it was measured on.
//
// For every layer: forward, backward and recompute time at the profiled micro-batch sizes,
// bytes per sample of the layer's output (what crosses a stage boundary) and of what it saves for
// backward, parameter and optimizer-state bytes, and the time of its optimizer step. Edges between
// layers are tensors; a skip connection is an edge that jumps over layers. Without explicit edges
// the layers form a chain and edge i -> i+1 carries layer i's output.
//
// File format "pipetwin.profile" version 1 (JSON): the fields below, validated on load with errors
// naming the file and field.
//
// Thread-safety: plain value types.
#pragma once

#include <string>
#include <vector>

#include "core/json_io.hpp"
#include "core/tensor_parallel.hpp"

namespace pipetwin {

struct LayerTiming {
  int micro_batch = 1;  // samples in the profiled micro-batch
  double forward_s = 0;
  double backward_s = 0;   // full backward: input and weight gradients
  double recompute_s = 0;  // forward again under checkpointing (usually == forward_s)
  // How much slower the layer runs while a device that shares its compute resources (the other
  // core of a CPU, other streams of a GPU) runs another stage: measured time ratio, >= 1. The
  // first is the forward's (and the recompute's); the second the backward's (and the optimizer
  // step's), 0: not measured apart, the first stands for both. They differ: on this project's CPU
  // machine a ViT block's backward slows by about 1.2 beside another stage, its forward barely.
  double contention = 1.0;
  double contention_backward = 0;
  // The backward's factor: contention_backward where measured, else contention.
  double backward_contention() const {
    return contention_backward > 0 ? contention_backward : contention;
  }
  // What the forward (and the recompute) and the backward cost more when they start after their
  // device waited for Profile::cold_pauses_s[i] while a device sharing its caches computed (the
  // other hyper-thread of a CPU core): seconds, one per pause, measured beside that device (so
  // already at the contended speed); empty: not measured. The wait lets the other stage evict
  // this one's weights and saved activations, which the pass then reads back from memory.
  std::vector<double> cold_forward_s{}, cold_backward_s{};
  // The part of backward_s that computes the weight gradients when the backward is split in an
  // input half (I) and a weight half (W) as zero-bubble schedules run it (Qi et al. 2024, Section
  // 2): measured apart by the profiler, the two halves' sum checked against the whole backward.
  // -1: not measured; the cost model then estimates it (cost_model.hpp, backward_weight_s).
  double backward_weight_s = -1;
};

struct LayerProfile {
  std::string name;
  std::string kind;  // free-form op kind: "linear", "attention", "mlp", "conv", "embedding", ...
  std::vector<LayerTiming> timings;
  double output_bytes_per_sample = 0;  // activation handed to the next layer
  double saved_bytes_per_sample = 0;   // activations kept for backward (without checkpointing)
  // Measured: the most the layer's backward holds above what was alive when it began (its
  // input and parameter gradients, and buffers such as a concatenation's gradient); 0: not
  // measured, the cost model estimates it (cost_model.hpp, backward_working_bytes).
  double backward_bytes_per_sample = 0;
  // Measured workspace: the most the layer's forward (backward) holds while it runs beyond what
  // it leaves behind, buffers it frees before it returns: a convolution's im2col columns, oneDNN's
  // scratchpad and reordered weights, the gradients between the operators inside the layer. How
  // much depends on the kernels the machine dispatches to (oneDNN picks other convolutions on an
  // AVX2-only CPU than on an AVX-512 one), so it is measured where the profile is. Forward: the
  // peak less what is alive after it (input, saved activations, output). Backward: the peak less
  // what was alive when it began and the input and parameter gradients it makes. 0: none, or not
  // measured. Charged by the memory walk while the pass runs (core/memory.hpp).
  double forward_workspace_bytes_per_sample = 0;
  double backward_workspace_bytes_per_sample = 0;
  double param_bytes = 0;
  double optimizer_bytes = 0;   // optimizer state (e.g. 2x params for Adam)
  double optimizer_step_s = 0;  // time of one optimizer update of this layer, in place
  // The same update written into another weight version, the old one kept for micro-batches
  // still reading it (PipeDream's weight stashing): it streams a third buffer through the caches.
  // 0: not measured, optimizer_step_s stands for both.
  double optimizer_new_version_s = 0;
  // A tensor-parallel shard's layer (Profile::tensor_parallel): the collectives its group runs
  // inside the forward (and again in a full recompute) and inside the backward, in order
  // (core/tensor_parallel.hpp). Empty for t = 1.
  std::vector<TpCollective> tp_forward{}, tp_backward{};
};

struct ProfileEdge {
  int from = 0;
  int to = 0;
  double bytes_per_sample = 0;
};

struct Profile {
  std::string model;   // zoo name or synthetic spec the profile describes
  std::string device;  // device it was measured on (a catalog name, e.g. "cpu-core", "h100-sxm")
  std::string dtype = "float32";
  std::string source = "measured";  // "measured", "analytic" or "synthetic"
  // The optimizer rule the optimizer_bytes and optimizer_step_s are for: "sgd", "momentum" or
  // "adam" (core/precision.hpp); empty: not stated (profiles written before it was recorded).
  std::string optimizer;
  std::string notes;
  double input_bytes_per_sample = 0;  // the model's input (fed to the first layer)
  std::vector<LayerProfile> layers;
  std::vector<ProfileEdge> edges;  // empty: a chain
  // CPU profiles: the time of the same work on each core the profiler could use, over its time
  // on the first core (where the layer times were taken); empty: cores are alike. Cores of one
  // virtual machine need not be alike (we measured one vCPU 27% slower than the other, steadily).
  std::vector<double> core_slowdown;
  // The waits, in seconds and increasing, at which the layers' cold_forward_s / cold_backward_s
  // were measured; empty: not measured.
  std::vector<double> cold_pauses_s;
  // What this profile is a shard of: t > 1, one device's share of every layer of a stage spread
  // over a tensor-parallel group (profiles/zoo/tensor_parallel.hpp). Size 1: the whole model.
  TensorParallel tensor_parallel;

  int num_layers() const { return static_cast<int>(layers.size()); }
  // Explicit edges, or the implied chain.
  std::vector<ProfileEdge> effective_edges() const;
};

Profile profile_from_json(const JsonView& doc);
Json profile_to_json(const Profile& profile);
Profile load_profile(const std::string& path);
void save_profile(const Profile& profile, const std::string& path);

}  // namespace pipetwin
