//===- Rope.h - rotary embedding frequencies and their scaling --*- C++ -*-===//
//
// The frequency of rotary pair i of a head of dimension D: theta^(-2i/D),
// rescaled as transformers' rope_type "linear", "llama3" or "yarn" does,
// and yarn's attention factor, which multiplies cos and sin. One
// definition for the CPU kernels, the CUDA backend's host code and the
// kernels' checks (the CUDA table kernel repeats the formulas in device
// code). Header-only, standard library only.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_PROGRAM_ROPE_H
#define PARTITION_RUNTIME_PROGRAM_ROPE_H

#include <cmath>
#include <cstdint>

namespace partition::runtime {

/// How an attention_scaled instruction's float parameter 1 names the
/// scaling (the numbers are part of the .ptp format).
enum class RopeScalingKind : int { None = 0, Linear = 1, Llama3 = 2, Yarn = 3 };

struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::None;
  double factor = 1.0;
  /// llama3 only (originalContext: llama3 and yarn).
  double lowFreqFactor = 1.0, highFreqFactor = 4.0, originalContext = 0.0;
  /// yarn only: the rotation counts (over the original context) that bound
  /// the ramp from pairs kept (extrapolated) to pairs divided by the factor
  /// (interpolated); transformers' defaults.
  double betaFast = 32.0, betaSlow = 1.0;

  static RopeScaling yarn(double factor, double betaFast, double betaSlow,
                          double originalContext) {
    RopeScaling s;
    s.kind = RopeScalingKind::Yarn;
    s.factor = factor;
    s.betaFast = betaFast;
    s.betaSlow = betaSlow;
    s.originalContext = originalContext;
    return s;
  }

  bool operator==(const RopeScaling &other) const {
    return kind == other.kind && factor == other.factor &&
           lowFreqFactor == other.lowFreqFactor &&
           highFreqFactor == other.highFreqFactor &&
           originalContext == other.originalContext &&
           betaFast == other.betaFast && betaSlow == other.betaSlow;
  }
};

/// yarn's ramp over the pairs, [low, high] (transformers'
/// find_correction_range with truncate = true, and its guard against
/// low == high): the pair whose wavelength fits `rotations` times in the
/// original context is at dim * ln(context / (2 pi rotations)) /
/// (2 ln theta).
inline void yarnRamp(int64_t dim, double theta, const RopeScaling &scaling,
                     double &low, double &high) {
  const double pi = 3.14159265358979323846;
  auto pair = [&](double rotations) {
    return double(dim) *
           std::log(scaling.originalContext / (rotations * 2.0 * pi)) /
           (2.0 * std::log(theta));
  };
  low = std::floor(pair(scaling.betaFast));
  high = std::ceil(pair(scaling.betaSlow));
  low = low > 0.0 ? low : 0.0;
  high = high < double(dim - 1) ? high : double(dim - 1);
  if (low == high)
    high += 0.001;
}

/// theta^(-2i/D), scaled; in double (the tables round once, to float).
inline double ropeFrequency(int64_t i, int64_t dim, double theta,
                            const RopeScaling &scaling) {
  const double freq = std::pow(theta, -2.0 * double(i) / double(dim));
  switch (scaling.kind) {
  case RopeScalingKind::None:
    return freq;
  case RopeScalingKind::Linear:
    return freq / scaling.factor;
  case RopeScalingKind::Llama3: {
    // transformers' _compute_llama3_parameters.
    const double pi = 3.14159265358979323846;
    const double wavelength = 2.0 * pi / freq;
    const double lowWavelength = scaling.originalContext / scaling.lowFreqFactor;
    const double highWavelength =
        scaling.originalContext / scaling.highFreqFactor;
    if (wavelength < highWavelength)
      return freq;
    if (wavelength > lowWavelength)
      return freq / scaling.factor;
    const double smooth =
        (scaling.originalContext / wavelength - scaling.lowFreqFactor) /
        (scaling.highFreqFactor - scaling.lowFreqFactor);
    return (1.0 - smooth) * freq / scaling.factor + smooth * freq;
  }
  case RopeScalingKind::Yarn: {
    // transformers' _compute_yarn_parameters: pairs below the ramp keep
    // their frequency, pairs above it are divided by the factor.
    double low, high;
    yarnRamp(dim, theta, scaling, low, high);
    double ramp = (double(i) - low) / (high - low);
    ramp = ramp < 0.0 ? 0.0 : ramp > 1.0 ? 1.0 : ramp;
    return freq / scaling.factor * ramp + freq * (1.0 - ramp);
  }
  }
  return freq;
}

/// What cos and sin are multiplied by (transformers' attention_scaling):
/// yarn's 0.1 ln(factor) + 1 for a factor above 1 (yarn_get_mscale), so
/// that q.k grows by its square; 1 for every other scaling.
inline double ropeAttentionFactor(const RopeScaling &scaling) {
  if (scaling.kind != RopeScalingKind::Yarn || scaling.factor <= 1.0)
    return 1.0;
  return 0.1 * std::log(scaling.factor) + 1.0;
}

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_PROGRAM_ROPE_H
