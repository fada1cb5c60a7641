// Gzip: the whole of a gzip file, inflated in memory. torch.profiler's tensorboard_trace_handler
// writes traces as "<worker>.<time>.pt.trace.json.gz" when asked (use_gzip=True), and TensorBoard
// and Perfetto open them as they are; `pipetwin import-trace` does too.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace pipetwin::trace_import {

// Whether `bytes` begins with the gzip magic number (RFC 1952, 2.3.1: 0x1f 0x8b).
bool is_gzip(std::string_view bytes);

// The inflated content of every gzip member in `bytes` (RFC 1952 allows several, concatenated).
// A corrupt or cut-short stream is an InputError "<origin>: not a valid gzip file (<why>)".
std::string gunzip(std::string_view bytes, const std::string& origin);

}  // namespace pipetwin::trace_import
