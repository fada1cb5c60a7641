// Freeze policy: how many transformer layers are frozen at each freeze step (PipeTransformer
// Section 3.1, Equation 1; Appendix B, Equation 3).
//
// Equation 1: at freeze step T >= 1, with L_frozen(0) = 0 and alpha in (0, 1),
//   L_frozen(T) = min( L_frozen(T-1) + alpha (L - L_frozen(T-1)),
//                      argmin over l in {L_frozen(T-1), ..., L} of ||g_l(T)|| )
// "The intuition behind the second term in the min function is that the layer with the smallest
// gradient norm converges first. To stabilize training, we enforce an upper bound ... which is a
// geometric sequence containing a hyper-parameter alpha." Equation 3 is the bound alone in
// closed form:
//   L_frozen(T) = (1-alpha)^T [ alpha L / (1-alpha) + sum_{t=2}^{T} alpha L / (1-alpha)^t ]
//               = L (1 - (1-alpha)^T).
//
// Details the paper leaves open, and what we chose:
//  - Equation 1 is a recursion on reals (Figure 4 plots it as one; Equation 3 is its closed
//    form). Layers are whole, so floor(L_frozen(T)) layers are frozen and the real value is
//    carried to T+1. Flooring at every step instead would stall early: with L = 12 and
//    alpha = 1/3 it never passes 10 frozen layers, while Equation 3 reaches 11 at T = 7.
//  - The argmin term is read as a layer count: the active layer with the smallest gradient
//    norm is frozen together with every layer below it ("freeze all layers preceding" it,
//    Appendix B, and the layer itself, since it "converges first"). Its index l (0-based, over
//    the active layers floor(L_frozen(T-1)) .. L-1) therefore contributes l + 1.
//  - ||g_l(T)|| is the mean of the per-step norms the trainer reported since the previous
//    freeze step (the gradient-norm accumulator below). With no norms reported (the simulator's
//    "alpha bound alone"), the argmin term does not constrain and Equation 3 results.
//  - A freeze step happens every `interval` epochs or optimizer steps; step T falls at the end
//    of interval T (epoch T * interval starts with the new count), so the first interval trains
//    every layer.
//
// Thread-safety: FreezePolicy and GradNormAccumulator are not thread-safe (one trainer thread
// feeds them); the free functions are pure.
#pragma once

#include <string>
#include <vector>

namespace pipetwin::elastic {

enum class FreezeUnit { kEpoch, kStep };
const char* freeze_unit_name(FreezeUnit u);  // "epoch", "step"
// Parses "epoch"/"epochs"/"step"/"steps"; throws InputError naming `origin` otherwise.
FreezeUnit parse_freeze_unit(const std::string& text, const std::string& origin);

struct FreezeConfig {
  int layers = 0;            // L: transformer layers the policy may freeze
  double alpha = 1.0 / 3.0;  // Table 1 uses the "conservative" 1/3
  FreezeUnit unit = FreezeUnit::kEpoch;
  int interval = 1;  // epochs or optimizer steps between freeze steps
  // Throws InputError naming the field: layers >= 1, 0 < alpha < 1, interval >= 1.
  void validate(const std::string& origin) const;
};

// Equation 3, the closed form of the alpha bound: L (1 - (1-alpha)^T), a real number.
double alpha_bound(int layers, double alpha, int T);
// Equation 3 as printed: (1-alpha)^T [alpha L/(1-alpha) + sum_{t=2}^T alpha L/(1-alpha)^t].
double alpha_bound_as_printed(int layers, double alpha, int T);
// Layers frozen by the bound alone after freeze step T: floor(alpha_bound) (with a 1e-9 guard
// against rounding just below an integer).
int bound_frozen_layers(int layers, double alpha, int T);

// One application of Equation 1 on reals. `argmin_count` is the argmin term as a layer count
// (see above), or a negative number when there are no gradient norms.
double equation1(double previous, int layers, double alpha, int argmin_count);

// Mean gradient norm per transformer layer over the steps since the last reset.
class GradNormAccumulator {
 public:
  explicit GradNormAccumulator(int layers = 0);
  // One optimizer step's norms, one per transformer layer (frozen layers' entries are ignored
  // by the policy). Throws InputError on a wrong length or a negative or non-finite norm.
  void add(const std::vector<double>& norms);
  int steps() const { return steps_; }
  std::vector<double> mean() const;
  void reset();

 private:
  std::vector<double> sum_;
  int steps_ = 0;
};

// The argmin term of Equation 1 as a layer count: 1 + the index of the smallest mean norm among
// layers first_active .. L-1 (ties: the lowest layer); -1 when `norms` is empty.
int argmin_count(const std::vector<double>& norms, int first_active);

// Equation 1 driven step by step by a trainer (or the simulator).
class FreezePolicy {
 public:
  explicit FreezePolicy(FreezeConfig config);

  const FreezeConfig& config() const { return config_; }
  // Whether freeze step T+1 falls when `epoch` starts (unit epoch) or after optimizer step
  // `step` (unit step; steps counted from 1 over the whole run).
  bool due_at_epoch(int epoch) const;
  bool due_after_step(long step) const;

  // Feeds one optimizer step's per-layer gradient norms.
  void add_gradient_norms(const std::vector<double>& norms) { accumulator_.add(norms); }
  // Applies Equation 1 with the accumulated norms, resets the accumulator, advances T and
  // returns the new frozen count (never smaller than before).
  int freeze_step();

  int frozen_layers() const { return frozen_; }
  double frozen_real() const { return real_; }
  int T() const { return T_; }
  const GradNormAccumulator& accumulator() const { return accumulator_; }

 private:
  FreezeConfig config_;
  GradNormAccumulator accumulator_;
  double real_ = 0;  // L_frozen(T) on reals
  int frozen_ = 0;   // floor(real_)
  int T_ = 0;
};

}  // namespace pipetwin::elastic
