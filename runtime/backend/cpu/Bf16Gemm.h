//===- Bf16Gemm.h - bf16 linear-layer GEMMs on AMX, by oneDNN ---*- C++ -*-===//
//
// A bf16 plan's linear layers otherwise run on fp32 copies: CpuDispatch.cpp
// widens the bf16 operands, calls cblas_sgemm and rounds the result back.
// On a CPU with AMX, oneDNN's bf16 matmul (tile kernels, fp32 accumulation,
// one rounding to bf16 at the end: the same arithmetic up to the order of
// the sums) ran GPT-2's GEMM shapes 4.5-8.5x faster than that on this
// project's Xeon (docs/performance.md). With AVX512-BF16 alone oneDNN's
// kernels ran at 0.8x the widened sgemm there, and without it oneDNN has no
// bf16 matmul, so it is chosen only where it may use AMX;
// PARTITION_BF16_GEMM=onednn|widen overrides.
//
// Why oneDNN: Debian 12's OpenBLAS is built without sbgemm, and oneDNN is
// packaged (libdnnl-dev), OpenMP-threaded like the other kernels, and what
// PyTorch runs bf16 matmuls with on CPUs. Built in only when CMake finds it
// (PARTITION_HAVE_ONEDNN); otherwise bf16 GEMMs always widen.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_BACKEND_CPU_BF16GEMM_H
#define PARTITION_RUNTIME_BACKEND_CPU_BF16GEMM_H

#include "runtime/backend/cpu/Kernels.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace partition::runtime::cpu {

/// Which engine runs the bf16 GEMMs of the linear layers.
enum class Bf16GemmEngine {
  Widen,  // fp32 copies and cblas_sgemm, like every other bf16 kernel
  OneDnn, // oneDNN's bf16 matmul, straight on the bf16 buffers
};

/// The engine this process uses, and why.
struct Bf16GemmChoice {
  Bf16GemmEngine engine = Bf16GemmEngine::Widen;
  /// "onednn" or "widen", as PARTITION_BF16_GEMM spells them.
  std::string name;
  /// For people: "oneDNN 2.6.3 on avx512_core_amx" or "fp32 sgemm on
  /// widened copies (<why>)".
  std::string describe;
};

/// The environment variable that overrides the choice.
inline constexpr const char *kBf16GemmEnv = "PARTITION_BF16_GEMM";

/// What oneDNN offers bf16 GEMMs on this CPU.
enum class OneDnnBf16 {
  Absent,  // the build has no oneDNN
  None,    // no bf16 matmul (below AVX-512)
  Slower,  // kernels without AMX: slower than widening on our Xeon
  Amx,     // AMX tile kernels
};

/// The decision alone, for the tests: `wanted` is PARTITION_BF16_GEMM's
/// value ("" when unset), `oneDnn` what oneDNN offers here and `name` its
/// version and instruction set, for the description.
Bf16GemmChoice chooseBf16Gemm(std::string_view wanted, OneDnnBf16 oneDnn,
                              const std::string &name);

/// Decided at the first call: PARTITION_BF16_GEMM when set (an unknown value,
/// or `onednn` in a build without oneDNN, throws std::runtime_error naming
/// the values it accepts), else oneDNN where it may use AMX.
const Bf16GemmChoice &bf16GemmChoice();

/// The product of a linear layer (Kernels.h's layout: weight [out, in]).
enum class LinearProduct {
  Forward,    // result [rows, out] = a [rows, in] b [out, in]^T (+ bias [out])
  GradInput,  // result [rows, in]  = a [rows, out] b [out, in]
  GradWeight, // result [out, in]   = a [rows, out]^T b [rows, in]
};

/// bf16 GEMMs compiled once per instruction: a oneDNN matmul bound to the
/// instruction's fixed buffers, all sharing one scratchpad (their packed
/// operands) that this object owns. Calls run on the constructing process's
/// executor thread, one at a time.
class Bf16Gemms {
public:
  /// Throws std::runtime_error in a build without oneDNN.
  Bf16Gemms();
  ~Bf16Gemms();
  Bf16Gemms(const Bf16Gemms &) = delete;
  Bf16Gemms &operator=(const Bf16Gemms &) = delete;

  /// The call computing `product` into `result` (overwritten; `bias` only
  /// with Forward, may be null). Returns an empty function for sizes with a
  /// zero in them, which the widened kernels handle.
  std::function<void()> compile(LinearProduct product, const std::uint16_t *a,
                                const std::uint16_t *b,
                                const std::uint16_t *bias,
                                std::uint16_t *result, Index rows,
                                Index inFeatures, Index outFeatures);

  /// The largest scratchpad any compiled GEMM asked for (allocated once, at
  /// the first call that needs it).
  std::size_t scratchpadBytes() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace partition::runtime::cpu

#endif // PARTITION_RUNTIME_BACKEND_CPU_BF16GEMM_H
