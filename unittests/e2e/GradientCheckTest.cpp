//===- GradientCheckTest.cpp - whole-model gradients vs finite differences ===//
//
// Compiles a model's training step with `optimizer=none` in-process (model
// builder -> train-step -> lower-to-rt -> memory plan -> .ptp bytes), loads
// it with runtime::Program::parse, runs it on the CPU backend, and checks the
// gradient of every parameter tensor against finite differences of the loss
// that the same program computes (fp32 throughout; the inner products and
// differences are accumulated in double):
//
//  - along a random direction d (entries RMS(p) N(0, 1)): catches an error
//    in any direction, in proportion to its size;
//  - along the gradient itself: the largest signal, so the tightest test of
//    its length (a gradient 1% too long fails);
//  - at the kTopEntries coordinates of largest |g|: localised errors (one
//    element, one row).
//
// The steps, the tolerances and why they are what they are: below. The
// point the gradient is checked at is moved off the initialisation (larger
// matrices, gains != 1, biases != 0) so that every path of every backward
// op carries signal. The gradient of GPT-2's attention key bias is zero in
// exact arithmetic (softmax ignores a shift of all logits of a row), so it
// is checked to be ~0 (< 1e-7 RMS; measured ~1e-12).
//
// GradientCheck.DetectsWrongGradients corrupts one gradient tensor in
// several ways and requires the check to flag each, so a check that has
// gone blind fails too.
//===----------------------------------------------------------------------===//

#include "model/ModelConfig.h"
#include "runtime/backend/Backend.h"
#include "runtime/train/Init.h"
#include "runtime/program/Program.h"
#include "runtime/train/Random.h"
#include "unittests/e2e/TestPrograms.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

using namespace partition;

using model::ModelConfig;

namespace {

//===----------------------------------------------------------------------===//
// Steps and tolerances.
//
// Every finite difference is the Richardson extrapolation of two central
// differences along a direction d, with steps h and 2h:
//
//   D = (8 [L(p + h d) - L(p - h d)] - [L(p + 2h d) - L(p - 2h d)]) / (12 h)
//
// which cancels the h^3 truncation term (what is left is O(h^4) relative)
// at no cost in noise: the loss is an fp32 scalar whose rounding noise is
// about one ulp (eps_L = ulp(L), 4.8e-7 for 4 <= L < 8), and D carries about
// 0.95 eps_L / h of it. Steps are relative to each tensor's RMS value, so
// that gains (~1), biases and matrices (~0.1) all move by the same fraction.
//
// A comparison passes when
//
//   |D - analytic| <= kRelTol * |analytic| + kNoiseUlps * ulp(L) / h
//
// Measured (PARTITION_GRADCHECK_VERBOSE=1 prints every comparison; each
// test prints its worst case): on all five configurations every error is
// below ~1 eps_L / h (the noise), the worst error / tolerance is 0.12, so the
// tolerance has a ~8x margin, and the relative errors of the comparisons
// whose signal is far above the noise are <= 5e-3 (noise-limited ones) and
// ~1e-5 (along the gradient, where the signal is largest). Larger steps
// fail on truncation: a random-direction step cap of 0.1 RMS errs by 1%
// on the Llama embedding, a coordinate cap of 1.0 RMS by 1.3%.
//
// Sensitivity: one tensor's gradient scaled by 1.01 fails (the comparison
// along the gradient: error 1e-2 x |analytic| against a tolerance of
// ~1.1e-3 x |analytic|), as DetectsWrongGradients checks; scaling one
// tensor by 1.02 in the harness made all five model tests fail.
//===----------------------------------------------------------------------===//

/// The step h of every finite difference makes the predicted first-order
/// loss change h |analytic| about kTargetChange: large against the noise
/// (eps_L / kTargetChange ~ 5e-5 relative), small enough to stay in the
/// smooth regime (the loss moves by 1% of a nat).
constexpr double kTargetChange = 1e-2;
/// ... but no entry moves by more than this many times the tensor's RMS
/// value (directions are scaled so that h = 1 would move entries by ~RMS):
/// then the check is as precise as the noise allows, kNoiseUlps below.
constexpr double kMaxStep = 0.02;
/// The cap for single coordinates (a direction of one entry, RMS long): one
/// entry alone can move further before the O(h^4) remainder shows (along a
/// random direction the first derivative partly cancels, the higher ones
/// do not).
constexpr double kMaxCoordinateStep = 0.1;
/// Relative tolerance.
constexpr double kRelTol = 1e-3;
/// Absolute tolerance in units of the loss's ulp divided by the step.
constexpr double kNoiseUlps = 8;
/// Coordinates checked per tensor (those of largest |g|).
constexpr int kTopEntries = 3;
/// The test point: matrices are initialised as in training (N(0, 0.02),
/// residual projections scaled down) and then multiplied by this, so that
/// the attention logits are O(1) rather than ~0 and softmax, RoPE and
/// every gradient path are exercised away from their linear regime.
constexpr double kMatrixScale = 5;
/// Norm gains 1 + N(0, kGainNoise), biases N(0, kBiasNoise): a backward
/// that forgets gamma or beta cannot hide behind gamma = 1, beta = 0.
constexpr double kGainNoise = 0.2;
constexpr double kBiasNoise = 0.1;

/// Reproducible directions on every platform.
using Rng = partition::runtime::SplitMix64;

/// The .ptp bytes of `config`'s training step without an optimizer.
std::string compileGradientProgram(const ModelConfig &config,
                                   int64_t microbatches) {
  return e2e::compileProgram(config, microbatches, "none");
}

/// One parameter tensor: its buffers and host copies.
struct Tensor {
  const runtime::BufferInfo *param = nullptr;
  const runtime::BufferInfo *grad = nullptr;
  std::vector<float> value;    // the point the gradient is checked at
  std::vector<float> gradient; // the program's gradient there
};

/// A loaded gradient program and the point it is checked at.
class GradientProgram {
public:
  explicit GradientProgram(const std::string &bytes)
      : program(runtime::Program::parse(
            reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(),
            "<gradient program>")),
        backend(runtime::createCpuBackend(program)),
        tokens(program.single(runtime::Role::Tokens)),
        targets(program.single(runtime::Role::Targets)),
        loss(program.single(runtime::Role::Loss)) {
    for (size_t i = 0; i < program.functions.size(); ++i)
      if (program.functions[i].name == "train_step")
        trainStep = i;
    for (size_t index : program.withRole(runtime::Role::Param)) {
      Tensor tensor;
      tensor.param = &program.buffers[index];
      for (size_t g : program.withRole(runtime::Role::Gradient))
        if (program.buffers[g].name == tensor.param->name)
          tensor.grad = &program.buffers[g];
      tensors.push_back(std::move(tensor));
    }
  }

  /// Initial parameters moved off their special values, random tokens and
  /// targets, then the loss and every gradient there.
  void setUp(uint64_t seed) {
    int64_t layers = program.modelInt("layers");
    int64_t vocab = program.modelInt("vocab");
    Rng rng{seed};
    for (Tensor &tensor : tensors) {
      const std::string &name = tensor.param->name;
      tensor.value =
          runtime::initialParameter(name, tensor.param->shape, layers, seed);
      bool bias = name.size() >= 5 &&
                  name.compare(name.size() - 5, 5, ".bias") == 0;
      for (float &v : tensor.value) {
        if (tensor.param->shape.size() >= 2)
          v = float(kMatrixScale * v);
        else
          v += float((bias ? kBiasNoise : kGainNoise) * rng.normal());
      }
      backend->write(*tensor.param, tensor.value.data());
    }
    std::vector<int32_t> ids(tokens.elements), next(targets.elements);
    for (int32_t &id : ids)
      id = int32_t(rng.next() % uint64_t(vocab));
    for (int32_t &id : next)
      id = int32_t(rng.next() % uint64_t(vocab));
    backend->write(tokens, ids.data());
    backend->write(targets, next.data());

    baseLoss = run();
    for (Tensor &tensor : tensors) {
      tensor.gradient.resize(tensor.grad->elements);
      backend->read(*tensor.grad, tensor.gradient.data());
    }
  }

  /// Runs the step and returns the loss.
  double run() {
    backend->run(trainStep);
    float value;
    backend->read(loss, &value);
    return value;
  }

  /// The loss with `tensor` set to `values` (restored afterwards).
  double lossWith(const Tensor &tensor, const std::vector<float> &values) {
    backend->write(*tensor.param, values.data());
    double result = run();
    backend->write(*tensor.param, tensor.value.data());
    return result;
  }

  runtime::Program program;
  std::unique_ptr<runtime::Backend> backend;
  const runtime::BufferInfo &tokens, &targets, &loss;
  size_t trainStep = ~size_t(0);
  std::vector<Tensor> tensors;
  double baseLoss = 0;
};

/// One comparison of a finite difference with the analytic value.
struct Comparison {
  std::string what;
  double fd = 0, analytic = 0, tolerance = 0, noise = 0;
  bool passed() const { return std::abs(fd - analytic) <= tolerance; }
  double error() const { return std::abs(fd - analytic); }
};

/// The spacing of fp32 numbers around `value`.
double ulp(double value) {
  float f = float(std::abs(value));
  return double(std::nextafter(f, INFINITY)) - double(f);
}

double rms(const std::vector<float> &values) {
  double sum = 0;
  for (float v : values)
    sum += double(v) * v;
  return std::sqrt(sum / double(std::max<size_t>(values.size(), 1)));
}

/// The Richardson-extrapolated central difference of the loss along
/// `direction` (see the comment on the steps above).
double derivative(GradientProgram &step, const Tensor &tensor,
                  const std::vector<double> &direction, double h) {
  auto difference = [&](double scale) {
    std::vector<float> plus(tensor.value.size()), minus(tensor.value.size());
    for (size_t i = 0; i < plus.size(); ++i) {
      plus[i] = float(double(tensor.value[i]) + scale * direction[i]);
      minus[i] = float(double(tensor.value[i]) - scale * direction[i]);
    }
    return step.lossWith(tensor, plus) - step.lossWith(tensor, minus);
  };
  return (8 * difference(h) - difference(2 * h)) / (12 * h);
}

double dot(const std::vector<float> &gradient,
           const std::vector<double> &direction) {
  double sum = 0;
  for (size_t i = 0; i < gradient.size(); ++i)
    sum += double(gradient[i]) * direction[i];
  return sum;
}

/// The step for a derivative expected to be `analytic` (see kTargetChange).
double stepFor(double analytic, double maxStep = kMaxStep) {
  return std::min(maxStep,
                  kTargetChange / std::max(std::abs(analytic), 1e-30));
}

Comparison compare(std::string what, double fd, double analytic, double h,
                   double loss) {
  double noise = ulp(loss) / h;
  return {std::move(what), fd, analytic,
          kRelTol * std::abs(analytic) + kNoiseUlps * noise, noise};
}

/// Checks `gradient` (the program's, or a corrupted copy) of `tensor`:
/// along a random direction, along the gradient itself, and at the
/// kTopEntries coordinates of largest |gradient|.
std::vector<Comparison> checkTensor(GradientProgram &step,
                                    const Tensor &tensor,
                                    const std::vector<float> &gradient,
                                    uint64_t seed,
                                    int topEntries = kTopEntries) {
  std::vector<Comparison> result;
  const std::string &name = tensor.param->name;
  size_t n = tensor.value.size();
  double scale = rms(tensor.value);
  double loss = step.baseLoss;

  // A random direction: catches errors in any direction, in proportion to
  // their size.
  Rng rng{seed};
  std::vector<double> direction(n);
  for (double &d : direction)
    d = scale * rng.normal();
  double analytic = dot(gradient, direction);
  double h = stepFor(analytic);
  result.push_back(compare(name + " along d",
                           derivative(step, tensor, direction, h), analytic,
                           h, loss));

  // Along the gradient: the direction of steepest change, so the most
  // precise test of the gradient's length (a wrong scale fails here).
  double gradientRms = rms(gradient);
  if (gradientRms > 0) {
    for (size_t i = 0; i < n; ++i)
      direction[i] = scale * gradient[i] / gradientRms;
    analytic = dot(gradient, direction);
    h = stepFor(analytic);
    result.push_back(compare(name + " along g",
                             derivative(step, tensor, direction, h), analytic,
                             h, loss));
  }

  // The entries of largest |g|: a localised error (one row, one element).
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  size_t top = std::min<size_t>(size_t(topEntries), n);
  std::partial_sort(order.begin(), order.begin() + top, order.end(),
                    [&](size_t a, size_t b) {
                      return std::abs(gradient[a]) > std::abs(gradient[b]);
                    });
  std::fill(direction.begin(), direction.end(), 0.0);
  for (size_t k = 0; k < top; ++k) {
    size_t i = order[k];
    direction[i] = scale;
    h = stepFor(scale * gradient[i], kMaxCoordinateStep);
    result.push_back(compare(name + "[" + std::to_string(i) + "]",
                             derivative(step, tensor, direction, h),
                             scale * gradient[i], h, loss));
    direction[i] = 0;
  }
  return result;
}

bool verbose() {
  const char *flag = std::getenv("PARTITION_GRADCHECK_VERBOSE");
  return flag && *flag && std::string(flag) != "0";
}

using e2e::smallGpt2;
using e2e::smallLlama;

/// Parameters whose exact gradient is zero: a key bias adds the same
/// q . b_k to every logit of a query row, which softmax ignores.
bool zeroByConstruction(const std::string &name) {
  return name.size() >= 11 &&
         name.compare(name.size() - 11, 11, "attn.k.bias") == 0;
}

void gradientCheck(const ModelConfig &config, int64_t microbatches,
                   uint64_t seed, int topEntries = kTopEntries) {
  ASSERT_EQ(model::validate(config), "");
  auto start = std::chrono::steady_clock::now();
  std::string bytes = compileGradientProgram(config, microbatches);
  ASSERT_FALSE(bytes.empty()) << "the gradient program did not compile";
  GradientProgram step(bytes);
  ASSERT_NE(step.trainStep, ~size_t(0));
  ASSERT_FALSE(step.tensors.empty());
  for (const Tensor &tensor : step.tensors) {
    ASSERT_NE(tensor.grad, nullptr)
        << "no gradient buffer for parameter " << tensor.param->name;
    ASSERT_EQ(tensor.grad->shape, tensor.param->shape) << tensor.param->name;
  }
  ASSERT_EQ(step.tokens.shape[0], config.batch * microbatches);
  step.setUp(seed);
  ASSERT_TRUE(std::isfinite(step.baseLoss));

  // Worst error / tolerance over all comparisons, and worst relative error
  // over those whose signal is far above the noise (|analytic| > 100 x the
  // noise term), by kind of comparison.
  double worstRatio = 0;
  std::map<std::string, double> worstRelative;
  size_t checks = 0;
  for (size_t t = 0; t < step.tensors.size(); ++t) {
    const Tensor &tensor = step.tensors[t];
    const std::string &name = tensor.param->name;
    double gradientRms = rms(tensor.gradient);
    if (zeroByConstruction(name)) {
      // Rounding leaves ~1e-12; a real dependence would be >= 1e-4.
      EXPECT_LT(gradientRms, 1e-7) << name << " should have a zero gradient";
      continue;
    }
    EXPECT_GT(gradientRms, 0.0) << name << " has a zero gradient";
    for (const Comparison &c :
         checkTensor(step, tensor, tensor.gradient, seed * 1000 + t,
                     topEntries)) {
      ++checks;
      EXPECT_TRUE(c.passed())
          << c.what << ": finite difference " << c.fd << ", gradient "
          << c.analytic << ", error " << c.error() << " > tolerance "
          << c.tolerance;
      worstRatio = std::max(worstRatio, c.error() / c.tolerance);
      double relative = c.error() / std::max(std::abs(c.analytic), 1e-30);
      std::string kind = c.what.find(" along d") != std::string::npos
                             ? "random direction"
                         : c.what.find(" along g") != std::string::npos
                             ? "gradient direction"
                             : "coordinates";
      if (std::abs(c.analytic) > 100 * c.noise)
        worstRelative[kind] = std::max(worstRelative[kind], relative);
      if (verbose())
        std::printf("  %-40s rms(g) %8.2e  fd %13.6e  an %13.6e  rel %8.1e  "
                    "err/noise %6.2f  err/tol %5.2f\n",
                    c.what.c_str(), gradientRms, c.fd, c.analytic, relative,
                    c.error() / c.noise, c.error() / c.tolerance);
    }
  }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  std::printf("gradient check: %zu tensors, %zu comparisons, loss %.6f, "
              "worst error/tolerance %.3f, worst relative error",
              step.tensors.size(), checks, step.baseLoss, worstRatio);
  for (auto &[kind, value] : worstRelative)
    std::printf(" %.1e (%s)", value, kind.c_str());
  std::printf(", %.2f s\n", seconds);
}

TEST(GradientCheck, Gpt2) { gradientCheck(smallGpt2(), 1, 1); }

TEST(GradientCheck, Gpt2Microbatches) { gradientCheck(smallGpt2(), 2, 2); }

/// The preset itself (B 4, T 64, C 64, V 256): 10x the work per step, so
/// one coordinate per tensor.
TEST(GradientCheck, Gpt2TinyPreset) {
  gradientCheck(*model::getPreset("gpt2-tiny"), 1, 3, /*topEntries=*/1);
}

TEST(GradientCheck, LlamaGqaRope) { gradientCheck(smallLlama(), 1, 4); }

TEST(GradientCheck, LlamaGqaRopeMicrobatches) {
  gradientCheck(smallLlama(), 2, 5);
}

/// Mixture of experts: the small Llama with 4 experts of 24, its router,
/// grouped expert GEMMs, combine and load-balancing loss (with a z-loss;
/// coefficients large enough to matter). The routing is piecewise constant
/// in the parameters, and the steps here (up to 2% of every entry) would
/// flip near-tied choices of some of the 64 tokens, so every token takes
/// all 4 experts (top-k = E, dropless): the choices then never change, and
/// every gradient path of the layer (gates, aux loss, expert weights) is
/// checked. The kernels' tests (MoeTest.cpp) check top-k < E and dropped
/// tokens with the routing held fixed.
model::ModelConfig smallMixtral() {
  model::ModelConfig config = smallLlama();
  config.family = "mixtral";
  config.experts = 4;
  config.topK = 4;
  config.expertFfn = 24;
  config.auxLossCoef = 0.1;
  config.zLossCoef = 0.01;
  return config;
}

TEST(GradientCheck, MixtralAllExperts) { gradientCheck(smallMixtral(), 1, 7); }

/// Sigmoid routing, a shared expert, MoE on every second layer, on a GPT-2
/// base.
TEST(GradientCheck, Gpt2MoeSigmoidShared) {
  model::ModelConfig config = smallGpt2();
  config.experts = 3;
  config.topK = 3;
  config.expertFfn = 24;
  config.router = "sigmoid";
  config.sharedExperts = 1;
  config.moeEvery = 2;
  config.auxLossCoef = 0.1;
  gradientCheck(config, 1, 8);
}

/// The check must flag a wrong gradient: each corruption of one tensor's
/// gradient (scaled by 1.01, negated, one row zeroed, the largest entry
/// negated, entries permuted) has to fail at least one comparison, while
/// the true gradient of the same tensor passes all of them.
TEST(GradientCheck, DetectsWrongGradients) {
  std::string bytes = compileGradientProgram(smallLlama(), 1);
  ASSERT_FALSE(bytes.empty());
  GradientProgram step(bytes);
  step.setUp(6);
  auto failures = [&](const Tensor &tensor,
                      const std::vector<float> &gradient) {
    int failed = 0;
    for (const Comparison &c : checkTensor(step, tensor, gradient, 77))
      failed += !c.passed();
    return failed;
  };
  using Corruption = std::function<void(std::vector<float> &,
                                        const std::vector<int64_t> &)>;
  std::vector<std::pair<const char *, Corruption>> corruptions = {
      {"scaled by 1.01",
       [](std::vector<float> &g, const std::vector<int64_t> &) {
         for (float &v : g)
           v *= 1.01f;
       }},
      {"negated",
       [](std::vector<float> &g, const std::vector<int64_t> &) {
         for (float &v : g)
           v = -v;
       }},
      {"largest entry negated",
       [](std::vector<float> &g, const std::vector<int64_t> &) {
         auto largest = std::max_element(g.begin(), g.end(),
                                         [](float a, float b) {
                                           return std::abs(a) < std::abs(b);
                                         });
         *largest = -*largest;
       }},
      {"row of the largest entry zeroed",
       [](std::vector<float> &g, const std::vector<int64_t> &shape) {
         size_t width = shape.size() == 2 ? size_t(shape[1]) : g.size();
         size_t largest = std::max_element(g.begin(), g.end(),
                                           [](float a, float b) {
                                             return std::abs(a) < std::abs(b);
                                           }) -
                          g.begin();
         size_t row = largest / width;
         std::fill(g.begin() + row * width, g.begin() + (row + 1) * width,
                   0.0f);
       }},
      {"reversed",
       [](std::vector<float> &g, const std::vector<int64_t> &) {
         std::reverse(g.begin(), g.end());
       }},
  };
  // A matrix (attention query weight, goes through RoPE) and a vector (a
  // norm gain) of the first layer.
  int checked = 0;
  for (const Tensor &tensor : step.tensors) {
    const std::string &name = tensor.param->name;
    if (name != "layers.0.attention.wq.weight" &&
        name != "layers.0.ffn_norm.weight")
      continue;
    ++checked;
    EXPECT_EQ(failures(tensor, tensor.gradient), 0) << name;
    for (auto &[what, corrupt] : corruptions) {
      std::vector<float> wrong = tensor.gradient;
      corrupt(wrong, tensor.param->shape);
      EXPECT_GT(failures(tensor, wrong), 0)
          << name << " with its gradient " << what << " passes the check";
    }
  }
  EXPECT_EQ(checked, 2) << "the parameter names of the Llama model changed";
}

} // namespace
