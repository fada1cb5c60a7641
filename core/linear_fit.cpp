#include "core/linear_fit.hpp"

#include <cmath>
#include <stdexcept>

#include <Eigen/Dense>

namespace pipetwin {

namespace {

void fill_residuals(LinearFit& fit, const std::vector<double>& b, const std::vector<double>& t) {
  double sq = 0, worst = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double r = fit.a + fit.c * b[i] - t[i];
    sq += r * r;
    if (t[i] > 0) worst = std::max(worst, std::fabs(r) / t[i]);
  }
  fit.rms_residual = std::sqrt(sq / static_cast<double>(b.size()));
  fit.max_rel_residual = worst;
}

}  // namespace

LinearFit fit_linear(const std::vector<double>& b, const std::vector<double>& t) {
  if (b.size() != t.size() || b.empty()) {
    throw std::invalid_argument("fit_linear: need equally many (b, t) samples, at least one");
  }
  LinearFit fit;
  const auto n = static_cast<Eigen::Index>(b.size());
  Eigen::VectorXd bv(n), tv(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    bv(i) = b[static_cast<size_t>(i)];
    tv(i) = t[static_cast<size_t>(i)];
  }
  bool distinct = false;
  for (Eigen::Index i = 1; i < n; ++i) distinct = distinct || bv(i) != bv(0);
  auto proportional = [&] {
    fit.a = 0;
    fit.c = bv.squaredNorm() > 0 ? std::max(0.0, bv.dot(tv) / bv.squaredNorm()) : 0;
  };
  if (!distinct) {
    proportional();
  } else {
    Eigen::MatrixXd design(n, 2);
    design.col(0).setOnes();
    design.col(1) = bv;
    const Eigen::Vector2d x = design.colPivHouseholderQr().solve(tv);
    fit.a = x(0);
    fit.c = x(1);
    if (fit.c < 0) {  // time cannot fall with more samples: constant model
      fit.c = 0;
      fit.a = std::max(0.0, tv.mean());
    } else if (fit.a < 0) {  // negative overhead: proportional model
      proportional();
    }
  }
  fill_residuals(fit, b, t);
  return fit;
}

}  // namespace pipetwin
