//===- LossTest.cpp - softmax cross-entropy and its gradient --------------===//

#include "runtime/backend/cpu/Kernels.h"
#include "unittests/runtime/cpu/KernelTestUtils.h"

#include <stdexcept>

using namespace partition::runtime::cpu;
using namespace partition::runtime::cpu::testing;

namespace {

/// -mean_r log softmax(logits[r])[targets[r]], max-subtracted, in double.
double lossRef(const DVec &logits, const std::vector<std::int32_t> &targets,
               Index rows, Index vocab) {
  double total = 0;
  for (Index r = 0; r < rows; ++r) {
    const double *x = &logits[r * vocab];
    double m = x[0];
    for (Index i = 1; i < vocab; ++i)
      m = std::max(m, x[i]);
    double s = 0;
    for (Index i = 0; i < vocab; ++i)
      s += std::exp(x[i] - m);
    total += std::log(s) + m - x[targets[r]];
  }
  return total / double(rows);
}

// Logits spread over [-8, 8] with one row shifted by +60 and one by -60
// (a naive exp would overflow / underflow there). Loss vs double
// reference: rtol 1e-6. Gradient (with loss_grad = 0.7, i.e. J = 0.7 loss)
// vs FD: rtol 2e-5, atol 2e-6 * max|grad|.
TEST(SoftmaxCrossEntropyTest, LossAndGradMatchReferenceAndFiniteDifferences) {
  std::mt19937 rng(40);
  const Index rows = 6, vocab = 11;
  FVec logitsF = randomFloats(rows * vocab, rng, -8.0f, 8.0f);
  for (Index i = 0; i < vocab; ++i) {
    logitsF[1 * vocab + i] += 60.0f;
    logitsF[4 * vocab + i] -= 60.0f;
  }
  auto targets = randomIds(rows, std::int32_t(vocab), rng);
  DVec logits = toDouble(logitsF);

  float loss = 0;
  softmaxCrossEntropy(logitsF.data(), targets.data(), &loss, rows, vocab);
  const double expected = lossRef(logits, targets, rows, vocab);
  EXPECT_NEAR(loss, expected, 1e-6 * std::abs(expected));

  const float lossGrad = 0.7f;
  DVec fd = finiteDifference(
      logits, [&] { return lossGrad * lossRef(logits, targets, rows, vocab); });
  FVec grad(rows * vocab);
  softmaxCrossEntropyGrad(&lossGrad, logitsF.data(), targets.data(),
                          grad.data(), rows, vocab);
  EXPECT_TRUE(allClose(grad, fd, 2e-5, 2e-6 * maxAbs(fd)));
}

// A GPT-2-like row length over the threading threshold; huge logits
// (1e4) must not overflow. Loss rtol 1e-6; gradient vs the closed form
// (softmax - onehot) loss_grad / rows in double: rtol 2e-5, atol 1e-7 / rows
// (the probabilities are ~1/V, the target entry ~1).
TEST(SoftmaxCrossEntropyTest, LongRowsAreStableAndMatchClosedForm) {
  std::mt19937 rng(41);
  const Index rows = 8, vocab = 5003;
  FVec logitsF = randomFloats(rows * vocab, rng, -4.0f, 4.0f);
  for (Index i = 0; i < vocab; ++i)
    logitsF[2 * vocab + i] += 1e4f;
  auto targets = randomIds(rows, std::int32_t(vocab), rng);
  DVec logits = toDouble(logitsF);
  float loss = 0;
  softmaxCrossEntropy(logitsF.data(), targets.data(), &loss, rows, vocab);
  const double expected = lossRef(logits, targets, rows, vocab);
  EXPECT_NEAR(loss, expected, 1e-6 * std::abs(expected));

  const float lossGrad = 1.0f;
  DVec gradRef(rows * vocab);
  for (Index r = 0; r < rows; ++r) {
    const double *x = &logits[r * vocab];
    double m = x[0], s = 0;
    for (Index i = 1; i < vocab; ++i)
      m = std::max(m, x[i]);
    for (Index i = 0; i < vocab; ++i)
      s += std::exp(x[i] - m);
    for (Index i = 0; i < vocab; ++i)
      gradRef[r * vocab + i] =
          (std::exp(x[i] - m) / s - (i == targets[r] ? 1.0 : 0.0)) / rows;
  }
  FVec grad(rows * vocab);
  softmaxCrossEntropyGrad(&lossGrad, logitsF.data(), targets.data(),
                          grad.data(), rows, vocab);
  EXPECT_TRUE(allClose(grad, gradRef, 2e-5, 1e-7 / rows));
}

TEST(SoftmaxCrossEntropyTest, RejectsOutOfRangeTargets) {
  FVec logits(2 * 3, 0.0f);
  const std::vector<std::int32_t> targets = {1, 3};
  float loss;
  EXPECT_THROW(
      softmaxCrossEntropy(logits.data(), targets.data(), &loss, 2, 3),
      std::invalid_argument);
}

} // namespace
