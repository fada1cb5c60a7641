#include "core/elastic/transformer_layers.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::elastic {

namespace {

const std::string& kind(const Profile& p, int i) {
  return p.layers[static_cast<size_t>(i)].kind;
}

// Block starts at attention layers; the last block keeps the mlp layers after it.
std::vector<int> attention_blocks(const Profile& p) {
  std::vector<int> begin;
  const int n = p.num_layers();
  for (int i = 0; i < n; ++i) {
    if (kind(p, i) == "attention") begin.push_back(i);
  }
  if (begin.empty()) return begin;
  int end = begin.back() + 1;
  while (end < n && kind(p, end) == "mlp") ++end;
  begin.push_back(end);
  return begin;
}

// One block per layer between leading "embedding" and trailing "head" layers.
std::vector<int> plain_blocks(const Profile& p) {
  int lo = 0, hi = p.num_layers();
  while (lo < hi && kind(p, lo) == "embedding") ++lo;
  while (hi > lo && kind(p, hi - 1) == "head") --hi;
  std::vector<int> begin;
  for (int i = lo; i <= hi; ++i) begin.push_back(i);
  return begin;
}

}  // namespace

TransformerLayers TransformerLayers::from_profile(const Profile& profile) {
  TransformerLayers t;
  t.profile_layers_ = profile.num_layers();
  t.begin_ = attention_blocks(profile);
  if (t.begin_.empty()) t.begin_ = plain_blocks(profile);
  if (t.begin_.size() < 2) {
    throw InputError(
        fmt::format("profile of {}: no layer can freeze ({} layers, all embedding or "
                    "head)",
                    profile.model, profile.num_layers()));
  }
  return t;
}

int TransformerLayers::frozen_profile_layers(int frozen) const {
  if (frozen < 0 || frozen > layers()) {
    throw InputError(fmt::format("frozen layers must be in 0..{} ({} given)", layers(), frozen));
  }
  return frozen == 0 ? 0 : begin_[static_cast<size_t>(frozen)];
}

}  // namespace pipetwin::elastic
