// Least-squares fit of a task time against micro-batch size: t(b) = a + c*b.
//
// The cost model (docs/design.md "Profile") fits every profiled layer this way so it can predict times
// at micro-batch sizes that were not profiled. The fit is non-negative least squares in two
// unknowns (Eigen): when the unconstrained fit gives a negative intercept or slope, that term is
// fixed at zero and the other refitted, so predictions never go negative when extrapolated. One
// sample is fitted as a pure proportion t = c*b. The fit reports its residuals so users can see
// how linear their layers really are.
//
// Thread-safety: value types; free functions are reentrant.
#pragma once

#include <vector>

namespace pipetwin {

struct LinearFit {
  double a = 0;                  // intercept (seconds): per-call overhead
  double c = 0;                  // slope (seconds per sample)
  double rms_residual = 0;       // root-mean-square residual (seconds)
  double max_rel_residual = 0;   // largest |residual| / measured time over the samples

  double operator()(double b) const {
    const double t = a + c * b;
    return t > 0 ? t : 0;
  }
};

// Fits t against b; b and t must have the same, non-zero length and b must be positive.
LinearFit fit_linear(const std::vector<double>& b, const std::vector<double>& t);

}  // namespace pipetwin
