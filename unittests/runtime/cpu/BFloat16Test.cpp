//===- BFloat16Test.cpp - fp32 <-> bf16 conversion ------------------------===//
//
// Against the definition: bf16 is the upper half of an fp32, narrowing
// rounds to nearest with ties to even, NaN stays NaN, and widening is exact.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace cpu = partition::runtime::cpu;

namespace {

float fromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint16_t narrow(float value) {
  uint16_t result;
  cpu::roundToBFloat16(&value, &result, 1);
  return result;
}

float widen(uint16_t value) {
  float result;
  cpu::widenBFloat16(&value, &result, 1);
  return result;
}

TEST(BFloat16, ExactValuesRoundTrip) {
  for (float value : {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 65280.0f,
                      std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
    uint16_t bits = narrow(value);
    EXPECT_EQ(widen(bits), value) << value;
    uint32_t expected;
    std::memcpy(&expected, &value, sizeof(expected));
    EXPECT_EQ(bits, expected >> 16) << value;
  }
}

TEST(BFloat16, RoundsToNearestTiesToEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even
  // mantissa (1.0); 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and
  // 1 + 2^-6 (even).
  EXPECT_EQ(widen(narrow(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(widen(narrow(1.0f + 3 * std::ldexp(1.0f, -8))),
            1.0f + std::ldexp(1.0f, -6));
  // Just above the halfway point rounds up.
  EXPECT_EQ(widen(narrow(fromBits(0x3f808001u))), fromBits(0x3f810000u));
  // The largest finite fp32 rounds up to infinity, as in CUDA.
  EXPECT_TRUE(std::isinf(widen(narrow(std::numeric_limits<float>::max()))));
}

TEST(BFloat16, NaNStaysNaN) {
  // A NaN whose payload is only in the low half would round to infinity
  // if treated as a number.
  EXPECT_TRUE(std::isnan(widen(narrow(fromBits(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(widen(narrow(std::nanf("")))));
}

TEST(BFloat16, RelativeErrorIsAtMostHalfAnUlp) {
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> values(100000);
  for (float &v : values)
    v = normal(random);
  std::vector<uint16_t> narrowed(values.size());
  std::vector<float> widened(values.size());
  cpu::roundToBFloat16(values.data(), narrowed.data(), values.size());
  cpu::widenBFloat16(narrowed.data(), widened.data(), values.size());
  // |v| in [2^(e-1), 2^e): bf16's 8 significant bits space values 2^(e-8)
  // apart there, so rounding moves v by at most 2^(e-9).
  for (size_t i = 0; i < values.size(); ++i) {
    int exponent;
    std::frexp(values[i], &exponent);
    ASSERT_LE(std::fabs(widened[i] - values[i]), std::ldexp(1.0f, exponent - 9))
        << values[i];
  }
}

TEST(BFloat16, RejectsNegativeSizes) {
  float value = 0;
  uint16_t bits = 0;
  EXPECT_THROW(cpu::roundToBFloat16(&value, &bits, -1), std::invalid_argument);
  EXPECT_THROW(cpu::widenBFloat16(&bits, &value, -1), std::invalid_argument);
}

} // namespace

// The kernels that read bf16 themselves (GELU, its gradient, add, the
// loss and its gradient) against the CPU backend's general path: widen the
// operands, run the fp32 kernel, round the results. Bit for bit, with
// values spread over several binades and some infinities and NaNs among
// the elementwise inputs.
namespace {

std::vector<uint16_t> randomBits(size_t n, std::mt19937 &rng, float spread,
                                 bool specials) {
  std::uniform_real_distribution<float> value(-spread, spread);
  std::vector<float> values(n);
  for (float &x : values)
    x = value(rng);
  if (specials && n > 8) {
    values[1] = std::numeric_limits<float>::infinity();
    values[3] = -std::numeric_limits<float>::infinity();
    values[5] = std::numeric_limits<float>::quiet_NaN();
  }
  std::vector<uint16_t> bits(n);
  cpu::roundToBFloat16(values.data(), bits.data(), cpu::Index(n));
  return bits;
}

std::vector<float> widened(const std::vector<uint16_t> &bits) {
  std::vector<float> values(bits.size());
  cpu::widenBFloat16(bits.data(), values.data(), cpu::Index(bits.size()));
  return values;
}

std::vector<uint16_t> rounded(const std::vector<float> &values) {
  std::vector<uint16_t> bits(values.size());
  cpu::roundToBFloat16(values.data(), bits.data(), cpu::Index(values.size()));
  return bits;
}

} // namespace

TEST(BFloat16, ElementwiseKernelsMatchTheWidenedOnes) {
  std::mt19937 rng(7);
  // Past kParallelThreshold, so that the team splits the loop too.
  for (size_t n : {size_t(37), size_t(40000)}) {
    auto x = randomBits(n, rng, 8.0f, true), g = randomBits(n, rng, 2.0f, true);
    std::vector<uint16_t> direct(n);

    std::vector<float> out(n);
    cpu::geluBFloat16(x.data(), direct.data(), cpu::Index(n));
    cpu::gelu(widened(x).data(), out.data(), cpu::Index(n));
    EXPECT_EQ(direct, rounded(out)) << "gelu, " << n;

    cpu::geluGradBFloat16(g.data(), x.data(), direct.data(), cpu::Index(n));
    cpu::geluGrad(widened(g).data(), widened(x).data(), out.data(),
                  cpu::Index(n));
    EXPECT_EQ(direct, rounded(out)) << "gelu_grad, " << n;

    cpu::addBFloat16(x.data(), g.data(), direct.data(), cpu::Index(n));
    cpu::add(widened(x).data(), widened(g).data(), out.data(), cpu::Index(n));
    EXPECT_EQ(direct, rounded(out)) << "add, " << n;
  }
}

TEST(BFloat16, LossKernelsMatchTheWidenedOnes) {
  std::mt19937 rng(8);
  for (auto [rows, vocab] : {std::pair<cpu::Index, cpu::Index>{3, 11},
                             {64, 5003}}) {
    auto logits = randomBits(size_t(rows * vocab), rng, 6.0f, false);
    std::vector<int32_t> targets(rows);
    for (cpu::Index r = 0; r < rows; ++r)
      targets[r] = int32_t((r * 7919) % vocab);
    float direct = 0, viaCopies = 0;
    cpu::softmaxCrossEntropyBFloat16(logits.data(), targets.data(), &direct,
                                     rows, vocab);
    cpu::softmaxCrossEntropy(widened(logits).data(), targets.data(),
                             &viaCopies, rows, vocab);
    EXPECT_EQ(std::memcmp(&direct, &viaCopies, sizeof(float)), 0)
        << direct << " against " << viaCopies;

    const float lossGrad = 0.75f;
    std::vector<uint16_t> grad(logits.size());
    std::vector<float> gradF(logits.size());
    cpu::softmaxCrossEntropyGradBFloat16(&lossGrad, logits.data(),
                                         targets.data(), grad.data(), rows,
                                         vocab);
    cpu::softmaxCrossEntropyGrad(&lossGrad, widened(logits).data(),
                                 targets.data(), gradF.data(), rows, vocab);
    EXPECT_EQ(grad, rounded(gradF)) << rows << " x " << vocab;
  }
}
