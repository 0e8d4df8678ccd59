//===- ProgramLoaderTest.cpp - the loader's mesh and collective checks ----===//
//
// Programs built field by field (SerializeProgram.h), each with one thing
// wrong, must be rejected before anything runs with one line naming it; and
// every single-byte corruption of a program with a mesh and collectives is
// rejected or runs, never crashes.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"
#include "runtime/program/Program.h"
#include "runtime/comm/MeshCommunicators.h"
#include "runtime/comm/SelfCommunicator.h"
#include "unittests/runtime/LoaderTesting.h"
#include "unittests/runtime/SerializeProgram.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

using namespace partition;
using runtime::Collective;
using runtime::Instruction;
using runtime::Program;
using runtime::ReduceKind;

namespace {

using testprograms::addArenaBuffer;
using testprograms::allReduce;
using testprograms::gelu;
using testprograms::meshProgram;
using testprograms::rejection;
using testprograms::roundTrip;
using testprograms::startedProgram;
using testprograms::waitFor;

// The data-parallel axis is the one with the data role, whatever its name.
TEST(ProgramLoader, AxisRolesRoundTrip) {
  Program program = testprograms::minimalProgram();
  program.mesh = {{"model", 2, runtime::AxisRole::Tensor},
                  {"replica", 2, runtime::AxisRole::Data}};
  Program loaded = roundTrip(program);
  ASSERT_EQ(loaded.mesh.size(), 2u);
  EXPECT_EQ(loaded.mesh[0].role, runtime::AxisRole::Tensor);
  EXPECT_EQ(loaded.mesh[1].role, runtime::AxisRole::Data);
  EXPECT_EQ(loaded.dataAxisIndex(), 1);
  program.mesh = {{"dp", 2}, {"tp", 2}};
  EXPECT_EQ(roundTrip(program).dataAxisIndex(), -1);
}

TEST(ProgramLoader, MeshAndCollectivesRoundTrip) {
  Program program = meshProgram();
  program.functions[0].instructions.push_back(
      allReduce({2}, {0, 2}, "loss", ReduceKind::Max));
  Program loaded = roundTrip(program);
  ASSERT_EQ(loaded.mesh.size(), 3u);
  EXPECT_EQ(loaded.mesh[2].name, "tp");
  EXPECT_EQ(loaded.devices(), 4);
  EXPECT_EQ(loaded.describeMesh(), "mesh dp=2 pp=1 tp=2");
  EXPECT_EQ(loaded.axisIndex("tp"), 2);
  EXPECT_EQ(loaded.axisIndex("ep"), -1);
  EXPECT_TRUE(loaded.hasCollectives());
  const auto &instructions = loaded.functions[0].instructions;
  ASSERT_EQ(instructions.size(), 2u);
  ASSERT_TRUE(instructions[1].collective);
  EXPECT_EQ(instructions[1].collective->reduce, ReduceKind::Max);
  EXPECT_EQ(instructions[1].collective->axes, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(instructions[1].collective->label, "loss");
  EXPECT_EQ(instructions[0].args, (std::vector<uint32_t>{0, 1}));
}

TEST(ProgramLoader, NoMeshIsOneDevice) {
  Program loaded = roundTrip(testprograms::minimalProgram());
  EXPECT_TRUE(loaded.mesh.empty());
  EXPECT_EQ(loaded.devices(), 1);
  EXPECT_EQ(loaded.describeMesh(), "no mesh");
  EXPECT_FALSE(loaded.hasCollectives());
}

TEST(ProgramLoader, UnlabelledCollectiveIsNamedByPosition) {
  Program program = meshProgram();
  program.functions[0].instructions[0].collective->label = "";
  EXPECT_EQ(roundTrip(program).functions[0].instructions[0].collective->label,
            "train_step instruction #0");
}

TEST(ProgramLoader, StartedCollectivesRoundTrip) {
  Program loaded = roundTrip(startedProgram());
  const std::vector<Instruction> &code = loaded.functions[0].instructions;
  ASSERT_EQ(code.size(), 3u);
  EXPECT_TRUE(code[0].collective->started);
  EXPECT_FALSE(code[0].isKernel());
  EXPECT_TRUE(code[1].isKernel());
  ASSERT_TRUE(code[2].waitFor);
  EXPECT_EQ(*code[2].waitFor, 0u);
  EXPECT_FALSE(code[2].isKernel());
  // Not started: the collective is done when its instruction ends.
  EXPECT_FALSE(roundTrip(meshProgram()).functions[0].instructions[0]
                   .collective->started);
}

// A wait without its start, a start without its wait, two waits, and an
// instruction on the buffers of a collective in flight: one line each.
TEST(ProgramLoader, RejectsBadStartsAndWaits) {
  auto broken = [](auto change) {
    Program program = startedProgram();
    change(program.functions[0].instructions);
    return rejection(program);
  };
  using Code = std::vector<Instruction>;
  EXPECT_EQ(broken([](Code &code) { code[0].collective->started = false; }),
            "p.ptp: train_step instruction #2 waits for instruction #0, "
            "which is not an earlier started collective or tier copy");
  EXPECT_EQ(broken([](Code &code) { code[2].waitFor = 1; }),
            "p.ptp: train_step instruction #2 waits for instruction #1, "
            "which is not an earlier started collective or tier copy");
  EXPECT_EQ(broken([](Code &code) { code[2].waitFor = 7; }),
            "p.ptp: train_step instruction #2 waits for instruction #7, "
            "which is not an earlier started collective or tier copy");
  EXPECT_EQ(broken([](Code &code) { code.pop_back(); }),
            "p.ptp: train_step instruction #0 (grads bucket 0) is started "
            "but never waited for");
  EXPECT_EQ(broken([](Code &code) { code.push_back(waitFor(0)); }),
            "p.ptp: train_step instruction #3 waits for train_step "
            "instruction #0 again (first waited for by instruction #2)");
  // gelu of a into a, while the bucket [a, b] is being reduced.
  EXPECT_EQ(broken([](Code &code) { code[1] = gelu(0, 0); }),
            "p.ptp: train_step instruction #1 touches the buffers of "
            "train_step instruction #0 (grads bucket 0), which runs until its "
            "wait at instruction #2");
  EXPECT_EQ(broken([](Code &code) { code[2].args = {0}; }),
            "p.ptp: train_step instruction #2 (wait) has buffers or "
            "parameters; a wait takes none");
  EXPECT_EQ(broken([](Code &code) { code[2].transfer = runtime::Transfer{}; }),
            "p.ptp: train_step instruction #2 is more than one of a "
            "collective, a transfer, a wait and a tier copy");
}

/// Context parallelism's ring: minimalProgram on a cp = 2 mesh with two
/// more [4] buffers, #6 "next" and #7 "out"; a started ring shift of a (#0)
/// into next, then gelu of a into out (a read of the block being sent),
/// then the wait.
Program ringProgram() {
  Program program = testprograms::minimalProgram();
  program.mesh = {{"dp", 1, runtime::AxisRole::Data},
                  {"pp", 1},
                  {"cp", 2, runtime::AxisRole::Context},
                  {"tp", 1}};
  program.sequenceChunks = 4;
  for (const char *name : {"next", "out"}) {
    runtime::BufferInfo buffer = program.buffers[0];
    buffer.name = name;
    buffer.offset = program.arenaBytes;
    program.arenaBytes += buffer.bytes;
    program.buffers.push_back(buffer);
  }
  Instruction shift;
  shift.args = {0, 6};
  shift.collective = Collective{runtime::CollectiveKind::RingShift,
                                ReduceKind::Sum, {2}, "ring k 1"};
  shift.collective->started = true;
  std::vector<Instruction> &code = program.functions[0].instructions;
  code.push_back(shift);
  code.push_back(gelu(0, 7));
  code.push_back(waitFor(0));
  return program;
}

TEST(ProgramLoader, RingShiftRoundTripsAndItsInputMayBeRead) {
  Program loaded = roundTrip(ringProgram());
  EXPECT_EQ(loaded.mesh[2].role, runtime::AxisRole::Context);
  EXPECT_EQ(loaded.sequenceChunks, 4);
  const std::vector<Instruction> &code = loaded.functions[0].instructions;
  ASSERT_EQ(code.size(), 3u);
  EXPECT_EQ(code[0].collective->kind, runtime::CollectiveKind::RingShift);
  EXPECT_TRUE(code[0].collective->started);
}

// While a ring shift runs its input may be read, not written, and its
// output not touched; its buffers are one shape; the zigzag order is even.
TEST(ProgramLoader, RejectsBadRingShifts) {
  auto broken = [](auto change) {
    Program program = ringProgram();
    change(program);
    return rejection(program);
  };
  EXPECT_EQ(broken([](Program &p) {
              p.functions[0].instructions[1] = gelu(7, 0);
            }),
            "p.ptp: train_step instruction #1 touches the buffers of "
            "train_step instruction #0 (ring k 1), which runs until its "
            "wait at instruction #2");
  EXPECT_EQ(broken([](Program &p) {
              p.functions[0].instructions[1] = gelu(6, 7);
            }),
            "p.ptp: train_step instruction #1 touches the buffers of "
            "train_step instruction #0 (ring k 1), which runs until its "
            "wait at instruction #2");
  EXPECT_NE(broken([](Program &p) {
              p.functions[0].instructions[0].args = {0, 2};
            }).find("must be its input's [4]"),
            std::string::npos);
  EXPECT_EQ(broken([](Program &p) { p.sequenceChunks = 3; }),
            "p.ptp: sequence_chunks = 3 is neither 0, 1 nor a positive even "
            "count; the file is corrupt");
}

TEST(ProgramLoader, RejectsBadMeshes) {
  Program program = meshProgram();
  program.mesh[1].size = 0;
  EXPECT_EQ(rejection(program),
            "p.ptp: mesh axis 'pp' has size 0; sizes must be positive");
  program = meshProgram();
  program.mesh[2].size = -3;
  EXPECT_EQ(rejection(program),
            "p.ptp: mesh axis 'tp' has size -3; sizes must be positive");
  program = meshProgram();
  program.mesh[2].name = "dp";
  EXPECT_EQ(rejection(program), "p.ptp: mesh axis 'dp' appears twice");
  program = meshProgram();
  program.mesh[1].name = "";
  EXPECT_EQ(rejection(program), "p.ptp: mesh axis #1 has no name");
  program = meshProgram();
  program.mesh = {{"dp", 1 << 11, runtime::AxisRole::Data}, {"pp", 1 << 11}};
  EXPECT_EQ(rejection(program), "p.ptp: the mesh has more than 1048576 "
                                "devices; the file is corrupt");
  program.mesh = {{"dp", int64_t(1) << 62, runtime::AxisRole::Data}, {"pp", int64_t(1) << 62}};
  EXPECT_NE(rejection(program).find("more than 1048576 devices"),
            std::string::npos);
}

TEST(ProgramLoader, RejectsBadCollectives) {
  const std::string what =
      "p.ptp: train_step instruction #0 (all_reduce 'grads bucket 0') ";
  auto broken = [](auto change) {
    Program program = meshProgram();
    change(program, program.functions[0].instructions[0]);
    return rejection(program);
  };
  EXPECT_EQ(broken([](Program &p, Instruction &) { p.mesh.clear(); }),
            what + "needs a device mesh, but the program has none");
  EXPECT_EQ(broken([](Program &, Instruction &i) { i.collective->axes = {}; }),
            what + "names no mesh axis");
  EXPECT_EQ(broken([](Program &, Instruction &i) { i.collective->axes = {3}; }),
            what + "names mesh axis #3 of 3");
  EXPECT_EQ(broken([](Program &, Instruction &i) {
              i.collective->axes = {2, 0};
            }),
            what +
                "has mesh axes out of order or repeated; they must be strictly "
                "increasing");
  EXPECT_EQ(broken([](Program &, Instruction &i) {
              i.collective->axes = {0, 0};
            }),
            what +
                "has mesh axes out of order or repeated; they must be strictly "
                "increasing");
  EXPECT_EQ(broken([](Program &, Instruction &i) { i.args = {}; }),
            what + "has no buffers");
  EXPECT_EQ(broken([](Program &, Instruction &i) {
              i.args = {0, 9};
            }),
            what + "refers to buffer #9 of 6");
  EXPECT_EQ(broken([](Program &, Instruction &i) {
              i.args = {0, 3};
            }),
            what + "reduces buffer #3 ('tokens'), which is neither f32 nor "
                   "bf16");
  // A bucket is reduced as one array of one type.
  EXPECT_EQ(broken([](Program &p, Instruction &) {
              p.buffers[1].dtype = runtime::DType::BF16;
            }),
            what + "mixes f32 and bf16 buffers in one bucket");
  EXPECT_EQ(broken([](Program &, Instruction &i) {
              i.args = {1, 0, 1};
            }),
            what + "lists buffer #1 twice");
  EXPECT_EQ(broken([](Program &p, Instruction &) {
              p.buffers[2].offset = p.buffers[1].offset + 4;
            }),
            "");
  EXPECT_EQ(broken([](Program &p, Instruction &i) {
              i.args = {0, 2};
              p.buffers[2].offset = 8; // inside buffer #0
            }),
            what + "reduces buffers #0 and #2, which overlap in the arena");
  EXPECT_EQ(broken([](Program &, Instruction &i) { i.floats = {1.0f}; }),
            what + "has integer or float parameters; collectives take none");
  EXPECT_EQ(broken([](Program &, Instruction &i) {
              i.collective->reduce = static_cast<ReduceKind>(3);
            }),
            "p.ptp: train_step instruction #0 has an unknown reduction 3");
  EXPECT_EQ(
      broken([](Program &, Instruction &i) {
        i.collective->kind = static_cast<runtime::CollectiveKind>(5);
      }),
      "p.ptp: train_step instruction #0 has an unknown collective kind 5");
}

/// minimalProgram on a dp=2 x tp=2 mesh, plus f32 buffers #6 "x" [2, 3, 4]
/// and #7 "y" [2, 6, 4] and an i32 scalar #8, with one collective over tp
/// along dimension 1: x -> y for a gather, y -> x for a scatter.
Program blockProgram(runtime::CollectiveKind kind) {
  Program program = testprograms::minimalProgram();
  program.mesh = {{"dp", 2, runtime::AxisRole::Data}, {"pp", 1}, {"tp", 2}};
  auto add = [&](const char *name, runtime::DType dtype,
                 std::vector<int64_t> shape) {
    addArenaBuffer(program, name, dtype, shape);
  };
  add("x", runtime::DType::F32, {2, 3, 4});
  add("y", runtime::DType::F32, {2, 6, 4});
  add("i", runtime::DType::I32, {});
  bool gather = kind == runtime::CollectiveKind::AllGather;
  Instruction instruction;
  instruction.args = gather ? std::vector<uint32_t>{6, 7}
                            : std::vector<uint32_t>{7, 6};
  instruction.collective =
      Collective{kind, ReduceKind::Sum, {2}, "block", /*dim=*/1};
  program.functions[0].instructions.push_back(instruction);
  return program;
}

TEST(ProgramLoader, BlockCollectivesRoundTrip) {
  for (auto kind : {runtime::CollectiveKind::AllGather,
                    runtime::CollectiveKind::ReduceScatter}) {
    Program loaded = roundTrip(blockProgram(kind));
    const Instruction &instruction = loaded.functions[0].instructions[0];
    ASSERT_TRUE(instruction.collective);
    EXPECT_EQ(instruction.collective->kind, kind);
    EXPECT_EQ(instruction.collective->dim, 1u);
    EXPECT_EQ(instruction.collective->axes, std::vector<uint32_t>{2});
    EXPECT_EQ(instruction.args, (std::vector<uint32_t>{
                                    kind == runtime::CollectiveKind::AllGather
                                        ? 6u
                                        : 7u,
                                    kind == runtime::CollectiveKind::AllGather
                                        ? 7u
                                        : 6u}));
  }
}

// An all_to_all of y [2, 6, 4] over tp (2 ranks): cut along dimension 1,
// the blocks received concatenated along dimension 0: [4, 3, 4].
TEST(ProgramLoader, AllToAllRoundTripsAndIsChecked) {
  auto program = [] {
    Program p = blockProgram(runtime::CollectiveKind::ReduceScatter);
    // The output, #9 "z" [4, 3, 4], past the end of the arena.
    runtime::BufferInfo z = p.buffers[7];
    z.name = "z";
    z.shape = {4, 3, 4};
    z.offset = p.arenaBytes;
    p.arenaBytes += z.bytes;
    p.buffers.push_back(z);
    Instruction &i = p.functions[0].instructions[0];
    i.args = {7, 9};
    i.collective->kind = runtime::CollectiveKind::AllToAll;
    i.collective->label = "dispatch";
    i.collective->concatDim = 0;
    return p;
  };
  Program loaded = roundTrip(program());
  const Collective &collective = *loaded.functions[0].instructions[0].collective;
  EXPECT_EQ(collective.kind, runtime::CollectiveKind::AllToAll);
  EXPECT_EQ(collective.dim, 1u);
  EXPECT_EQ(collective.concatDim, 0u);
  const std::string what =
      "p.ptp: train_step instruction #0 (all_to_all 'dispatch') ";
  Program same = program();
  same.functions[0].instructions[0].collective->concatDim = 1;
  EXPECT_EQ(rejection(same),
            what + "has concat_dim 1, which must be a dimension of its input "
                   "[2,6,4] other than split_dim 1");
  Program wrong = program();
  wrong.buffers[9].shape = {2, 3, 8};
  EXPECT_EQ(rejection(wrong),
            what + "output [2,3,8] must be [4,3,4] (input [2,6,4], group of "
                   "2)");
  Program indivisible = program();
  indivisible.functions[0].instructions[0].collective->axes = {0, 2};
  indivisible.buffers[9].shape = {8, 1, 4};
  EXPECT_EQ(rejection(indivisible),
            what + "cuts dimension 1 of [2,6,4] into 4 blocks, which does not "
                   "divide");
}

// A counted all_to_all (mixture-of-experts buffers): [1, 4, 8, 2] cut
// along the experts (dimension 1) over tp, [2, 2, 8, 2] received; the
// counts of filled rows of each [B, E] cell ride as args 2 and 3.
TEST(ProgramLoader, CountedAllToAllRoundTripsAndIsChecked) {
  auto program = [] {
    Program p = blockProgram(runtime::CollectiveKind::ReduceScatter);
    auto add = [&](const char *name, runtime::DType dtype,
                   std::vector<int64_t> shape) {
      return addArenaBuffer(p, name, dtype, shape);
    };
    uint32_t in = add("in", runtime::DType::F32, {1, 4, 8, 2});
    uint32_t out = add("out", runtime::DType::F32, {2, 2, 8, 2});
    uint32_t sent = add("sent", runtime::DType::I32, {1, 4});
    uint32_t received = add("received", runtime::DType::I32, {2, 2});
    Instruction &i = p.functions[0].instructions[0];
    i.args = {in, out, sent, received};
    i.collective->kind = runtime::CollectiveKind::AllToAll;
    i.collective->label = "dispatch";
    i.collective->concatDim = 0;
    i.collective->rowsDim = 2;
    return p;
  };
  Program loaded = roundTrip(program());
  const Instruction &instruction = loaded.functions[0].instructions[0];
  EXPECT_EQ(instruction.collective->rowsDim, 2u);
  EXPECT_EQ(instruction.args.size(), 4u);
  const std::string what =
      "p.ptp: train_step instruction #0 (all_to_all 'dispatch') ";
  Program three = program();
  three.functions[0].instructions[0].args.pop_back();
  EXPECT_EQ(rejection(three),
            what + "has 3 buffers; it takes an input and an output and their "
                   "counts of filled rows");
  Program rows = program();
  rows.functions[0].instructions[0].collective->rowsDim = 1;
  EXPECT_EQ(rejection(rows),
            what + "has rows_dim 1, which must come after split_dim and "
                   "concat_dim and before the last dimension of its input "
                   "[1,4,8,2]");
  Program shape = program();
  // The same bytes, the output's cells miscounted.
  shape.buffers[shape.functions[0].instructions[0].args[3]].shape = {4, 1};
  EXPECT_EQ(rejection(shape),
            what + "counts the output's filled rows in buffer #" +
                std::to_string(shape.functions[0].instructions[0].args[3]) +
                " ('received'), which must be i32 [2,2]");
}

TEST(ProgramLoader, RejectsBadBlockCollectives) {
  auto broken = [](runtime::CollectiveKind kind, auto change) {
    Program program = blockProgram(kind);
    change(program, program.functions[0].instructions[0]);
    return rejection(program);
  };
  const auto gather = runtime::CollectiveKind::AllGather;
  const auto scatter = runtime::CollectiveKind::ReduceScatter;
  const std::string what =
      "p.ptp: train_step instruction #0 (all_gather 'block') ";
  const std::string scatterWhat =
      "p.ptp: train_step instruction #0 (reduce_scatter 'block') ";
  EXPECT_EQ(broken(gather, [](Program &, Instruction &i) { i.args = {6}; }),
            what + "has 1 buffers; it takes an input and an output");
  EXPECT_EQ(broken(gather, [](Program &, Instruction &i) {
              i.args = {6, 7, 0};
            }),
            what + "has 3 buffers; it takes an input and an output");
  EXPECT_EQ(broken(gather, [](Program &, Instruction &i) { i.args = {6, 9}; }),
            what + "refers to buffer #9 of 9");
  // A gather moves i32 words too, but input and output must agree.
  EXPECT_EQ(broken(gather, [](Program &, Instruction &i) { i.args = {8, 7}; }),
            what + "has an input and an output of different types");
  EXPECT_EQ(broken(gather, [](Program &p, Instruction &) {
              p.buffers[7].offset = p.buffers[6].offset + 4;
            }),
            what + "has an input and an output that overlap in the arena");
  EXPECT_EQ(broken(gather, [](Program &, Instruction &i) {
              i.collective->dim = 3;
            }),
            what + "has dim 3, but its input [2,3,4] has rank 3");
  EXPECT_EQ(broken(gather, [](Program &, Instruction &i) {
              i.collective->dim = 0;
            }),
            what + "output [2,6,4] must be [4,3,4] (input [2,3,4], group of "
                   "2)");
  EXPECT_EQ(broken(gather, [](Program &, Instruction &i) {
              i.collective->axes = {0, 2};
            }),
            what + "output [2,6,4] must be [2,12,4] (input [2,3,4], group of "
                   "4)");
  EXPECT_EQ(broken(scatter, [](Program &, Instruction &i) {
              i.collective->dim = 2;
            }),
            scatterWhat + "output [2,3,4] must be [2,6,2] (input [2,6,4], "
                          "group of 2)");
  EXPECT_EQ(broken(scatter, [](Program &p, Instruction &) {
              p.buffers[7].shape = {2, 5, 4};
              p.buffers[7].elements = 40;
              p.buffers[7].bytes = 160;
            }),
            scatterWhat + "splits dimension 1 of [2,5,4] into 2 blocks, which "
                          "does not divide");
  EXPECT_EQ(broken(scatter, [](Program &p, Instruction &) { p.mesh.clear(); }),
            scatterWhat + "needs a device mesh, but the program has none");
}

/// minimalProgram on a dp=2 x tp=2 mesh with an AxisIndex buffer #6.
Program axisIndexProgram(const std::string &name) {
  Program program = testprograms::minimalProgram();
  program.mesh = {{"dp", 2, runtime::AxisRole::Data}, {"pp", 1}, {"tp", 2}};
  addArenaBuffer(program, name.c_str(), runtime::DType::I32, {},
                 runtime::Role::AxisIndex);
  return program;
}

TEST(ProgramLoader, AxisIndexBuffers) {
  Program loaded = roundTrip(axisIndexProgram("tp,dp"));
  ASSERT_EQ(loaded.withRole(runtime::Role::AxisIndex).size(), 1u);
  EXPECT_EQ(loaded.axisIndexAxes(loaded.buffers[6]),
            (std::vector<uint32_t>{2, 0}));
  EXPECT_STREQ(runtime::roleName(runtime::Role::AxisIndex), "axis_index");
  EXPECT_STREQ(runtime::roleName(runtime::Role::Logits), "logits");
}

TEST(ProgramLoader, RejectsBadAxisIndexBuffers) {
  const std::string what = "p.ptp: axis index buffer #6 ";
  auto broken = [](const std::string &name, auto change) {
    Program program = axisIndexProgram(name);
    change(program, program.buffers[6]);
    return rejection(program);
  };
  auto same = [](Program &, runtime::BufferInfo &) {};
  EXPECT_EQ(broken("tp", [](Program &p, runtime::BufferInfo &) {
              p.mesh.clear();
            }),
            what + "('tp') needs a device mesh, but the program has none");
  EXPECT_EQ(broken("tp", [](Program &, runtime::BufferInfo &b) {
              b.dtype = runtime::DType::F32;
            }),
            what + "('tp') must be an i32 scalar");
  EXPECT_EQ(broken("tp", [](Program &, runtime::BufferInfo &b) {
              b.shape = {1};
            }),
            what + "('tp') must be an i32 scalar");
  EXPECT_EQ(broken("ep", same),
            what + "('ep'): 'ep' is not an axis of the mesh dp=2 pp=1 tp=2");
  EXPECT_EQ(broken("", same),
            what + "(''): '' is not an axis of the mesh dp=2 pp=1 tp=2");
  EXPECT_EQ(broken("dp,", same),
            what + "('dp,'): '' is not an axis of the mesh dp=2 pp=1 tp=2");
  EXPECT_EQ(broken("tp,tp", same),
            what + "('tp,tp'): axis 'tp' is listed twice");
  EXPECT_EQ(broken("tp", [](Program &p, runtime::BufferInfo &b) {
              runtime::BufferInfo copy = b;
              copy.offset = p.arenaBytes;
              p.arenaBytes += 4;
              p.buffers.push_back(copy);
            }),
            "p.ptp: axis index buffer #7 ('tp') appears twice");
}

/// One device: the backend writes index 0 without communicators; with a
/// mesh of several devices it needs them.
TEST(ProgramLoader, AxisIndexWithoutCommunicators) {
  Program one = axisIndexProgram("dp,tp");
  one.mesh = {{"dp", 1, runtime::AxisRole::Data}, {"pp", 1}, {"tp", 1}};
  Program loaded = roundTrip(one);
  auto backend = runtime::createCpuBackend(loaded);
  int32_t value = -1;
  backend->read(loaded.buffers[6], &value);
  EXPECT_EQ(value, 0);
  Program many = roundTrip(axisIndexProgram("tp"));
  try {
    runtime::createCpuBackend(many);
    ADD_FAILURE() << "a backend without communicators wrote an axis index";
  } catch (const runtime::ProgramError &error) {
    EXPECT_EQ(std::string(error.what()),
              "axis index 'tp' needs this rank's coordinates on the "
              "program's mesh dp=2 pp=1 tp=2, but the backend has no "
              "communicators; run it with partition-run");
  }
}

/// One device (dp=1 x pp=1 x tp=1) so that the collectives run on a world
/// of one, as partition-run runs a one-device mesh without MPI.
enum class Outcome { Rejected, Ran };

Outcome loadAndRun(const std::string &bytes) {
  Program program;
  try {
    program = Program::parse(reinterpret_cast<const uint8_t *>(bytes.data()),
                             bytes.size(), "<corrupted>");
  } catch (const runtime::ProgramError &) {
    return Outcome::Rejected;
  }
  if (program.devices() != 1)
    return Outcome::Rejected; // partition-run's world-size check
  runtime::comm::SelfCommunicator self;
  std::vector<runtime::comm::MeshAxisSize> sizes;
  for (const runtime::MeshAxis &axis : program.mesh)
    sizes.push_back({axis.name, axis.size});
  std::vector<std::vector<uint32_t>> groups;
  for (const runtime::Function &function : program.functions)
    for (const Instruction &instruction : function.instructions)
      if (instruction.collective)
        groups.push_back(instruction.collective->axes);
  std::unique_ptr<runtime::comm::MeshCommunicators> mesh;
  if (!program.mesh.empty())
    mesh =
        std::make_unique<runtime::comm::MeshCommunicators>(self, sizes, groups);
  try {
    auto backend = runtime::createCpuBackend(program, mesh.get());
    for (size_t f = 0; f < program.functions.size(); ++f)
      backend->run(f, 1);
  } catch (const runtime::ProgramError &) {
    return Outcome::Rejected;
  }
  return Outcome::Ran;
}

TEST(ProgramLoader, EverySingleByteOfACollectiveProgram) {
  Program program = testprograms::minimalProgram();
  program.mesh = {{"dp", 1, runtime::AxisRole::Data}, {"pp", 1}, {"tp", 1}};
  program.functions[0].instructions = {allReduce({0, 1}, {0}),
                                       allReduce({2}, {0, 2}, "loss")};
  std::string original = testprograms::serializeProgram(program);
  ASSERT_EQ(loadAndRun(original), Outcome::Ran);
  std::map<Outcome, size_t> outcomes;
  for (uint8_t mask : {uint8_t(0xff), uint8_t(0x01)})
    for (size_t offset = 0; offset < original.size(); ++offset) {
      std::string bytes = original;
      bytes[offset] = char(uint8_t(bytes[offset]) ^ mask);
      try {
        ++outcomes[loadAndRun(bytes)];
      } catch (const std::exception &error) {
        ADD_FAILURE() << "byte " << offset
                      << ": not a ProgramError: " << error.what();
      }
    }
  EXPECT_GT(outcomes[Outcome::Rejected], outcomes[Outcome::Ran]);
}

} // namespace

namespace {

/// minimalProgram whose buffer "b" [2, 3] is the parameter "wte" of a
/// vocabulary of 1 id padded to 2 rows (--dist-pad-vocab).
Program paddedProgram() {
  Program program = testprograms::minimalProgram();
  program.buffers[1].role = runtime::Role::Param;
  program.buffers[1].name = "wte";
  program.model = {{"vocab", 1}, {"padded_vocab", 2},
                   {"padded_params", {"wte"}}};
  return program;
}

} // namespace

// Initialisation and checkpoints see a padded table's logical rows only.
TEST(ProgramLoader, PaddedVocabularyTables) {
  Program loaded = roundTrip(paddedProgram());
  EXPECT_EQ(loaded.buffers[1].logicalShape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(loaded.buffers[1].tensorShape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(loaded.buffers[0].tensorShape(), (std::vector<int64_t>{4}));
  Program unpadded = roundTrip(testprograms::minimalProgram());
  EXPECT_EQ(unpadded.buffers[1].tensorShape(), (std::vector<int64_t>{2, 3}));
}

TEST(ProgramLoader, RejectsBadPaddedVocabularies) {
  const std::string sizes =
      "p.ptp: the model description's padded_params, padded_vocab and vocab "
      "are not a list of names and two sizes with 1 <= vocab <= padded_vocab";
  auto broken = [](auto change) {
    Program program = paddedProgram();
    change(program);
    return rejection(program);
  };
  EXPECT_EQ(broken([](Program &p) { p.model["vocab"] = 3; }), sizes);
  EXPECT_EQ(broken([](Program &p) { p.model["vocab"] = 0; }), sizes);
  EXPECT_EQ(broken([](Program &p) { p.model.erase("padded_vocab"); }), sizes);
  EXPECT_EQ(broken([](Program &p) { p.model["padded_params"] = "wte"; }),
            sizes);
  EXPECT_EQ(broken([](Program &p) { p.model["padded_vocab"] = 3; }),
            "p.ptp: param 'wte' is a padded vocabulary table but does not "
            "have padded_vocab = 3 rows");
  EXPECT_EQ(broken([](Program &p) {
              p.model["padded_params"] = {"wte", "lm_head"};
            }),
            "p.ptp: the model description's padded_params name tensors the "
            "program does not hold");
}
