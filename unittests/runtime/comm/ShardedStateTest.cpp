//===- ShardedStateTest.cpp - sharded parameters: init, save, resume ------===//
//
//   mpirun -n N partition-runtime-sharded-state-test WORKDIR    (N = 2 or 4)
//
// The trainer on a hand-built program whose parameters and moments are
// sharded over a dp=N/2 x tp=2 mesh (split over one axis, over two, along
// both dimensions, and one replicated), against the same program on one
// device. Its train_step is elementwise (m1 += p, m2 += m2, p += m1), so
// every plan computes the same logical tensors bit for bit, and:
//  - initialisation: the gathered initial state equals one device's;
//  - --save writes logical tensors: after 3 steps both checkpoints are
//    identical;
//  - --resume across plans: the sharded run resumes the single-device
//    checkpoint and the single device the sharded one, and both reach the
//    uninterrupted single-device state after 5 steps.
// The dp replicas hold different blocks of the [[dp, tp]] buffer, so this
// also checks that the start-up replica check compares like with like.
//
//===----------------------------------------------------------------------===//

#include "runtime/program/Program.h"
#include "runtime/train/Sharding.h"
#include "runtime/train/Trainer.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/SelfCommunicator.h"
#include "unittests/runtime/SerializeProgram.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

using namespace partition;
using namespace partition::runtime;
namespace ckpt = partition::runtime::checkpoint;

namespace {

int failures = 0;
int worldRank = 0;

void expect(bool condition, const std::string &what) {
  if (!condition) {
    ++failures;
    std::fprintf(stderr, "rank %d: %s\n", worldRank, what.c_str());
  }
}

constexpr uint32_t kDp = 0, kTp = 1;

struct Param {
  const char *name;
  std::vector<int64_t> logical;
  Sharding sharding;
};

// Init.cpp gives each a different distribution: N(0, 0.02), the scaled
// residual projection, and ones.
const std::vector<Param> kParams = {
    {"h.0.attn.q.weight", {8, 6}, {{kTp}, {}}},
    {"h.0.attn.c_proj.weight", {8, 6}, {{kDp, kTp}, {}}},
    {"h.0.mlp.c_fc.weight", {8, 4}, {{kTp}, {kDp}}},
    {"h.0.ln_1.weight", {8}, {}},
};

constexpr int64_t kGlobalBatch = 4, kSeq = 4;

/// The program on a dp x tp=2 mesh, or on one device when dp is 0.
Program makeProgram(int64_t dp) {
  Program program;
  std::vector<int64_t> sizes;
  if (dp > 0) {
    program.mesh = {{"dp", dp, runtime::AxisRole::Data}, {"tp", 2}};
    sizes = {dp, 2};
  }
  uint64_t offset = 0;
  auto add = [&](Role role, const std::string &name, DType dtype,
                 std::vector<int64_t> shape, Sharding sharding = {}) {
    BufferInfo buffer;
    buffer.role = role;
    buffer.name = name;
    buffer.dtype = dtype;
    buffer.elements = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      for (uint32_t axis : d < sharding.size() ? sharding[d]
                                               : std::vector<uint32_t>{})
        shape[d] /= sizes[axis];
      buffer.elements *= shape[d];
    }
    buffer.shape = shape;
    buffer.sharding = sharding;
    buffer.bytes = uint64_t(buffer.elements) * 4;
    buffer.offset = offset;
    offset += buffer.bytes;
    program.buffers.push_back(buffer);
    return uint32_t(program.buffers.size() - 1);
  };
  Function step{"train_step", {}};
  for (const Param &param : kParams) {
    Sharding sharding = dp > 0 ? param.sharding : Sharding{};
    uint32_t p = add(Role::Param, param.name, DType::F32, param.logical,
                     sharding);
    uint32_t m1 = add(Role::Moment1, param.name, DType::F32, param.logical,
                      sharding);
    uint32_t m2 = add(Role::Moment2, param.name, DType::F32, param.logical,
                      sharding);
    for (std::vector<uint32_t> args : {std::vector<uint32_t>{m1, p, m1},
                                       // m2 stays zero: a second moment
                                       // is never negative (checkpoints
                                       // refuse one), and m1 and p carry
                                       // the same shardings with values.
                                       std::vector<uint32_t>{m2, m2, m2},
                                       std::vector<uint32_t>{p, m1, p}}) {
      Instruction instruction;
      instruction.kernel = KernelId::Add;
      instruction.args = args;
      step.instructions.push_back(instruction);
    }
  }
  int64_t rows = kGlobalBatch / std::max<int64_t>(dp, 1);
  add(Role::LearningRate, "", DType::F32, {});
  add(Role::Tokens, "", DType::I32, {rows, kSeq});
  add(Role::Targets, "", DType::I32, {rows, kSeq});
  add(Role::Loss, "", DType::F32, {});
  program.arenaBytes = offset;
  program.functions.push_back(step);
  program.model = {{"vocab", 16}, {"layers", 1}, {"seq_len", kSeq}};
  program.train = nlohmann::json::object();
  // Through the loader: the program must pass its checks.
  std::string bytes = testprograms::serializeProgram(program);
  return Program::parse(reinterpret_cast<const uint8_t *>(bytes.data()),
                        bytes.size(), dp > 0 ? "sharded" : "single");
}

TrainOptions options(const std::string &name, int64_t steps,
                     const std::string &save, const std::string &resume = "") {
  TrainOptions result;
  result.program = name;
  result.steps = steps;
  result.seed = 7;
  result.evalEvery = 0;
  result.quiet = true;
  result.save = save;
  result.resume = resume;
  result.commTimeoutSeconds = 30;
  return result;
}

/// Every tensor of checkpoints `a` and `b`: the same names, shapes and bytes.
void expectSameCheckpoint(const std::string &a, const std::string &b) {
  ckpt::Checkpoint left = ckpt::openCheckpoint(a);
  ckpt::Checkpoint right = ckpt::openCheckpoint(b);
  std::string what = a + " vs " + b;
  expect(left.tensors.names().size() == 3 * kParams.size(),
         what + ": " + std::to_string(left.tensors.names().size()) +
             " tensors");
  expect(left.tensors.names().size() == right.tensors.names().size(),
         what + ": different tensor counts");
  expect(left.state.step == right.state.step, what + ": different steps");
  for (const std::string &name : left.tensors.names()) {
    if (!right.tensors.contains(name)) {
      expect(false, what + ": " + name + " missing");
      continue;
    }
    const ckpt::TensorInfo &info = left.tensors.info(name);
    if (info.shape != right.tensors.info(name).shape) {
      expect(false, what + ": " + name + " has another shape");
      continue;
    }
    std::vector<char> x(info.bytes()), y(info.bytes());
    left.tensors.readRaw(name, x.data(), x.size());
    right.tensors.readRaw(name, y.data(), y.size());
    expect(x == y, what + ": " + name + " differs");
  }
}

/// Checks that some parameter is not all zeros or ones: the runs did move
/// the state, so comparing them means something.
void expectNonTrivial(const std::string &dir) {
  ckpt::Checkpoint checkpoint = ckpt::openCheckpoint(dir);
  std::string name = std::string(kParams[1].name) + ".adam_m";
  std::vector<float> values(8 * 6);
  checkpoint.tensors.read(name, ckpt::DType::F32, {8, 6}, values.data(),
                          values.size() * 4);
  bool varied = false;
  for (float value : values)
    varied |= value != values[0];
  expect(varied, dir + ": " + name + " is constant");
}

void barrier(comm::Communicator &world, const char *what) {
  float value = 0;
  world.allReduce(&value, 1, comm::ReduceOp::Sum, {what});
}

void runAll(comm::Communicator &world, const std::string &work) {
  Program single = makeProgram(0);
  Program sharded = makeProgram(world.size() / 2);
  auto dir = [&](const char *name) { return work + "/" + name; };
  comm::SelfCommunicator self;

  if (worldRank == 0) {
    std::filesystem::remove_all(work);
    std::filesystem::create_directories(work);
    train(options("single", 0, dir("single0")), single, self);
    train(options("single", 3, dir("single3")), single, self);
    train(options("single", 5, dir("single5")), single, self);
  }
  barrier(world, "single-device runs");
  train(options("sharded", 0, dir("sharded0")), sharded, world);
  train(options("sharded", 3, dir("sharded3")), sharded, world);
  train(options("sharded", 5, dir("sharded5-from-single3"), dir("single3")),
        sharded, world);
  barrier(world, "sharded runs");
  if (worldRank == 0) {
    train(options("single", 5, dir("single5-from-sharded3"), dir("sharded3")),
          single, self);
    expectNonTrivial(dir("single3"));
    expectSameCheckpoint(dir("single0"), dir("sharded0"));
    expectSameCheckpoint(dir("single3"), dir("sharded3"));
    expectSameCheckpoint(dir("single5"), dir("sharded5-from-single3"));
    expectSameCheckpoint(dir("single5"), dir("single5-from-sharded3"));
  }
}

} // namespace

int main(int argc, char **argv) {
  auto world = comm::MpiCommunicator::world(&argc, &argv, {30.0});
  worldRank = world->rank();
  if (argc != 2 || (world->size() != 2 && world->size() != 4)) {
    std::fprintf(stderr, "usage: mpirun -n 2|4 %s WORKDIR\n", argv[0]);
    return 2;
  }
  try {
    runAll(*world, argv[1]);
  } catch (const std::exception &error) {
    // The other ranks may wait in a collective: end the job rather than
    // leave them to the timeout.
    std::fprintf(stderr, "rank %d: exception: %s\n", worldRank, error.what());
    std::fflush(stderr);
    std::abort();
  }
  float failed = float(failures);
  world->allReduce(&failed, 1, comm::ReduceOp::Max, {"result"});
  if (worldRank == 0)
    std::printf("%s\n", failed == 0 ? "sharded state: all ranks passed"
                                    : "sharded state: FAILED");
  return failed == 0 ? 0 : 1;
}
