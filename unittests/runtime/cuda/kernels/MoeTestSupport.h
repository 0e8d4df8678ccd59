//===- MoeTestSupport.h - device buffers and comparisons for MoeTest ------===//
//
// The few helpers MoeTest.cpp needs: host bf16 rounding, device arrays that
// convert to and from float, and the element comparison of KernelsTest.cpp
// (|gpu - cpu| <= rtol * max(|cpu|, floor * the largest |cpu|)). A header of
// its own because KernelsTest.cpp keeps its helpers in its own file's
// anonymous namespace and runs unmodified in the emulator.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_UNITTESTS_RUNTIME_CUDA_KERNELS_MOETESTSUPPORT_H
#define PARTITION_UNITTESTS_RUNTIME_CUDA_KERNELS_MOETESTSUPPORT_H

#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace partition::moetest {

using FVec = std::vector<float>;
using IVec = std::vector<std::int32_t>;
using bf16 = __nv_bfloat16;

constexpr double kFp32Rtol = 1e-5;
constexpr double kBf16Rtol = 1.0 / 256.0 + kFp32Rtol;

inline float roundBf16(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u); // nearest even (no NaNs here)
  bits &= 0xffff0000u;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

template <typename T> float roundTo(float x) {
  return std::is_same_v<T, float> ? x : roundBf16(x);
}
template <typename T> FVec rounded(FVec v) {
  for (float &x : v)
    x = roundTo<T>(x);
  return v;
}
template <typename T> constexpr double rtolOf() {
  return std::is_same_v<T, float> ? kFp32Rtol : kBf16Rtol;
}

inline void check(cudaError_t error, const char *what) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " +
                             cudaGetErrorString(error));
}

/// `count` elements of T on the device; float values convert (T float or
/// bf16, i32 ids as they are).
template <typename T> class Device {
public:
  explicit Device(std::size_t count) : count(count) {
    check(cudaMalloc(&ptr, std::max<std::size_t>(1, count * sizeof(T))),
          "cudaMalloc");
  }
  ~Device() { cudaFree(ptr); }
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;
  T *get() const { return static_cast<T *>(ptr); }

  void raw(const void *data) {
    if (count)
      check(cudaMemcpy(ptr, data, count * sizeof(T), cudaMemcpyHostToDevice),
            "cudaMemcpy to device");
  }
  template <typename U> void upload(const std::vector<U> &values) {
    if (values.size() != count)
      throw std::logic_error("upload: size mismatch");
    std::vector<T> host(count);
    for (std::size_t i = 0; i < count; ++i)
      host[i] = convert(values[i]);
    raw(host.data());
  }
  FVec floats() const {
    std::vector<T> host = values();
    FVec out(count);
    for (std::size_t i = 0; i < count; ++i)
      out[i] = toFloat(host[i]);
    return out;
  }
  std::vector<T> values() const {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    std::vector<T> host(count);
    if (count)
      check(cudaMemcpy(host.data(), ptr, count * sizeof(T),
                       cudaMemcpyDeviceToHost),
            "cudaMemcpy to host");
    return host;
  }

private:
  template <typename U> static T convert(U x) {
    if constexpr (std::is_same_v<T, bf16>)
      return __float2bfloat16_rn(float(x));
    else
      return T(x);
  }
  static float toFloat(T x) {
    if constexpr (std::is_same_v<T, bf16>)
      return __bfloat162float(x);
    else
      return float(x);
  }
  void *ptr = nullptr;
  std::size_t count;
};

inline ::testing::AssertionResult close(const FVec &actual,
                                        const FVec &expected, double rtol,
                                        double floorFraction = 1e-3) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " vs " << expected.size();
  double scale = 0.0;
  for (float x : expected)
    scale = std::max(scale, double(std::abs(x)));
  const double floor = std::max(floorFraction * scale, 1e-30);
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double error = std::abs(double(actual[i]) - expected[i]) /
                         std::max(double(std::abs(expected[i])), floor);
    if (!(error <= rtol))
      return ::testing::AssertionFailure()
             << "element [" << i << "]: actual " << actual[i]
             << ", expected " << expected[i] << ", relative error " << error
             << " > " << rtol;
  }
  return ::testing::AssertionSuccess();
}

} // namespace partition::moetest

#endif // PARTITION_UNITTESTS_RUNTIME_CUDA_KERNELS_MOETESTSUPPORT_H
