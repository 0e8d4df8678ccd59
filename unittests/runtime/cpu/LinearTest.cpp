//===- LinearTest.cpp - linear and its input/weight gradients -------------===//

#include "runtime/backend/cpu/Kernels.h"
#include "unittests/runtime/cpu/KernelTestUtils.h"

using namespace partition::runtime::cpu;
using namespace partition::runtime::cpu::testing;

namespace {

/// y[m, n] = sum_k x[m, k] w[n, k] + b[n] (b may be empty).
DVec linearRef(const DVec &x, const DVec &w, const DVec &b, Index rows,
               Index in, Index out) {
  DVec y(rows * out);
  for (Index m = 0; m < rows; ++m)
    for (Index n = 0; n < out; ++n) {
      double s = b.empty() ? 0.0 : b[n];
      for (Index k = 0; k < in; ++k)
        s += x[m * in + k] * w[n * in + k];
      y[m * out + n] = s;
    }
  return y;
}

// Forward vs double reference: rtol 1e-5, atol 1e-5 * sqrt(K) (fp32 dot
// products of K terms of size ~1). Gradients vs FD: rtol 2e-5, atol
// 1e-5 * max|grad|.
TEST(LinearTest, ForwardAndGradsMatchFiniteDifferences) {
  std::mt19937 rng(20);
  for (bool withBias : {true, false}) {
    SCOPED_TRACE(withBias ? "bias" : "no bias");
    const Index rows = 7, in = 5, out = 6;
    FVec xF = randomFloats(rows * in, rng), wF = randomFloats(out * in, rng);
    FVec bF = withBias ? randomFloats(out, rng) : FVec();
    FVec r = randomFloats(rows * out, rng);
    DVec x = toDouble(xF), w = toDouble(wF), b = toDouble(bF),
         rd = toDouble(r);

    FVec y(rows * out, 5.0f);
    linear(xF.data(), wF.data(), withBias ? bF.data() : nullptr, y.data(),
           rows, in, out);
    EXPECT_TRUE(allClose(y, linearRef(x, w, b, rows, in, out), 1e-5, 3e-5));

    auto objective = [&] { return dot(linearRef(x, w, b, rows, in, out), rd); };
    DVec fdx = finiteDifference(x, objective);
    DVec fdw = finiteDifference(w, objective);
    FVec dx(rows * in), dw(out * in), db(out, 3.0f);
    linearGradInput(r.data(), wF.data(), dx.data(), rows, in, out);
    linearGradWeight(r.data(), xF.data(), dw.data(),
                     withBias ? db.data() : nullptr, rows, in, out);
    EXPECT_TRUE(allClose(dx, fdx, 2e-5, 1e-5 * maxAbs(fdx)));
    EXPECT_TRUE(allClose(dw, fdw, 2e-5, 1e-5 * maxAbs(fdw)));
    if (withBias) {
      DVec fdb = finiteDifference(b, objective);
      EXPECT_TRUE(allClose(db, fdb, 2e-5, 1e-5 * maxAbs(fdb)));
    } else {
      EXPECT_EQ(db, FVec(out, 3.0f)); // untouched without a bias
    }
  }
}

// Shapes over the threading thresholds, with a column count that does not
// split evenly into the bias-gradient bands; against double products
// (dx = dy W, dW = dy^T x, db = column sums): atol 1e-5 * sqrt(terms).
TEST(LinearTest, LargeShapesMatchDoubleReference) {
  std::mt19937 rng(21);
  const Index rows = 300, in = 70, out = 531;
  FVec x = randomFloats(rows * in, rng), w = randomFloats(out * in, rng),
       b = randomFloats(out, rng), dy = randomFloats(rows * out, rng);
  DVec xd = toDouble(x), wd = toDouble(w), bd = toDouble(b),
       dyd = toDouble(dy);
  FVec y(rows * out);
  linear(x.data(), w.data(), b.data(), y.data(), rows, in, out);
  EXPECT_TRUE(allClose(y, linearRef(xd, wd, bd, rows, in, out), 1e-5, 1e-4));

  DVec dxRef(rows * in, 0.0), dwRef(out * in, 0.0), dbRef(out, 0.0);
  for (Index m = 0; m < rows; ++m)
    for (Index n = 0; n < out; ++n) {
      const double g = dyd[m * out + n];
      dbRef[n] += g;
      for (Index k = 0; k < in; ++k) {
        dxRef[m * in + k] += g * wd[n * in + k];
        dwRef[n * in + k] += g * xd[m * in + k];
      }
    }
  FVec dx(rows * in), dw(out * in), db(out);
  linearGradInput(dy.data(), w.data(), dx.data(), rows, in, out);
  linearGradWeight(dy.data(), x.data(), dw.data(), db.data(), rows, in, out);
  EXPECT_TRUE(allClose(dx, dxRef, 1e-5, 3e-4));
  EXPECT_TRUE(allClose(dw, dwRef, 1e-5, 3e-4));
  EXPECT_TRUE(allClose(db, dbRef, 1e-5, 3e-4));
}

} // namespace
