//===- ZeroMemory.h - ZeRO's per-rank model-state accounting ----*- C++ -*-===//
//
// The closed forms of the ZeRO paper (Rajbhandari et al., 2020, section
// 5): with Psi parameters, N data-parallel ranks, parameters and gradients
// of `parameterBytes` and `gradientBytes` each and K bytes of optimizer
// state per parameter, a rank holds
//   stage 0: (P + G + K) Psi
//   stage 1: (P + G) Psi + K Psi / N
//   stage 2: P Psi + (G + K) Psi / N
//   stage 3: (P + G + K) Psi / N.
// The paper's layout is 16-bit parameters and gradients and K = 12 (fp32
// master weights, momentum and variance); this project's is fp32 throughout
// (4 + 4 + 8 bytes: 16 Psi; bf16 autocast keeps the same fp32 state).
// The memory report (--memory-report) prints this line for the plan's
// stage next to what the memory plan measured.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_LOWERING_ZEROMEMORY_H
#define PARTITION_LOWERING_ZEROMEMORY_H

#include <cstdint>

namespace partition {

/// Bytes per parameter of each kind of model state.
struct StateLayout16 {
  double parameterBytes = 4, gradientBytes = 4, optimizerBytes = 8;
};

/// This project's layout: fp32 parameters, gradients and two fp32 moments.
inline constexpr StateLayout16 kFp32AdamW{4, 4, 8};
/// The ZeRO paper's mixed-precision Adam: 2 + 2 + K = 12.
inline constexpr StateLayout16 kPaperMixedPrecisionAdam{2, 2, 12};

/// Per-rank bytes of each kind of model state under a ZeRO stage.
struct ZeroStateBytes {
  double parameters = 0, gradients = 0, optimizerState = 0;
  double total() const { return parameters + gradients + optimizerState; }
};

/// The closed forms above; stage outside 0-3 or ranks < 1 give zeros.
ZeroStateBytes zeroStateBytes(int64_t stage, double parameters, int64_t ranks,
                              const StateLayout16 &layout = kFp32AdamW);

} // namespace partition

#endif // PARTITION_LOWERING_ZEROMEMORY_H
