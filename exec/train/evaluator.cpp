#include <map>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "exec/runtime/bundle.hpp"
#include "exec/runtime/session.hpp"
#include "exec/train/evaluator.hpp"
#include "exec/train/train_data.hpp"
#include "exec/train/train_run.hpp"
#include "models/layered_model.hpp"
#include "models/tensor_parallel_model.hpp"

namespace pipetwin::exec {

namespace {

// Like tensors of an edge's producers for a batch of `batch` samples.
std::vector<at::Tensor> edge_like(PipelineSession& session, int from, int to, int64_t batch) {
  std::vector<at::Tensor> like;
  for (int p : session.graph().tensors(from, to)) {
    const at::Tensor one = session.value_like(p);
    std::vector<int64_t> sizes = one.sizes().vec();
    sizes[0] = batch;
    like.push_back(at::empty(sizes, one.options()));
  }
  return like;
}

}  // namespace

void Evaluator::evaluate(double sums[4]) {
  // Replica 0's stages in data order; the tensors that cross ranks go over the transport, one
  // bundle per stage edge (exec/runtime/stage_io.hpp). Tags above 2^29 leave the training windows'
  // tags alone (and every window has ended anyway).
  PipelineSession& session = *run_.session;
  const StageGraph& graph = session.graph();
  const int64_t kEvalTag = int64_t{1} << 29, S = graph.num_stages();
  const auto& model = session.model();
  auto on_this_rank = [&](int stage) {
    return session.rank_of_device(session.device_of(0, stage)) == session.rank();
  };
  for (size_t b = 0; b < run_.data->eval.size(); ++b) {
    const auto& [input, target] = run_.data->eval[b];
    auto tag = [&](int from, int to) {
      return kEvalTag + (static_cast<int64_t>(b) * S + from) * S + to;
    };
    std::map<int, at::Tensor> values{{kModelInput, input}};  // what this rank holds, by producer
    for (int s : graph.data_order()) {
      if (!on_this_rank(s)) continue;
      const int dev = session.device_of(0, s);
      for (const auto& [from, to] : graph.edges()) {
        if (to != s || on_this_rank(from)) continue;
        const auto like = edge_like(session, from, s, input.size(0));
        const at::Tensor packed = session.transport().recv(session.device_of(0, from), dev,
                                                           tag(from, s), packed_like(like));
        const auto parts = unpack_bundle(packed, like);
        const auto& producers = graph.tensors(from, s);
        for (size_t i = 0; i < producers.size(); ++i) values[producers[i]] = parts[i];
      }
      StageRuntime* rt = session.runtime(0, s);
      std::vector<at::Tensor> inputs;
      for (int p : rt->spec().inputs) inputs.push_back(values.at(p));
      const std::vector<at::Tensor> out = rt->infer(inputs);
      for (size_t k = 0; k < rt->spec().outputs.size(); ++k) values[rt->spec().outputs[k]] = out[k];
      for (const auto& [from, to] : graph.edges()) {
        if (from != s || on_this_rank(to)) continue;
        std::vector<at::Tensor> bundle;
        for (int p : graph.tensors(s, to))
          bundle.push_back(values.at(p).to(session.value_like(p).scalar_type()));
        session.transport().send(pack_bundle(bundle), dev, session.device_of(0, to), tag(s, to));
      }
      if (!rt->spec().last) continue;
      const at::Tensor& y = out.back();
      at::NoGradGuard no_grad;
      // A tensor-parallel head's output is this rank's shard (models/tensor_parallel_model.hpp).
      models::TpComm* tp = session.options().tp_comm.get();
      const at::Tensor loss = tp ? models::tensor_parallel_loss(model, y, target, *tp)
                                 : model.per_sample_loss(y, target);
      sums[0] += loss.sum().item<double>();
      sums[3] += static_cast<double>(input.size(0));
      if (model.task != models::Task::kRegression) {
        const at::Tensor predicted =
            tp ? models::tensor_parallel_predictions(model, y, *tp) : y.argmax(-1);
        sums[1] += (predicted == target).sum().item<double>();
        sums[2] += static_cast<double>(target.numel());
      }
    }
  }
}

}  // namespace pipetwin::exec
