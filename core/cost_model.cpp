#include "core/cost_model.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/collective.hpp"
#include "core/error.hpp"
#include "core/routes.hpp"

namespace pipetwin {

CostModel::CostModel(Profile profile, const Cluster& cluster, CostOptions options)
    : profile_(std::move(profile)),
      cluster_(cluster),
      options_(options),
      graph_(ModelGraph::from_profile(profile_)),
      links_(topology_links(cluster)),
      scale_(options_.compute_scale * options_.framework.compute_scale),
      launch_s_(options_.framework.layer_launch_s),
      comm_scale_(options_.framework.communication_scale) {
  require_positive("compute scale", options_.compute_scale);
  require_positive("framework compute scale", options_.framework.compute_scale);
  require_positive("framework communication scale", comm_scale_);
  require_positive("framework contention scale", options_.framework.contention_scale);
  if (options_.optimizer_shards < 1) {
    throw InputError(fmt::format("optimizer shards must be positive ({} given)",
                                 options_.optimizer_shards));
  }
  if (options_.frozen_layers < 0 || options_.frozen_layers > profile_.num_layers()) {
    throw InputError(fmt::format("frozen layers must be in 0..{} ({} given)", profile_.num_layers(),
                                 options_.frozen_layers));
  }
  for (const auto& layer : profile_.layers) {
    std::vector<double> b, f, bw, r, c, cb, w;
    const double weight_share = estimated_weight_share(layer);
    for (const auto& t : layer.timings) {
      b.push_back(t.micro_batch);
      f.push_back(t.forward_s);
      bw.push_back(t.backward_s);
      w.push_back(t.backward_weight_s >= 0 ? t.backward_weight_s : weight_share * t.backward_s);
      r.push_back(t.recompute_s);
      c.push_back(t.contention);
      cb.push_back(t.backward_contention());
    }
    LayerFits fits;
    fits.forward = fit_linear(b, f);
    fits.backward = fit_linear(b, bw);
    fits.backward_weight = fit_linear(b, w);
    fits.recompute = fit_linear(b, r);
    fits.contended = fit_linear(b, c);
    fits.contended_backward = fit_linear(b, cb);
    fits_.push_back(std::move(fits));
    fit_cold(layer, b);
  }
  fit_tensor_parallel();
}

void CostModel::fit_cold(const LayerProfile& layer, const std::vector<double>& b) {
  LayerFits& fits = fits_.back();
  for (size_t i = 0; i < profile_.cold_pauses_s.size(); ++i) {
    std::vector<double> f, bw;
    for (const auto& t : layer.timings) {
      // profile_from_json checked the lengths; a profile built in code may leave them empty.
      f.push_back(i < t.cold_forward_s.size() ? t.cold_forward_s[i] : 0);
      bw.push_back(i < t.cold_backward_s.size() ? t.cold_backward_s[i] : 0);
    }
    fits.cold_forward.push_back(fit_linear(b, f));
    fits.cold_backward.push_back(fit_linear(b, bw));
  }
}

// The framework's layer launch (core/framework.hpp) is added to each pass of a layer: forward,
// backward (its input half when split: backward_weight_s leaves it out) and recompute.
double CostModel::forward_s(int layer, double b) const {
  return fits(layer).forward(b) * scale_ + launch_s_ + tp_forward_s(layer, b);
}

double CostModel::backward_s(int layer, double b) const {
  return frozen(layer) ? 0 : fits(layer).backward(b) * scale_ + launch_s_ + tp_backward_s(layer, b);
}

double CostModel::backward_weight_s(int layer, double b) const {
  if (frozen(layer)) return 0;
  return std::clamp(fits(layer).backward_weight(b) * scale_, 0.0, backward_s(layer, b));
}

double estimated_weight_share(const LayerProfile& layer) {
  if (layer.param_bytes <= 0) return 0;
  for (const char* kind : {"embedding", "conv", "residual", "norm"}) {
    if (layer.kind == kind) return 0;
  }
  return 0.5;
}
double CostModel::recompute_s(int layer, double b) const {
  return frozen(layer) ? 0 : fits(layer).recompute(b) * scale_ + launch_s_ + tp_forward_s(layer, b);
}

double CostModel::optimizer_s(int layer) const {
  if (frozen(layer)) return 0;
  return profile_.layers[static_cast<size_t>(layer)].optimizer_step_s * scale_ /
         options_.optimizer_shards;
}

double CostModel::optimizer_new_version_s(int layer) const {
  const double s = profile_.layers[static_cast<size_t>(layer)].optimizer_new_version_s;
  return frozen(layer) || s <= 0 ? optimizer_s(layer) : s * scale_ / options_.optimizer_shards;
}

double CostModel::measured_contention(int layer, double b) const {
  return std::max(1.0, fits(layer).contended(b));
}

double CostModel::measured_contention_backward(int layer, double b) const {
  return std::max(1.0, fits(layer).contended_backward(b));
}

double CostModel::contention(int layer, double b) const {
  return with_framework_contention(measured_contention(layer, b));
}

double CostModel::contention_backward(int layer, double b) const {
  return with_framework_contention(measured_contention_backward(layer, b));
}

double CostModel::with_framework_contention(double measured) const {
  // The framework's contention_scale on the slowdown beyond 1 (core/framework.hpp).
  const double k = options_.framework.contention_scale;
  return k == 1.0 ? measured : 1.0 + k * (measured - 1.0);
}

double CostModel::cold_forward_s(int layer, double b, size_t pause) const {
  // The cold figures were measured beside the profiler's co-runner: its contention, unscaled.
  const auto& fits = this->fits(layer).cold_forward;
  if (pause >= fits.size()) return 0;
  return fits[pause](b) * scale_ / measured_contention(layer, b);
}

double CostModel::cold_backward_s(int layer, double b, size_t pause) const {
  const auto& fits = this->fits(layer).cold_backward;
  if (frozen(layer) || pause >= fits.size()) return 0;
  return fits[pause](b) * scale_ / measured_contention_backward(layer, b);
}

double CostModel::device_slowdown(int device) const {
  const auto& slow = profile_.core_slowdown;
  if (slow.empty() || cluster_.device.kind != "cpu" || device < 0) return 1.0;
  return slow[static_cast<size_t>(device) % slow.size()];
}

double CostModel::transfer_s(double bytes, int a, int b) const {
  if (a == b || bytes <= 0) return 0;
  if (cluster_.topology && in_cluster(cluster_, a) && in_cluster(cluster_, b)) {
    // Alone on its route: its slowest resource.
    const Route r = route(cluster_, a, b);
    return (r.latency + bytes / slowest_rate(links_, {r})) * comm_scale_;
  }
  const LinkSpec& link = cluster_.link(a, b);
  return (link.latency + bytes / link.bandwidth) * comm_scale_;
}

double CostModel::allreduce_s(double bytes, const std::vector<int>& devices) const {
  return allreduce_cost(cluster_, links_, bytes, devices).seconds * comm_scale_;
}

std::vector<Bucket> CostModel::ddp_buckets(const std::vector<int>& layers) const {
  std::vector<int> sorted(layers);
  std::sort(sorted.rbegin(), sorted.rend());  // reverse parameter order
  std::vector<Bucket> out;
  Bucket current;
  bool open = false;
  for (int layer : sorted) {
    const double bytes = profile_.layers[static_cast<size_t>(layer)].param_bytes;
    if (frozen(layer) || bytes <= 0) continue;
    if (!open) {
      current = Bucket{layer, layer, 0};
      open = true;
    }
    current.first_layer = layer;
    current.bytes += bytes;
    const double cap = out.empty() ? options_.first_bucket_bytes : options_.bucket_cap_bytes;
    if (current.bytes >= cap) {
      out.push_back(current);
      open = false;
    }
  }
  if (open) out.push_back(current);
  return out;
}

StageCost CostModel::stage_cost(const std::vector<int>& layers, double b) const {
  StageCost c;
  c.layers = layers;
  c.micro_batch = b;
  std::vector<char> in_stage(static_cast<size_t>(num_layers()), 0);
  for (int l : layers) in_stage[static_cast<size_t>(l)] = 1;
  for (int l : layers) {
    const auto& p = profile_.layers[static_cast<size_t>(l)];
    const double k = contention(l, b), kb = contention_backward(l, b);
    c.forward_s += forward_s(l, b);
    c.backward_s += backward_s(l, b);
    c.tp_forward_s += tp_forward_s(l, b);
    c.tp_backward_s += frozen(l) ? 0 : tp_backward_s(l, b);
    c.tp_recompute_s += frozen(l) ? 0 : tp_forward_s(l, b);
    c.backward_weight_s += backward_weight_s(l, b);
    c.recompute_s += recompute_s(l, b);
    c.optimizer_s += optimizer_s(l);
    c.optimizer_new_version_s += optimizer_new_version_s(l);
    c.forward_shared_s += k * forward_s(l, b);
    c.backward_shared_s += kb * backward_s(l, b);
    c.backward_weight_shared_s += kb * backward_weight_s(l, b);
    c.recompute_shared_s += k * recompute_s(l, b);
    c.optimizer_shared_s += kb * optimizer_s(l);
    c.optimizer_new_version_shared_s += kb * optimizer_new_version_s(l);
    c.cold_forward_s.resize(cold_pauses().size());
    c.cold_backward_s.resize(cold_pauses().size());
    for (size_t i = 0; i < cold_pauses().size(); ++i) {
      c.cold_forward_s[i] += cold_forward_s(l, b, i);
      c.cold_backward_s[i] += cold_backward_s(l, b, i);
    }
    const double footprint = 2 * p.param_bytes + p.optimizer_bytes;
    if (frozen(l)) {
      c.frozen_bytes += options_.lambda_frozen * footprint;
    } else {
      c.param_bytes += p.param_bytes;
      c.grad_bytes += p.param_bytes;
      c.optimizer_bytes += p.optimizer_bytes / options_.optimizer_shards;
      c.saved_bytes += p.saved_bytes_per_sample * b;
    }
    if (l == 0) c.input_bytes += profile_.input_bytes_per_sample * b;
    for (const auto& e : graph_.in_edges(l)) {
      if (!in_stage[static_cast<size_t>(e.from)]) c.input_bytes += e.bytes_per_sample * b;
    }
  }
  add_framework_passes(c);
  c.backward_bytes = backward_working_bytes(layers, b);
  std::tie(c.forward_bytes, c.forward_nograd_bytes) = forward_working_bytes(layers, b);
  c.buckets = ddp_buckets(layers);
  // Backward visits the stage's layers from the last to the first; a bucket is ready once the
  // lowest layer in it is done.
  std::vector<int> order(layers);
  std::sort(order.rbegin(), order.rend());
  for (const auto& bucket : c.buckets) {
    double t = 0, tw = 0;
    for (int l : order) {
      t += backward_s(l, b);
      tw += backward_weight_s(l, b);
      if (l == bucket.first_layer) break;
    }
    c.bucket_ready_s.push_back(t);
    c.bucket_weight_ready_s.push_back(tw);
  }
  return c;
}

void CostModel::add_framework_passes(StageCost& c) const {
  // The framework's per-micro-batch term on every pass of the stage, its per-iteration term on
  // the stage's optimizer step; passes a frozen stage does not run are not charged.
  const Framework& fw = options_.framework;
  if (fw.micro_batch_s == 0 && fw.iteration_s == 0) return;
  const bool active =
      std::any_of(c.layers.begin(), c.layers.end(), [this](int l) { return !frozen(l); });
  if (!c.layers.empty()) {
    c.forward_s += fw.micro_batch_s;
    c.forward_shared_s += fw.micro_batch_s;
  }
  if (!active) return;
  for (double StageCost::*pass : {&StageCost::backward_s, &StageCost::backward_shared_s,
                                  &StageCost::recompute_s, &StageCost::recompute_shared_s})
    c.*pass += fw.micro_batch_s;
  for (double StageCost::*step :
       {&StageCost::optimizer_s, &StageCost::optimizer_shared_s,
        &StageCost::optimizer_new_version_s, &StageCost::optimizer_new_version_shared_s})
    c.*step += fw.iteration_s;
}

std::pair<double, double> CostModel::forward_working_bytes(const std::vector<int>& layers,
                                                           double b) const {
  // The layers run in order, each freeing its workspace before the next begins: layer l's peak
  // is what the layers before it saved, its own saved activations and its workspace.
  std::vector<int> order(layers);
  std::sort(order.begin(), order.end());
  double saved = 0, with_grad = 0, nograd = 0;
  for (int l : order) {
    const auto& p = profile_.layers[static_cast<size_t>(l)];
    const double workspace = p.forward_workspace_bytes_per_sample * b;
    if (!frozen(l)) saved += p.saved_bytes_per_sample * b;
    with_grad = std::max(with_grad, saved + workspace);
    nograd = std::max(nograd, workspace);
  }
  return {std::max(0.0, with_grad - saved), nograd};
}

double CostModel::layer_backward_peak(int l, double b, bool stage_output, double input_grad,
                                      bool reads_skip) const {
  const auto& p = profile_.layers[static_cast<size_t>(l)];
  const double out_grad = p.output_bytes_per_sample * b;
  // Layer l's own output (among its saved activations in the profile) is gone too by the time
  // its input gradient is formed: the next layer released it with its saved input, or l's
  // backward with l's own saved output (a ReLU's). The stage output stays: the stage keeps it
  // until its backward ends (exec/runtime/stage.hpp).
  const double own_output = stage_output ? 0.0 : out_grad;
  // The workspace (Profile's backward_workspace_bytes_per_sample, measured with the output
  // gradient held: the gradients between the layer's operators, oneDNN's weight-gradient buffers)
  // and the output gradient: inside a stage autograd frees the output gradient once the layer's
  // first operator has consumed it, so the larger of the two is alive at the layer's peak; the
  // stage's output gradient is held until its backward ends, so there both are.
  const double workspace = p.backward_workspace_bytes_per_sample * b;
  const double incoming = stage_output ? out_grad + workspace : std::max(out_grad, workspace);
  const double estimate = incoming + input_grad + p.param_bytes - own_output;
  // A layer that reads a skip combines its inputs (a U-Net decoder block up-samples one and
  // concatenates the other) and its backward holds buffers of that combination the estimate
  // cannot see: where the profile measured the backward (backward_bytes, above the held output
  // gradient), it counts, with the estimate as a floor.
  const double measured = reads_skip ? out_grad + p.backward_bytes_per_sample * b : 0.0;
  return std::max(estimate, measured);
}

double CostModel::backward_working_bytes(const std::vector<int>& layers, double b) const {
  std::vector<int> order(layers);
  std::sort(order.rbegin(), order.rend());
  double released = 0, most = 0;
  // Gradients of skip connections (edges that jump over layers): formed by the backward of the
  // layer that reads the skip, alive until they join the producer's output gradient at its
  // backward, or to the end of the stage's backward when the producer is on another stage (the
  // stage's input gradients; a U-Net decoder holds every encoder level's).
  std::map<int, double> skip_grads;  // by producer
  double waiting = 0;
  // The gradients received for the stage's other outputs (a U-Net encoder stage sends its levels
  // to the decoder's stage): they arrive as one bundle with the last layer's, which the stage
  // holds until its backward ends (exec/runtime/stage_io.hpp); the last layer's own is counted
  // below.
  if (!order.empty()) {
    // Per (producer, reader layer): an upper bound. Readers of one producer on one stage send
    // back one gradient (stage edges carry a tensor once, model_graph.hpp), but while a
    // partitioner prices a stage, which stage each later reader will land on is not known.
    std::set<std::pair<int, int>> sent;
    for (int l : order) {
      if (l == order.front() || frozen(l)) continue;
      for (const auto& e : graph_.out_edges(l)) {
        if (std::find(layers.begin(), layers.end(), e.to) == layers.end() &&
            sent.insert({l, e.to}).second)
          waiting += e.bytes_per_sample * b;
      }
    }
  }
  for (int l : order) {
    if (frozen(l)) continue;
    const auto& p = profile_.layers[static_cast<size_t>(l)];
    if (auto it = skip_grads.find(l); it != skip_grads.end()) {
      waiting -= it->second;
      skip_grads.erase(it);
    }
    double input_grad = 0;
    bool reads_skip = false;
    for (const auto& e : graph_.in_edges(l)) {
      if (!frozen(e.from)) input_grad += e.bytes_per_sample * b;
      reads_skip = reads_skip || e.from != l - 1;
    }
    most = std::max(most, layer_backward_peak(l, b, l == order.front(), input_grad, reads_skip) -
                              released + waiting);
    for (const auto& e : graph_.in_edges(l)) {
      if (e.from == l - 1 || e.from < 0 || frozen(e.from)) continue;
      skip_grads[e.from] += e.bytes_per_sample * b;
      waiting += e.bytes_per_sample * b;
    }
    released += p.saved_bytes_per_sample * b;
  }
  return most;
}

std::vector<StageEdge> CostModel::stage_edges(const std::vector<int>& stage_of_layer) const {
  for (const auto& e : graph_.edges()) {
    const int a = stage_of_layer[static_cast<size_t>(e.from)];
    const int b = stage_of_layer[static_cast<size_t>(e.to)];
    if (a > b) {
      throw InputError(
          fmt::format("partition: edge from layer {} (stage {}) to layer {} (stage {}) "
                      "runs backwards; stages must follow the model's data flow",
                      e.from, a, e.to, b));
    }
  }
  std::vector<StageEdge> out;
  for (const auto& [key, value] : graph_.stage_edge_bytes(stage_of_layer))
    out.push_back({key.first, key.second, value});
  return out;
}

}  // namespace pipetwin
