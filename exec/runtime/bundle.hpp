// Bundles: the tensors one stage edge carries for one micro-batch, sent as one message.
//
// A chain model's edge carries one tensor, sent as it is. With cross-layer skip connections an
// edge may carry several (exec/runtime/stage_io.hpp); they are flattened and concatenated into one
// buffer of their common dtype, so a transfer stays one message per (edge, micro-batch, direction)
// and the schedule's send/recv actions and tags need not change. The receiver splits the buffer by
// the shapes it expects (the producers' outputs for one micro-batch). Under autocast an edge may
// carry tensors of different dtypes (a bfloat16 activation beside a float32 one): the buffer is
// then of the type both promote to, which holds every value exactly, and the receiver casts each
// part back to the dtype it expects.
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

namespace pipetwin::exec {

// One tensor: itself, contiguous. Several: one 1-D buffer of their promoted dtype. Throws
// std::invalid_argument on an undefined tensor or on dtypes that differ and are not all floating.
at::Tensor pack_bundle(const std::vector<at::Tensor>& tensors);
// A tensor shaped like pack_bundle(like) (what a receive fills).
at::Tensor packed_like(const std::vector<at::Tensor>& like);
// The tensors of `packed`, shaped (and typed) as `like`; std::invalid_argument when the sizes
// disagree.
std::vector<at::Tensor> unpack_bundle(const at::Tensor& packed,
                                      const std::vector<at::Tensor>& like);

}  // namespace pipetwin::exec
