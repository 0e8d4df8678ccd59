//===- AttentionTest.cpp - CUDA attention against the CPU kernels ---------===//
//
// The CUDA flash attention (runtime/backend/cuda/attention) against cpu::attention /
// cpu::attentionGrad on the same random inputs: forward and the three
// gradients, for plain multi-head and GQA heads, with and without RoPE,
// causal and full, sequence lengths that are not multiples of the 64-row
// tiles, head dimensions from 16 to 128 (padded ones included), sliding
// windows (narrower and wider than a tile, of one key, beyond the
// sequence), in fp32 and bf16 storage. Also: two runs give the same bits, and unsupported shapes
// throw before any launch.
//
// Tolerances (|gpu - cpu| <= rtol |cpu| + atol, every element):
// - fp32: rtol 1e-4, atol 1e-5. Both sides compute in fp32 with different
//   summation orders and exp implementations; their difference is ~1e-6
//   relative.
// - bf16: inputs rounded to bf16 first, the CPU reference runs on the
//   rounded values in fp32; rtol 2e-2, atol 1e-3. The GPU computes in fp32
//   too, so the difference is dominated by rounding its outputs to bf16
//   (2^-9 relative).
//
// Without a usable GPU the executable prints
// "partition-cuda-attention-tests: skipped: <reason>" and exits 0 (ctest
// reports the test as skipped).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/attention/Attention.h"
#include "runtime/backend/cpu/Kernels.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace cpu = partition::runtime::cpu;
namespace gpu = partition::runtime::cuda;

namespace {

using FVec = std::vector<float>;
using bf16 = __nv_bfloat16;

struct Case {
  std::int64_t batch, seq, heads, kvHeads, dim;
  bool causal;
  float theta; // 0: no RoPE
  partition::runtime::RopeScaling scaling = {};
  std::int64_t window = 0; // sliding window; 0: none
};

std::string describe(const Case &c) {
  std::ostringstream os;
  os << "B=" << c.batch << " T=" << c.seq << " H=" << c.heads
     << " Hkv=" << c.kvHeads << " D=" << c.dim
     << (c.causal ? " causal" : " full") << " theta=" << c.theta
     << " scaling=" << int(c.scaling.kind) << " window=" << c.window;
  return os.str();
}

gpu::AttentionShape shapeOf(const Case &c) {
  gpu::AttentionShape s;
  s.batch = c.batch;
  s.seq = c.seq;
  s.numHeads = c.heads;
  s.numKvHeads = c.kvHeads;
  s.headDim = c.dim;
  s.causal = c.causal;
  s.ropeTheta = c.theta;
  s.ropeScaling = c.scaling;
  s.window = c.window;
  return s;
}

cpu::AttentionConfig configOf(const Case &c) {
  cpu::AttentionConfig cfg;
  cfg.batch = c.batch;
  cfg.seq = c.seq;
  cfg.numHeads = c.heads;
  cfg.numKvHeads = c.kvHeads;
  cfg.headDim = c.dim;
  cfg.causal = c.causal;
  cfg.ropeTheta = c.theta;
  cfg.ropeScaling = c.scaling;
  cfg.window = c.window;
  return cfg;
}

void check(cudaError_t error, const char *what) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " +
                             cudaGetErrorString(error));
}

/// Owns one cudaMalloc'd buffer.
class DeviceBuffer {
public:
  explicit DeviceBuffer(std::size_t bytes) : bytes(bytes) {
    if (bytes)
      check(cudaMalloc(&ptr, bytes), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (ptr)
      cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  template <typename T> T *as() const { return static_cast<T *>(ptr); }
  std::size_t size() const { return bytes; }

private:
  void *ptr = nullptr;
  std::size_t bytes;
};

/// float -> bf16 bits, round to nearest even (what __float2bfloat16_rn
/// does), without relying on cuda_bf16.h's host paths.
std::uint16_t toBf16Bits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if (std::isnan(x))
    return 0x7FC0;
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return std::uint16_t(bits >> 16);
}

float fromBf16Bits(std::uint16_t b) {
  const std::uint32_t bits = std::uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

FVec roundToBf16(const FVec &v) {
  FVec r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    r[i] = fromBf16Bits(toBf16Bits(v[i]));
  return r;
}

FVec randomFloats(std::size_t n, std::mt19937 &rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  FVec v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// Host storage of T as raw bits (float or bf16's uint16).
template <typename T>
using Raw = std::conditional_t<std::is_same_v<T, float>, float, std::uint16_t>;

template <typename T> std::vector<Raw<T>> encode(const FVec &v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    std::vector<std::uint16_t> r(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      r[i] = toBf16Bits(v[i]);
    return r;
  }
}

template <typename T> FVec decode(const std::vector<Raw<T>> &v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    FVec r(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      r[i] = fromBf16Bits(v[i]);
    return r;
  }
}

struct Inputs {
  FVec q, k, v, g;
};

struct Outputs {
  FVec out, dq, dk, dv;
};

Inputs randomInputs(const Case &c, unsigned seed) {
  std::mt19937 rng(seed);
  const std::size_t qSize = c.batch * c.seq * c.heads * c.dim;
  const std::size_t kSize = c.batch * c.seq * c.kvHeads * c.dim;
  Inputs in;
  // Wider q and k than v: sharper softmax rows.
  in.q = randomFloats(qSize, rng, -2.0f, 2.0f);
  in.k = randomFloats(kSize, rng, -2.0f, 2.0f);
  in.v = randomFloats(kSize, rng, -1.0f, 1.0f);
  in.g = randomFloats(qSize, rng, -1.0f, 1.0f);
  return in;
}

Outputs runCpu(const Case &c, const Inputs &in) {
  const cpu::AttentionConfig cfg = configOf(c);
  Outputs o;
  o.out.assign(in.q.size(), 0.0f);
  o.dq.assign(in.q.size(), 0.0f);
  o.dk.assign(in.k.size(), 0.0f);
  o.dv.assign(in.k.size(), 0.0f);
  cpu::attention(in.q.data(), in.k.data(), in.v.data(), o.out.data(), cfg);
  cpu::attentionGrad(in.g.data(), in.q.data(), in.k.data(), in.v.data(),
                     o.dq.data(), o.dk.data(), o.dv.data(), cfg);
  return o;
}

template <typename T>
void upload(const DeviceBuffer &dst, const std::vector<Raw<T>> &src) {
  check(cudaMemcpy(dst.as<void>(), src.data(), src.size() * sizeof(Raw<T>),
                   cudaMemcpyHostToDevice),
        "cudaMemcpy to device");
}

template <typename T> FVec download(const DeviceBuffer &src, std::size_t n) {
  std::vector<Raw<T>> raw(n);
  check(cudaMemcpy(raw.data(), src.as<void>(), n * sizeof(Raw<T>),
                   cudaMemcpyDeviceToHost),
        "cudaMemcpy to host");
  return decode<T>(raw);
}

/// Forward and backward on the GPU with storage T; outputs start as NaN
/// bit patterns (0xFF bytes) so that an element never written fails.
template <typename T> Outputs runGpu(const Case &c, const Inputs &in) {
  const gpu::AttentionShape shape = shapeOf(c);
  const bool isBf16 = std::is_same_v<T, bf16>;
  const std::size_t qBytes = in.q.size() * sizeof(T);
  const std::size_t kBytes = in.k.size() * sizeof(T);
  DeviceBuffer q(qBytes), k(kBytes), v(kBytes), g(qBytes);
  DeviceBuffer out(qBytes), dq(qBytes), dk(kBytes), dv(kBytes);
  upload<T>(q, encode<T>(in.q));
  upload<T>(k, encode<T>(in.k));
  upload<T>(v, encode<T>(in.v));
  upload<T>(g, encode<T>(in.g));
  for (const DeviceBuffer *b : {&out, &dq, &dk, &dv})
    check(cudaMemset(b->as<void>(), 0xFF, b->size()), "cudaMemset");
  const std::size_t wsBytes =
      std::max(gpu::attentionWorkspaceSize(shape, isBf16),
               gpu::attentionGradWorkspaceSize(shape, isBf16));
  DeviceBuffer ws(wsBytes);

  gpu::attention<T>(q.as<T>(), k.as<T>(), v.as<T>(), out.as<T>(), shape,
                    ws.as<void>(), wsBytes, nullptr);
  gpu::attentionGrad<T>(g.as<T>(), q.as<T>(), k.as<T>(), v.as<T>(), dq.as<T>(),
                        dk.as<T>(), dv.as<T>(), shape, ws.as<void>(), wsBytes,
                        nullptr);
  check(cudaDeviceSynchronize(), "attention kernels");

  Outputs o;
  o.out = download<T>(out, in.q.size());
  o.dq = download<T>(dq, in.q.size());
  o.dk = download<T>(dk, in.k.size());
  o.dv = download<T>(dv, in.k.size());
  return o;
}

/// |actual - expected| <= rtol |expected| + atol everywhere; on failure,
/// names how many elements fail and the worst one.
::testing::AssertionResult allClose(const char *what, const FVec &actual,
                                    const FVec &expected, double rtol,
                                    double atol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << what << ": size " << actual.size() << " vs " << expected.size();
  std::size_t failures = 0, worst = 0;
  double worstExcess = -1.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double err = std::abs(double(actual[i]) - double(expected[i]));
    const double bound = atol + rtol * std::abs(double(expected[i]));
    const bool bad = !(err <= bound); // NaN fails
    failures += bad;
    const double excess = std::isnan(err) ? 1e300 : err - bound;
    if (excess > worstExcess) {
      worstExcess = excess;
      worst = i;
    }
  }
  if (failures == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << failures << " of " << actual.size()
         << " elements off; worst at " << worst << ": " << actual[worst]
         << " vs " << expected[worst];
}

const Case kCases[] = {
    // Plain multi-head, no RoPE, causal and full; 77 = 64 + a ragged tile.
    {2, 77, 4, 4, 64, true, 0.0f},
    {2, 77, 4, 4, 64, false, 0.0f},
    // GQA 8/2 with RoPE, causal and full, head dims 64 and 128.
    {2, 77, 8, 2, 64, true, 10000.0f},
    {2, 77, 8, 2, 128, false, 10000.0f},
    {2, 77, 8, 2, 128, true, 500.0f},
    // A small head (padded to 32).
    {2, 77, 4, 2, 16, true, 10000.0f},
    // Several tiles each way, a padded head with RoPE, one kv head.
    {1, 200, 4, 1, 96, true, 10000.0f},
    // Odd-sized head without RoPE, full attention over 3 tiles.
    {2, 130, 2, 2, 40, false, 0.0f},
    // One position.
    {2, 1, 2, 1, 32, true, 10000.0f},
    // RoPE scaling: Llama 3.1's (every band of the llama3 rule at D = 64
    // with an original context of 32), linear, and yarn (pairs kept, on
    // the ramp and divided at D = 64, theta 1e4, an original context of
    // 32; cos and sin times its attention factor).
    {2, 77, 8, 2, 64, true, 500000.0f,
     {partition::runtime::RopeScalingKind::Llama3, 8.0, 1.0, 4.0, 32.0}},
    {1, 70, 4, 2, 32, true, 10000.0f,
     {partition::runtime::RopeScalingKind::Linear, 4.0}},
    // Sliding windows: narrower than a 32-key tile over 3 query tiles (a
    // row's first tiles fully masked); of one key; wider than a 64-row
    // block, with RoPE scaling; one beyond the sequence (none).
    {1, 150, 4, 2, 64, true, 10000.0f, {}, 20},
    {2, 77, 4, 4, 32, true, 0.0f, {}, 1},
    {1, 150, 4, 2, 32, true, 10000.0f,
     {partition::runtime::RopeScalingKind::Linear, 4.0}, 70},
    {1, 40, 2, 1, 32, true, 10000.0f, {}, 64},
    {2, 77, 8, 2, 64, true, 10000.0f,
     partition::runtime::RopeScaling::yarn(4.0, 32.0, 1.0, 32.0)},
};

template <typename T> void compareWithCpu(double rtol, double atol) {
  unsigned seed = 100;
  for (const Case &c : kCases) {
    SCOPED_TRACE(describe(c));
    Inputs in = randomInputs(c, seed++);
    if (std::is_same_v<T, bf16>) {
      in.q = roundToBf16(in.q);
      in.k = roundToBf16(in.k);
      in.v = roundToBf16(in.v);
      in.g = roundToBf16(in.g);
    }
    const Outputs expected = runCpu(c, in);
    const Outputs actual = runGpu<T>(c, in);
    EXPECT_TRUE(allClose("result", actual.out, expected.out, rtol, atol));
    EXPECT_TRUE(allClose("query grad", actual.dq, expected.dq, rtol, atol));
    EXPECT_TRUE(allClose("key grad", actual.dk, expected.dk, rtol, atol));
    EXPECT_TRUE(allClose("value grad", actual.dv, expected.dv, rtol, atol));
  }
}

TEST(CudaAttentionTest, Fp32MatchesCpu) { compareWithCpu<float>(1e-4, 1e-5); }

TEST(CudaAttentionTest, Bf16MatchesCpu) { compareWithCpu<bf16>(2e-2, 1e-3); }

//===----------------------------------------------------------------------===//
// Explicit positions (attention_positions): queries and keys of their own
// lengths at i32 positions, against cpu::attentionPositions(Grad).
//===----------------------------------------------------------------------===//

struct PositionsCase {
  Case c; // c.seq: the queries
  std::int64_t keySeq;
  std::vector<std::int32_t> qpos, kpos;
};

std::vector<std::int32_t> zigzag(std::int64_t length, std::int64_t chunks) {
  std::vector<std::int32_t> v(length);
  cpu::sequencePositions(v.data(), length, chunks);
  return v;
}

std::vector<PositionsCase> positionsCases() {
  std::vector<PositionsCase> cases;
  // All-gathered keys in zigzag layout (cp 2: 4 chunks of 40), the local
  // queries of rank 1 (layout blocks 2 and 3), GQA with RoPE.
  {
    const std::vector<std::int32_t> all = zigzag(160, 4);
    PositionsCase pc{{2, 80, 8, 2, 64, true, 10000.0f}, 160, {}, all};
    pc.qpos.assign(all.begin() + 80, all.end());
    cases.push_back(pc);
  }
  // Rank 0 of cp 4 (chunks 0 and 7 of 8 x 12), a sliding window, one kv
  // head, head dim 32 (padded), llama3 RoPE scaling.
  {
    const std::vector<std::int32_t> all = zigzag(96, 8);
    PositionsCase pc{{1, 24, 4, 1, 32, true, 500000.0f,
                      {partition::runtime::RopeScalingKind::Llama3, 8.0, 1.0,
                       4.0, 32.0},
                      10},
                     96, {}, all};
    pc.qpos.assign(all.begin(), all.begin() + 24);
    cases.push_back(pc);
  }
  // More queries than keys, keys at odd positions from 9: the first
  // queries see no key (zeros); no RoPE, odd head dim.
  {
    PositionsCase pc{{2, 70, 2, 2, 40, true, 0.0f}, 33, {}, {}};
    for (int t = 0; t < 70; ++t)
      pc.qpos.push_back(t);
    for (int s = 0; s < 33; ++s)
      pc.kpos.push_back(9 + 2 * s);
    cases.push_back(pc);
  }
  // Full (non-causal) attention over shuffled key positions, RoPE.
  {
    PositionsCase pc{{1, 40, 4, 2, 64, false, 10000.0f}, 100, {}, {}};
    std::mt19937 rng(7);
    for (int t = 0; t < 40; ++t)
      pc.qpos.push_back(int(rng() % 200));
    for (int s = 0; s < 100; ++s)
      pc.kpos.push_back(int(rng() % 200));
    cases.push_back(pc);
  }
  return cases;
}

template <typename T>
void comparePositionsWithCpu(double rtol, double atol) {
  unsigned seed = 300;
  for (const PositionsCase &pc : positionsCases()) {
    const Case &c = pc.c;
    SCOPED_TRACE(describe(c) + " Tk=" + std::to_string(pc.keySeq));
    std::mt19937 rng(seed++);
    const std::size_t qSize = c.batch * c.seq * c.heads * c.dim;
    const std::size_t kSize = c.batch * pc.keySeq * c.kvHeads * c.dim;
    Inputs in;
    in.q = randomFloats(qSize, rng, -2.0f, 2.0f);
    in.k = randomFloats(kSize, rng, -2.0f, 2.0f);
    in.v = randomFloats(kSize, rng, -1.0f, 1.0f);
    in.g = randomFloats(qSize, rng, -1.0f, 1.0f);
    if (std::is_same_v<T, bf16>) {
      in.q = roundToBf16(in.q);
      in.k = roundToBf16(in.k);
      in.v = roundToBf16(in.v);
      in.g = roundToBf16(in.g);
    }
    const cpu::AttentionConfig cfg = configOf(c);
    Outputs expected;
    expected.out.assign(qSize, 0.0f);
    expected.dq.assign(qSize, 0.0f);
    expected.dk.assign(kSize, 0.0f);
    expected.dv.assign(kSize, 0.0f);
    cpu::attentionPositions(in.q.data(), in.k.data(), in.v.data(),
                            pc.qpos.data(), pc.kpos.data(),
                            expected.out.data(), pc.keySeq, cfg);
    cpu::attentionPositionsGrad(in.g.data(), in.q.data(), in.k.data(),
                                in.v.data(), pc.qpos.data(), pc.kpos.data(),
                                expected.dq.data(), expected.dk.data(),
                                expected.dv.data(), pc.keySeq, cfg);

    const gpu::AttentionShape shape = shapeOf(c);
    const std::size_t qBytes = qSize * sizeof(T), kBytes = kSize * sizeof(T);
    DeviceBuffer q(qBytes), k(kBytes), v(kBytes), g(qBytes);
    DeviceBuffer out(qBytes), dq(qBytes), dk(kBytes), dv(kBytes);
    DeviceBuffer qp(pc.qpos.size() * 4), kp(pc.kpos.size() * 4);
    upload<T>(q, encode<T>(in.q));
    upload<T>(k, encode<T>(in.k));
    upload<T>(v, encode<T>(in.v));
    upload<T>(g, encode<T>(in.g));
    check(cudaMemcpy(qp.as<void>(), pc.qpos.data(), pc.qpos.size() * 4,
                     cudaMemcpyHostToDevice),
          "cudaMemcpy");
    check(cudaMemcpy(kp.as<void>(), pc.kpos.data(), pc.kpos.size() * 4,
                     cudaMemcpyHostToDevice),
          "cudaMemcpy");
    for (const DeviceBuffer *b : {&out, &dq, &dk, &dv})
      check(cudaMemset(b->as<void>(), 0xFF, b->size()), "cudaMemset");
    const std::size_t wsBytes = std::max(
        gpu::attentionPositionsWorkspaceSize(shape, pc.keySeq, false),
        gpu::attentionPositionsWorkspaceSize(shape, pc.keySeq, true));
    DeviceBuffer ws(wsBytes);
    const auto *qpos = qp.as<std::int32_t>();
    const auto *kpos = kp.as<std::int32_t>();
    gpu::attentionPositions<T>(q.as<T>(), k.as<T>(), v.as<T>(), qpos, kpos,
                               out.as<T>(), shape, pc.keySeq, ws.as<void>(),
                               wsBytes, nullptr);
    gpu::attentionPositionsGrad<T>(g.as<T>(), q.as<T>(), k.as<T>(), v.as<T>(),
                                   qpos, kpos, dq.as<T>(), dk.as<T>(),
                                   dv.as<T>(), shape, pc.keySeq, ws.as<void>(),
                                   wsBytes, nullptr);
    check(cudaDeviceSynchronize(), "attention kernels");
    EXPECT_TRUE(allClose("result", download<T>(out, qSize), expected.out,
                         rtol, atol));
    EXPECT_TRUE(allClose("query grad", download<T>(dq, qSize), expected.dq,
                         rtol, atol));
    EXPECT_TRUE(allClose("key grad", download<T>(dk, kSize), expected.dk,
                         rtol, atol));
    EXPECT_TRUE(allClose("value grad", download<T>(dv, kSize), expected.dv,
                         rtol, atol));
  }
}

TEST(CudaAttentionTest, PositionsFp32MatchesCpu) {
  comparePositionsWithCpu<float>(1e-4, 1e-5);
}

TEST(CudaAttentionTest, PositionsBf16MatchesCpu) {
  comparePositionsWithCpu<bf16>(2e-2, 1e-3);
}

//===----------------------------------------------------------------------===//
// Ring attention: attention_block (with lse) per key block and
// attention_block_grad from the final out and lse (the CPU blocks merged by
// cpu::attentionMerge), against cpu::attentionBlock(Grad).
//===----------------------------------------------------------------------===//

template <typename T> void compareBlocksWithCpu(double rtol, double atol) {
  unsigned seed = 500;
  for (const PositionsCase &pc : positionsCases()) {
    const Case &c = pc.c;
    SCOPED_TRACE(describe(c) + " Tk=" + std::to_string(pc.keySeq));
    std::mt19937 rng(seed++);
    const std::int64_t tk = pc.keySeq, half = tk / 2;
    const std::size_t qSize = c.batch * c.seq * c.heads * c.dim;
    const std::size_t lseSize = c.batch * c.heads * c.seq;
    Inputs in;
    in.q = randomFloats(qSize, rng, -2.0f, 2.0f);
    in.k = randomFloats(c.batch * tk * c.kvHeads * c.dim, rng, -2.0f, 2.0f);
    in.v = randomFloats(c.batch * tk * c.kvHeads * c.dim, rng, -1.0f, 1.0f);
    in.g = randomFloats(qSize, rng, -1.0f, 1.0f);
    if (std::is_same_v<T, bf16>) {
      in.q = roundToBf16(in.q);
      in.k = roundToBf16(in.k);
      in.v = roundToBf16(in.v);
      in.g = roundToBf16(in.g);
    }
    // The keys in two blocks [0, half) and [half, tk) (the first with the
    // second half's positions swapped in would be the same test).
    const std::int64_t lens[2] = {half, tk - half};
    const std::int64_t starts[2] = {0, half};
    const cpu::AttentionConfig cfg = configOf(c);
    const gpu::AttentionShape shape = shapeOf(c);
    const std::int64_t row = c.kvHeads * c.dim;
    FVec blockOut[2], blockLse[2];
    DeviceBuffer q(qSize * sizeof(T)), g(qSize * sizeof(T));
    DeviceBuffer qp(pc.qpos.size() * 4);
    upload<T>(q, encode<T>(in.q));
    upload<T>(g, encode<T>(in.g));
    check(cudaMemcpy(qp.as<void>(), pc.qpos.data(), pc.qpos.size() * 4,
                     cudaMemcpyHostToDevice),
          "cudaMemcpy");
    struct Block {
      FVec k, v;
      std::vector<std::int32_t> kpos;
    } blocks[2];
    for (int i = 0; i < 2; ++i) {
      Block &bl = blocks[i];
      for (std::int64_t b = 0; b < c.batch; ++b)
        for (std::int64_t s = 0; s < lens[i]; ++s) {
          const std::size_t from = (b * tk + starts[i] + s) * row;
          bl.k.insert(bl.k.end(), in.k.begin() + from,
                      in.k.begin() + from + row);
          bl.v.insert(bl.v.end(), in.v.begin() + from,
                      in.v.begin() + from + row);
        }
      bl.kpos.assign(pc.kpos.begin() + starts[i],
                     pc.kpos.begin() + starts[i] + lens[i]);
      blockOut[i].assign(qSize, 0.0f);
      blockLse[i].assign(lseSize, 0.0f);
      cpu::attentionBlock(in.q.data(), bl.k.data(), bl.v.data(),
                          pc.qpos.data(), bl.kpos.data(), blockOut[i].data(),
                          blockLse[i].data(), cfg, lens[i]);
    }
    FVec out(qSize), lse(lseSize);
    cpu::attentionMerge(blockOut[0].data(), blockLse[0].data(),
                        blockOut[1].data(), blockLse[1].data(), out.data(),
                        lse.data(), c.batch, c.seq, c.heads, c.dim);
    if (std::is_same_v<T, bf16>)
      out = roundToBf16(out);
    DeviceBuffer dOut(qSize * sizeof(T)), dLse(lseSize * 4);
    upload<T>(dOut, encode<T>(out));
    check(cudaMemcpy(dLse.as<void>(), lse.data(), lseSize * 4,
                     cudaMemcpyHostToDevice),
          "cudaMemcpy");
    for (int i = 0; i < 2; ++i) {
      SCOPED_TRACE("block " + std::to_string(i));
      const Block &bl = blocks[i];
      const std::size_t kSize = bl.k.size();
      FVec dq(qSize, 0.0f), dk(kSize, 0.0f), dv(kSize, 0.0f);
      cpu::attentionBlockGrad(in.g.data(), in.q.data(), bl.k.data(),
                              bl.v.data(), pc.qpos.data(), bl.kpos.data(),
                              out.data(), lse.data(), dq.data(), dk.data(),
                              dv.data(), cfg, lens[i]);
      DeviceBuffer k(kSize * sizeof(T)), v(kSize * sizeof(T));
      DeviceBuffer kp(bl.kpos.size() * 4 + 4);
      DeviceBuffer o(qSize * sizeof(T)), l(lseSize * 4);
      DeviceBuffer gq(qSize * sizeof(T)), gk(kSize * sizeof(T) + 4),
          gv(kSize * sizeof(T) + 4);
      upload<T>(k, encode<T>(bl.k));
      upload<T>(v, encode<T>(bl.v));
      check(cudaMemcpy(kp.as<void>(), bl.kpos.data(), bl.kpos.size() * 4,
                       cudaMemcpyHostToDevice),
            "cudaMemcpy");
      for (const DeviceBuffer *b : {&o, &l, &gq, &gk, &gv})
        check(cudaMemset(b->as<void>(), 0xFF, b->size()), "cudaMemset");
      const std::size_t wsBytes = std::max(
          gpu::attentionPositionsWorkspaceSize(shape, lens[i], false),
          gpu::attentionPositionsWorkspaceSize(shape, lens[i], true));
      DeviceBuffer ws(wsBytes);
      gpu::attentionBlock<T>(q.as<T>(), k.as<T>(), v.as<T>(),
                             qp.as<std::int32_t>(), kp.as<std::int32_t>(),
                             o.as<T>(), l.as<float>(), shape, lens[i],
                             ws.as<void>(), wsBytes, nullptr);
      gpu::attentionBlockGrad<T>(
          g.as<T>(), q.as<T>(), k.as<T>(), v.as<T>(), qp.as<std::int32_t>(),
          kp.as<std::int32_t>(), dOut.as<T>(), dLse.as<float>(), gq.as<T>(),
          gk.as<T>(), gv.as<T>(), shape, lens[i], ws.as<void>(), wsBytes,
          nullptr);
      check(cudaDeviceSynchronize(), "attention block kernels");
      EXPECT_TRUE(allClose("block out", download<T>(o, qSize), blockOut[i],
                           rtol, atol));
      // -inf (a query that sees no key of the block) must match exactly.
      auto finite = [](FVec x) {
        for (float &e : x)
          if (e == -INFINITY)
            e = -1e30f;
        return x;
      };
      EXPECT_TRUE(allClose("block lse", finite(download<float>(l, lseSize)),
                           finite(blockLse[i]), 1e-4, 1e-5));
      EXPECT_TRUE(allClose("query grad", download<T>(gq, qSize), dq, rtol,
                           atol));
      EXPECT_TRUE(allClose("key grad", download<T>(gk, kSize), dk, rtol,
                           atol));
      EXPECT_TRUE(allClose("value grad", download<T>(gv, kSize), dv, rtol,
                           atol));
    }
  }
}

TEST(CudaAttentionTest, BlocksFp32MatchCpu) {
  compareBlocksWithCpu<float>(1e-4, 1e-5);
}

TEST(CudaAttentionTest, BlocksBf16MatchCpu) {
  compareBlocksWithCpu<bf16>(2e-2, 1e-3);
}

bool sameBits(const FVec &a, const FVec &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// No atomics anywhere: two runs give the same bits, GQA groups included.
// Three 64-row query tiles and five 32-key tiles, two query heads per kv
// head: every reduction order the kernels have, at a size the emulator
// runs in seconds.
TEST(CudaAttentionTest, Deterministic) {
  const Case c{1, 130, 4, 2, 64, true, 10000.0f};
  const Inputs in = randomInputs(c, 7);
  for (bool isBf16 : {false, true}) {
    SCOPED_TRACE(isBf16 ? "bf16" : "fp32");
    const Outputs a = isBf16 ? runGpu<bf16>(c, in) : runGpu<float>(c, in);
    const Outputs b = isBf16 ? runGpu<bf16>(c, in) : runGpu<float>(c, in);
    EXPECT_TRUE(sameBits(a.out, b.out));
    EXPECT_TRUE(sameBits(a.dq, b.dq));
    EXPECT_TRUE(sameBits(a.dk, b.dk));
    EXPECT_TRUE(sameBits(a.dv, b.dv));
  }
}

template <typename F> std::string invalidArgumentMessage(F &&f) {
  try {
    f();
  } catch (const std::invalid_argument &e) {
    return e.what();
  }
  return "(no std::invalid_argument thrown)";
}

// Unsupported shapes throw std::invalid_argument naming the limit, before
// anything is launched (null pointers are never touched).
TEST(CudaAttentionTest, RejectsUnsupportedShapes) {
  gpu::AttentionShape big = shapeOf({1, 8, 2, 1, 160, true, 10000.0f});
  EXPECT_EQ(invalidArgumentMessage([&] {
              gpu::attention<float>(nullptr, nullptr, nullptr, nullptr, big,
                                    nullptr, 0, nullptr);
            }),
            "attention: head dimension 160 is above the CUDA kernel's limit "
            "of 128");
  EXPECT_NE(invalidArgumentMessage([&] {
              gpu::attentionGrad<bf16>(nullptr, nullptr, nullptr, nullptr,
                                       nullptr, nullptr, nullptr, big, nullptr,
                                       0, nullptr);
            }).find("limit of 128"),
            std::string::npos);
  EXPECT_THROW(gpu::attentionWorkspaceSize(big, false), std::invalid_argument);

  const gpu::AttentionShape odd = shapeOf({1, 8, 2, 1, 17, true, 10000.0f});
  EXPECT_NE(invalidArgumentMessage([&] {
              gpu::attention<float>(nullptr, nullptr, nullptr, nullptr, odd,
                                    nullptr, 0, nullptr);
            }).find("even head dimension"),
            std::string::npos);

  const gpu::AttentionShape windowed =
      shapeOf({1, 8, 2, 1, 32, false, 0.0f, {}, 4});
  EXPECT_NE(invalidArgumentMessage([&] {
              gpu::attention<float>(nullptr, nullptr, nullptr, nullptr,
                                    windowed, nullptr, 0, nullptr);
            }).find("sliding window 4 must be 0 (none) or positive with "
                    "causal attention"),
            std::string::npos);

  const gpu::AttentionShape groups = shapeOf({1, 8, 6, 4, 32, true, 0.0f});
  EXPECT_THROW(gpu::attentionGradWorkspaceSize(groups, false),
               std::invalid_argument);

  // Too small a workspace (the backward always needs lse and delta).
  const gpu::AttentionShape ok = shapeOf({1, 8, 2, 1, 32, true, 0.0f});
  EXPECT_EQ(gpu::attentionWorkspaceSize(ok, false), 0u);
  EXPECT_GT(gpu::attentionGradWorkspaceSize(ok, false), 0u);
  EXPECT_NE(invalidArgumentMessage([&] {
              gpu::attentionGrad<float>(nullptr, nullptr, nullptr, nullptr,
                                        nullptr, nullptr, nullptr, ok, nullptr,
                                        0, nullptr);
            }).find("workspace"),
            std::string::npos);
}

} // namespace

int main(int argc, char **argv) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    std::printf("partition-cuda-attention-tests: skipped: %s\n",
                error != cudaSuccess ? cudaGetErrorString(error)
                                     : "no CUDA device");
    return 0;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
