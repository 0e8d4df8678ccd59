//===- Rope.h - rotary embedding frequencies and their scaling --*- C++ -*-===//
//
// The frequency of rotary pair i of a head of dimension D: theta^(-2i/D),
// rescaled as transformers' rope_type "linear" or "llama3" does. One
// definition for the CPU kernels, the CUDA backend's host code and the
// kernels' checks (the CUDA table kernel repeats the formula in device
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
enum class RopeScalingKind : int { None = 0, Linear = 1, Llama3 = 2 };

struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::None;
  double factor = 1.0;
  /// llama3 only.
  double lowFreqFactor = 1.0, highFreqFactor = 4.0, originalContext = 0.0;

  bool operator==(const RopeScaling &other) const {
    return kind == other.kind && factor == other.factor &&
           lowFreqFactor == other.lowFreqFactor &&
           highFreqFactor == other.highFreqFactor &&
           originalContext == other.originalContext;
  }
};

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
  }
  return freq;
}

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_PROGRAM_ROPE_H
