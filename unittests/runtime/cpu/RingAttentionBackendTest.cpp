//===- RingAttentionBackendTest.cpp - the ring attention kernels in programs =//
//
// One instruction per ring attention kernel in a program (through the .ptp
// writer and loader): the CPU backend must accept their shapes
// (runtime/program/KernelArgs.cpp), pass each kernel its buffers and
// parameters in the order of runtime/program/Kernels.def and give exactly
// what a direct call gives; shapes and types that disagree must be rejected
// before anything runs, naming the buffer.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"
#include "runtime/backend/cpu/Kernels.h"
#include "runtime/program/Program.h"
#include "unittests/runtime/cpu/BackendTesting.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>

using namespace partition;
using runtime::DType;
using runtime::Instruction;
using runtime::KernelId;
using runtime::Program;
namespace cpu = partition::runtime::cpu;

namespace {

// Two query heads on one key-value head of D = 4; a block of 3 keys.
constexpr int64_t kBatch = 2, kQueries = 4, kKeys = 3, kHeads = 2, kDim = 4;

/// Buffer indices, after minimalProgram's six.
enum Buf : uint32_t {
  Query = 6,
  Key,
  Value,
  QueryPositions,
  KeyPositions,
  Out,
  Lse,
  MergedOut,
  MergedLse,
  Grad,
  QueryGrad,
  KeyGrad,
  ValueGrad,
};

uint32_t addBuffer(Program &program, DType dtype, std::vector<int64_t> shape) {
  std::string name = "b" + std::to_string(program.buffers.size());
  return testprograms::addArenaBuffer(program, name.c_str(), dtype,
                                      std::move(shape));
}

/// Causal, RoPE at theta 1e4 scaled linearly by 2, a window of 3.
Instruction kernel(KernelId id, std::vector<uint32_t> args) {
  Instruction instruction;
  instruction.kernel = id;
  instruction.args = std::move(args);
  if (id != KernelId::AttentionMerge) {
    instruction.ints = {kHeads, 1, 1, 3};
    instruction.floats = {1e4f, 1.0f, 2.0f, 0.0f, 0.0f, 0.0f};
  }
  return instruction;
}

/// The activations in `activation` (f32, or bf16 as mixed precision has
/// them); positions i32 and every lse f32 either way.
Program ringProgram(DType activation = DType::F32) {
  Program program = testprograms::minimalProgram();
  const DType a = activation;
  const std::vector<int64_t> query = {kBatch, kQueries, kHeads * kDim};
  const std::vector<int64_t> key = {kBatch, kKeys, kDim};
  const std::vector<int64_t> lse = {kBatch, kHeads, kQueries};
  for (auto [dtype, shape] :
       std::vector<std::pair<DType, std::vector<int64_t>>>{
           {a, query},            {a, key},
           {a, key},              {DType::I32, {kQueries}},
           {DType::I32, {kKeys}}, {a, query},
           {DType::F32, lse},     {a, query},
           {DType::F32, lse},     {a, query},
           {a, query},            {a, key},
           {a, key}})
    addBuffer(program, dtype, shape);
  program.functions[0].instructions = {
      kernel(KernelId::AttentionBlock,
             {Query, Key, Value, QueryPositions, KeyPositions, Out, Lse}),
      kernel(KernelId::AttentionMerge,
             {Out, Lse, Out, Lse, MergedOut, MergedLse}),
      kernel(KernelId::AttentionBlockGrad,
             {Grad, Query, Key, Value, QueryPositions, KeyPositions,
              MergedOut, MergedLse, QueryGrad, KeyGrad, ValueGrad}),
  };
  return program;
}

using testprograms::roundTrip;

std::vector<float> randomFloats(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// The attention parameters ringProgram's instructions carry, for the
/// direct calls the program's results are compared with.
cpu::AttentionConfig programConfig() {
  cpu::AttentionConfig config;
  config.batch = kBatch;
  config.seq = kQueries;
  config.numHeads = kHeads;
  config.numKvHeads = 1;
  config.headDim = kDim;
  config.ropeTheta = 1e4f;
  config.ropeScaling.kind = runtime::RopeScalingKind::Linear;
  config.ropeScaling.factor = 2.0;
  config.window = 3;
  return config;
}

TEST(RingAttentionBackend, InstructionsMatchDirectCalls) {
  Program program = roundTrip(ringProgram());
  auto backend = runtime::createCpuBackend(program);
  std::mt19937 rng(7);
  // Zigzag-like positions: the queries of chunks 0 and 3 of 4, a block of
  // keys some of which no query sees.
  const std::vector<int32_t> queryPositions = {0, 1, 6, 7};
  const std::vector<int32_t> keyPositions = {1, 5, 2};
  auto q = randomFloats(kBatch * kQueries * kHeads * kDim, rng);
  auto k = randomFloats(kBatch * kKeys * kDim, rng);
  auto v = randomFloats(kBatch * kKeys * kDim, rng);
  auto grad = randomFloats(q.size(), rng);
  auto write = [&](uint32_t index, const void *data) {
    backend->write(program.buffers[index], data);
  };
  write(Query, q.data());
  write(Key, k.data());
  write(Value, v.data());
  write(QueryPositions, queryPositions.data());
  write(KeyPositions, keyPositions.data());
  write(Grad, grad.data());
  backend->run(0, 1);

  auto read = [&](uint32_t index) {
    std::vector<float> values(program.buffers[index].elements);
    backend->read(program.buffers[index], values.data());
    return values;
  };
  cpu::AttentionConfig config = programConfig();
  std::vector<float> out(q.size()), lse(kBatch * kHeads * kQueries);
  cpu::attentionBlock(q.data(), k.data(), v.data(), queryPositions.data(),
                      keyPositions.data(), out.data(), lse.data(), config,
                      kKeys);
  EXPECT_EQ(read(Out), out);
  EXPECT_EQ(read(Lse), lse);
  // Query 0 sees no key (they are at 1 and later): -inf; query 7 only key
  // 5 (its window is 5..7).
  EXPECT_EQ(lse[0], -INFINITY);
  EXPECT_TRUE(std::isfinite(lse[3]));
  std::vector<float> merged(q.size()), mergedLse(lse.size());
  cpu::attentionMerge(out.data(), lse.data(), out.data(), lse.data(),
                      merged.data(), mergedLse.data(), kBatch, kQueries,
                      kHeads, kDim);
  EXPECT_EQ(read(MergedOut), merged);
  EXPECT_EQ(read(MergedLse), mergedLse);
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  cpu::attentionBlockGrad(grad.data(), q.data(), k.data(), v.data(),
                          queryPositions.data(), keyPositions.data(),
                          merged.data(), mergedLse.data(), dq.data(),
                          dk.data(), dv.data(), config, kKeys);
  EXPECT_EQ(read(QueryGrad), dq);
  EXPECT_EQ(read(KeyGrad), dk);
  EXPECT_EQ(read(ValueGrad), dv);
}

// bf16 activations (mixed precision) with f32 log-sum-exps: the loader
// accepts the mix, the backend widens and rounds the bf16 buffers around
// the fp32 kernels, so the outputs are the fp32 kernels' on the rounded
// inputs, rounded.
TEST(RingAttentionBackend, Bf16ActivationsWithF32Lse) {
  Program program = roundTrip(ringProgram(DType::BF16));
  auto backend = runtime::createCpuBackend(program);
  std::mt19937 rng(9);
  auto bf16 = [](std::vector<float> x) {
    std::vector<uint16_t> y(x.size());
    cpu::roundToBFloat16(x.data(), y.data(), cpu::Index(x.size()));
    cpu::widenBFloat16(y.data(), x.data(), cpu::Index(x.size()));
    return std::make_pair(y, x);
  };
  auto [q16, q] = bf16(randomFloats(kBatch * kQueries * kHeads * kDim, rng));
  auto [k16, k] = bf16(randomFloats(kBatch * kKeys * kDim, rng));
  auto [v16, v] = bf16(randomFloats(kBatch * kKeys * kDim, rng));
  auto [g16, g] = bf16(randomFloats(q.size(), rng));
  const std::vector<int32_t> queryPositions = {0, 1, 6, 7};
  const std::vector<int32_t> keyPositions = {1, 2, 5};
  backend->write(program.buffers[Query], q16.data());
  backend->write(program.buffers[Key], k16.data());
  backend->write(program.buffers[Value], v16.data());
  backend->write(program.buffers[Grad], g16.data());
  backend->write(program.buffers[QueryPositions], queryPositions.data());
  backend->write(program.buffers[KeyPositions], keyPositions.data());
  backend->run(0, 1);

  cpu::AttentionConfig config = programConfig();
  std::vector<float> out(q.size()), lse(kBatch * kHeads * kQueries);
  cpu::attentionBlock(q.data(), k.data(), v.data(), queryPositions.data(),
                      keyPositions.data(), out.data(), lse.data(), config,
                      kKeys);
  std::vector<float> readLse(lse.size());
  backend->read(program.buffers[Lse], readLse.data());
  EXPECT_EQ(readLse, lse);
  std::vector<uint16_t> out16(out.size()), readOut(out.size());
  cpu::roundToBFloat16(out.data(), out16.data(), cpu::Index(out.size()));
  backend->read(program.buffers[Out], readOut.data());
  EXPECT_EQ(readOut, out16);
}

/// The backend's message for a program changed by `change`.
std::string rejection(void (*change)(Program &)) {
  Program program = ringProgram();
  change(program);
  return testprograms::backendRejection(program);
}

TEST(RingAttentionBackend, RejectsShapesThatDisagree) {
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[0].args[3] = Lse; // f32 positions
            }),
            "train_step instruction #0 (attention_block): query_positions "
            "must hold i32, not f32");
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[0].args[4] = QueryPositions;
            }),
            "train_step instruction #0 (attention_block): key_positions [4] "
            "must be [3]");
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[0].args[6] = MergedOut;
            }),
            "train_step instruction #0 (attention_block): lse [2,4,8] must "
            "be [B, H, Tq] of the query [2,4,8]");
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[0].ints[3] = -1;
            }),
            "train_step instruction #0 (attention_block): sliding window -1 "
            "must be 0 (none) or positive with causal attention");
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[1].args[3] = Out;
            }),
            "train_step instruction #1 (attention_merge): lse_b and lse must "
            "be shaped like lse_a [2,2,4]");
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[2].args[7] = KeyPositions;
            }),
            "train_step instruction #2 (attention_block_grad): lse must hold "
            "f32, not i32");
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[2].args[9] = QueryGrad;
            }),
            "train_step instruction #2 (attention_block_grad): gradients "
            "must be shaped like query, key and value");
}

} // namespace
