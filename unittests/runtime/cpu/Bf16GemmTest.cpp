//===- Bf16GemmTest.cpp - bf16 linear-layer GEMMs by oneDNN ---------------===//
//
// The oneDNN GEMMs against exact products of the same bf16 inputs (they may
// differ from the widened sgemm only in the order of the fp32 sums, so both
// round to within one bf16 step of the exact value), the bias gradient
// beside them bit for bit against the widened kernel, and the choice of
// engine.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/Bf16Gemm.h"
#include "unittests/runtime/cpu/KernelTestUtils.h"

#include <optional>
#include <stdexcept>

using namespace partition::runtime::cpu;
using namespace partition::runtime::cpu::testing;

namespace {

using Bits = std::vector<std::uint16_t>;

Bits randomBf16(std::size_t n, std::mt19937 &rng) {
  FVec values = randomFloats(n, rng);
  Bits bits(n);
  roundToBFloat16(values.data(), bits.data(), Index(n));
  return bits;
}

FVec widened(const Bits &bits) {
  FVec values(bits.size());
  widenBFloat16(bits.data(), values.data(), Index(bits.size()));
  return values;
}

/// The exact product, in double, of the bf16 operands (Kernels.h layouts):
/// Forward y [m, n] = a [m, k] b [n, k]^T + bias; GradInput dx [m, k] =
/// a [m, n] b [n, k]; GradWeight dW [n, k] = a [m, n]^T b [m, k].
DVec exactProduct(LinearProduct product, const DVec &a, const DVec &b,
                  const DVec &bias, Index m, Index k, Index n) {
  DVec result;
  switch (product) {
  case LinearProduct::Forward:
    result.assign(m * n, 0.0);
    for (Index r = 0; r < m; ++r)
      for (Index c = 0; c < n; ++c) {
        double sum = bias.empty() ? 0.0 : bias[c];
        for (Index i = 0; i < k; ++i)
          sum += a[r * k + i] * b[c * k + i];
        result[r * n + c] = sum;
      }
    break;
  case LinearProduct::GradInput:
    result.assign(m * k, 0.0);
    for (Index r = 0; r < m; ++r)
      for (Index c = 0; c < k; ++c)
        for (Index i = 0; i < n; ++i)
          result[r * k + c] += a[r * n + i] * b[i * k + c];
    break;
  case LinearProduct::GradWeight:
    result.assign(n * k, 0.0);
    for (Index r = 0; r < n; ++r)
      for (Index c = 0; c < k; ++c)
        for (Index i = 0; i < m; ++i)
          result[r * k + c] += a[i * n + r] * b[i * k + c];
    break;
  }
  return result;
}

/// A Bf16Gemms when this build has oneDNN, else nothing (the test skips).
std::optional<Bf16Gemms> makeGemms() {
  try {
    return std::optional<Bf16Gemms>(std::in_place);
  } catch (const std::runtime_error &) {
    return std::nullopt;
  }
}

const char *productName(LinearProduct product) {
  switch (product) {
  case LinearProduct::Forward:
    return "forward";
  case LinearProduct::GradInput:
    return "grad input";
  case LinearProduct::GradWeight:
    return "grad weight";
  }
  return "";
}

} // namespace

// Each result is the exact value rounded once to bf16 (half a step: 2^-9
// relative), after fp32 sums whose error is far below that: rtol 2^-8
// allows one step, atol covers results that cancel to near zero.
TEST(Bf16GemmTest, ProductsMatchTheExactValueRoundedToBf16) {
  std::optional<Bf16Gemms> gemms = makeGemms();
  if (!gemms)
    GTEST_SKIP() << "built without oneDNN";
  std::mt19937 rng(31);
  struct Case {
    LinearProduct product;
    bool bias;
  };
  const Case cases[] = {{LinearProduct::Forward, true},
                        {LinearProduct::Forward, false},
                        {LinearProduct::GradInput, false},
                        {LinearProduct::GradWeight, false}};
  // Odd sizes (no block divides them), and one large enough for oneDNN to
  // split the work over threads and pack its operands.
  const Index shapes[][3] = {{37, 53, 29}, {256, 192, 320}};
  for (const Case &test : cases)
    for (const auto &shape : shapes) {
      const Index m = shape[0], k = shape[1], n = shape[2];
      SCOPED_TRACE(std::string(productName(test.product)) +
                   (test.bias ? " + bias " : " ") + std::to_string(m) + "x" +
                   std::to_string(k) + "x" + std::to_string(n));
      const bool forward = test.product == LinearProduct::Forward;
      const Index aSize = test.product == LinearProduct::GradInput ||
                                  test.product == LinearProduct::GradWeight
                              ? m * n
                              : m * k;
      const Index bSize = test.product == LinearProduct::GradWeight ? m * k
                                                                    : n * k;
      const Index resultSize =
          forward ? m * n : test.product == LinearProduct::GradInput ? m * k
                                                                     : n * k;
      Bits a = randomBf16(aSize, rng), b = randomBf16(bSize, rng);
      Bits bias = test.bias ? randomBf16(n, rng) : Bits();
      Bits result(resultSize, 0x7fc0); // NaN: every element must be written
      std::function<void()> call = gemms->compile(
          test.product, a.data(), b.data(), test.bias ? bias.data() : nullptr,
          result.data(), m, k, n);
      if (!call)
        GTEST_SKIP() << "oneDNN has no bf16 matmul on this CPU";
      call();
      DVec expected =
          exactProduct(test.product, toDouble(widened(a)), toDouble(widened(b)),
                       toDouble(widened(bias)), m, k, n);
      EXPECT_TRUE(allClose(widened(result), expected, 1.0 / 256, 1e-4));
      // Compiled once, run again: the same bits.
      Bits first = result;
      call();
      EXPECT_EQ(result, first);
    }
}

TEST(Bf16GemmTest, ZeroSizesAreLeftToTheWidenedKernels) {
  std::optional<Bf16Gemms> gemms = makeGemms();
  if (!gemms)
    GTEST_SKIP() << "built without oneDNN";
  Bits a(8), b(8), result(8);
  EXPECT_FALSE(gemms->compile(LinearProduct::Forward, a.data(), b.data(),
                              nullptr, result.data(), 0, 4, 2));
  EXPECT_FALSE(gemms->compile(LinearProduct::GradWeight, a.data(), b.data(),
                              nullptr, result.data(), 2, 4, 0));
}

TEST(Bf16GemmTest, BiasGradientIsTheWidenedKernelsBitForBit) {
  std::mt19937 rng(32);
  for (Index columns : {Index(5), Index(300), Index(1031)}) {
    const Index rows = 67;
    Bits grad = randomBf16(rows * columns, rng);
    Bits direct(columns);
    linearBiasGradBFloat16(grad.data(), direct.data(), rows, columns);
    // The widened path: fp32 column sums by linearGradWeight, rounded.
    FVec gradF = widened(grad), input(rows * 3, 0.5f), weightGrad(columns * 3),
        biasGrad(columns);
    linearGradWeight(gradF.data(), input.data(), weightGrad.data(),
                     biasGrad.data(), rows, 3, columns);
    Bits viaWidening(columns);
    roundToBFloat16(biasGrad.data(), viaWidening.data(), columns);
    EXPECT_EQ(direct, viaWidening) << columns << " columns";
  }
}

TEST(Bf16GemmTest, ChoiceFollowsTheEnvironmentThenAmx) {
  const std::string amx = "oneDNN 2.6.3 on avx512_core_amx";
  EXPECT_EQ(chooseBf16Gemm("", OneDnnBf16::Amx, amx).engine,
            Bf16GemmEngine::OneDnn);
  EXPECT_EQ(chooseBf16Gemm("", OneDnnBf16::Amx, amx).describe, amx);
  Bf16GemmChoice slower =
      chooseBf16Gemm("", OneDnnBf16::Slower, "oneDNN 2.6.3 on avx512_core_bf16");
  EXPECT_EQ(slower.engine, Bf16GemmEngine::Widen);
  EXPECT_EQ(slower.describe, "fp32 sgemm on widened copies (no AMX for oneDNN "
                             "2.6.3 on avx512_core_bf16)");
  // Forced: oneDNN where it has a bf16 matmul at all, else said plainly.
  Bf16GemmChoice forced = chooseBf16Gemm("onednn", OneDnnBf16::Slower, "x");
  EXPECT_EQ(forced.engine, Bf16GemmEngine::OneDnn);
  EXPECT_EQ(forced.describe, "x (PARTITION_BF16_GEMM=onednn)");
  Bf16GemmChoice none =
      chooseBf16Gemm("onednn", OneDnnBf16::None, "oneDNN 2.6.3 on avx2");
  EXPECT_EQ(none.engine, Bf16GemmEngine::Widen);
  EXPECT_EQ(none.describe,
            "fp32 sgemm on widened copies (PARTITION_BF16_GEMM=onednn, but "
            "oneDNN 2.6.3 on avx2 has no bf16 matmul)");
  Bf16GemmChoice widen = chooseBf16Gemm("widen", OneDnnBf16::Amx, amx);
  EXPECT_EQ(widen.engine, Bf16GemmEngine::Widen);
  EXPECT_EQ(widen.name, "widen");
  EXPECT_EQ(widen.describe,
            "fp32 sgemm on widened copies (PARTITION_BF16_GEMM=widen)");
  EXPECT_EQ(chooseBf16Gemm("", OneDnnBf16::Absent, "").describe,
            "fp32 sgemm on widened copies (built without oneDNN)");
  EXPECT_THROW(chooseBf16Gemm("onednn", OneDnnBf16::Absent, ""),
               std::runtime_error);
  try {
    chooseBf16Gemm("amx", OneDnnBf16::Amx, amx);
    ADD_FAILURE() << "an unknown engine was accepted";
  } catch (const std::runtime_error &error) {
    EXPECT_STREQ(error.what(),
                 "PARTITION_BF16_GEMM=amx: expected `onednn` or `widen`");
  }
}
