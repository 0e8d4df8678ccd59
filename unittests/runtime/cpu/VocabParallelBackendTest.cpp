//===- VocabParallelBackendTest.cpp - the vocab-parallel kernels in programs =//
//
// One instruction per vocabulary-parallel kernel in a program (through the
// .ptp writer and loader): the CPU backend must accept their shapes
// (runtime/program/KernelArgs.cpp), pass each kernel its buffers in the order of
// runtime/program/Kernels.def and give exactly what a direct call gives; and shapes
// that disagree must be rejected before anything runs, naming the buffer.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"
#include "runtime/program/Program.h"
#include "runtime/backend/cpu/Kernels.h"
#include "unittests/runtime/cpu/BackendTesting.h"

#include <gtest/gtest.h>

#include <random>

using namespace partition;
using runtime::DType;
using runtime::Instruction;
using runtime::KernelId;
using runtime::Program;
namespace cpu = partition::runtime::cpu;

namespace {

constexpr int64_t kBatch = 2, kSeq = 3, kRows = kBatch * kSeq;
constexpr int64_t kLocalVocab = 5, kChannels = 4;
constexpr int32_t kShard = 1; // ids 5..9

/// Buffer indices, after minimalProgram's six.
enum Buf : uint32_t {
  Tokens = 6,
  Table,
  Shard,
  Embedded,
  Grad,
  TableGrad,
  Logits,
  LocalMax,
  Targets,
  TargetLogit,
  Max,
  LocalSumExp,
  SumExp,
  Target,
  Loss,
  LossGrad,
  LogitsGrad,
};

uint32_t addBuffer(Program &program, DType dtype, std::vector<int64_t> shape) {
  std::string name = "b" + std::to_string(program.buffers.size());
  return testprograms::addArenaBuffer(program, name.c_str(), dtype,
                                      std::move(shape));
}

Instruction kernel(KernelId id, std::vector<uint32_t> args) {
  Instruction instruction;
  instruction.kernel = id;
  instruction.args = std::move(args);
  return instruction;
}

Program vocabParallelProgram() {
  Program program = testprograms::minimalProgram();
  const std::vector<int64_t> bt = {kBatch, kSeq};
  const std::vector<int64_t> logits = {kBatch, kSeq, kLocalVocab};
  const std::vector<int64_t> table = {kLocalVocab, kChannels};
  const std::vector<int64_t> activation = {kBatch, kSeq, kChannels};
  for (auto [dtype, shape] :
       std::vector<std::pair<DType, std::vector<int64_t>>>{
           {DType::I32, bt},         {DType::F32, table},
           {DType::I32, {}},         {DType::F32, activation},
           {DType::F32, activation}, {DType::F32, table},
           {DType::F32, logits},     {DType::F32, bt},
           {DType::I32, bt},         {DType::F32, bt},
           {DType::F32, bt},         {DType::F32, bt},
           {DType::F32, bt},         {DType::F32, bt},
           {DType::F32, {}},         {DType::F32, {}},
           {DType::F32, logits}})
    addBuffer(program, dtype, shape);
  program.functions[0].instructions = {
      kernel(KernelId::VocabParallelEmbedding, {Tokens, Table, Shard, Embedded}),
      kernel(KernelId::VocabParallelEmbeddingGrad,
             {Grad, Tokens, Shard, TableGrad}),
      kernel(KernelId::VocabParallelMax, {Logits, LocalMax}),
      kernel(KernelId::VocabParallelTargetLogit,
             {Logits, Targets, Shard, TargetLogit}),
      kernel(KernelId::VocabParallelSumExp, {Logits, Max, LocalSumExp}),
      kernel(KernelId::VocabParallelLoss, {Max, SumExp, Target, Loss}),
      kernel(KernelId::VocabParallelCrossEntropyGrad,
             {LossGrad, Logits, Targets, Shard, Max, SumExp, LogitsGrad}),
  };
  return program;
}

using testprograms::roundTrip;

std::vector<float> randomFloats(size_t n, std::mt19937 &rng, float lo,
                                float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

TEST(VocabParallelBackend, InstructionsMatchDirectCalls) {
  Program program = roundTrip(vocabParallelProgram());
  auto backend = runtime::createCpuBackend(program);
  std::mt19937 rng(7);
  // Ids of shard 0, of this shard (its first and last) and of shard 2.
  const std::vector<int32_t> tokens = {0, 5, 9, 7, 10, 5};
  const std::vector<int32_t> targets = {9, 4, 5, 6, 14, 8};
  const int32_t shard = kShard;
  auto table = randomFloats(kLocalVocab * kChannels, rng, -1, 1);
  auto grad = randomFloats(kRows * kChannels, rng, -1, 1);
  auto logits = randomFloats(kRows * kLocalVocab, rng, -4, 4);
  auto max = randomFloats(kRows, rng, 4, 5);
  auto sumExp = randomFloats(kRows, rng, 1, 3);
  auto target = randomFloats(kRows, rng, -4, 4);
  const float lossGrad = 0.7f;
  auto write = [&](uint32_t index, const void *data) {
    backend->write(program.buffers[index], data);
  };
  write(Tokens, tokens.data());
  write(Targets, targets.data());
  write(Shard, &shard);
  write(Table, table.data());
  write(Grad, grad.data());
  write(Logits, logits.data());
  write(Max, max.data());
  write(SumExp, sumExp.data());
  write(Target, target.data());
  write(LossGrad, &lossGrad);
  backend->run(0, 1);

  auto read = [&](uint32_t index) {
    std::vector<float> values(program.buffers[index].elements);
    backend->read(program.buffers[index], values.data());
    return values;
  };
  std::vector<float> expected(kRows * kChannels);
  cpu::vocabParallelEmbedding(tokens.data(), table.data(), &shard,
                              expected.data(), kRows, kLocalVocab, kChannels);
  EXPECT_EQ(read(Embedded), expected);
  expected.assign(kLocalVocab * kChannels, 0);
  cpu::vocabParallelEmbeddingGrad(grad.data(), tokens.data(), &shard,
                                  expected.data(), kRows, kLocalVocab,
                                  kChannels);
  EXPECT_EQ(read(TableGrad), expected);
  expected.assign(kRows, 0);
  cpu::vocabParallelMax(logits.data(), expected.data(), kRows, kLocalVocab);
  EXPECT_EQ(read(LocalMax), expected);
  cpu::vocabParallelTargetLogit(logits.data(), targets.data(), &shard,
                                expected.data(), kRows, kLocalVocab);
  EXPECT_EQ(read(TargetLogit), expected);
  EXPECT_EQ(expected, (std::vector<float>{logits[0 * kLocalVocab + 4], 0,
                                          logits[2 * kLocalVocab + 0],
                                          logits[3 * kLocalVocab + 1], 0,
                                          logits[5 * kLocalVocab + 3]}));
  cpu::vocabParallelSumExp(logits.data(), max.data(), expected.data(), kRows,
                           kLocalVocab);
  EXPECT_EQ(read(LocalSumExp), expected);
  float loss = 0;
  cpu::vocabParallelLoss(max.data(), sumExp.data(), target.data(), &loss,
                         kRows);
  EXPECT_EQ(read(Loss), std::vector<float>{loss});
  expected.assign(kRows * kLocalVocab, 0);
  cpu::vocabParallelCrossEntropyGrad(&lossGrad, logits.data(), targets.data(),
                                     &shard, max.data(), sumExp.data(),
                                     expected.data(), kRows, kLocalVocab);
  EXPECT_EQ(read(LogitsGrad), expected);
}

/// The backend's message for a program whose instruction #i was changed.
std::string rejection(void (*change)(Program &)) {
  Program program = vocabParallelProgram();
  change(program);
  return testprograms::backendRejection(program);
}

TEST(VocabParallelBackend, RejectsShapesThatDisagree) {
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[0].args[2] = Loss; // f32 shard
            }),
            "train_step instruction #0 (vocab_parallel_embedding): shard "
            "must hold i32, not f32");
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[1].args[2] = Tokens; // [2,3] shard
            }),
            "train_step instruction #1 (vocab_parallel_embedding_grad): "
            "shard [2,3] must be a scalar");
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[2].args[1] = Table; // [5,4]
            }),
            "train_step instruction #2 (vocab_parallel_max): max [5,4] does "
            "not hold one value per row of logits [2,3,5]");
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[3].args[1] = Shard; // targets []
            }),
            "train_step instruction #3 (vocab_parallel_target_logit): "
            "targets [] do not match logits [2,3,5]");
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[4].args[1] = Loss; // max []
            }),
            "train_step instruction #4 (vocab_parallel_sum_exp): max [] does "
            "not hold one value per row of logits [2,3,5]");
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[5].args[1] = Logits;
            }),
            "train_step instruction #5 (vocab_parallel_loss): sum_exp and "
            "max: [2,3,5] and [2,3] differ in size");
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[6].args[5] = Loss; // sum_exp []
            }),
            "train_step instruction #6 (vocab_parallel_cross_entropy_grad): "
            "sum_exp [] does not hold one value per row of logits [2,3,5]");
  EXPECT_EQ(rejection([](Program &p) {
              p.functions[0].instructions[6].args[6] = Embedded;
            }),
            "train_step instruction #6 (vocab_parallel_cross_entropy_grad): "
            "logits gradient: [2,3,5] and [2,3,4] differ in size");
}

/// The masked kernels of a padded vocabulary of 8 ids: this shard's ids 5..9
/// are 5, 6, 7 and two padding ids.
constexpr int64_t kPaddedVocab = 8;

Program maskedProgram() {
  Program program = vocabParallelProgram();
  auto masked = [](KernelId id, std::vector<uint32_t> args) {
    Instruction instruction = kernel(id, std::move(args));
    instruction.ints = {kPaddedVocab};
    return instruction;
  };
  program.functions[0].instructions = {
      masked(KernelId::VocabParallelMaskedMax, {Logits, Shard, LocalMax}),
      masked(KernelId::VocabParallelMaskedSumExp,
             {Logits, Max, Shard, LocalSumExp}),
      masked(KernelId::VocabParallelMaskedCrossEntropyGrad,
             {LossGrad, Logits, Targets, Shard, Max, SumExp, LogitsGrad}),
  };
  return program;
}

// The padding columns hold the largest logits (a kernel that reads them
// gives another max); the instructions give what direct masked calls give,
// and a gradient of exactly zero at the padding.
TEST(VocabParallelBackend, MaskedInstructionsMatchDirectCalls) {
  Program program = roundTrip(maskedProgram());
  auto backend = runtime::createCpuBackend(program);
  std::mt19937 rng(11);
  const std::vector<int32_t> targets = {7, 4, 5, 6, 0, 2};
  const int32_t shard = kShard;
  auto logits = randomFloats(kRows * kLocalVocab, rng, -4, 4);
  for (int64_t r = 0; r < kRows; ++r)
    logits[r * kLocalVocab + 3] = logits[r * kLocalVocab + 4] = 50.0f;
  auto max = randomFloats(kRows, rng, 4, 5);
  auto sumExp = randomFloats(kRows, rng, 1, 3);
  const float lossGrad = 0.7f;
  auto write = [&](uint32_t index, const void *data) {
    backend->write(program.buffers[index], data);
  };
  write(Targets, targets.data());
  write(Shard, &shard);
  write(Logits, logits.data());
  write(Max, max.data());
  write(SumExp, sumExp.data());
  write(LossGrad, &lossGrad);
  backend->run(0, 1);
  auto read = [&](uint32_t index) {
    std::vector<float> values(program.buffers[index].elements);
    backend->read(program.buffers[index], values.data());
    return values;
  };

  std::vector<float> expected(kRows);
  cpu::vocabParallelMax(logits.data(), expected.data(), kRows, kLocalVocab,
                        &shard, kPaddedVocab);
  EXPECT_EQ(read(LocalMax), expected);
  for (int64_t r = 0; r < kRows; ++r)
    EXPECT_LT(expected[r], 50.0f) << "row " << r;
  cpu::vocabParallelSumExp(logits.data(), max.data(), expected.data(), kRows,
                           kLocalVocab, &shard, kPaddedVocab);
  EXPECT_EQ(read(LocalSumExp), expected);
  expected.assign(kRows * kLocalVocab, 1.0f);
  cpu::vocabParallelCrossEntropyGrad(&lossGrad, logits.data(), targets.data(),
                                     &shard, max.data(), sumExp.data(),
                                     expected.data(), kRows, kLocalVocab,
                                     kPaddedVocab);
  std::vector<float> grad = read(LogitsGrad);
  EXPECT_EQ(grad, expected);
  for (int64_t r = 0; r < kRows; ++r)
    EXPECT_TRUE(grad[r * kLocalVocab + 3] == 0.0f &&
                grad[r * kLocalVocab + 4] == 0.0f)
        << "row " << r;
}

TEST(VocabParallelBackend, RejectsBadMaskedInstructions) {
  auto rejected = [](void (*change)(Program &)) -> std::string {
    Program program = maskedProgram();
    change(program);
    return testprograms::backendRejection(program);
  };
  EXPECT_EQ(rejected([](Program &p) {
              p.functions[0].instructions[0].ints = {0};
            }),
            "train_step instruction #0 (vocab_parallel_masked_max): the "
            "logical vocabulary 0 is not in [1, 2^31]");
  EXPECT_EQ(rejected([](Program &p) {
              p.functions[0].instructions[1].args[2] = Loss; // f32 shard
            }),
            "train_step instruction #1 (vocab_parallel_masked_sum_exp): "
            "shard must hold i32, not f32");
  EXPECT_EQ(rejected([](Program &p) {
              p.functions[0].instructions[0].args[1] = Tokens; // [2,3] shard
            }),
            "train_step instruction #0 (vocab_parallel_masked_max): shard "
            "[2,3] must be a scalar");
}

} // namespace
