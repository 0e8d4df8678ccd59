//===- KernelSupport.h - helpers shared by the CPU kernels ------*- C++ -*-===//
//
// Internal to runtime/backend/cpu: a vectorisable exp, per-thread scratch buffers,
// OpenBLAS thread control and argument checks.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CPU_KERNELSUPPORT_H
#define PARTITION_RUNTIME_CPU_KERNELSUPPORT_H

#include "runtime/backend/cpu/Kernels.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>

namespace partition::runtime::cpu::detail {

/// Below this many elements an elementwise kernel runs on the calling thread:
/// waking the team costs more than the work.
constexpr Index kParallelThreshold = 1 << 14;

/// exp(x) to about 2 ulp (Cephes' expf polynomial), written so that GCC and
/// Clang vectorise loops that call it: glibc's expf is a scalar call unless
/// the whole file is built with -ffast-math, which we avoid so that NaNs and
/// infinities keep their meaning. NaN in gives NaN out; exp(-inf) = 0;
/// results below FLT_MIN flush to zero.
inline float fastExp(float x) {
  constexpr float kHi = 88.3762626647949f;  // log(FLT_MAX)
  constexpr float kLo = -87.3365447505531f; // log(FLT_MIN)
  // Adding 1.5 * 2^23 rounds to an integer in the low mantissa bits.
  constexpr float kShifter = 12582912.0f;
  constexpr std::int32_t kShifterBits = 0x4B400000;
  float xc = x > kHi ? kHi : x;
  xc = xc < kLo ? kLo : xc;
  float t = xc * 1.44269504088896341f + kShifter;
  float n = t - kShifter;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  std::int32_t tBits;
  std::memcpy(&tBits, &t, sizeof(tBits));
  std::int32_t scaleBits = (tBits - kShifterBits + 127) << 23;
  float scale;
  std::memcpy(&scale, &scaleBits, sizeof(scale));
  float result = y * scale;
  result = x < kLo ? 0.0f : result;
  result = x > kHi ? std::numeric_limits<float>::infinity() : result;
  return result;
}

/// 1 / (1 + exp(-x)), saturating cleanly at both ends.
inline float sigmoid(float x) { return 1.0f / (1.0f + fastExp(-x)); }

/// An element as fp32: itself, or a bf16 (std::uint16_t) widened (exact).
inline float asFloat(float value) { return value; }
inline float asFloat(std::uint16_t bits) {
  const std::uint32_t widened = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof(value));
  return value;
}

/// `value` stored as an element: itself, or rounded to bf16 to nearest,
/// ties to even, NaNs kept NaN (BFloat16.cpp).
inline void store(float &element, float value) { element = value; }
inline void store(std::uint16_t &element, float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  const std::uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  element = static_cast<std::uint16_t>(nan ? ((bits >> 16) | 0x0040u)
                                           : (rounded >> 16));
}

/// Scratch memory of the calling thread: `slot` names one of a few buffers
/// that may be live at once; each grows to the largest request and is reused,
/// so steady-state calls allocate nothing. 64-byte aligned, uninitialised.
void *threadScratch(std::size_t bytes, unsigned slot);
constexpr unsigned kScratchSlots = 4;

/// While alive, makes cblas_sgemm single-threaded if OpenBLAS is the pthreads
/// build (it would otherwise fight the OpenMP team it is called from, and
/// concurrent calls serialise on its server lock). The OpenMP build already
/// runs single-threaded inside a parallel region, and setting its thread
/// count would also change OpenMP's, so it is left alone.
class SerialBlasScope {
public:
  explicit SerialBlasScope(bool active);
  ~SerialBlasScope();
  SerialBlasScope(const SerialBlasScope &) = delete;
  SerialBlasScope &operator=(const SerialBlasScope &) = delete;

private:
  int savedThreads = 0;
};

/// Throws std::invalid_argument unless every value is >= 0.
void checkNonNegative(const char *kernel, std::initializer_list<Index> sizes);
/// Throws unless value fits a BLAS int.
int blasInt(const char *kernel, Index value);
/// Throws unless 0 <= ids[i] < limit for all i < count, naming the first
/// offender.
void checkIds(const char *kernel, const char *what, const std::int32_t *ids,
              Index count, Index limit);
[[noreturn]] void fail(const char *kernel, const std::string &message);

} // namespace partition::runtime::cpu::detail

#endif // PARTITION_RUNTIME_CPU_KERNELSUPPORT_H
