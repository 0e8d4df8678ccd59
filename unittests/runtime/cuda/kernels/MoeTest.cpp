//===- MoeTest.cpp - CUDA mixture-of-experts kernels against the CPU ------===//
//
// Every kernel of runtime/backend/cuda/kernels/Moe.h on the same random
// inputs (fixed seeds) as its CPU counterpart (runtime/backend/cpu/Moe.cpp),
// in fp32 and bf16 storage (bf16: inputs rounded first, the CPU runs on the
// rounded values in fp32, the CUDA result may differ by one bf16 rounding).
// The routing cases cover top-1 and top-2, the three scorings, a bias, a
// capacity that drops choices and experts left empty (the tests assert that
// they did); the expert GEMMs run with counts below the capacity (and 0).
// Ids and slots must match exactly, data movement is exact, the rest is
// compared to 1e-5 (fp32) relative, with KernelsTest.cpp's floors.
// Runs on a GPU and in the emulator (unittests/runtime/cuda/emulator, where
// cuBLAS is fake_cublas.cpp).
//
//===----------------------------------------------------------------------===//

#include "unittests/runtime/cuda/kernels/MoeTestSupport.h"

#include "runtime/backend/cpu/Kernels.h"
#include "runtime/backend/CountedExchange.h"
#include "runtime/backend/cuda/kernels/Moe.h"

#include <memory>
#include <random>

namespace {

using namespace partition::moetest;
namespace cpu = partition::runtime::cpu;
namespace cuda = partition::runtime::cuda;
using partition::runtime::MoeScoring;
using Index = std::int64_t;

constexpr double kCancelFloor = 0.1;

FVec randomFloats(std::size_t n, std::mt19937 &rng, float lo = -2.0f,
                  float hi = 2.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  FVec v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

struct RouteCase {
  Index batch, seq, experts, topK, capacity;
  MoeScoring scoring;
  bool bias;
};

std::vector<RouteCase> routeCases() {
  std::vector<RouteCase> cases;
  for (MoeScoring scoring :
       {MoeScoring::Softmax, MoeScoring::SoftmaxTopK, MoeScoring::Sigmoid})
    for (bool bias : {false, true}) {
      cases.push_back({2, 12, 4, 1, 12, scoring, bias}); // dropless top-1
      cases.push_back({2, 12, 4, 2, 3, scoring, bias});  // top-2, drops
      cases.push_back({1, 6, 8, 1, 6, scoring, bias});   // empty experts
      cases.push_back({3, 9, 6, 2, 4, scoring, bias});
    }
  return cases;
}

cpu::MoeShape cpuShape(const RouteCase &c, Index channels = 0) {
  cpu::MoeShape s;
  s.batch = c.batch, s.seq = c.seq, s.channels = channels;
  s.experts = c.experts, s.topK = c.topK, s.capacity = c.capacity;
  return s;
}
cuda::MoeShape cudaShape(const RouteCase &c, Index channels = 0) {
  cuda::MoeShape s;
  s.batch = c.batch, s.seq = c.seq, s.channels = channels;
  s.experts = c.experts, s.topK = c.topK, s.capacity = c.capacity;
  return s;
}

/// The CPU routing of `logits` (already rounded to the storage type).
struct Routing {
  FVec gates;
  IVec experts, slots, counts;
};
Routing cpuRoute(const FVec &logits, const FVec *bias, const RouteCase &c) {
  const std::size_t choices = std::size_t(c.batch * c.seq * c.topK);
  Routing r{FVec(choices), IVec(choices), IVec(choices),
            IVec(std::size_t(c.batch * c.experts))};
  cpu::moeRoute(logits.data(), bias ? bias->data() : nullptr, r.gates.data(),
                r.experts.data(), r.slots.data(), r.counts.data(), cpuShape(c),
                c.scoring);
  return r;
}

template <typename T> class Moe : public ::testing::Test {
protected:
  void SetUp() override {
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    bad = std::make_unique<Device<int>>(1);
    clearBad();
    ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    cublasDestroy(handle);
    bad.reset();
    cudaStreamDestroy(stream);
  }
  void clearBad() { bad->upload(IVec{0}); }
  int badFlag() { return bad->values()[0]; }

  cudaStream_t stream = nullptr;
  cublasHandle_t handle = nullptr;
  std::unique_ptr<Device<int>> bad;
  std::mt19937 rng{20261204};
};

using Storages = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(Moe, Storages);

TYPED_TEST(Moe, RouteMatchesCpu) {
  using T = TypeParam;
  bool dropped = false, empty = false;
  for (const RouteCase &c : routeCases()) {
    SCOPED_TRACE(testing::Message()
                 << "scoring " << int(c.scoring) << " k " << c.topK
                 << " capacity " << c.capacity << " bias " << c.bias);
    const FVec logits =
        rounded<T>(randomFloats(c.batch * c.seq * c.experts, this->rng));
    const FVec bias = randomFloats(c.experts, this->rng, -0.3f, 0.3f);
    const Routing want = cpuRoute(logits, c.bias ? &bias : nullptr, c);
    const std::size_t choices = want.experts.size();
    Device<T> dLogits(logits.size()), dGates(choices);
    Device<float> dBias(bias.size());
    Device<std::int32_t> dExperts(choices), dSlots(choices),
        dCounts(want.counts.size());
    dLogits.upload(logits);
    dBias.upload(bias);
    cuda::moeRoute<T>(dLogits.get(), c.bias ? dBias.get() : nullptr,
                      dGates.get(), dExperts.get(), dSlots.get(), dCounts.get(),
                      cudaShape(c), c.scoring, this->stream);
    EXPECT_EQ(dExperts.values(), want.experts);
    EXPECT_EQ(dSlots.values(), want.slots);
    EXPECT_EQ(dCounts.values(), want.counts);
    EXPECT_TRUE(close(dGates.floats(), want.gates, rtolOf<T>()));
    for (std::int32_t slot : want.slots)
      dropped |= slot < 0;
    for (std::int32_t count : want.counts)
      empty |= count == 0;
  }
  EXPECT_TRUE(dropped) << "no case dropped a choice past the capacity";
  EXPECT_TRUE(empty) << "no case left an expert empty";
}

// The metrics' expert load: the tally adds each route's counts per expert
// over its groups, and keeps adding until the backend resets it.
TYPED_TEST(Moe, RoutingTallyAddsCountsOverGroups) {
  const RouteCase c{3, 9, 6, 2, 4, MoeScoring::Softmax, false};
  const FVec logits =
      rounded<TypeParam>(randomFloats(c.batch * c.seq * c.experts, this->rng));
  const Routing routed = cpuRoute(logits, nullptr, c);
  Device<std::int32_t> dCounts(routed.counts.size());
  dCounts.upload(routed.counts);
  Device<unsigned long long> kept(std::size_t(c.experts));
  kept.upload(std::vector<unsigned long long>(std::size_t(c.experts), 0));
  for (int route = 0; route < 2; ++route)
    cuda::moeRoutingTally(dCounts.get(), kept.get(), cudaShape(c),
                          this->stream);
  std::vector<unsigned long long> want(std::size_t(c.experts), 0);
  unsigned long long total = 0;
  for (Index b = 0; b < c.batch; ++b)
    for (Index e = 0; e < c.experts; ++e) {
      want[std::size_t(e)] += 2 * routed.counts[std::size_t(b * c.experts + e)];
      total += 2 * routed.counts[std::size_t(b * c.experts + e)];
    }
  EXPECT_EQ(kept.values(), want);
  // Capacity 4 of 9 tokens' top-2: some choices were dropped, so the kept
  // rows are fewer than the choices and the backend's dropped count is
  // not trivially zero.
  EXPECT_LT(total, 2u * unsigned(c.batch * c.seq * c.topK));
}

TYPED_TEST(Moe, RouteGradMatchesCpu) {
  using T = TypeParam;
  for (const RouteCase &c : routeCases()) {
    if (c.bias)
      continue;
    SCOPED_TRACE(testing::Message()
                 << "scoring " << int(c.scoring) << " k " << c.topK);
    const FVec logits =
        rounded<T>(randomFloats(c.batch * c.seq * c.experts, this->rng));
    const Routing r = cpuRoute(logits, nullptr, c);
    const FVec gatesGrad =
        rounded<T>(randomFloats(r.experts.size(), this->rng));
    FVec want(logits.size());
    cpu::moeRouteGrad(gatesGrad.data(), logits.data(), r.experts.data(),
                      want.data(), cpuShape(c), c.scoring);
    Device<T> dGatesGrad(gatesGrad.size()), dLogits(logits.size()),
        dResult(logits.size());
    Device<std::int32_t> dExperts(r.experts.size());
    dGatesGrad.upload(gatesGrad);
    dLogits.upload(logits);
    dExperts.upload(r.experts);
    dResult.upload(FVec(logits.size(), 7.0f)); // must be overwritten
    cuda::moeRouteGrad<T>(dGatesGrad.get(), dLogits.get(), dExperts.get(),
                          dResult.get(), cudaShape(c), c.scoring,
                          this->bad->get(), this->stream);
    EXPECT_TRUE(close(dResult.floats(), want, rtolOf<T>(), kCancelFloor));
    EXPECT_EQ(this->badFlag(), 0);
  }
}

TYPED_TEST(Moe, DispatchAndCombineMatchCpu) {
  using T = TypeParam;
  const Index H = 11; // odd: no vector path assumed
  for (const RouteCase &c : routeCases()) {
    if (c.bias || c.scoring == MoeScoring::SoftmaxTopK)
      continue;
    SCOPED_TRACE(testing::Message()
                 << "k " << c.topK << " capacity " << c.capacity);
    const Routing r = cpuRoute(
        randomFloats(c.batch * c.seq * c.experts, this->rng), nullptr, c);
    const FVec gates = rounded<T>(r.gates);
    const std::size_t tokens = c.batch * c.seq * H,
                      rows = c.batch * c.experts * c.capacity * H;
    const FVec x = rounded<T>(randomFloats(tokens, this->rng));
    const FVec buffer = rounded<T>(randomFloats(rows, this->rng));
    const FVec dy = rounded<T>(randomFloats(tokens, this->rng));
    const cpu::MoeShape cs = cpuShape(c, H);
    FVec wantBuffer(rows), wantDx(tokens), wantY(tokens), wantDb(rows),
        wantDg(gates.size());
    cpu::moeDispatch(x.data(), r.experts.data(), r.slots.data(),
                     wantBuffer.data(), cs);
    cpu::moeDispatchGrad(buffer.data(), r.experts.data(), r.slots.data(),
                         wantDx.data(), cs);
    cpu::moeCombine(buffer.data(), gates.data(), r.experts.data(),
                    r.slots.data(), wantY.data(), cs);
    cpu::moeCombineGrad(dy.data(), buffer.data(), gates.data(),
                        r.experts.data(), r.slots.data(), wantDb.data(),
                        wantDg.data(), cs);

    Device<T> dX(tokens), dBuffer(rows), dDy(tokens), dGates(gates.size());
    Device<T> outBuffer(rows), outDx(tokens), outY(tokens), outDb(rows),
        outDg(gates.size());
    Device<std::int32_t> dExperts(r.experts.size()), dSlots(r.slots.size());
    dX.upload(x), dBuffer.upload(buffer), dDy.upload(dy);
    dGates.upload(gates), dExperts.upload(r.experts);
    dSlots.upload(r.slots);
    // Garbage first: rows no choice fills must come back zero.
    outBuffer.upload(FVec(rows, 7.0f));
    outDb.upload(FVec(rows, 7.0f));
    const cuda::MoeShape s = cudaShape(c, H);
    int *bad = this->bad->get();
    cuda::moeDispatch<T>(dX.get(), dExperts.get(), dSlots.get(),
                         outBuffer.get(), s, bad, this->stream);
    cuda::moeCombine<T>(dBuffer.get(), nullptr, dExperts.get(), dSlots.get(),
                        outDx.get(), s, bad, this->stream);
    cuda::moeCombine<T>(dBuffer.get(), dGates.get(), dExperts.get(),
                        dSlots.get(), outY.get(), s, bad, this->stream);
    cuda::moeCombineGrad<T>(dDy.get(), dBuffer.get(), dGates.get(),
                            dExperts.get(), dSlots.get(), outDb.get(),
                            outDg.get(), s, bad, this->stream);
    EXPECT_TRUE(close(outBuffer.floats(), wantBuffer, 0.0));
    EXPECT_TRUE(close(outDx.floats(), wantDx, rtolOf<T>(), kCancelFloor));
    EXPECT_TRUE(close(outY.floats(), wantY, rtolOf<T>(), kCancelFloor));
    EXPECT_TRUE(close(outDb.floats(), wantDb, rtolOf<T>()));
    EXPECT_TRUE(close(outDg.floats(), wantDg, rtolOf<T>(), kCancelFloor));
    EXPECT_EQ(this->badFlag(), 0);
  }
}

/// B = 2 groups of E = 3 experts at capacity 5, counts below it (and 0).
struct GemmCase {
  cuda::ExpertGemmShape g{2, 3, 5, 7, 6};
  IVec counts{5, 0, 2, 3, 1, 0};
  cpu::ExpertGemmShape cpuShape() const {
    return {g.batch, g.experts, g.capacity, g.inFeatures, g.outFeatures};
  }
  /// Random rows of `features`, zero past the counts unless `garbage`.
  FVec rows(Index features, bool garbage, std::mt19937 &rng) const {
    FVec v = randomFloats(g.batch * g.experts * g.capacity * features, rng);
    for (Index group = 0; group < g.batch * g.experts; ++group)
      for (Index c = counts[group]; c < g.capacity; ++c)
        for (Index f = 0; f < features; ++f)
          v[(group * g.capacity + c) * features + f] = garbage ? 5.0f : 0.0f;
    return v;
  }
  /// Whether every row past the counts is exactly zero.
  bool zeroTail(const FVec &v, Index features) const {
    for (Index group = 0; group < g.batch * g.experts; ++group)
      for (Index c = counts[group]; c < g.capacity; ++c)
        for (Index f = 0; f < features; ++f)
          if (v[(group * g.capacity + c) * features + f] != 0.0f)
            return false;
    return true;
  }
};

TYPED_TEST(Moe, ExpertGemmsMatchCpu) {
  using T = TypeParam;
  const GemmCase gc;
  const auto &g = gc.g;
  const Index K = g.inFeatures, N = g.outFeatures;
  // Forward and input gradient read only the counted rows on the CPU:
  // garbage past them must not leak into the CUDA result.
  const FVec x = rounded<T>(gc.rows(K, true, this->rng));
  const FVec dy = rounded<T>(gc.rows(N, true, this->rng));
  const FVec w = rounded<T>(randomFloats(g.experts * N * K, this->rng));
  // The weight gradient's operands keep the invariant (zero past counts).
  const FVec x0 = rounded<T>(gc.rows(K, false, this->rng));
  const FVec dy0 = rounded<T>(gc.rows(N, false, this->rng));
  FVec wantY(g.batch * g.experts * g.capacity * N), wantDx(x.size()),
      wantDw(w.size());
  cpu::expertLinear(x.data(), w.data(), gc.counts.data(), wantY.data(),
                    gc.cpuShape());
  cpu::expertLinearGradInput(dy.data(), w.data(), gc.counts.data(),
                             wantDx.data(), gc.cpuShape());
  cpu::expertLinearGradWeight(dy0.data(), x0.data(), gc.counts.data(),
                              wantDw.data(), gc.cpuShape());

  Device<T> dX(x.size()), dDy(dy.size()), dW(w.size()), dX0(x0.size()),
      dDy0(dy0.size()), outY(wantY.size()), outDx(x.size()), outDw(w.size());
  Device<std::int32_t> dCounts(gc.counts.size());
  dX.upload(x), dDy.upload(dy), dW.upload(w), dX0.upload(x0);
  dDy0.upload(dy0), dCounts.upload(gc.counts);
  for (Device<T> *out : {&outY, &outDx})
    out->upload(FVec(out == &outY ? wantY.size() : x.size(), 9.0f));
  outDw.upload(FVec(w.size(), 9.0f));
  int *bad = this->bad->get();
  cuda::expertLinear<T>(this->handle, dX.get(), dW.get(), dCounts.get(),
                        outY.get(), g, false, bad, this->stream);
  cuda::expertLinearGradInput<T>(this->handle, dDy.get(), dW.get(),
                                 dCounts.get(), outDx.get(), g, false, bad,
                                 this->stream);
  cuda::expertLinearGradWeight<T>(this->handle, dDy0.get(), dX0.get(),
                                  dCounts.get(), outDw.get(), g, false, bad,
                                  this->stream);
  const FVec y = outY.floats(), dx = outDx.floats();
  EXPECT_TRUE(gc.zeroTail(y, N));
  EXPECT_TRUE(gc.zeroTail(dx, K));
  EXPECT_TRUE(close(y, wantY, rtolOf<T>(), kCancelFloor));
  EXPECT_TRUE(close(dx, wantDx, rtolOf<T>(), kCancelFloor));
  // bf16: the running sum over the B groups is rounded once per group.
  EXPECT_TRUE(
      close(outDw.floats(), wantDw, g.batch * rtolOf<T>(), kCancelFloor));
  EXPECT_EQ(this->badFlag(), 0);
}

// DeepSeek-V3's bias update: the load of each case's routing and the new
// bias equal the CPU's bit for bit (the same double mean and sign), in
// place too. Both are f32 whatever the storage T (the fixture's only use).
TYPED_TEST(Moe, BiasUpdateMatchesCpu) {
  for (const RouteCase &c : routeCases()) {
    const FVec logits = randomFloats(c.batch * c.seq * c.experts, this->rng);
    const Routing r = cpuRoute(logits, nullptr, c);
    const FVec bias = randomFloats(c.experts, this->rng, -0.3f, 0.3f);
    FVec wantLoad(c.experts), wantBias(c.experts);
    cpu::moeExpertLoad(r.counts.data(), wantLoad.data(), c.batch, c.experts);
    cpu::moeBiasUpdate(bias.data(), wantLoad.data(), wantBias.data(), c.experts,
                       0.01f);
    Device<std::int32_t> dCounts(r.counts.size());
    Device<float> dLoad(c.experts), dBias(c.experts);
    dCounts.upload(r.counts);
    dBias.upload(bias);
    cuda::moeExpertLoad(dCounts.get(), dLoad.get(), c.batch, c.experts,
                        this->stream);
    cuda::moeBiasUpdate(dBias.get(), dLoad.get(), dBias.get(), c.experts, 0.01f,
                        this->stream);
    EXPECT_EQ(dLoad.values(), wantLoad);
    EXPECT_EQ(dBias.values(), wantBias);
  }
}

TYPED_TEST(Moe, AuxLossMatchesCpu) {
  using T = TypeParam;
  for (const RouteCase &c : routeCases()) {
    if (c.bias)
      continue;
    for (auto [aux, z] : {std::pair{0.01f, 0.001f}, std::pair{1.0f, 0.5f}}) {
      SCOPED_TRACE(testing::Message() << "scoring " << int(c.scoring) << " k "
                                      << c.topK << " aux " << aux);
      const FVec logits =
          rounded<T>(randomFloats(c.batch * c.seq * c.experts, this->rng));
      const Routing r = cpuRoute(logits, nullptr, c);
      const cpu::MoeShape cs = cpuShape(c);
      float wantLoss = 0, lossGrad = 0.75f;
      FVec wantGrad(logits.size());
      cpu::moeAuxLoss(logits.data(), r.experts.data(), &wantLoss, cs, c.scoring,
                      aux, z);
      cpu::moeAuxLossGrad(&lossGrad, logits.data(), r.experts.data(),
                          wantGrad.data(), cs, c.scoring, aux, z);
      const cuda::MoeShape s = cudaShape(c);
      Device<unsigned char> ws(cuda::moeAuxLossWorkspaceSize(s));
      Device<T> dLogits(logits.size()), outGrad(logits.size());
      Device<float> dLossGrad(1), outLoss(1);
      Device<std::int32_t> dExperts(r.experts.size());
      dLogits.upload(logits), dExperts.upload(r.experts);
      dLossGrad.upload(FVec{lossGrad});
      cuda::moeAuxLoss<T>(dLogits.get(), dExperts.get(), outLoss.get(), s,
                          c.scoring, aux, z, ws.get(), this->bad->get(),
                          this->stream);
      cuda::moeAuxLossGrad<T>(dLossGrad.get(), dLogits.get(), dExperts.get(),
                              outGrad.get(), s, c.scoring, aux, z, ws.get(),
                              this->bad->get(), this->stream);
      // The loss is f32 from the same (rounded) logits in both storages.
      EXPECT_TRUE(close(outLoss.floats(), FVec{wantLoss}, kFp32Rtol));
      EXPECT_TRUE(close(outGrad.floats(), wantGrad, rtolOf<T>(), kCancelFloor));
      EXPECT_EQ(this->badFlag(), 0);
    }
  }
}

// Corrupt routing sets the flag and stays inside the buffers (the emulator
// allocates exact sizes; ASan builds see any overrun).
TYPED_TEST(Moe, BadIdsAreFlagged) {
  using T = TypeParam;
  const RouteCase c{1, 4, 3, 2, 2, MoeScoring::Softmax, false};
  const Index H = 5;
  const cuda::MoeShape s = cudaShape(c, H);
  const std::size_t choices = 8, tokens = 4 * H, rows = 3 * 2 * H;
  Device<T> x(tokens), buffer(rows), gates(choices), out(tokens), outRows(rows),
      outGates(choices), logits(12), logitsGrad(12);
  x.upload(FVec(tokens, 1.0f)), buffer.upload(FVec(rows, 1.0f));
  gates.upload(FVec(choices, 0.5f)), logits.upload(FVec(12, 0.1f));
  Device<std::int32_t> experts(choices), slots(choices);
  const IVec goodExperts{0, 1, 1, 2, 2, 0, 0, 1};
  const IVec goodSlots{0, 0, 1, 0, 1, 1, -1, -1};
  auto expectBad = [&](const IVec &e, const IVec &sl, const char *what) {
    experts.upload(e), slots.upload(sl);
    this->clearBad();
    cuda::moeDispatch<T>(x.get(), experts.get(), slots.get(), outRows.get(), s,
                         this->bad->get(), this->stream);
    EXPECT_EQ(this->badFlag(), 1) << what << ": dispatch";
    this->clearBad();
    cuda::moeCombine<T>(buffer.get(), gates.get(), experts.get(), slots.get(),
                        out.get(), s, this->bad->get(), this->stream);
    EXPECT_EQ(this->badFlag(), 1) << what << ": combine";
    this->clearBad();
    cuda::moeCombineGrad<T>(x.get(), buffer.get(), gates.get(), experts.get(),
                            slots.get(), outRows.get(), outGates.get(), s,
                            this->bad->get(), this->stream);
    EXPECT_EQ(this->badFlag(), 1) << what << ": combine_grad";
  };
  IVec e = goodExperts, sl = goodSlots;
  e[3] = 3;
  expectBad(e, goodSlots, "expert id = E");
  e[3] = -1;
  expectBad(e, goodSlots, "expert id -1");
  sl[2] = 2;
  expectBad(goodExperts, sl, "slot = capacity");
  // The good routing is not flagged.
  experts.upload(goodExperts), slots.upload(goodSlots);
  this->clearBad();
  cuda::moeCombine<T>(buffer.get(), gates.get(), experts.get(), slots.get(),
                      out.get(), s, this->bad->get(), this->stream);
  EXPECT_EQ(this->badFlag(), 0);
  // The router's gradient and aux loss with an expert id out of range.
  e = goodExperts, e[5] = 7;
  experts.upload(e);
  this->clearBad();
  cuda::moeRouteGrad<T>(gates.get(), logits.get(), experts.get(),
                        logitsGrad.get(), s, c.scoring, this->bad->get(),
                        this->stream);
  EXPECT_EQ(this->badFlag(), 1) << "route_grad";
  Device<unsigned char> ws(cuda::moeAuxLossWorkspaceSize(s));
  Device<float> loss(1);
  this->clearBad();
  cuda::moeAuxLoss<T>(logits.get(), experts.get(), loss.get(), s, c.scoring,
                      0.01f, 0.001f, ws.get(), this->bad->get(), this->stream);
  EXPECT_EQ(this->badFlag(), 1) << "aux_loss";
  // A count past the capacity empties its block and is flagged.
  const cuda::ExpertGemmShape g{1, 2, 2, 3, 2};
  Device<T> gx(12), gw(12), gy(8);
  gx.upload(FVec(12, 1.0f)), gw.upload(FVec(12, 1.0f));
  Device<std::int32_t> counts(2);
  counts.upload(IVec{3, 1});
  this->clearBad();
  cuda::expertLinear<T>(this->handle, gx.get(), gw.get(), counts.get(),
                        gy.get(), g, false, this->bad->get(), this->stream);
  EXPECT_EQ(this->badFlag(), 1) << "expert_linear";
  EXPECT_EQ(gy.floats(), (FVec{0, 0, 0, 0, 3, 3, 0, 0}));
}

// The counted all-to-all's pack and unpack (MoeExchange.cu), through an
// exchange between simulated ranks: each rank's expert buffer [B, E, C, H]
// is cut along the experts (rank r takes experts [r E/R, (r+1) E/R)), and
// each receives [R B, E/R, C, H], source rank s's rows at batch rows
// [s B, (s+1) B). Only the filled rows move (the packed sizes are the
// counts' sums), arrive where the dense all-to-all puts them, and the rows
// past the counts come out zero whatever the input held there. Counts of
// 0, partial and full capacity.
TYPED_TEST(Moe, CountedExchangeMovesTheFilledRows) {
  using T = TypeParam;
  const int bytes = int(sizeof(T));
  struct ExchangeCase {
    Index ranks, batch, experts, capacity, channels;
  };
  for (const ExchangeCase &x :
       {ExchangeCase{2, 2, 4, 3, 5}, ExchangeCase{3, 1, 6, 4, 3},
        ExchangeCase{2, 3, 2, 2, 1}, ExchangeCase{1, 2, 3, 2, 4}}) {
    SCOPED_TRACE(testing::Message() << x.ranks << " ranks, batch " << x.batch
                                    << ", " << x.experts << " experts");
    const Index R = x.ranks, B = x.batch, E = x.experts, C = x.capacity,
                H = x.channels, local = E / R;
    const Index cellSize = C * H;
    // Send side: cells [B, E], the rank of (b, e) is e / local.
    const cuda::CountedCells send{B * E, C, H, /*stride=*/1, E, local};
    // Receive side: cells [R B, local], the source of (row, e) is row / B.
    const cuda::CountedCells recv{R * B * local, C, H, local, R * B, B};
    std::vector<FVec> inputs;
    std::vector<IVec> counts;
    std::uniform_int_distribution<int> fill(0, int(C));
    for (Index r = 0; r < R; ++r) {
      // Rows past the counts hold garbage: they must not travel.
      inputs.push_back(rounded<T>(randomFloats(B * E * cellSize, this->rng)));
      IVec c(std::size_t(B * E));
      for (std::int32_t &n : c)
        n = fill(this->rng);
      c[0] = 0, c[std::size_t(B * E - 1)] = std::int32_t(C);
      counts.push_back(c);
    }
    // Pack on every rank; split each packed buffer by destination.
    std::vector<std::vector<FVec>> segments(static_cast<std::size_t>(R));
    for (Index r = 0; r < R; ++r) {
      Device<T> in(inputs[r].size()), packed(inputs[r].size());
      Device<std::int32_t> dCounts(counts[r].size());
      in.upload(inputs[r]), dCounts.upload(counts[r]);
      cuda::packCountedRows(in.get(), dCounts.get(), packed.get(), send, bytes,
                            this->stream);
      const FVec all = packed.floats();
      Index at = 0;
      for (Index to = 0; to < R; ++to) {
        Index rows = 0;
        for (Index b = 0; b < B; ++b)
          for (Index e = to * local; e < (to + 1) * local; ++e)
            rows += counts[r][std::size_t(b * E + e)];
        segments[r].push_back(
            FVec(all.begin() + at * H, all.begin() + (at + rows) * H));
        at += rows;
      }
    }
    // Receive: the segments of every source in rank order, unpacked.
    for (Index to = 0; to < R; ++to) {
      FVec received;
      IVec recvCounts(std::size_t(R * B * local));
      for (Index from = 0; from < R; ++from) {
        const FVec &seg = segments[from][to];
        received.insert(received.end(), seg.begin(), seg.end());
        for (Index b = 0; b < B; ++b)
          for (Index e = 0; e < local; ++e)
            recvCounts[std::size_t((from * B + b) * local + e)] =
                counts[from][std::size_t(b * E + to * local + e)];
      }
      const std::size_t outSize = std::size_t(R * B * local * cellSize);
      Device<T> dReceived(std::max<std::size_t>(received.size(), 1)),
          out(outSize);
      if (!received.empty())
        dReceived.upload(received);
      out.upload(FVec(outSize, 7.0f)); // stale rows: must become zeros
      Device<std::int32_t> dCounts(recvCounts.size());
      dCounts.upload(recvCounts);
      cuda::unpackCountedRows(dReceived.get(), dCounts.get(), out.get(), recv,
                              bytes, this->stream);
      FVec want(outSize, 0.0f);
      for (Index from = 0; from < R; ++from)
        for (Index b = 0; b < B; ++b)
          for (Index e = 0; e < local; ++e) {
            const Index source = b * E + to * local + e;
            const Index filled = counts[from][std::size_t(source)];
            std::copy_n(inputs[from].begin() + source * cellSize, filled * H,
                        want.begin() + ((from * B + b) * local + e) * cellSize);
          }
      EXPECT_EQ(out.floats(), want) << "rank " << to;
    }
  }
}

// The exchange kernels never index outside a buffer: a count beyond the
// capacity moves the whole cell and a negative one nothing (the host checks
// the counts it reads back before launching; these stand in for a count
// changed behind its back). Bad shapes and element sizes are refused.
TYPED_TEST(Moe, CountedRowsClampTheCountsAndCheckTheirArguments) {
  using T = TypeParam;
  const int bytes = int(sizeof(T));
  // Two ranks, one cell each, 2 rows of 3.
  const cuda::CountedCells cells{2, 2, 3, /*stride=*/1, 2, 1};
  const FVec input = rounded<T>(FVec{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Device<T> in(12), packed(12), out(12);
  in.upload(input), packed.upload(FVec(12, -1.0f));
  Device<std::int32_t> counts(2);
  counts.upload(IVec{5, -3});
  cuda::packCountedRows(in.get(), counts.get(), packed.get(), cells, bytes,
                        this->stream);
  FVec want(12, -1.0f);
  std::copy_n(input.begin(), 6, want.begin());
  EXPECT_EQ(packed.floats(), want) << "pack: 5 rows clamp to 2, -3 to 0";
  out.upload(FVec(12, 7.0f));
  cuda::unpackCountedRows(packed.get(), counts.get(), out.get(), cells, bytes,
                          this->stream);
  want = FVec(12, 0.0f);
  std::copy_n(input.begin(), 6, want.begin());
  EXPECT_EQ(out.floats(), want) << "unpack: the clamped cell is zeroed";
  EXPECT_THROW(cuda::packCountedRows(in.get(), counts.get(), packed.get(),
                                     cells, 8, this->stream),
               std::invalid_argument);
  EXPECT_THROW(cuda::unpackCountedRows(packed.get(), counts.get(), out.get(),
                                       cuda::CountedCells{2, 2, 3, 1, 2, 0},
                                       bytes, this->stream),
               std::invalid_argument);
  EXPECT_THROW(cuda::packCountedRows(in.get(), counts.get(), packed.get(),
                                     cuda::CountedCells{-1, 2, 3, 1, 2, 1},
                                     bytes, this->stream),
               std::invalid_argument);
}

// The host side (CountedExchange.h): the cells and ranks the backend
// derives from a buffer's shape, as CountedExchangeMovesTheFilledRows
// writes them by hand, and the rows per rank that size the NCCL transfers;
// a count outside [0, rows] is refused with the collective's label.
TEST(CountedExchangeHost, CellsRowsPerRankAndBadCounts) {
  using partition::runtime::BufferInfo;
  using partition::runtime::ProgramError;
  namespace cb = partition::runtime;
  // [B 2, E 4, C 3, H 5] cut along the experts over 2 ranks; received as
  // [R B 4, E/R 2, C 3, H 5], the source rank along dimension 0.
  BufferInfo sent, received;
  sent.name = "dispatched", sent.shape = {2, 4, 3, 5};
  received.name = "received", received.shape = {4, 2, 3, 5};
  const cuda::CountedCells send = cb::countedCells(sent, 2, 1, 2);
  const cuda::CountedCells recv = cb::countedCells(received, 2, 0, 2);
  EXPECT_EQ(std::vector<Index>({send.count, send.rows, send.inner, send.stride,
                                send.dimSize, send.per}),
            std::vector<Index>({8, 3, 5, 1, 4, 2}));
  EXPECT_EQ(std::vector<Index>({recv.count, recv.rows, recv.inner, recv.stride,
                                recv.dimSize, recv.per}),
            std::vector<Index>({8, 3, 5, 2, 4, 2}));
  // Cells (b, e): experts 0, 1 go to rank 0, experts 2, 3 to rank 1.
  const IVec counts{0, 1, 2, 3, 3, 2, 1, 0};
  EXPECT_EQ(cb::rowsPerRank(counts.data(), send, 2, "x", "dispatched"),
            (std::vector<std::int64_t>{0 + 1 + 3 + 2, 2 + 3 + 1 + 0}));
  // Cells (row, e): rows 0, 1 come from rank 0, rows 2, 3 from rank 1.
  EXPECT_EQ(cb::rowsPerRank(counts.data(), recv, 2, "x", "received"),
            (std::vector<std::int64_t>{0 + 1 + 2 + 3, 3 + 2 + 1 + 0}));
  for (std::int32_t bad : {-1, 4}) {
    IVec c = counts;
    c[5] = bad;
    try {
      cb::rowsPerRank(c.data(), send, 2, "rt.all_to_all 'moe.dispatch'",
                      "dispatched");
      ADD_FAILURE() << "count " << bad << " accepted";
    } catch (const ProgramError &error) {
      EXPECT_EQ(std::string(error.what()),
                "rt.all_to_all 'moe.dispatch': " + std::to_string(bad) +
                    " filled rows counted in a cell of 'dispatched', which "
                    "holds 3");
    }
  }
}

} // namespace
