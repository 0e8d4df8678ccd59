//===- ReplicaProgramTest.cpp - NTP programs: loading and gradient boxes --===//
//
// A program of nonuniform replicas (ptp::Replica) nests one whole program
// per replica; the loader checks each as a program and their rows and
// degrees against each other, rejecting a bad one with one line. The
// gradient sum's common refinement pairs ranks as Megatron-LM's
// nonuniform_tp.py does: tp 4 + tp 2 gives groups {0, 4}, {1, 4}, {2, 5},
// {3, 5} for a row-split weight.
//
//===----------------------------------------------------------------------===//

#include "runtime/program/Program.h"
#include "runtime/train/ReplicaGradients.h"
#include "unittests/runtime/LoaderTesting.h"
#include "unittests/runtime/SerializeProgram.h"

#include <gtest/gtest.h>

using namespace partition;
using runtime::BufferInfo;
using runtime::DType;
using runtime::KernelId;
using runtime::Program;
using runtime::ReplicaBox;
using runtime::ReplicaProgram;
using runtime::Role;

namespace {

using testprograms::rejection;
using testprograms::roundTrip;

BufferInfo state(Role role, const char *name, std::vector<int64_t> shape,
                 uint64_t offset, bool split) {
  BufferInfo buffer;
  buffer.role = role;
  buffer.name = name;
  buffer.dtype = DType::F32;
  buffer.shape = std::move(shape);
  buffer.offset = offset;
  if (split)
    buffer.sharding = {{2}, {}};
  return buffer;
}

/// One replica's program at degree `tp` on `rows` rows: a weight "w" of
/// logical shape [8, 2] split by rows over tp, and a gain "g" [2]
/// replicated; a train_step whose AdamW updates both.
Program replicaStep(int64_t tp, int64_t rows, int64_t weightRows = 8) {
  Program program = testprograms::minimalProgram();
  program.mesh = {{"dp", 1, runtime::AxisRole::Data},
                  {"pp", 1, runtime::AxisRole::Pipeline},
                  {"tp", tp, runtime::AxisRole::Tensor}};
  program.model = {{"batch", 3}, {"vocab", 8}};
  uint64_t at = program.arenaBytes;
  auto add = [&](BufferInfo buffer) {
    buffer.elements = 1;
    for (int64_t dim : buffer.shape)
      buffer.elements *= dim;
    buffer.bytes = uint64_t(buffer.elements) * 4;
    buffer.offset = at;
    at += buffer.bytes;
    program.buffers.push_back(buffer);
    return uint32_t(program.buffers.size() - 1);
  };
  for (BufferInfo &buffer : program.buffers)
    if (buffer.role == Role::Tokens || buffer.role == Role::Targets) {
      buffer.shape = {rows, 2};
      buffer.elements = rows * 2;
      buffer.bytes = uint64_t(rows) * 8;
    }
  // Tokens and targets moved to the end, with their new sizes.
  for (BufferInfo &buffer : program.buffers)
    if (buffer.role == Role::Tokens || buffer.role == Role::Targets) {
      buffer.offset = at;
      at += buffer.bytes;
    }
  std::vector<uint32_t> adam[2];
  for (auto [index, name, shape, split] :
       {std::tuple<int, const char *, std::vector<int64_t>, bool>{
            0, "w", {weightRows / tp, 2}, tp > 1},
        {1, "g", {2}, false}}) {
    uint32_t param = add(state(Role::Param, name, shape, 0, split));
    uint32_t gradient = add(state(Role::Temporary, "", shape, 0, false));
    uint32_t m = add(state(Role::Moment1, name, shape, 0, split));
    uint32_t v = add(state(Role::Moment2, name, shape, 0, split));
    adam[index] = {param, gradient, m, v};
  }
  uint32_t step = add(state(Role::Step, "", {}, 0, false));
  program.buffers[step].dtype = DType::I32;
  uint32_t lr = add(state(Role::LearningRate, "", {}, 0, false));
  program.arenaBytes = at;
  for (const std::vector<uint32_t> &args : adam) {
    runtime::Instruction instruction;
    instruction.kernel = KernelId::AdamW;
    instruction.args = {args[0], args[1], args[2], args[3], step, lr,
                        args[0], args[2], args[3]};
    instruction.floats = {0.9f, 0.95f, 1e-8f, 0.0f};
    instruction.ints = {};
    program.functions.front().instructions.push_back(instruction);
  }
  return program;
}

/// Replicas of degrees `tps`, the batch of 3 rows split `rows`.
Program replicas(std::vector<int64_t> tps, std::vector<int64_t> rows,
                 int64_t weightRows = 8) {
  Program program;
  program.model = {{"batch", 3}, {"vocab", 8}};
  program.train = nlohmann::json::object();
  int64_t offset = 0, largest = 0;
  for (size_t i = 0; i < tps.size(); ++i) {
    ReplicaProgram replica;
    replica.tp = tps[i];
    replica.batchOffset = offset;
    replica.batchRows = rows[i];
    replica.program = std::make_shared<Program>(
        roundTrip(replicaStep(tps[i], rows[i], weightRows)));
    offset += rows[i];
    largest = std::max(largest, tps[i]);
    program.replicas.push_back(replica);
  }
  program.mesh = {{"dp", int64_t(tps.size()), runtime::AxisRole::Data},
                  {"tp", largest, runtime::AxisRole::Tensor}};
  return program;
}

TEST(ReplicaProgram, LoadsAndNumbersRanksReplicaByReplica) {
  Program program = roundTrip(replicas({2, 1}, {2, 1}));
  ASSERT_EQ(program.replicas.size(), 2u);
  EXPECT_EQ(program.devices(), 3);
  EXPECT_EQ(program.describeMesh(), "replicas tp=2,1");
  EXPECT_EQ(program.replicas[1].batchOffset, 2);
  EXPECT_EQ(program.replicaOf(0), std::make_pair(size_t(0), 0));
  EXPECT_EQ(program.replicaOf(1), std::make_pair(size_t(0), 1));
  EXPECT_EQ(program.replicaOf(2), std::make_pair(size_t(1), 0));
  EXPECT_EQ(program.replicas[0].program->devices(), 2);
}

TEST(ReplicaProgram, RejectsRowsThatDoNotFollow) {
  Program program = replicas({2, 1}, {2, 1});
  program.replicas[1].batchOffset = 1;
  EXPECT_EQ(rejection(program),
            "p.ptp replica 1: rows [1, 2) do not follow the previous "
            "replica's (row 2) or its tokens' 1 rows; recompile it");
}

TEST(ReplicaProgram, RejectsRowsThatDoNotSumToTheBatch) {
  Program program = replicas({2, 1}, {2, 1});
  program.model["batch"] = 4;
  for (ReplicaProgram &replica : program.replicas) {
    Program nested = *replica.program;
    nested.model["batch"] = 4;
    replica.program = std::make_shared<Program>(nested);
  }
  EXPECT_EQ(rejection(program), "p.ptp: the replicas' rows sum to 3, not the "
                                "step's batch of 4; recompile it");
}

TEST(ReplicaProgram, RejectsADegreeThatIsNotTheReplicaMesh) {
  Program program = replicas({2, 1}, {2, 1});
  program.replicas[1].tp = 2;
  EXPECT_EQ(rejection(program),
            "p.ptp replica 1: runs on mesh dp=1 pp=1 tp=1, not a "
            "tensor-parallel mesh of its tp 2; recompile it");
}

TEST(ReplicaProgram, RejectsAnotherModel) {
  Program program = replicas({2, 1}, {2, 1});
  Program nested = *program.replicas[0].program;
  nested.model["vocab"] = 16;
  program.replicas[0].program = std::make_shared<Program>(nested);
  EXPECT_EQ(rejection(program), "p.ptp replica 0: is compiled for another "
                                "model than the program's; recompile it");
}

TEST(ReplicaProgram, RejectsACorruptReplica) {
  Program program = replicas({2, 1}, {2, 1});
  Program nested = *program.replicas[1].program;
  nested.buffers.front().offset = uint64_t(1) << 50;
  program.replicas[1].program = std::make_shared<Program>(nested);
  EXPECT_NE(rejection(program).find("p.ptp replica 1"), std::string::npos);
}

TEST(ReplicaProgram, RejectsReplicasInsideAReplica) {
  Program program = replicas({2, 1}, {2, 1});
  program.replicas[1].program =
      std::make_shared<Program>(replicas({1, 1}, {2, 1}));
  EXPECT_EQ(rejection(program),
            "p.ptp replica 1: holds replicas itself; recompile it");
}

TEST(ReplicaBoxes, PairRanksAsMegatronDoes) {
  Program program = roundTrip(replicas({4, 2}, {2, 1}));
  std::vector<ReplicaBox> boxes = runtime::replicaBoxes(program);
  // "w" [8, 2]: rows 2 per rank of tp 4, 4 per rank of tp 2 (ranks 4, 5).
  ASSERT_EQ(boxes.size(), 5u);
  std::vector<std::vector<int>> holders = {{0, 4}, {1, 4}, {2, 5}, {3, 5}};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(boxes[i].param, "w");
    EXPECT_EQ(boxes[i].lo, (std::vector<int64_t>{int64_t(2 * i), 0}));
    EXPECT_EQ(boxes[i].hi, (std::vector<int64_t>{int64_t(2 * i + 2), 2}));
    EXPECT_EQ(boxes[i].holders, holders[i]);
    EXPECT_EQ(boxes[i].contributors, holders[i]);
  }
  // "g" [2], replicated: every rank holds it, one of each replica adds it.
  EXPECT_EQ(boxes[4].param, "g");
  EXPECT_EQ(boxes[4].holders, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  ASSERT_EQ(boxes[4].contributors.size(), 2u);
  EXPECT_LT(boxes[4].contributors[0], 4);
  EXPECT_GE(boxes[4].contributors[1], 4);
}

TEST(ReplicaBoxes, RefineDegreesThatDoNotDivideEachOther) {
  // "w" [12, 2]: 3 rows per rank of tp 4 (ranks 0-3), 4 per rank of tp 3
  // (ranks 4-6); cuts at 0, 3, 4, 6, 8, 9, 12.
  Program program = roundTrip(replicas({4, 3}, {2, 1}, 12));
  std::vector<ReplicaBox> boxes = runtime::replicaBoxes(program);
  ASSERT_EQ(boxes.size(), 7u);
  std::vector<std::pair<int64_t, int64_t>> rows = {{0, 3}, {3, 4}, {4, 6},
                                                   {6, 8}, {8, 9}, {9, 12}};
  std::vector<std::vector<int>> holders = {{0, 4}, {1, 4}, {1, 5},
                                           {2, 5}, {2, 6}, {3, 6}};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(boxes[i].lo[0], rows[i].first);
    EXPECT_EQ(boxes[i].hi[0], rows[i].second);
    EXPECT_EQ(boxes[i].holders, holders[i]);
  }
  int64_t elements = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    elements += boxes[i].elements();
  EXPECT_EQ(elements, 12 * 2);
}

TEST(ReplicaBoxes, SplitsTheStepBeforeTheOptimizer) {
  Program split = runtime::splitAtOptimizer(
      *roundTrip(replicas({2, 1}, {2, 1})).replicas[0].program);
  ASSERT_NE(split.function("train_step_update"), nullptr);
  EXPECT_EQ(split.function("train_step")->instructions.size(), 0u);
  EXPECT_EQ(split.function("train_step_update")->instructions.size(), 2u);
}

} // namespace
