// Partitioners: split a model's layers into pipeline stages and place the stages on devices.
//
// All partitioners sit behind one interface and one registry (`make_partitioner(name)`); each
// lives in its own file. A Partition lists the layers of every stage; contiguous partitioners
// return consecutive layer ranges in model order, one stage per device. Graph partitioners
// (mixed-pipe, metis) may put several stages on one device and let a stage feed a stage that is
// not its neighbour (FTPipe Section 4: "stages can communicate with non-neighbors directly");
// they fill `device`. PipeDream's planner may replicate a stage data-parallel; it fills
// `replicas`. Stages are always numbered in a topological order of the stage graph, so every
// model edge goes from a lower (or the same) stage to a higher one.
//
// Partitioners receive the cost model so they can weigh layers by time (at the plan's
// micro-batch size) or by memory, and a per-device memory limit they must respect (0: none); one
// that cannot meet it throws NoFitError saying which stage (or device) needs how much. What a
// stage needs is priced by the request's schedule model when it has one (`memory`,
// stage_memory.hpp: the memory walk's peak for the stage at its position in the pipeline, under
// the schedule, M and checkpointing being planned; sim/planner.cpp passes it), else as static
// bytes plus `in_flight` micro-batches of activations. The searching partitioners (optimal,
// pipedream-dp, balance-time, balance-size, mixed-pipe, metis) never return a stage over the
// limit when another choice fits; uniform and autopipe have no choice and only check
// (docs/partition-memory.md).
//
// Candidates are compared by `evaluate_partition`: the request's evaluator when it has one (the
// planner passes a simulator-based one, sim/planner.cpp; core/ cannot call the simulator), else
// `bottleneck_time`, FTPipe's stage period (Section 4, Equation 1) on the slowest device.
//
// Thread-safety: partitioners are stateless; partition() may be called concurrently (the
// evaluator must then be thread-safe too).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/cost_model.hpp"
#include "core/error.hpp"

namespace pipetwin {

class StageMemory;  // stage_memory.hpp

struct Partition {
  std::vector<std::vector<int>> stages;  // layers of each stage, ascending
  // Data-parallel copies of each stage (PipeDream); empty: one each. A replicated stage occupies
  // as many devices, one stage per device, in stage order.
  std::vector<int> replicas;
  // Stage -> device of one pipeline replica; empty: stage s on device s.
  std::vector<int> device;

  int num_stages() const { return static_cast<int>(stages.size()); }
  // Sizes of the stages ("balance" in torchgpipe's terms).
  std::vector<int> balance() const;
  int replicas_of(int stage) const;
  // The device of a stage (its first device when it is replicated).
  int device_of(int stage) const;
  // Devices one pipeline replica occupies.
  int num_devices() const;
  // Every stage has the same number of replicas.
  bool uniform_replicas() const;
};

struct PartitionRequest {
  const CostModel* cost = nullptr;
  // Stages of contiguous partitioners; the number of devices (GPUs) P for the planners that
  // choose their own stage count (pipedream-dp, mixed-pipe, metis).
  int num_stages = 1;
  double micro_batch = 1;         // samples per micro-batch, for time and activation weights
  double memory_limit_bytes = 0;  // per device; 0 = unlimited
  // The schedule's memory model (must outlive the call); null: static + in_flight activations.
  const StageMemory* memory = nullptr;
  int in_flight = 1;      // without a model: micro-batches whose activations a stage holds at once
  int micro_batches = 1;  // M per optimizer step; one all-reduce per step (pipedream-dp)
  // Whether a NoFitError states the leanest split's need (need_bytes, where), which costs a
  // program over every split's memory (range_terms.hpp leanest_split) in optimal, balance-time
  // and balance-size. false: a caller that only asks whether a partition fits (capacity's
  // screen, studies/capacity_screen.hpp) gets the error with need_bytes 0.
  bool explain_no_fit = true;
  // Predicted iteration time of a candidate (lower is better; +inf: cannot run). Empty:
  // bottleneck_time. Used by partitioners that pick among candidates (mixed-pipe).
  std::function<double(const Partition&)> evaluate;
};

class Partitioner {
 public:
  virtual ~Partitioner() = default;
  virtual std::string name() const = 0;
  virtual Partition partition(const PartitionRequest& request) const = 0;
};

std::unique_ptr<Partitioner> make_partitioner(const std::string& name);
std::vector<std::string> partitioner_names();

// Helpers shared by partitioners.
Partition contiguous_partition(const std::vector<int>& balance);
// Checks the request; contiguous partitioners also need the profile's layer order to follow the
// data flow (`needs_index_order`), graph partitioners do not.
void check_partition_request(const PartitionRequest& r, const std::string& who,
                             bool needs_index_order = true);
// No partition the partitioner could return fits the memory limit. `need_bytes` is the smallest
// need it found (the leanest candidate's largest stage, or the block that found no room), `where`
// says where ("on stage 1", "on device 0 (stages 0, 2)", "for a block of 3 layer(s) from layer 5").
class NoFitError : public InputError {
 public:
  NoFitError(const std::string& message, double need_bytes, double limit_bytes, std::string where)
      : InputError(message),
        need_bytes(need_bytes),
        limit_bytes(limit_bytes),
        where(std::move(where)) {}
  double need_bytes, limit_bytes;
  std::string where;
};

// The bytes per sample that cross into `layers` from the other layers (the inputs a stage of them
// receives) and out of them (the outputs it sends), summed over the model graph's edges.
struct CrossingBytes {
  double in = 0, out = 0;
};
CrossingBytes crossing_bytes_per_sample(const CostModel& cost, const std::vector<int>& layers);

// Memory one stage needs without a schedule model: static bytes plus `in_flight` micro-batches of
// activations — the footprint balance-size and metis weigh layers by.
double stage_memory_bytes(const PartitionRequest& r, const std::vector<int>& layers);
// Memory of `layers` as stage `stage` of a pipeline of `num_stages`: the schedule model's peak
// (a chain, one stage per device) when the request has one, else stage_memory_bytes(r, layers).
double stage_memory_bytes(const PartitionRequest& r, const std::vector<int>& layers, int stage,
                          int num_stages);
// Micro-batches of activations a stage is priced with where a partitioner has no position for it
// (mixed-pipe's blocks): the most any stage of a num_stages chain keeps, or `in_flight`.
double activation_sets(const PartitionRequest& r);
// Memory of each device of one pipeline replica: the sum over the stages it hosts, each at its
// position in the partition.
std::vector<double> device_memory_bytes(const PartitionRequest& r, const Partition& p);
// Throws NoFitError naming the first stage (or device, when it hosts several stages) over the
// request's memory limit.
void check_memory(const PartitionRequest& r, const Partition& p, const std::string& who);
bool fits_memory(const PartitionRequest& r, const Partition& p);

// FTPipe Equation 1: T = C + max(0, T_comm_fwd - C) + max(0, T_comm_bwd - C), communication
// overlapping computation on its own streams.
double stage_period(double compute_s, double comm_fwd_s, double comm_bwd_s);
// The slowest device's period. Per device: C = forward + backward of its stages at the request's
// micro-batch; T_comm_fwd = receiving the activations of stage edges from other devices,
// T_comm_bwd = receiving the gradients of stage edges to other devices, one message per stage
// edge (latency + bytes / bandwidth of the link between the two devices). A stage replicated
// over m devices takes max(T, all-reduce of its gradients / M) / m (PipeDream's T(i -> j, m)).
double bottleneck_time(const PartitionRequest& r, const Partition& p);
double evaluate_partition(const PartitionRequest& r, const Partition& p);

// A partition from unordered stages: sorts each stage's layers and numbers the stages in a
// topological order of the stage graph (ties: the stage holding the lowest layer first), keeping
// each stage's device. Throws std::logic_error when the stages depend on each other in a cycle.
Partition order_stages(const ModelGraph& graph, std::vector<std::vector<int>> stages,
                       std::vector<int> device);
// The same partition with devices numbered in the order of their first stage.
Partition renumber_devices(Partition p);
// Whether the stage graph (an edge s -> t when a model edge runs from stage s to stage t) has no
// cycle; independent of the stage numbering.
bool stage_graph_is_acyclic(const ModelGraph& graph, const Partition& p);

}  // namespace pipetwin
