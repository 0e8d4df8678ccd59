//===- KernelsTest.cpp - CUDA kernels against the CPU kernels -------------===//
//
// Every kernel of runtime/backend/cuda/kernels/Kernels.h runs on the same random
// inputs (fixed seeds) as its CPU counterpart (runtime/backend/cpu/Kernels.h) or,
// where the CPU has none (addBias, casts, fills, the 2-byte blocks), a
// plain host loop, and the results are compared.
//
// Tolerances. An element passes when |gpu - cpu| <= rtol * max(|cpu|,
// floor), floor = f * (the largest |cpu| of that output):
// - fp32 storage: rtol = 1e-5. The two sides sum in different orders and
//   use different exp implementations (CPU fastExp, CUDA expf, both within
//   about 2 ulp), so they agree to a few fp32 ulps of the terms involved.
//   f = 1e-3 for results that are products or sums of same-signed terms
//   (kSmallFloor); f = 0.1 (kCancelFloor) where terms of both signs cancel
//   (norm outputs and gradients, gelu/swiglu gradients, column sums, the
//   moments), so that a near-zero element is judged against the terms'
//   scale, not its own.
// - bf16 storage: inputs are rounded to bf16 first and the CPU runs on the
//   rounded values in fp32; the CUDA result, rounded once to bf16, must be
//   within one bf16 rounding (2^-8 relative) plus the fp32 tolerance above.
//   fp32 outputs (the loss, the vocabulary statistics) keep rtol = 1e-5.
// - Pure data movement (casts, fills, embedding rows, blocks) is exact.
// Reductions are also run twice and must be bitwise equal.
//
// Without a usable GPU, main prints "partition-cuda-kernel-tests: skipped:
// REASON" and exits 0 (ctest reports the test as skipped).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/Kernels.h"
#include "runtime/backend/cuda/kernels/Kernels.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace {

namespace cpu = partition::runtime::cpu;
namespace cuda = partition::runtime::cuda;
using Index = std::int64_t;
using bf16 = cuda::bf16;
using FVec = std::vector<float>;
using IVec = std::vector<std::int32_t>;

constexpr double kFp32Rtol = 1e-5;
constexpr double kBf16Rtol = 1.0 / 256.0 + kFp32Rtol;
constexpr double kSmallFloor = 1e-3;
constexpr double kCancelFloor = 0.1;

//===----------------------------------------------------------------------===//
// Host-side bf16 and device buffers
//===----------------------------------------------------------------------===//

std::uint16_t bf16Bits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet
    return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  // Round to nearest even on the 16 dropped bits.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

float bf16Value(std::uint16_t b) {
  const std::uint32_t bits = std::uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

float roundBf16(float x) { return bf16Value(bf16Bits(x)); }

template <typename T> struct Storage;
template <> struct Storage<float> {
  static constexpr double rtol = kFp32Rtol;
  static float round(float x) { return x; }
};
template <> struct Storage<bf16> {
  static constexpr double rtol = kBf16Rtol;
  static float round(float x) { return roundBf16(x); }
};

template <typename T> FVec rounded(FVec v) {
  for (float &x : v)
    x = Storage<T>::round(x);
  return v;
}

void cudaCheck(cudaError_t error, const char *what) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " +
                             cudaGetErrorString(error));
}

/// A device allocation of `count` elements of T (at least one byte), freed
/// on destruction; float vectors convert to and from the storage type.
template <typename T> class DeviceArray {
public:
  explicit DeviceArray(std::size_t count) : count(count) {
    cudaCheck(cudaMalloc(&ptr, std::max<std::size_t>(1, count * sizeof(T))),
              "cudaMalloc");
  }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;

  T *get() const { return static_cast<T *>(ptr); }
  std::size_t size() const { return count; }

  void uploadBytes(const void *data) {
    if (count == 0) // an empty vector's data() may be null
      return;
    cudaCheck(cudaMemcpy(ptr, data, count * sizeof(T), cudaMemcpyHostToDevice),
              "cudaMemcpy to device");
  }
  std::vector<unsigned char> bytes() const {
    cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    std::vector<unsigned char> out(count * sizeof(T));
    if (out.empty())
      return out;
    cudaCheck(cudaMemcpy(out.data(), ptr, out.size(), cudaMemcpyDeviceToHost),
              "cudaMemcpy to host");
    return out;
  }

  /// Values as fp32 (T float or bf16).
  void upload(const FVec &values) {
    if (values.size() != count)
      throw std::logic_error("upload: size mismatch");
    if constexpr (std::is_same_v<T, float>) {
      uploadBytes(values.data());
    } else {
      std::vector<std::uint16_t> bits(count);
      for (std::size_t i = 0; i < count; ++i)
        bits[i] = bf16Bits(values[i]);
      uploadBytes(bits.data());
    }
  }
  FVec download() const {
    const std::vector<unsigned char> raw = bytes();
    FVec out(count);
    if constexpr (std::is_same_v<T, float>) {
      std::memcpy(out.data(), raw.data(), raw.size());
    } else {
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t b;
        std::memcpy(&b, raw.data() + 2 * i, 2);
        out[i] = bf16Value(b);
      }
    }
    return out;
  }

private:
  void *ptr = nullptr;
  std::size_t count;
};

template <typename T> std::unique_ptr<DeviceArray<T>> device(const FVec &v) {
  auto array = std::make_unique<DeviceArray<T>>(v.size());
  array->upload(v);
  return array;
}

std::unique_ptr<DeviceArray<std::int32_t>> deviceIds(const IVec &v) {
  auto array = std::make_unique<DeviceArray<std::int32_t>>(v.size());
  array->uploadBytes(v.data());
  return array;
}

std::unique_ptr<DeviceArray<float>> deviceScalar(float x) {
  return device<float>(FVec{x});
}

FVec randomFloats(std::size_t n, std::mt19937 &rng, float lo = -1.0f,
                  float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  FVec v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

IVec randomIds(std::size_t n, std::int32_t lo, std::int32_t hi,
               std::mt19937 &rng) {
  std::uniform_int_distribution<std::int32_t> dist(lo, hi - 1);
  IVec v(n);
  for (auto &x : v)
    x = dist(rng);
  return v;
}

//===----------------------------------------------------------------------===//
// Comparisons
//===----------------------------------------------------------------------===//

::testing::AssertionResult close(const FVec &actual, const FVec &expected,
                                 double rtol, double floorFraction) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " vs " << expected.size();
  double scale = 0.0;
  for (float x : expected)
    if (std::isfinite(x))
      scale = std::max(scale, double(std::abs(x)));
  const double floor = std::max(floorFraction * scale, 1e-30);
  std::size_t failures = 0, worst = 0;
  double worstError = -1.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    double error;
    if (std::isnan(e) || std::isnan(a))
      error = std::isnan(e) && std::isnan(a) ? 0.0 : INFINITY;
    else if (std::isinf(e) || std::isinf(a))
      error = a == e ? 0.0 : INFINITY;
    else
      error = std::abs(a - e) / std::max(std::abs(e), floor);
    if (!(error <= rtol))
      ++failures;
    if (error > worstError) {
      worstError = error;
      worst = i;
    }
  }
  if (failures == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << failures << " of " << actual.size()
         << " elements differ; worst at [" << worst << "]: actual "
         << actual[worst] << ", expected " << expected[worst]
         << ", relative error " << worstError << " > " << rtol << " (floor "
         << floor << ")";
}

::testing::AssertionResult exact(const FVec &actual, const FVec &expected) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " vs " << expected.size();
  for (std::size_t i = 0; i < actual.size(); ++i)
    if (std::memcmp(&actual[i], &expected[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure()
             << "element [" << i << "]: actual " << actual[i] << ", expected "
             << expected[i];
  return ::testing::AssertionSuccess();
}

//===----------------------------------------------------------------------===//
// Fixtures
//===----------------------------------------------------------------------===//

class CudaTest : public ::testing::Test {
protected:
  void SetUp() override {
    cudaCheck(cudaStreamCreate(&stream), "cudaStreamCreate");
    badId = std::make_unique<DeviceArray<int>>(1);
    clearBadId();
  }
  void TearDown() override {
    badId.reset();
    cudaStreamDestroy(stream);
  }
  void sync() { cudaCheck(cudaStreamSynchronize(stream), "stream sync"); }
  void clearBadId() {
    const int zero = 0;
    badId->uploadBytes(&zero);
  }
  int readBadId() {
    sync();
    int value = -1;
    cudaCheck(
        cudaMemcpy(&value, badId->get(), sizeof(int), cudaMemcpyDeviceToHost),
        "read badId");
    return value;
  }
  std::unique_ptr<DeviceArray<unsigned char>> workspace(std::size_t bytes) {
    return std::make_unique<DeviceArray<unsigned char>>(bytes);
  }

  cudaStream_t stream = nullptr;
  std::unique_ptr<DeviceArray<int>> badId;
};

template <typename T> class CudaTyped : public CudaTest {};

struct StorageNames {
  template <typename T> static std::string GetName(int) {
    return std::is_same_v<T, float> ? "fp32" : "bf16";
  }
};
using StorageTypes = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(CudaTyped, StorageTypes, StorageNames);

//===----------------------------------------------------------------------===//
// Conversions
//===----------------------------------------------------------------------===//

TEST_F(CudaTest, CastsRoundToNearestEven) {
  std::mt19937 rng(1);
  // 1003 elements: packs plus a tail; also from an odd offset, element by
  // element. A few exact ties and specials.
  FVec values = randomFloats(1003, rng, -100.0f, 100.0f);
  values[0] = bf16Value(0x3f80) + std::ldexp(1.0f, -8); // tie, rounds down
  values[1] = bf16Value(0x3f81) + std::ldexp(1.0f, -8); // tie, rounds up
  values[2] = INFINITY;
  values[3] = -0.0f;
  values[4] = 3.0e38f; // near bf16's largest finite value
  FVec expectedBf16(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    expectedBf16[i] = roundBf16(values[i]);
  for (Index offset : {0, 1}) {
    const Index n = Index(values.size()) - offset;
    auto input = device<float>(values);
    DeviceArray<bf16> halves(values.size());
    DeviceArray<float> back(values.size());
    DeviceArray<bf16> halves2(values.size());
    DeviceArray<float> copy(values.size());
    cuda::cast<float, bf16>(input->get() + offset, halves.get() + offset, n,
                            stream);
    cuda::cast<bf16, float>(halves.get() + offset, back.get() + offset, n,
                            stream);
    cuda::cast<bf16, bf16>(halves.get() + offset, halves2.get() + offset, n,
                           stream);
    cuda::cast<float, float>(input->get() + offset, copy.get() + offset, n,
                             stream);
    sync();
    auto tail = [&](const FVec &v) {
      return FVec(v.begin() + offset, v.end());
    };
    EXPECT_TRUE(exact(tail(halves.download()), tail(expectedBf16)));
    EXPECT_TRUE(exact(tail(back.download()), tail(expectedBf16)));
    EXPECT_TRUE(exact(tail(halves2.download()), tail(expectedBf16)));
    EXPECT_TRUE(exact(tail(copy.download()), tail(values)));
  }
}

TEST_F(CudaTest, FillsStepCounterAndCopies) {
  DeviceArray<float> f(1001);
  DeviceArray<bf16> h(1001);
  cuda::fill<float>(f.get(), 0.1f, 1001, stream);
  cuda::fill<bf16>(h.get(), 0.1f, 1001, stream);
  sync();
  EXPECT_TRUE(exact(f.download(), FVec(1001, 0.1f)));
  EXPECT_TRUE(exact(h.download(), FVec(1001, roundBf16(0.1f))));

  DeviceArray<std::int32_t> step(3), one(3), sum(3);
  cuda::fillI32(step.get(), 41, 3, stream);
  cuda::fillI32(one.get(), 1, 3, stream);
  cuda::addI32(step.get(), one.get(), sum.get(), 3, stream);
  cuda::addI32(step.get(), one.get(), step.get(), 3, stream); // in place
  const std::vector<unsigned char> raw = sum.bytes(), raw2 = step.bytes();
  IVec got(3), got2(3);
  std::memcpy(got.data(), raw.data(), raw.size());
  std::memcpy(got2.data(), raw2.data(), raw2.size());
  EXPECT_EQ(got, IVec(3, 42));
  EXPECT_EQ(got2, IVec(3, 42));

  std::mt19937 rng(2);
  const FVec values = randomFloats(777, rng);
  auto src = device<float>(values);
  DeviceArray<float> dst(777);
  cuda::copyBytes(src->get(), dst.get(), 777 * sizeof(float), stream);
  sync();
  EXPECT_TRUE(exact(dst.download(), values));
}

TEST_F(CudaTest, RejectsBadSizesOnTheHost) {
  DeviceArray<float> a(4);
  EXPECT_THROW(cuda::add<float>(a.get(), a.get(), a.get(), -1, stream),
               std::invalid_argument);
  EXPECT_THROW(cuda::layerNorm<float>(a.get(), a.get(), a.get(), a.get(), 1, 4,
                                      0.0f, stream),
               std::invalid_argument);
  EXPECT_THROW(
      cuda::positionEmbeddingGrad<float>(a.get(), a.get(), 1, 4, 2, 1, stream),
      std::invalid_argument);
  EXPECT_THROW(cuda::packBlocks(a.get(), a.get(), 1, 1, 1, 2, 3, stream),
               std::invalid_argument);
}

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

TYPED_TEST(CudaTyped, Embedding) {
  using T = TypeParam;
  std::mt19937 rng(3);
  for (Index channels : {64, 37}) {
    const Index rows = 50, vocab = 20;
    const FVec table = rounded<T>(randomFloats(vocab * channels, rng));
    const IVec tokens = randomIds(rows, 0, vocab, rng);
    FVec expected(rows * channels);
    cpu::embedding(tokens.data(), table.data(), expected.data(), rows, vocab,
                   channels);
    auto dTable = device<T>(table);
    auto dTokens = deviceIds(tokens);
    DeviceArray<T> result(rows * channels);
    cuda::embedding<T>(dTokens->get(), dTable->get(), result.get(), rows, vocab,
                       channels, this->badId->get(), this->stream);
    EXPECT_TRUE(exact(result.download(), expected)) << "channels " << channels;
    EXPECT_EQ(this->readBadId(), 0);
  }
}

TYPED_TEST(CudaTyped, EmbeddingGrad) {
  using T = TypeParam;
  std::mt19937 rng(4);
  struct Shape {
    Index rows, vocab, channels;
  };
  // Many repeats of few tokens; more table rows than tokens (untouched
  // rows); element-by-element channels.
  for (Shape s : {Shape{300, 20, 64}, Shape{100, 700, 64}, Shape{300, 20, 33},
                  Shape{0, 5, 8}}) {
    for (bool accumulate : {false, true}) {
      const FVec grad = rounded<T>(randomFloats(s.rows * s.channels, rng));
      const IVec tokens = randomIds(s.rows, 0, s.vocab, rng);
      const FVec initial = rounded<T>(randomFloats(s.vocab * s.channels, rng));
      FVec expected = initial;
      cpu::embeddingGrad(grad.data(), tokens.data(), expected.data(), s.rows,
                         s.vocab, s.channels, accumulate);
      auto dGrad = device<T>(grad);
      auto dTokens = deviceIds(tokens);
      auto ws = this->workspace(
          cuda::embeddingGradWorkspaceSize(s.rows, s.vocab, s.channels));
      std::vector<unsigned char> first;
      for (int run = 0; run < 2; ++run) {
        auto result = device<T>(initial);
        cuda::embeddingGrad<T>(dGrad->get(), dTokens->get(), result->get(),
                               s.rows, s.vocab, s.channels, accumulate,
                               ws->get(), this->badId->get(), this->stream);
        if (run == 0) {
          first = result->bytes();
          EXPECT_TRUE(close(result->download(), expected, Storage<T>::rtol,
                            kCancelFloor))
              << "rows " << s.rows << " vocab " << s.vocab << " channels "
              << s.channels << " accumulate " << accumulate;
        } else {
          EXPECT_EQ(result->bytes(), first) << "not reproducible";
        }
      }
      EXPECT_EQ(this->readBadId(), 0);
    }
  }
}

TYPED_TEST(CudaTyped, PositionEmbedding) {
  using T = TypeParam;
  std::mt19937 rng(5);
  for (Index channels : {64, 37}) {
    const Index batch = 3, seq = 10, positions = 16;
    const FVec input = rounded<T>(randomFloats(batch * seq * channels, rng));
    const FVec table = rounded<T>(randomFloats(positions * channels, rng));
    FVec expected(input.size());
    cpu::positionEmbedding(input.data(), table.data(), expected.data(), batch,
                           seq, channels);
    auto dInput = device<T>(input);
    auto dTable = device<T>(table);
    DeviceArray<T> result(input.size());
    cuda::positionEmbedding<T>(dInput->get(), dTable->get(), result.get(),
                               batch, seq, channels, this->stream);
    // In place, as the backend may run it.
    cuda::positionEmbedding<T>(dInput->get(), dTable->get(), dInput->get(),
                               batch, seq, channels, this->stream);
    this->sync();
    EXPECT_TRUE(
        close(result.download(), expected, Storage<T>::rtol, kCancelFloor));
    EXPECT_TRUE(
        close(dInput->download(), expected, Storage<T>::rtol, kCancelFloor));

    const FVec grad = rounded<T>(randomFloats(batch * seq * channels, rng));
    FVec expectedGrad(positions * channels);
    cpu::positionEmbeddingGrad(grad.data(), expectedGrad.data(), batch, seq,
                               positions, channels);
    auto dGrad = device<T>(grad);
    std::vector<unsigned char> first;
    for (int run = 0; run < 2; ++run) {
      DeviceArray<T> tableGrad(positions * channels);
      cuda::positionEmbeddingGrad<T>(dGrad->get(), tableGrad.get(), batch, seq,
                                     positions, channels, this->stream);
      if (run == 0) {
        first = tableGrad.bytes();
        EXPECT_TRUE(close(tableGrad.download(), expectedGrad, Storage<T>::rtol,
                          kCancelFloor));
      } else {
        EXPECT_EQ(tableGrad.bytes(), first);
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Context parallelism: explicit positions and the attention merge
//===----------------------------------------------------------------------===//

TEST_F(CudaTest, SequencePositions) {
  for (Index length : {0, 1, 48, 1000})
    for (Index chunks : {1, 2, 4, 8}) {
      if (chunks > 1 && length % chunks != 0)
        continue;
      IVec expected(length);
      cpu::sequencePositions(expected.data(), length, chunks);
      DeviceArray<std::int32_t> positions(length);
      cuda::sequencePositions(positions.get(), length, chunks, stream);
      const std::vector<unsigned char> raw = positions.bytes();
      IVec actual(length);
      if (length)
        std::memcpy(actual.data(), raw.data(), raw.size());
      EXPECT_EQ(actual, expected) << "length " << length << " chunks " << chunks;
    }
  DeviceArray<std::int32_t> positions(12);
  EXPECT_THROW(cuda::sequencePositions(positions.get(), 12, 3, stream),
               std::invalid_argument);
  EXPECT_THROW(cuda::sequencePositions(positions.get(), 12, 8, stream),
               std::invalid_argument);
}

TYPED_TEST(CudaTyped, PositionEmbeddingAt) {
  using T = TypeParam;
  std::mt19937 rng(17);
  struct Case {
    Index batch, seq, table, channels;
    bool zigzag;
  };
  // Zigzag positions of a longer sequence, and random ones with repeats,
  // unused rows and a table shorter than the sequence; channels over one
  // tile of the gradient's blocks and odd ones; more positions than one
  // scan tile (300).
  for (const Case &c : {Case{2, 32, 64, 64, true}, Case{3, 300, 40, 37, false},
                        Case{1, 7, 9, 130, false}, Case{4, 16, 32, 5, true}}) {
    IVec positions(c.seq);
    if (c.zigzag) {
      IVec whole(c.table);
      cpu::sequencePositions(whole.data(), c.table, 4);
      // Rank 1 of 2 holds layout blocks 2 and 3 of 4.
      std::copy(whole.begin() + c.table / 2,
                whole.begin() + c.table / 2 + c.seq, positions.begin());
    } else {
      positions = randomIds(c.seq, 0, std::int32_t(c.table), rng);
    }
    const FVec input = rounded<T>(randomFloats(c.batch * c.seq * c.channels, rng));
    const FVec table = rounded<T>(randomFloats(c.table * c.channels, rng));
    FVec expected(input.size());
    cpu::positionEmbeddingAt(input.data(), table.data(), positions.data(),
                             expected.data(), c.batch, c.seq, c.table,
                             c.channels);
    auto dInput = device<T>(input);
    auto dTable = device<T>(table);
    auto dPositions = deviceIds(positions);
    DeviceArray<T> result(input.size());
    cuda::positionEmbeddingAt<T>(dInput->get(), dTable->get(),
                                 dPositions->get(), result.get(), c.batch,
                                 c.seq, c.table, c.channels,
                                 this->badId->get(), this->stream);
    // In place, as the backend may run it.
    cuda::positionEmbeddingAt<T>(dInput->get(), dTable->get(),
                                 dPositions->get(), dInput->get(), c.batch,
                                 c.seq, c.table, c.channels,
                                 this->badId->get(), this->stream);
    this->sync();
    EXPECT_TRUE(
        close(result.download(), expected, Storage<T>::rtol, kCancelFloor));
    EXPECT_TRUE(
        close(dInput->download(), expected, Storage<T>::rtol, kCancelFloor));
    EXPECT_EQ(this->readBadId(), 0);

    const FVec grad = rounded<T>(randomFloats(c.batch * c.seq * c.channels, rng));
    FVec expectedGrad(c.table * c.channels);
    cpu::positionEmbeddingAtGrad(grad.data(), positions.data(),
                                 expectedGrad.data(), c.batch, c.seq, c.table,
                                 c.channels);
    auto dGrad = device<T>(grad);
    std::vector<unsigned char> first;
    for (int run = 0; run < 2; ++run) {
      DeviceArray<T> tableGrad(c.table * c.channels);
      tableGrad.upload(FVec(c.table * c.channels, NAN)); // every row written
      cuda::positionEmbeddingAtGrad<T>(dGrad->get(), dPositions->get(),
                                       tableGrad.get(), c.batch, c.seq,
                                       c.table, c.channels, this->badId->get(),
                                       this->stream);
      if (run == 0) {
        first = tableGrad.bytes();
        // The CPU kernel's order: fp32 bit for bit, bf16 its rounding.
        EXPECT_TRUE(exact(tableGrad.download(), rounded<T>(expectedGrad)));
      } else {
        EXPECT_EQ(tableGrad.bytes(), first);
      }
    }
    EXPECT_EQ(this->readBadId(), 0);
  }
  // A position outside the table is flagged, reads nothing outside it.
  const Index batch = 2, seq = 4, table = 3, channels = 8;
  auto dPositions = deviceIds(IVec{0, 3, -1, 2});
  auto dInput = device<T>(FVec(batch * seq * channels, 1.0f));
  auto dTable = device<T>(FVec(table * channels, 2.0f));
  DeviceArray<T> result(batch * seq * channels);
  cuda::positionEmbeddingAt<T>(dInput->get(), dTable->get(), dPositions->get(),
                               result.get(), batch, seq, table, channels,
                               this->badId->get(), this->stream);
  EXPECT_EQ(this->readBadId(), 1);
  const FVec out = result.download();
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[1 * channels], 1.0f);
  EXPECT_EQ(out[2 * channels], 1.0f);
  this->clearBadId();
  DeviceArray<T> tableGrad(table * channels);
  cuda::positionEmbeddingAtGrad<T>(dInput->get(), dPositions->get(),
                                   tableGrad.get(), batch, seq, table,
                                   channels, this->badId->get(), this->stream);
  EXPECT_EQ(this->readBadId(), 1);
  const FVec g = tableGrad.download();
  EXPECT_EQ(g[0], 2.0f);
  EXPECT_EQ(g[1 * channels], 0.0f);
  EXPECT_EQ(g[2 * channels], 2.0f);
  this->clearBadId();
}

TYPED_TEST(CudaTyped, AttentionMerge) {
  using T = TypeParam;
  std::mt19937 rng(23);
  struct Case {
    Index batch, seq, heads, headDim;
  };
  // Heads beyond one block of threads (300) and odd head sizes.
  for (const Case &c : {Case{2, 5, 4, 16}, Case{1, 3, 300, 3},
                        Case{3, 7, 3, 37}}) {
    const Index features = c.heads * c.headDim;
    const Index n = c.batch * c.seq * features, rows = c.batch * c.heads * c.seq;
    const FVec outA = rounded<T>(randomFloats(n, rng));
    const FVec outB = rounded<T>(randomFloats(n, rng));
    FVec lseA = randomFloats(rows, rng, -4.0f, 4.0f);
    FVec lseB = randomFloats(rows, rng, -4.0f, 4.0f);
    // A query that saw no key of one block, or of either.
    for (Index r = 0; r < rows; r += 3)
      lseA[r] = -INFINITY;
    for (Index r = 0; r < rows; r += 5)
      lseB[r] = -INFINITY;
    FVec expected(n), expectedLse(rows);
    cpu::attentionMerge(rounded<T>(outA).data(), lseA.data(), outB.data(),
                        lseB.data(), expected.data(), expectedLse.data(),
                        c.batch, c.seq, c.heads, c.headDim);
    auto dOutA = device<T>(outA);
    auto dOutB = device<T>(outB);
    auto dLseA = device<float>(lseA);
    auto dLseB = device<float>(lseB);
    DeviceArray<T> out(n);
    DeviceArray<float> lse(rows);
    cuda::attentionMerge<T>(dOutA->get(), dLseA->get(), dOutB->get(),
                            dLseB->get(), out.get(), lse.get(), c.batch, c.seq,
                            c.heads, c.headDim, this->stream);
    // In place into a, as the ring accumulates.
    cuda::attentionMerge<T>(dOutA->get(), dLseA->get(), dOutB->get(),
                            dLseB->get(), dOutA->get(), dLseA->get(), c.batch,
                            c.seq, c.heads, c.headDim, this->stream);
    this->sync();
    EXPECT_TRUE(close(out.download(), expected, Storage<T>::rtol, kSmallFloor));
    EXPECT_TRUE(close(lse.download(), expectedLse, kFp32Rtol, kSmallFloor));
    EXPECT_TRUE(
        close(dOutA->download(), expected, Storage<T>::rtol, kSmallFloor));
    EXPECT_TRUE(close(dLseA->download(), expectedLse, kFp32Rtol, kSmallFloor));
  }
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

struct NormShape {
  Index rows, channels;
};
// Packs (768), element by element (37), more rows than one chunk and a
// partial chunk (300 = 37 chunks of 8 + 4), and 8192 channels, whose
// gradient accumulators need more than 48 KiB of shared memory. 6144
// (layernorm) and 12288 (rmsnorm) channels need exactly 48 KiB of dynamic
// shared memory, which with the kernels' static scratch passes the default
// limit: the opt-in must be made there too.
const NormShape kNormShapes[] = {{67, 768},  {300, 37}, {16, 8192},
                                 {5, 4100},  {4, 6144}, {3, 12288}};

TYPED_TEST(CudaTyped, LayerNorm) {
  using T = TypeParam;
  std::mt19937 rng(6);
  const float epsilon = 1e-5f;
  for (NormShape s : kNormShapes) {
    const Index n = s.rows * s.channels;
    // An offset mean, so that the two-pass variance matters.
    const FVec input = rounded<T>(randomFloats(n, rng, 2.0f, 4.0f));
    const FVec gamma = rounded<T>(randomFloats(s.channels, rng));
    const FVec beta = rounded<T>(randomFloats(s.channels, rng));
    const FVec grad = rounded<T>(randomFloats(n, rng));
    // Each side's row mean of `channels` values near 3 carries its fp32
    // summation error (the CPU's, measured against a double reference, is
    // up to 6e-6 of the output scale at 8192-12288 channels; the CUDA
    // tree's 3e-6), and (x - mean) rstd passes it on to every element:
    // allow it on top of rtol for the wide rows (y, dx and dgamma, which
    // all go through xhat).
    const double rtol =
        Storage<T>::rtol +
        kFp32Rtol * std::max(0.0, std::sqrt(double(s.channels) / 1024.0) - 1.0);
    FVec expected(n), expectedDx(n), expectedDgamma(s.channels),
        expectedDbeta(s.channels);
    cpu::layerNorm(input.data(), gamma.data(), beta.data(), expected.data(),
                   s.rows, s.channels, epsilon);
    cpu::layerNormGrad(grad.data(), input.data(), gamma.data(),
                       expectedDx.data(), expectedDgamma.data(),
                       expectedDbeta.data(), s.rows, s.channels, epsilon);
    auto dInput = device<T>(input);
    auto dGamma = device<T>(gamma);
    auto dBeta = device<T>(beta);
    auto dGrad = device<T>(grad);
    DeviceArray<T> result(n);
    cuda::layerNorm<T>(dInput->get(), dGamma->get(), dBeta->get(), result.get(),
                       s.rows, s.channels, epsilon, this->stream);
    this->sync();
    EXPECT_TRUE(close(result.download(), expected, rtol, kCancelFloor))
        << "rows " << s.rows << " channels " << s.channels;

    auto ws =
        this->workspace(cuda::layerNormGradWorkspaceSize(s.rows, s.channels));
    std::vector<unsigned char> firstDx, firstDgamma, firstDbeta;
    for (int run = 0; run < 2; ++run) {
      DeviceArray<T> dx(n), dgamma(s.channels), dbeta(s.channels);
      cuda::layerNormGrad<T>(dGrad->get(), dInput->get(), dGamma->get(),
                             dx.get(), dgamma.get(), dbeta.get(), s.rows,
                             s.channels, epsilon, ws->get(), this->stream);
      if (run == 0) {
        firstDx = dx.bytes();
        firstDgamma = dgamma.bytes();
        firstDbeta = dbeta.bytes();
        EXPECT_TRUE(close(dx.download(), expectedDx, rtol, kCancelFloor))
            << "dx, rows " << s.rows << " channels " << s.channels;
        EXPECT_TRUE(
            close(dgamma.download(), expectedDgamma, rtol, kCancelFloor))
            << "dgamma, rows " << s.rows << " channels " << s.channels;
        EXPECT_TRUE(close(dbeta.download(), expectedDbeta, Storage<T>::rtol,
                          kCancelFloor))
            << "dbeta, rows " << s.rows << " channels " << s.channels;
      } else {
        EXPECT_EQ(dx.bytes(), firstDx);
        EXPECT_EQ(dgamma.bytes(), firstDgamma);
        EXPECT_EQ(dbeta.bytes(), firstDbeta);
      }
    }
  }
}

TYPED_TEST(CudaTyped, RmsNorm) {
  using T = TypeParam;
  std::mt19937 rng(7);
  const float epsilon = 1e-6f;
  for (NormShape s : kNormShapes) {
    const Index n = s.rows * s.channels;
    const FVec input = rounded<T>(randomFloats(n, rng));
    const FVec gamma = rounded<T>(randomFloats(s.channels, rng));
    const FVec grad = rounded<T>(randomFloats(n, rng));
    FVec expected(n), expectedDx(n), expectedDgamma(s.channels);
    cpu::rmsNorm(input.data(), gamma.data(), expected.data(), s.rows,
                 s.channels, epsilon);
    cpu::rmsNormGrad(grad.data(), input.data(), gamma.data(), expectedDx.data(),
                     expectedDgamma.data(), s.rows, s.channels, epsilon);
    auto dInput = device<T>(input);
    auto dGamma = device<T>(gamma);
    auto dGrad = device<T>(grad);
    DeviceArray<T> result(n);
    cuda::rmsNorm<T>(dInput->get(), dGamma->get(), result.get(), s.rows,
                     s.channels, epsilon, this->stream);
    this->sync();
    EXPECT_TRUE(
        close(result.download(), expected, Storage<T>::rtol, kSmallFloor))
        << "rows " << s.rows << " channels " << s.channels;

    auto ws =
        this->workspace(cuda::rmsNormGradWorkspaceSize(s.rows, s.channels));
    std::vector<unsigned char> firstDx, firstDgamma;
    for (int run = 0; run < 2; ++run) {
      DeviceArray<T> dx(n), dgamma(s.channels);
      cuda::rmsNormGrad<T>(dGrad->get(), dInput->get(), dGamma->get(), dx.get(),
                           dgamma.get(), s.rows, s.channels, epsilon, ws->get(),
                           this->stream);
      if (run == 0) {
        firstDx = dx.bytes();
        firstDgamma = dgamma.bytes();
        EXPECT_TRUE(
            close(dx.download(), expectedDx, Storage<T>::rtol, kCancelFloor))
            << "dx, rows " << s.rows << " channels " << s.channels;
        EXPECT_TRUE(close(dgamma.download(), expectedDgamma, Storage<T>::rtol,
                          kCancelFloor))
            << "dgamma, rows " << s.rows << " channels " << s.channels;
      } else {
        EXPECT_EQ(dx.bytes(), firstDx);
        EXPECT_EQ(dgamma.bytes(), firstDgamma);
      }
    }
  }
}

TYPED_TEST(CudaTyped, NormGradsWithoutRows) {
  using T = TypeParam;
  // No rows: the parameter gradients are zeros, as on the CPU.
  auto nan = device<T>(FVec(8, NAN));
  auto nan2 = device<T>(FVec(8, NAN));
  DeviceArray<T> dummy(8);
  cuda::layerNormGrad<T>(dummy.get(), dummy.get(), dummy.get(), dummy.get(),
                         nan->get(), nan2->get(), 0, 8, 1e-5f, nullptr,
                         this->stream);
  this->sync();
  EXPECT_TRUE(exact(nan->download(), FVec(8, 0.0f)));
  EXPECT_TRUE(exact(nan2->download(), FVec(8, 0.0f)));
}

//===----------------------------------------------------------------------===//
// Bias
//===----------------------------------------------------------------------===//

TYPED_TEST(CudaTyped, BiasAddAndGrad) {
  using T = TypeParam;
  std::mt19937 rng(8);
  for (Index out : {96, 37}) {
    for (Index rows : {1000, 3, 0}) {
      const FVec values = rounded<T>(randomFloats(rows * out, rng));
      const FVec bias = rounded<T>(randomFloats(out, rng));
      // No CPU kernel adds a bias alone: a host loop in fp32.
      FVec expected = values;
      for (Index r = 0; r < rows; ++r)
        for (Index o = 0; o < out; ++o)
          expected[r * out + o] += bias[o];
      auto dValues = device<T>(values);
      auto dBias = device<T>(bias);
      cuda::addBias<T>(dValues->get(), dBias->get(), rows, out, this->stream);
      this->sync();
      EXPECT_TRUE(
          close(dValues->download(), expected, Storage<T>::rtol, kCancelFloor));

      // The CPU's bias gradient is part of linearGradWeight.
      const Index in = 4;
      const FVec input = randomFloats(rows * in, rng);
      FVec weightGrad(out * in), expectedBias(out);
      cpu::linearGradWeight(values.data(), input.data(), weightGrad.data(),
                            expectedBias.data(), rows, in, out);
      auto dGrad = device<T>(values);
      auto ws = this->workspace(cuda::biasGradWorkspaceSize(rows, out));
      std::vector<unsigned char> first;
      for (int run = 0; run < 2; ++run) {
        DeviceArray<T> biasGrad(out);
        cuda::biasGrad<T>(dGrad->get(), biasGrad.get(), rows, out, ws->get(),
                          this->stream);
        if (run == 0) {
          first = biasGrad.bytes();
          EXPECT_TRUE(close(biasGrad.download(), expectedBias, Storage<T>::rtol,
                            kCancelFloor))
              << "rows " << rows << " out " << out;
        } else {
          EXPECT_EQ(biasGrad.bytes(), first);
        }
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TYPED_TEST(CudaTyped, Elementwise) {
  using T = TypeParam;
  std::mt19937 rng(9);
  const Index size = 10007; // packs and a tail
  const FVec x = rounded<T>(randomFloats(size, rng, -6.0f, 6.0f));
  const FVec y = rounded<T>(randomFloats(size, rng, -3.0f, 3.0f));
  const FVec dy = rounded<T>(randomFloats(size, rng));
  FVec gelu(size), geluGrad(size), swiglu(size), gateGrad(size), upGrad(size),
      sum(size), scaled(size);
  cpu::gelu(x.data(), gelu.data(), size);
  cpu::geluGrad(dy.data(), x.data(), geluGrad.data(), size);
  cpu::swiglu(x.data(), y.data(), swiglu.data(), size);
  cpu::swigluGrad(dy.data(), x.data(), y.data(), gateGrad.data(), upGrad.data(),
                  size);
  cpu::add(x.data(), y.data(), sum.data(), size);
  cpu::scale(x.data(), -0.3f, scaled.data(), size);

  auto dX = device<T>(x);
  auto dY = device<T>(y);
  auto dDy = device<T>(dy);
  const double rtol = Storage<T>::rtol;
  // Offset 0: 16-byte packs; offset 1: element by element.
  for (Index offset : {0, 1}) {
    const Index n = size - offset;
    auto tail = [&](const FVec &v) {
      return FVec(v.begin() + offset, v.end());
    };
    DeviceArray<T> a(size), b(size);
    const T *px = dX->get() + offset, *py = dY->get() + offset,
            *pdy = dDy->get() + offset;
    T *pa = a.get() + offset, *pb = b.get() + offset;

    cuda::gelu<T>(px, pa, n, this->stream);
    EXPECT_TRUE(close(tail(a.download()), tail(gelu), rtol, kSmallFloor))
        << "gelu, offset " << offset;
    cuda::geluGrad<T>(pdy, px, pa, n, this->stream);
    EXPECT_TRUE(close(tail(a.download()), tail(geluGrad), rtol, kCancelFloor))
        << "gelu_grad, offset " << offset;
    cuda::swiglu<T>(px, py, pa, n, this->stream);
    EXPECT_TRUE(close(tail(a.download()), tail(swiglu), rtol, kSmallFloor))
        << "swiglu, offset " << offset;
    cuda::swigluGrad<T>(pdy, px, py, pa, pb, n, this->stream);
    EXPECT_TRUE(close(tail(a.download()), tail(gateGrad), rtol, kCancelFloor))
        << "swiglu_grad gate, offset " << offset;
    EXPECT_TRUE(close(tail(b.download()), tail(upGrad), rtol, kSmallFloor))
        << "swiglu_grad up, offset " << offset;
    cuda::add<T>(px, py, pa, n, this->stream);
    EXPECT_TRUE(close(tail(a.download()), tail(sum), rtol, kCancelFloor))
        << "add, offset " << offset;
    cuda::scale<T>(px, -0.3f, pa, n, this->stream);
    EXPECT_TRUE(close(tail(a.download()), tail(scaled), rtol, kSmallFloor))
        << "scale, offset " << offset;
  }

  // Exact aliasing: result = input.
  auto inPlace = device<T>(x);
  cuda::gelu<T>(inPlace->get(), inPlace->get(), size, this->stream);
  EXPECT_TRUE(close(inPlace->download(), gelu, rtol, kSmallFloor));
  auto gate = device<T>(x);
  auto up = device<T>(y);
  cuda::swigluGrad<T>(dDy->get(), gate->get(), up->get(), gate->get(),
                      up->get(), size, this->stream);
  EXPECT_TRUE(close(gate->download(), gateGrad, rtol, kCancelFloor));
  EXPECT_TRUE(close(up->download(), upGrad, rtol, kSmallFloor));
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

TYPED_TEST(CudaTyped, SoftmaxCrossEntropy) {
  using T = TypeParam;
  std::mt19937 rng(10);
  for (Index vocab : {1000, 1001, 5}) {
    const Index rows = 64;
    const FVec logits =
        rounded<T>(randomFloats(rows * vocab, rng, -4.0f, 4.0f));
    const IVec targets = randomIds(rows, 0, vocab, rng);
    const float lossGrad = 1.7f;
    float expectedLoss = 0.0f;
    FVec expectedGrad(rows * vocab);
    cpu::softmaxCrossEntropy(logits.data(), targets.data(), &expectedLoss, rows,
                             vocab);
    cpu::softmaxCrossEntropyGrad(&lossGrad, logits.data(), targets.data(),
                                 expectedGrad.data(), rows, vocab);
    auto dLogits = device<T>(logits);
    auto dTargets = deviceIds(targets);
    auto dLossGrad = deviceScalar(lossGrad);
    auto ws = this->workspace(cuda::softmaxCrossEntropyWorkspaceSize(rows));
    std::vector<unsigned char> first;
    for (int run = 0; run < 2; ++run) {
      DeviceArray<float> loss(1);
      cuda::softmaxCrossEntropy<T>(dLogits->get(), dTargets->get(), loss.get(),
                                   rows, vocab, ws->get(), this->badId->get(),
                                   this->stream);
      if (run == 0) {
        first = loss.bytes();
        EXPECT_TRUE(close(loss.download(), FVec{expectedLoss}, kFp32Rtol, 0.0))
            << "vocab " << vocab;
      } else {
        EXPECT_EQ(loss.bytes(), first);
      }
    }
    DeviceArray<T> grad(rows * vocab);
    cuda::softmaxCrossEntropyGrad<T>(dLossGrad->get(), dLogits->get(),
                                     dTargets->get(), grad.get(), rows, vocab,
                                     this->badId->get(), this->stream);
    EXPECT_TRUE(
        close(grad.download(), expectedGrad, Storage<T>::rtol, kSmallFloor))
        << "vocab " << vocab;
    EXPECT_EQ(this->readBadId(), 0);
  }
  // No rows: NaN, as on the CPU.
  DeviceArray<float> loss(1);
  cuda::softmaxCrossEntropy<T>(nullptr, nullptr, loss.get(), 0, 10, nullptr,
                               this->badId->get(), this->stream);
  EXPECT_TRUE(std::isnan(loss.download()[0]));
}

//===----------------------------------------------------------------------===//
// AdamW
//===----------------------------------------------------------------------===//

TEST_F(CudaTest, AdamW) {
  std::mt19937 rng(11);
  const Index size = 10001;
  const FVec param = randomFloats(size, rng);
  const FVec grad = randomFloats(size, rng);
  const FVec m1 = randomFloats(size, rng, -0.1f, 0.1f);
  const FVec m2 = randomFloats(size, rng, 0.0f, 0.01f);
  cpu::AdamWConfig cpuConfig;
  cpuConfig.weightDecay = 0.1f;
  cuda::AdamWConfig config;
  config.weightDecay = 0.1f;
  for (std::int32_t step : {1, 7, 100000}) {
    const float lr = 3e-3f;
    FVec expectedP(size), expectedM(size), expectedV(size);
    cpu::adamw(param.data(), grad.data(), m1.data(), m2.data(), &step, &lr,
               expectedP.data(), expectedM.data(), expectedV.data(), size,
               cpuConfig);
    auto dStep = deviceIds(IVec{step});
    auto dLr = deviceScalar(lr);
    auto dGrad = device<float>(grad);
    // Separate outputs, then in place.
    for (bool inPlace : {false, true}) {
      auto p = device<float>(param);
      auto m = device<float>(m1);
      auto v = device<float>(m2);
      DeviceArray<float> np(size), nm(size), nv(size);
      cuda::adamw(p->get(), dGrad->get(), m->get(), v->get(), dStep->get(),
                  dLr->get(), inPlace ? p->get() : np.get(),
                  inPlace ? m->get() : nm.get(), inPlace ? v->get() : nv.get(),
                  size, config, stream);
      sync();
      EXPECT_TRUE(close((inPlace ? *p : np).download(), expectedP, kFp32Rtol,
                        kCancelFloor))
          << "step " << step << " in place " << inPlace;
      EXPECT_TRUE(close((inPlace ? *m : nm).download(), expectedM, kFp32Rtol,
                        kCancelFloor))
          << "step " << step << " in place " << inPlace;
      EXPECT_TRUE(close((inPlace ? *v : nv).download(), expectedV, kFp32Rtol,
                        kCancelFloor))
          << "step " << step << " in place " << inPlace;
    }
  }
}

// adamw_block (ZeRO's chunk read in its parameter): block b of a flat
// parameter updates bit for bit as adamw on that block's copy, whatever the
// block's alignment (12 floats keep 16 bytes; 37 do not); a block outside
// [0, blocks) sets badId and writes nothing.
TEST_F(CudaTest, AdamWBlock) {
  std::mt19937 rng(13);
  const Index blocks = 3;
  cuda::AdamWConfig config;
  config.weightDecay = 0.1f;
  const std::int32_t step = 7;
  const float lr = 3e-3f;
  auto dStep = deviceIds(IVec{step});
  auto dLr = deviceScalar(lr);
  for (Index size : {Index(12), Index(37)}) {
    const FVec param = randomFloats(size * blocks, rng);
    const FVec grad = randomFloats(size, rng);
    const FVec m1 = randomFloats(size, rng, -0.1f, 0.1f);
    const FVec m2 = randomFloats(size, rng, 0.0f, 0.01f);
    auto p = device<float>(param), g = device<float>(grad),
         m = device<float>(m1), v = device<float>(m2);
    for (std::int32_t block : {0, 2, 3, -1}) {
      const bool inside = block >= 0 && block < blocks;
      auto dBlock = deviceIds(IVec{block});
      DeviceArray<float> np(size), nm(size), nv(size);
      const FVec untouched(size, 0.5f);
      np.upload(untouched);
      clearBadId();
      cuda::adamwBlock(p->get(), dBlock->get(), blocks, g->get(), m->get(),
                       v->get(), dStep->get(), dLr->get(), np.get(), nm.get(),
                       nv.get(), size, config, badId->get(), stream);
      EXPECT_EQ(readBadId(), inside ? 0 : 1) << "block " << block;
      if (!inside) {
        EXPECT_EQ(np.download(), untouched) << "block " << block;
        continue;
      }
      const FVec part(param.begin() + block * size,
                      param.begin() + (block + 1) * size);
      auto chunk = device<float>(part);
      DeviceArray<float> ep(size), em(size), ev(size);
      cuda::adamw(chunk->get(), g->get(), m->get(), v->get(), dStep->get(),
                  dLr->get(), ep.get(), em.get(), ev.get(), size, config,
                  stream);
      sync();
      EXPECT_EQ(np.download(), ep.download()) << "size " << size << " block " << block;
      EXPECT_EQ(nm.download(), em.download()) << "size " << size << " block " << block;
      EXPECT_EQ(nv.download(), ev.download()) << "size " << size << " block " << block;
    }
  }
}

//===----------------------------------------------------------------------===//
// Blocks
//===----------------------------------------------------------------------===//

TEST_F(CudaTest, Blocks) {
  std::mt19937 rng(12);
  struct Shape {
    Index outer, blockDim, inner, blocks;
  };
  // Runs of 140 bytes (4-byte units) and 160 bytes (16-byte units) for
  // fp32, 70 and 80 bytes for 2-byte elements.
  for (Shape s : {Shape{3, 5, 7, 4}, Shape{3, 5, 8, 4}, Shape{1, 6, 3, 2}}) {
    const Index total = s.outer * s.blocks * s.blockDim * s.inner;
    const Index part = s.outer * s.blockDim * s.inner;
    const FVec input = randomFloats(total, rng);
    // fp32 against the CPU kernels.
    FVec expectedSlice(part), expectedPacked(total), expectedUnpacked(total);
    const std::int32_t index = std::int32_t(s.blocks - 1);
    cpu::sliceBlock(input.data(), &index, expectedSlice.data(), s.outer,
                    s.blockDim, s.inner, s.blocks);
    cpu::packBlocks(input.data(), expectedPacked.data(), s.outer, s.blockDim,
                    s.inner, s.blocks);
    cpu::unpackBlocks(input.data(), expectedUnpacked.data(), s.outer,
                      s.blockDim, s.inner, s.blocks);
    auto dInput = device<float>(input);
    auto dIndex = deviceIds(IVec{index});
    DeviceArray<float> slice(part), packed(total), unpacked(total);
    cuda::sliceBlock(dInput->get(), dIndex->get(), slice.get(), s.outer,
                     s.blockDim, s.inner, s.blocks, 4, badId->get(), stream);
    cuda::packBlocks(dInput->get(), packed.get(), s.outer, s.blockDim, s.inner,
                     s.blocks, 4, stream);
    cuda::unpackBlocks(dInput->get(), unpacked.get(), s.outer, s.blockDim,
                       s.inner, s.blocks, 4, stream);
    sync();
    EXPECT_TRUE(exact(slice.download(), expectedSlice));
    EXPECT_TRUE(exact(packed.download(), expectedPacked));
    EXPECT_TRUE(exact(unpacked.download(), expectedUnpacked));
    EXPECT_EQ(readBadId(), 0);

    // 2-byte elements: the same permutation of bf16 values (the CPU
    // kernels are fp32 only, so the expected values are the fp32 results
    // rounded).
    auto dHalf = device<bf16>(input);
    DeviceArray<bf16> hSlice(part), hPacked(total), hUnpacked(total);
    cuda::sliceBlock(dHalf->get(), dIndex->get(), hSlice.get(), s.outer,
                     s.blockDim, s.inner, s.blocks, 2, badId->get(), stream);
    cuda::packBlocks(dHalf->get(), hPacked.get(), s.outer, s.blockDim, s.inner,
                     s.blocks, 2, stream);
    cuda::unpackBlocks(dHalf->get(), hUnpacked.get(), s.outer, s.blockDim,
                       s.inner, s.blocks, 2, stream);
    sync();
    EXPECT_TRUE(exact(hSlice.download(), rounded<bf16>(expectedSlice)));
    EXPECT_TRUE(exact(hPacked.download(), rounded<bf16>(expectedPacked)));
    EXPECT_TRUE(exact(hUnpacked.download(), rounded<bf16>(expectedUnpacked)));

    // An index out of range: *badId, zeros.
    auto dBadIndex = deviceIds(IVec{std::int32_t(s.blocks)});
    cuda::sliceBlock(dInput->get(), dBadIndex->get(), slice.get(), s.outer,
                     s.blockDim, s.inner, s.blocks, 4, badId->get(), stream);
    EXPECT_EQ(readBadId(), 1);
    EXPECT_TRUE(exact(slice.download(), FVec(part, 0.0f)));
    clearBadId();
  }
}

//===----------------------------------------------------------------------===//
// Vocabulary parallelism
//===----------------------------------------------------------------------===//

TYPED_TEST(CudaTyped, VocabParallel) {
  using T = TypeParam;
  std::mt19937 rng(13);
  for (Index localVocab : {40, 37}) {
    const Index rows = 96, channels = 48, shards = 4;
    const std::int32_t shard = 1;
    // Global ids over all shards: about a quarter are local.
    const IVec ids = randomIds(rows, 0, std::int32_t(shards * localVocab), rng);
    const FVec table = rounded<T>(randomFloats(localVocab * channels, rng));
    const FVec grad = rounded<T>(randomFloats(rows * channels, rng));
    const FVec logits =
        rounded<T>(randomFloats(rows * localVocab, rng, -4.0f, 4.0f));
    const float lossGrad = 0.9f;

    FVec embedded(rows * channels), tableGrad(localVocab * channels), max(rows),
        targetLogit(rows), sumExp(rows), logitsGrad(rows * localVocab);
    float loss = 0.0f;
    cpu::vocabParallelEmbedding(ids.data(), table.data(), &shard,
                                embedded.data(), rows, localVocab, channels);
    cpu::vocabParallelEmbeddingGrad(grad.data(), ids.data(), &shard,
                                    tableGrad.data(), rows, localVocab,
                                    channels);
    cpu::vocabParallelMax(logits.data(), max.data(), rows, localVocab);
    cpu::vocabParallelTargetLogit(logits.data(), ids.data(), &shard,
                                  targetLogit.data(), rows, localVocab);
    cpu::vocabParallelSumExp(logits.data(), max.data(), sumExp.data(), rows,
                             localVocab);
    cpu::vocabParallelLoss(max.data(), sumExp.data(), targetLogit.data(), &loss,
                           rows);
    cpu::vocabParallelCrossEntropyGrad(&lossGrad, logits.data(), ids.data(),
                                       &shard, max.data(), sumExp.data(),
                                       logitsGrad.data(), rows, localVocab);

    auto dIds = deviceIds(ids);
    auto dShard = deviceIds(IVec{shard});
    auto dTable = device<T>(table);
    auto dGrad = device<T>(grad);
    auto dLogits = device<T>(logits);
    auto dLossGrad = deviceScalar(lossGrad);
    int *badId = this->badId->get();
    cudaStream_t stream = this->stream;
    const double rtol = Storage<T>::rtol;

    DeviceArray<T> gEmbedded(rows * channels);
    cuda::vocabParallelEmbedding<T>(dIds->get(), dTable->get(), dShard->get(),
                                    gEmbedded.get(), rows, localVocab, channels,
                                    badId, stream);
    EXPECT_TRUE(exact(gEmbedded.download(), embedded));

    auto ws = this->workspace(cuda::vocabParallelEmbeddingGradWorkspaceSize(
        rows, localVocab, channels));
    std::vector<unsigned char> firstTableGrad;
    for (int run = 0; run < 2; ++run) {
      auto gTableGrad = device<T>(FVec(localVocab * channels, NAN));
      cuda::vocabParallelEmbeddingGrad<T>(
          dGrad->get(), dIds->get(), dShard->get(), gTableGrad->get(), rows,
          localVocab, channels, ws->get(), badId, stream);
      if (run == 0) {
        firstTableGrad = gTableGrad->bytes();
        EXPECT_TRUE(
            close(gTableGrad->download(), tableGrad, rtol, kCancelFloor));
      } else {
        EXPECT_EQ(gTableGrad->bytes(), firstTableGrad);
      }
    }

    // The statistics from the CPU's inputs, so that each kernel is checked
    // on its own.
    auto dMax = device<float>(max);
    auto dSumExp = device<float>(sumExp);
    auto dTargetLogit = device<float>(targetLogit);
    DeviceArray<float> gMax(rows), gTargetLogit(rows), gSumExp(rows), gLoss(1);
    DeviceArray<T> gLogitsGrad(rows * localVocab);
    cuda::vocabParallelMax<T>(dLogits->get(), gMax.get(), rows, localVocab,
                              stream);
    cuda::vocabParallelTargetLogit<T>(dLogits->get(), dIds->get(),
                                      dShard->get(), gTargetLogit.get(), rows,
                                      localVocab, badId, stream);
    cuda::vocabParallelSumExp<T>(dLogits->get(), dMax->get(), gSumExp.get(),
                                 rows, localVocab, stream);
    cuda::vocabParallelCrossEntropyGrad<T>(
        dLossGrad->get(), dLogits->get(), dIds->get(), dShard->get(),
        dMax->get(), dSumExp->get(), gLogitsGrad.get(), rows, localVocab, badId,
        stream);
    EXPECT_TRUE(exact(gMax.download(), max));
    EXPECT_TRUE(exact(gTargetLogit.download(), targetLogit));
    EXPECT_TRUE(close(gSumExp.download(), sumExp, kFp32Rtol, kSmallFloor));
    EXPECT_TRUE(close(gLogitsGrad.download(), logitsGrad, rtol, kSmallFloor));
    std::vector<unsigned char> firstLoss;
    for (int run = 0; run < 2; ++run) {
      cuda::vocabParallelLoss(dMax->get(), dSumExp->get(), dTargetLogit->get(),
                              gLoss.get(), rows, nullptr, stream);
      if (run == 0) {
        firstLoss = gLoss.bytes();
        EXPECT_TRUE(close(gLoss.download(), FVec{loss}, kFp32Rtol, 0.0));
      } else {
        EXPECT_EQ(gLoss.bytes(), firstLoss);
      }
    }
    EXPECT_EQ(cuda::vocabParallelLossWorkspaceSize(rows), 0u);
    EXPECT_EQ(this->readBadId(), 0);
  }
}

//===----------------------------------------------------------------------===//
// Bad ids: *badId = 1, the row contributes nothing, nothing out of bounds
//===----------------------------------------------------------------------===//

TYPED_TEST(CudaTyped, BadTokenIds) {
  using T = TypeParam;
  std::mt19937 rng(14);
  const Index rows = 40, vocab = 16, channels = 24;
  IVec tokens = randomIds(rows, 0, vocab, rng);
  tokens[3] = vocab;    // one past the end
  tokens[17] = -5;      // negative
  tokens[30] = 1 << 30; // far out
  IVec cleanTokens = tokens;
  const FVec table = rounded<T>(randomFloats(vocab * channels, rng));
  FVec grad = rounded<T>(randomFloats(rows * channels, rng));
  FVec cleanGrad = grad;
  for (Index r : {3, 17, 30}) {
    cleanTokens[r] = 0;
    for (Index c = 0; c < channels; ++c)
      cleanGrad[r * channels + c] = 0.0f;
  }
  auto dTokens = deviceIds(tokens);
  auto dTable = device<T>(table);

  // Embedding: bad rows are zeros.
  FVec expected(rows * channels);
  cpu::embedding(cleanTokens.data(), table.data(), expected.data(), rows, vocab,
                 channels);
  for (Index r : {3, 17, 30})
    std::fill_n(expected.begin() + r * channels, channels, 0.0f);
  DeviceArray<T> embedded(rows * channels);
  cuda::embedding<T>(dTokens->get(), dTable->get(), embedded.get(), rows, vocab,
                     channels, this->badId->get(), this->stream);
  EXPECT_TRUE(exact(embedded.download(), expected));
  EXPECT_EQ(this->readBadId(), 1);
  this->clearBadId();

  // Embedding gradient: bad rows add nothing (the reference adds zeros).
  FVec expectedGrad(vocab * channels);
  cpu::embeddingGrad(cleanGrad.data(), cleanTokens.data(), expectedGrad.data(),
                     rows, vocab, channels);
  auto dGrad = device<T>(grad);
  auto ws =
      this->workspace(cuda::embeddingGradWorkspaceSize(rows, vocab, channels));
  DeviceArray<T> tableGrad(vocab * channels);
  cuda::embeddingGrad<T>(dGrad->get(), dTokens->get(), tableGrad.get(), rows,
                         vocab, channels, false, ws->get(), this->badId->get(),
                         this->stream);
  EXPECT_TRUE(close(tableGrad.download(), expectedGrad, Storage<T>::rtol,
                    kCancelFloor));
  EXPECT_EQ(this->readBadId(), 1);
  this->clearBadId();

  // Loss: a bad target's row adds 0 (the mean still divides by rows) and
  // gets a zero gradient.
  const FVec logits = rounded<T>(randomFloats(rows * vocab, rng, -3.0f, 3.0f));
  FVec validLogits;
  IVec validTargets;
  for (Index r = 0; r < rows; ++r) {
    if (tokens[r] >= 0 && tokens[r] < vocab) {
      validTargets.push_back(tokens[r]);
      validLogits.insert(validLogits.end(), logits.begin() + r * vocab,
                         logits.begin() + (r + 1) * vocab);
    }
  }
  const Index valid = Index(validTargets.size());
  float validLoss = 0.0f;
  cpu::softmaxCrossEntropy(validLogits.data(), validTargets.data(), &validLoss,
                           valid, vocab);
  const float expectedLoss =
      static_cast<float>(double(validLoss) * valid / double(rows));
  auto dLogits = device<T>(logits);
  auto lossWs = this->workspace(cuda::softmaxCrossEntropyWorkspaceSize(rows));
  DeviceArray<float> loss(1);
  cuda::softmaxCrossEntropy<T>(dLogits->get(), dTokens->get(), loss.get(), rows,
                               vocab, lossWs->get(), this->badId->get(),
                               this->stream);
  EXPECT_TRUE(close(loss.download(), FVec{expectedLoss}, kFp32Rtol, 0.0));
  EXPECT_EQ(this->readBadId(), 1);
  this->clearBadId();

  const float one = 1.0f;
  FVec expectedLogitsGrad(rows * vocab, 0.0f);
  {
    // The CPU gradient over the whole batch for the valid rows: run it
    // with bad targets replaced, then zero those rows.
    cpu::softmaxCrossEntropyGrad(&one, logits.data(), cleanTokens.data(),
                                 expectedLogitsGrad.data(), rows, vocab);
    for (Index r : {3, 17, 30})
      std::fill_n(expectedLogitsGrad.begin() + r * vocab, vocab, 0.0f);
  }
  auto dOne = deviceScalar(one);
  DeviceArray<T> logitsGrad(rows * vocab);
  cuda::softmaxCrossEntropyGrad<T>(dOne->get(), dLogits->get(), dTokens->get(),
                                   logitsGrad.get(), rows, vocab,
                                   this->badId->get(), this->stream);
  EXPECT_TRUE(close(logitsGrad.download(), expectedLogitsGrad, Storage<T>::rtol,
                    kSmallFloor));
  EXPECT_EQ(this->readBadId(), 1);
  this->clearBadId();

  // Vocabulary parallel: only negative ids (and shards) are bad.
  const std::int32_t shard = 0;
  auto dShard = deviceIds(IVec{shard});
  DeviceArray<float> targetLogit(rows);
  cuda::vocabParallelTargetLogit<T>(dLogits->get(), dTokens->get(),
                                    dShard->get(), targetLogit.get(), rows,
                                    vocab, this->badId->get(), this->stream);
  const FVec got = targetLogit.download();
  EXPECT_EQ(got[17], 0.0f);
  EXPECT_EQ(got[3], 0.0f);
  EXPECT_EQ(this->readBadId(), 1);
  this->clearBadId();
  auto negativeShard = deviceIds(IVec{-1});
  DeviceArray<T> vpEmbedded(rows * channels);
  cuda::vocabParallelEmbedding<T>(
      dTokens->get(), dTable->get(), negativeShard->get(), vpEmbedded.get(),
      rows, vocab, channels, this->badId->get(), this->stream);
  EXPECT_TRUE(exact(vpEmbedded.download(), FVec(rows * channels, 0.0f)));
  EXPECT_EQ(this->readBadId(), 1);
  this->clearBadId();
  auto vpWs = this->workspace(
      cuda::vocabParallelEmbeddingGradWorkspaceSize(rows, vocab, channels));
  auto vpTableGrad = device<T>(FVec(vocab * channels, NAN));
  cuda::vocabParallelEmbeddingGrad<T>(
      dGrad->get(), dTokens->get(), dShard->get(), vpTableGrad->get(), rows,
      vocab, channels, vpWs->get(), this->badId->get(), this->stream);
  // Shard 0 holds ids [0, vocab): as embeddingGrad without the bad rows.
  EXPECT_TRUE(close(vpTableGrad->download(), expectedGrad, Storage<T>::rtol,
                    kCancelFloor));
  EXPECT_EQ(this->readBadId(), 1);
}

} // namespace

int main(int argc, char **argv) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    std::printf(
        "partition-cuda-kernel-tests: skipped: %s\n",
        cudaGetErrorString(error != cudaSuccess ? error : cudaErrorNoDevice));
    return 0;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
