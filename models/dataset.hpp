// Data sets for training the zoo's models on real data: the sklearn "digits" images (Alpaydin &
// Kaynak, UCI optical recognition of handwritten digits, 8x8 downsampled), which Debian ships
// with python3-sklearn, so tests and examples need no download. Synthetic batches are
// LayeredModel::synthetic_input / synthetic_target (layered_model.hpp).
//
// load_digits() reads sklearn's digits.csv.gz (1797 rows of 64 pixel values 0..16 and a label
// 0..9) with zlib and returns images [N, 1, 8, 8] float32 scaled to [0, 1] and labels [N] int64.
// Models that fit it: `mlp` (input=64 is the default), `vit:...,image=8,patch=2,channels=1`,
// `resnet20:channels=1,image=8`, and BERT over the token view (digits_as_tokens):
// `bert:tiny,seq=65,vocab=18`.
//
// Thread-safety: pure functions (load_digits reads a file).
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

namespace pipetwin::models {

struct Dataset {
  std::string source;  // the file it was read from
  at::Tensor inputs;   // [N, ...]
  at::Tensor labels;   // [N] int64
  int64_t classes = 0;

  int64_t size() const { return labels.size(0); }
  // Samples [begin, end) (views, no copy).
  Dataset slice(int64_t begin, int64_t end) const;
};

inline constexpr int64_t kDigitsSamples = 1797;
inline constexpr int64_t kDigitsClasses = 10;
inline constexpr int64_t kDigitsMaxPixel = 16;
// Token view: [CLS] first, then the 64 pixels row by row, token id = pixel value (0..16).
inline constexpr int64_t kDigitsClsToken = 17;
inline constexpr int64_t kDigitsVocab = 18;  // a BERT over the token view needs vocab >= 18
inline constexpr int64_t kDigitsSeq = 65;

// /usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
std::string default_digits_path();

// Throws InputError naming the path (and the Debian package python3-sklearn) when the file is
// missing, and naming the row when a row is malformed.
Dataset load_digits(const std::string& path = default_digits_path());

// The same samples as int64 token sequences [N, 65] (inputs); labels unchanged.
Dataset digits_as_tokens(const Dataset& digits);

}  // namespace pipetwin::models
