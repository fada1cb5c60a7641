// A user's TorchScript module as a LayeredModel: `torchscript:FILE.pt[,key=value...]`
// (models/torchscript_spec.hpp lists the options and the metadata file beside the module).
//
// FILE.pt is a module saved with torch.jit.save after torch.jit.script or torch.jit.trace (Python's
// save_for_pipetwin in python/pipetwin_save.py does both and writes the metadata). Its layers are
// its top-level children, in order, as for an nn.Sequential; a child without a forward of its own
// (an nn.ModuleList such as a `layers` list of blocks) stands for its elements, in order, named
// "layers.0", "layers.1", .... Each layer is a child as the module holds it: its parameters are the
// module's own (loaded from the file, not drawn from the seed: every build of a name has the same
// weights, so the executor's stage replicas and the reference start identical), converted to the
// run's floating dtype, and registered under the module's names. A layer's forward is the child's
// TorchScript forward, which LibTorch's interpreter runs operator by operator (the graph
// executor's optimizer off, so that a layer's time does not depend on the shapes it saw before)
// and autograd differentiates.
//
// What a module must satisfy, each checked when it is built (an InputError of one line naming the
// file and the child otherwise):
//   - every child's forward takes one tensor and returns one tensor, or takes two tensors when the
//     metadata declares the skip edge that feeds its second input (`skip_from`, an earlier child:
//     torchgpipe Section 3.3.1's skip connections, as U-Net's layers have them);
//   - every parameter and buffer lives in a child, and no two children share one (a stage trains
//     its own children);
//   - the children applied in order (with the declared skips) compute the module's forward, checked
//     on a synthetic batch of two in eval mode. A forward that does more than call its children
//     (a reshape between two of them, a residual around one) fails this check.
// The loss and the shape of a sample's target follow from the module's output on that batch
// unless the name or the metadata give them (and then must agree with it).
//
// Dropout inside a TorchScript module draws from LibTorch's default generator, not from the
// per-micro-batch streams of pipetwin's own layers (models/dropout.hpp): such a run is not
// reproducible from its seed.
//
// Thread-safety: build_torchscript_model may be called from several threads (it caches the file
// bytes and the result of the checks under a lock). A built model follows LayeredModel's rule.
#pragma once

#include <cstdint>

#include "models/layered_model.hpp"
#include "profiles/model_spec.hpp"

namespace pipetwin::models {

// The model `spec` (family "torchscript") names, in `dtype` (float32 or float64). `seed` is kept
// (LayeredModel::seed, for clone()) and draws nothing.
LayeredModel build_torchscript_model(const ModelSpec& spec, torch::Dtype dtype, uint64_t seed);

}  // namespace pipetwin::models
