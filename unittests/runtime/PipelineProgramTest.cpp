//===- PipelineProgramTest.cpp - the loader's pipeline checks -------------===//
//
// Schema v5: a program holds one instruction stream per pipeline stage and
// sends / receives between them. Programs built field by field
// (SerializeProgram.h), each with one thing wrong, must be rejected before
// anything runs with one line naming it.
//
//===----------------------------------------------------------------------===//

#include "runtime/program/Program.h"
#include "runtime/program/ProgramFormat.h"
#include "unittests/runtime/LoaderTesting.h"
#include "unittests/runtime/SerializeProgram.h"

#include <gtest/gtest.h>

using namespace partition;
using runtime::BufferInfo;
using runtime::DType;
using runtime::Instruction;
using runtime::Program;
using runtime::Role;
using runtime::Stream;
using runtime::Transfer;

namespace {

using testprograms::rejection;
using testprograms::roundTrip;

BufferInfo buffer(Role role, const char *name, DType dtype,
                  std::vector<int64_t> shape, uint64_t offset) {
  BufferInfo info;
  info.role = role;
  info.name = name;
  info.dtype = dtype;
  info.shape = std::move(shape);
  info.offset = offset;
  return info;
}

Instruction transfer(bool send, uint32_t buffer, int64_t peer,
                     uint32_t axis = 1, std::string label = "F stage0->1") {
  Instruction instruction;
  instruction.args = {buffer};
  instruction.transfer = Transfer{send, axis, peer, std::move(label)};
  return instruction;
}

/// A dp=1 x pp=2 program: stage 0 holds the tokens and the parameter
/// "wte" [4, 2] and sends its activations [2, 3] to stage 1, which holds
/// "wte" too, the targets and the loss.
Program twoStages() {
  Program program;
  program.mesh = {{"dp", 1, runtime::AxisRole::Data},
                  {"pp", 2, runtime::AxisRole::Pipeline}};
  program.model = nlohmann::json::object();
  program.train = nlohmann::json::object();
  Stream first;
  first.buffers = {buffer(Role::Param, "wte", DType::F32, {4, 2}, 0),
                   buffer(Role::Temporary, "", DType::F32, {2, 3}, 64),
                   buffer(Role::Tokens, "", DType::I32, {1, 2}, 128)};
  first.arenaBytes = 192;
  first.functions = {{"train_step", {transfer(true, 1, 1)}}};
  Stream last;
  last.buffers = {buffer(Role::Param, "wte", DType::F32, {4, 2}, 0),
                  buffer(Role::Temporary, "", DType::F32, {2, 3}, 64),
                  buffer(Role::Targets, "", DType::I32, {1, 2}, 128),
                  buffer(Role::Loss, "", DType::F32, {}, 192)};
  last.arenaBytes = 256;
  last.functions = {{"train_step", {transfer(false, 1, 0)}}};
  program.streams = {first, last};
  program.selectStream(0);
  return program;
}

TEST(PipelineProgram, StreamsRoundTrip) {
  Program loaded = roundTrip(twoStages());
  ASSERT_EQ(loaded.streams.size(), 2u);
  EXPECT_EQ(loaded.pipelineAxisIndex(), 1);
  EXPECT_EQ(loaded.dataAxisIndex(), 0);
  EXPECT_TRUE(loaded.hasCollectives());
  // Stream 0 is selected after loading; the others are there to select.
  EXPECT_EQ(loaded.stream, 0u);
  EXPECT_EQ(loaded.arenaBytes, 192u);
  ASSERT_EQ(loaded.functions[0].instructions.size(), 1u);
  const auto &send = loaded.functions[0].instructions[0].transfer;
  ASSERT_TRUE(send);
  EXPECT_TRUE(send->send);
  EXPECT_EQ(send->axis, 1u);
  EXPECT_EQ(send->peer, 1);
  EXPECT_EQ(send->label, "F stage0->1");
  loaded.selectStream(1);
  EXPECT_EQ(loaded.arenaBytes, 256u);
  EXPECT_EQ(loaded.single(Role::Loss).offset, 192u);
  EXPECT_FALSE(loaded.functions[0].instructions[0].transfer->send);
  EXPECT_EQ(loaded.withRoleInStreams(Role::Param),
            (std::vector<std::pair<size_t, size_t>>{{0, 0}, {1, 0}}));
  EXPECT_THROW(loaded.selectStream(2), runtime::ProgramError);
}

TEST(PipelineProgram, OneStreamWithoutAPipelineAxis) {
  Program loaded = roundTrip(testprograms::minimalProgram());
  EXPECT_EQ(loaded.streams.size(), 1u);
  EXPECT_EQ(loaded.pipelineAxisIndex(), -1);
  EXPECT_EQ(loaded.arenaBytes, loaded.streams[0].arenaBytes);
}

TEST(PipelineProgram, UnlabelledTransferIsNamedByPosition) {
  Program program = twoStages();
  program.streams[1].functions[0].instructions[0].transfer->label = "";
  program.functions[0].instructions[0].transfer->label = "";
  Program loaded = roundTrip(program);
  EXPECT_EQ(loaded.functions[0].instructions[0].transfer->label,
            "train_step instruction #0");
}

TEST(PipelineProgram, RejectsAStreamCountOtherThanThePipelineAxis) {
  Program program = twoStages();
  program.streams.pop_back();
  EXPECT_EQ(rejection(program),
            "p.ptp: program has 1 instruction streams, but its mesh dp=1 "
            "pp=2 has 2 pipeline stages ('pp'); it needs one stream per "
            "stage: recompile it");
  program = twoStages();
  program.mesh[1].role = runtime::AxisRole::None;
  EXPECT_EQ(rejection(program),
            "p.ptp: program has 2 instruction streams, but its mesh dp=1 "
            "pp=2 has no pipeline axis; it needs one stream per stage: "
            "recompile it");
}

TEST(PipelineProgram, RejectsTransfersOutsideThePipeline) {
  Program program = twoStages();
  program.functions[0].instructions[0].transfer->peer = 2;
  EXPECT_EQ(rejection(program),
            "p.ptp stage 0: train_step instruction #0 (send 'F stage0->1') "
            "sends to stage 2, outside the mesh's 2 stages ('pp')");
  program = twoStages();
  program.functions[0].instructions[0].transfer->peer = 0;
  EXPECT_EQ(rejection(program),
            "p.ptp stage 0: train_step instruction #0 (send 'F stage0->1') "
            "sends to its own stage 0");
  program = twoStages();
  program.functions[0].instructions[0].transfer->axis = 0;
  EXPECT_EQ(rejection(program),
            "p.ptp stage 0: train_step instruction #0 (send 'F stage0->1') "
            "names mesh axis 'dp', but transfers run between pipeline "
            "stages, along 'pp'");
  program = twoStages();
  program.functions[0].instructions[0].transfer->axis = 7;
  EXPECT_EQ(rejection(program),
            "p.ptp stage 0: train_step instruction #0 (send 'F stage0->1') "
            "names mesh axis #7, but transfers run between pipeline "
            "stages, along 'pp'");
  program = twoStages();
  program.functions[0].instructions[0].args = {0, 1};
  EXPECT_EQ(rejection(program),
            "p.ptp stage 0: train_step instruction #0 (send 'F stage0->1') "
            "has 2 buffers; a transfer moves exactly one");
  program = twoStages();
  program.functions[0].instructions[0].args = {9};
  EXPECT_EQ(rejection(program),
            "p.ptp stage 0: train_step instruction #0 (send 'F stage0->1') "
            "refers to buffer #9 of 3");
  program = twoStages();
  program.functions[0].instructions[0].ints = {1};
  EXPECT_EQ(rejection(program),
            "p.ptp stage 0: train_step instruction #0 (send 'F stage0->1') "
            "has integer or float parameters; transfers take none");
}

TEST(PipelineProgram, RejectsATransferWithoutAPipelineAxis) {
  Program program = testprograms::minimalProgram();
  program.mesh = {{"dp", 1, runtime::AxisRole::Data}};
  program.functions[0].instructions.push_back(transfer(true, 0, 1, 0, "x"));
  EXPECT_EQ(rejection(program),
            "p.ptp: train_step instruction #0 (send 'x') needs a pipeline "
            "axis, but the program's mesh dp=1 has none; recompile it with "
            "a plan whose mesh has pp");
}

TEST(PipelineProgram, RejectsSendsWithoutTheirReceives) {
  Program program = twoStages();
  program.streams[1].functions[0].instructions.clear();
  EXPECT_EQ(rejection(program),
            "p.ptp: train_step: stage 0 sends stage 1 1 buffers, but stage 1 "
            "receives 0 from it; every send needs its receive");
  program = twoStages();
  program.streams[1].buffers[1].shape = {3, 3};
  program.streams[1].buffers[1].offset = 128;
  program.streams[1].buffers[2].offset = 64;
  EXPECT_EQ(rejection(program),
            "p.ptp: train_step: stage 0 sends stage 1 24 bytes as 'F "
            "stage0->1', but its receive #0 ('F stage0->1') expects 36");
  // A receive whose stage never sends.
  program = twoStages();
  program.functions[0].instructions.clear();
  EXPECT_EQ(rejection(program),
            "p.ptp: train_step: stage 0 sends stage 1 0 buffers, but stage 1 "
            "receives 1 from it; every send needs its receive");
}

TEST(PipelineProgram, RejectsMisplacedRoles) {
  Program program = twoStages();
  program.buffers[2].role = Role::Temporary;
  EXPECT_EQ(rejection(program),
            "p.ptp stage 0: program needs exactly one tokens buffer");
  program = twoStages();
  program.streams[1].buffers[3].role = Role::Temporary;
  EXPECT_EQ(rejection(program),
            "p.ptp stage 1: program needs exactly one loss buffer");
  program = twoStages();
  program.buffers[1].role = Role::Targets;
  program.buffers[1].dtype = DType::I32;
  program.streams[0].buffers[1] = program.buffers[1];
  program.functions[0].instructions.clear();
  program.streams[1].functions[0].instructions.clear();
  // An earlier stage may read the targets too (the last one must).
  EXPECT_EQ(rejection(program), "");
  program.streams[1].buffers[2].role = Role::Temporary;
  EXPECT_EQ(rejection(program),
            "p.ptp stage 1: program needs exactly one targets buffer");
}

TEST(PipelineProgram, RejectsLogitsBeforeTheLastStage) {
  // logits_step's outputs are made where the loss is.
  Program program = twoStages();
  program.buffers[1].role = Role::Logits;
  program.buffers[1].name = "mb0";
  program.streams[0].buffers[1] = program.buffers[1];
  EXPECT_EQ(rejection(program),
            "p.ptp stage 0: program has logits buffers on a stage other than "
            "the last, which makes them");
  program = twoStages();
  program.streams[1].buffers[1].role = Role::Logits;
  program.streams[1].buffers[1].name = "mb0";
  EXPECT_EQ(rejection(program), "");
}

TEST(PipelineProgram, RejectsATiedTensorOfTwoShapes) {
  Program program = twoStages();
  program.streams[1].buffers[0].shape = {2, 4};
  EXPECT_EQ(rejection(program),
            "p.ptp: param 'wte' is [4,2] on stage 0 but [2,4] on stage 1; a "
            "tensor two stages hold must be one tensor");
}

TEST(PipelineProgram, ChecksEveryStreamLikeOne) {
  // The stage's own checks name it: a buffer outside stage 1's arena.
  Program program = twoStages();
  program.streams[1].arenaBytes = 128;
  EXPECT_EQ(rejection(program),
            "p.ptp stage 1: buffer #2 [128, +8) lies outside the arena of "
            "128 bytes");
}

} // namespace
