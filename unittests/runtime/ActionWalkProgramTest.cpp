//===- ActionWalkProgramTest.cpp - the loader's and CPU backend's walks ---===//
//
// A function's action walk (program format 16, docs/compiler.md "The
// schedule as data"): it round-trips, the loader lays out each slot's copy
// of a region with the slot's buffers (a repeated slot's copies at their
// strides), backends run the actions in order with their micro-batch's
// rows, and every wrong walk is refused in one line.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"
#include "runtime/program/ActionWalk.h"
#include "runtime/program/KernelArgs.h"
#include "runtime/program/Program.h"
#include "unittests/runtime/LoaderTesting.h"
#include "unittests/runtime/SerializeProgram.h"

#include <gtest/gtest.h>

using namespace partition;
using runtime::DType;
using runtime::Instruction;
using runtime::KernelId;
using runtime::Program;
using runtime::Role;
using runtime::WalkAction;

namespace {

using testprograms::rejection;
using testprograms::roundTrip;

constexpr int kMicrobatches = 4, kTokens = 2, kChannels = 3, kVocab = 5;
// Buffers.
enum : uint32_t { Table, Tokens, Rows, Act, ActCopy, Sum };

Instruction kernel(KernelId id, std::vector<uint32_t> args,
                   std::vector<float> floats = {}) {
  Instruction instruction;
  instruction.kernel = id;
  instruction.args = std::move(args);
  instruction.floats = std::move(floats);
  return instruction;
}

/// Two kinds of action on 4 micro-batches of 2 tokens: "F" looks the
/// micro-batch's tokens up in the table (its activation, #3), "B" adds the
/// activation to the sum (#5). Two micro-batches are in flight, as on a
/// 1F1B stage: slot 1 puts the activation in #4.
Program walkProgram() {
  Program program;
  auto add = [&](Role role, const char *name, DType dtype,
                 std::vector<int64_t> shape) {
    testprograms::addArenaBuffer(program, name, dtype, std::move(shape), role);
  };
  add(Role::Temporary, "table", DType::F32, {kVocab, kChannels});
  add(Role::Tokens, "tokens", DType::I32, {kMicrobatches, kTokens});
  add(Role::Temporary, "", DType::I32, {kTokens});
  add(Role::Temporary, "", DType::F32, {kTokens, kChannels});
  add(Role::Temporary, "", DType::F32, {kTokens, kChannels});
  add(Role::Temporary, "sum", DType::F32, {kTokens, kChannels});
  add(Role::Targets, "targets", DType::I32, {kMicrobatches, kTokens});
  add(Role::Loss, "loss", DType::F32, {});
  program.model = nlohmann::json::object();
  program.train = nlohmann::json::object();
  runtime::Function function{"train_step", {}};
  function.instructions = {
      kernel(KernelId::Fill, {Sum}, {0.0f}),
      kernel(KernelId::Embedding, {Rows, Table, Act}),
      kernel(KernelId::Add, {Sum, Act, Sum}),
  };
  runtime::ActionWalk walk;
  walk.regions = {{1, 2, "F chunk 0", {Rows}, {Tokens}},
                  {2, 3, "B chunk 0", {}, {}}};
  walk.slots = {{}, {{Act}, {ActCopy}}};
  walk.actions = {{0, 0, 0}, {0, 1, 1}, {1, 0, 0}, {0, 0, 2},
                  {1, 1, 1}, {0, 1, 3}, {1, 0, 2}, {1, 1, 3}};
  function.walk = walk;
  program.functions.push_back(std::move(function));
  return program;
}

/// Runs `program` (walkProgram's buffers and kernels) on the CPU backend
/// and expects the sum of every micro-batch's lookups, and the tokens
/// input as it was (the walk copies its rows out).
void expectSumOfLookups(const Program &program) {
  auto backend = runtime::createCpuBackend(program);
  std::vector<float> table(kVocab * kChannels);
  for (size_t i = 0; i < table.size(); ++i)
    table[i] = 0.25f * float(i) - 1.0f;
  const std::vector<int32_t> tokens = {0, 4, 1, 1, 3, 2, 4, 0};
  backend->write(program.buffers[Table], table.data());
  backend->write(program.buffers[Tokens], tokens.data());
  backend->run(0, 1);
  std::vector<float> sum(kTokens * kChannels);
  backend->read(program.buffers[Sum], sum.data());
  std::vector<float> expected(kTokens * kChannels, 0.0f);
  for (int m = 0; m < kMicrobatches; ++m)
    for (int t = 0; t < kTokens; ++t)
      for (int c = 0; c < kChannels; ++c)
        expected[t * kChannels + c] +=
            table[tokens[m * kTokens + t] * kChannels + c];
  for (size_t i = 0; i < sum.size(); ++i)
    EXPECT_FLOAT_EQ(sum[i], expected[i]) << i;
  std::vector<int32_t> after(tokens.size());
  backend->read(program.buffers[Tokens], after.data());
  EXPECT_EQ(after, tokens);
}

/// walkProgram in GPipe's order, every micro-batch in flight: slot 1 puts
/// the activation in a buffer of its own at the arena's end and repeats
/// twice, its copies 24 bytes (one activation) apart in the room after it.
Program gpipeProgram(uint32_t repeat = 2) {
  Program program = walkProgram();
  const uint32_t copy = testprograms::addArenaBuffer(
      program, "", DType::F32, {kTokens, kChannels});
  testprograms::addArenaBuffer(program, "room", DType::F32,
                               {2, kTokens, kChannels});
  runtime::ActionWalk &walk = *program.functions[0].walk;
  walk.slots[1] = {{Act}, {copy}, repeat, {kTokens * kChannels * 4}};
  walk.actions.clear();
  for (uint32_t region : {0u, 1u})
    for (uint32_t m = 0; m < kMicrobatches; ++m)
      walk.actions.push_back({region, m, m});
  return program;
}

TEST(ActionWalk, RepeatedSlotTakesCopiesAtItsStrides) {
  Program program = gpipeProgram();
  const uint32_t copy = static_cast<uint32_t>(program.buffers.size() - 2);
  Program loaded = roundTrip(program);
  const runtime::ActionWalk &walk = *loaded.functions[0].walk;
  ASSERT_EQ(walk.slots.size(), 4u);
  EXPECT_EQ(walk.slots[1].copies, std::vector<uint32_t>{copy});
  for (uint32_t slot = 2; slot < 4; ++slot) {
    EXPECT_EQ(walk.slots[slot].templates, std::vector<uint32_t>{Act});
    ASSERT_EQ(walk.slots[slot].copies.size(), 1u);
    const runtime::BufferInfo &repeat =
        loaded.buffers[walk.slots[slot].copies[0]];
    EXPECT_EQ(repeat.offset, loaded.buffers[copy].offset +
                                 (slot - 1) * kTokens * kChannels * 4);
    EXPECT_EQ(repeat.shape, loaded.buffers[Act].shape);
    EXPECT_EQ(walk.slots[slot].repeat, 0u);
  }
  // Each slot's copy of both regions: 2 + 3 x 2 instructions.
  EXPECT_EQ(loaded.functions[0].instructions.size(), 9u);
}

TEST(ActionWalk, CpuBackendRunsRepeatedSlots) {
  // Every forward before any backward: repeats on one buffer would leave
  // micro-batch 3's lookup in all of slots 1 to 3.
  expectSumOfLookups(roundTrip(gpipeProgram()));
}

TEST(ActionWalk, RefusesWrongRepeats) {
  auto broken = [](uint32_t repeat, auto change) {
    Program program = gpipeProgram(repeat);
    change(program.functions[0].walk->slots[1]);
    return rejection(program);
  };
  EXPECT_EQ(broken(2, [](runtime::ActionSlot &slot) { slot.strides = {}; }),
            "p.ptp: train_step action walk slot 1 repeats with 0 strides for "
            "1 copies; each copy needs one");
  EXPECT_EQ(broken(2, [](runtime::ActionSlot &slot) { slot.strides = {12}; }),
            "p.ptp: train_step action walk slot 1 repeats buffer #8 every 12 "
            "bytes 2 times, which overlaps it or leaves the arena of 280 "
            "bytes");
  EXPECT_EQ(broken(2, [](runtime::ActionSlot &slot) { slot.strides = {0}; }),
            "p.ptp: train_step action walk slot 1 repeats buffer #8 every 0 "
            "bytes 2 times, which overlaps it or leaves the arena of 280 "
            "bytes");
  EXPECT_EQ(broken(3, [](runtime::ActionSlot &) {}),
            "p.ptp: train_step action walk slot 1 repeats buffer #8 every 24 "
            "bytes 3 times, which overlaps it or leaves the arena of 280 "
            "bytes");
  EXPECT_EQ(broken(9, [](runtime::ActionSlot &) {}),
            "p.ptp: train_step action walk slot 1 repeats 9 times (1 copies "
            "each); the walk has 8 actions");
}

TEST(ActionWalk, RoundTripAndLayout) {
  Program loaded = roundTrip(walkProgram());
  const runtime::Function &function = loaded.functions[0];
  ASSERT_TRUE(function.walk);
  const runtime::ActionWalk &walk = *function.walk;
  EXPECT_EQ(walk.regions.size(), 2u);
  EXPECT_EQ(walk.regions[0].name, "F chunk 0");
  EXPECT_EQ(walk.regions[0].rows, std::vector<uint32_t>{Rows});
  EXPECT_EQ(walk.actions.size(), 8u);
  EXPECT_EQ(walk.actions[5].microbatch, 3u);
  // The file's 3 instructions, then slot 1's copies of both regions, with
  // #4 for #3.
  EXPECT_EQ(walk.written, 3u);
  ASSERT_EQ(function.instructions.size(), 5u);
  EXPECT_EQ(function.writtenSize(), 3u);
  EXPECT_EQ(function.instructions[3].args,
            (std::vector<uint32_t>{Rows, Table, ActCopy}));
  EXPECT_EQ(function.instructions[4].args,
            (std::vector<uint32_t>{Sum, ActCopy, Sum}));
  EXPECT_EQ(walk.ranges[0][1], (std::pair<size_t, size_t>{3, 4}));
  EXPECT_EQ(walk.ranges[1][0], (std::pair<size_t, size_t>{2, 3}));
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(runtime::instructionRuns(function)[i], i == 0 ? 1 : 2) << i;
  // The order a backend runs the instructions in, and when it copies an
  // action's rows.
  std::vector<std::string> order;
  runtime::walkFunction(
      function,
      [&](size_t begin, size_t end) {
        order.push_back(std::to_string(begin) + "-" + std::to_string(end));
      },
      [](int64_t) { FAIL() << "a walk has no loop runs"; },
      [&](size_t action) {
        order.push_back("rows " + std::to_string(action));
      });
  EXPECT_EQ(order, (std::vector<std::string>{
                       "0-1", "rows 0", "1-2", "rows 1", "3-4", "rows 2",
                       "2-3", "rows 3", "1-2", "rows 4", "4-5", "rows 5",
                       "3-4", "rows 6", "2-3", "rows 7", "4-5", "3-3"}));
  EXPECT_EQ(runtime::microbatchSpanName(function, 2),
            "F chunk 0, micro-batch 1");
  EXPECT_EQ(runtime::microbatchSpanName(function, 9),
            "after the actions (the update)");
  // Written back, a loaded walk is the file's, not its copies.
  Program again = roundTrip(loaded);
  EXPECT_EQ(again.functions[0].instructions.size(), 5u);
}

TEST(ActionWalk, SlotWithoutSubstitutionsRunsTheRegionItself) {
  Program program = walkProgram();
  program.functions[0].walk->slots.push_back({});
  program.functions[0].walk->actions.push_back({1, 2, 3});
  Program loaded = roundTrip(program);
  const runtime::ActionWalk &walk = *loaded.functions[0].walk;
  EXPECT_EQ(walk.ranges[1][2], walk.ranges[1][0]);
  EXPECT_EQ(loaded.functions[0].instructions.size(), 5u);
  EXPECT_EQ(runtime::instructionRuns(loaded.functions[0])[2], 3);
}

TEST(ActionWalk, CpuBackendRunsEachActionInItsSlot) {
  // Each micro-batch's own activation: with one slot, micro-batch 1's
  // lookup would overwrite micro-batch 0's before its B adds it.
  expectSumOfLookups(roundTrip(walkProgram()));
}

TEST(ActionWalk, CodeNoActionRunsMayOverlap) {
  // B runs in slot 1 alone (as GPipe's shared backward, whose first
  // backward has a region of its own): its code as written, with the
  // template's buffer, may have an output over an input, since nothing
  // runs it; slot 1's copy of it, which runs, may not.
  Program program = walkProgram();
  program.buffers[Act].offset = program.buffers[Sum].offset + 4;
  program.functions[0].walk->actions = {{0, 0, 0}, {0, 1, 1}, {1, 1, 1}};
  EXPECT_NO_THROW(runtime::checkInstructions(roundTrip(program)));
  program.functions[0].walk->actions.push_back({1, 0, 0});
  std::string error;
  try {
    runtime::checkInstructions(roundTrip(program));
  } catch (const runtime::ProgramError &e) {
    error = e.what();
  }
  EXPECT_EQ(error, "train_step instruction #2 (add): an output overlaps an "
                   "input");
}

TEST(ActionWalk, RefusesWrongWalks) {
  auto broken = [](auto change) {
    Program program = walkProgram();
    change(program.functions[0], program);
    return rejection(program);
  };
  EXPECT_EQ(broken([](runtime::Function &f, Program &) {
              f.loop = runtime::MicrobatchLoop{1, 2, 2, {}};
            }),
            "p.ptp: train_step action walk: the function also has a "
            "micro-batch loop; it may have one or the other");
  EXPECT_EQ(broken([](runtime::Function &f, Program &) {
              f.walk->actions.clear();
            }),
            "p.ptp: train_step action walk has 2 regions, 2 slots and 0 "
            "actions; it needs at least one of each");
  EXPECT_EQ(broken([](runtime::Function &f, Program &) {
              f.walk->regions[1].begin = 3;
              f.walk->regions[1].end = 4;
            }),
            "p.ptp: train_step action walk region 1 runs #3 to #4 of 3 "
            "instructions; the regions must be non-empty, contiguous and in "
            "order");
  EXPECT_EQ(broken([](runtime::Function &f, Program &) {
              f.walk->actions[2].slot = 2;
            }),
            "p.ptp: train_step action walk action 2 runs region 1 in slot 2, "
            "but the walk has 2 regions and 2 slots");
  EXPECT_EQ(broken([](runtime::Function &f, Program &) {
              f.walk->regions[0].rowsSources = {Table};
            }),
            "p.ptp: train_step action walk region 0 ('F chunk 0') copies "
            "rows from buffer #0, which is no tokens or targets input");
  EXPECT_EQ(broken([](runtime::Function &f, Program &) {
              f.walk->actions[5].microbatch = 4;
            }),
            "p.ptp: train_step action walk region 0 ('F chunk 0') copies "
            "micro-batch 4's rows from buffer #1, which holds 4 "
            "micro-batches of 8 bytes");
  EXPECT_EQ(broken([](runtime::Function &f, Program &p) {
              p.buffers[Rows].offset = p.buffers[Tokens].offset;
            }),
            "p.ptp: train_step action walk region 0 ('F chunk 0') copies "
            "rows into buffer #2, which overlaps its input buffer #1");
  EXPECT_EQ(broken([](runtime::Function &f, Program &) {
              f.walk->regions[0].rows.push_back(Act);
            }),
            "p.ptp: train_step action walk region 0 ('F chunk 0') copies "
            "rows into 2 buffers from 1 inputs; each copy needs one of each");
  EXPECT_EQ(broken([](runtime::Function &f, Program &) {
              // A region of 1024 instructions run in 4097 slots (and the
              // backward's one in slot 1): a small file that would ask for
              // 4 million instructions.
              f.instructions.insert(f.instructions.begin() + 2, 1023,
                                    f.instructions[1]);
              f.walk->regions[0].end = 1025;
              f.walk->regions[1] = {1025, 1026, "B chunk 0", {}, {}};
              for (uint32_t slot = 2; slot <= 4097; ++slot) {
                f.walk->slots.push_back(f.walk->slots[1]);
                f.walk->actions.push_back({0, slot, 0});
              }
            }),
            "p.ptp: train_step action walk runs its regions in slots that "
            "need 4195329 instructions of copies; at most 4194304");
  EXPECT_EQ(broken([](runtime::Function &f, Program &) {
              f.walk->slots[0] = {{Act}, {ActCopy}};
            }),
            "p.ptp: train_step action walk slot 0 substitutes buffers; slot "
            "0 runs the regions' own");
  EXPECT_EQ(broken([](runtime::Function &f, Program &) {
              f.walk->slots[1] = {{Act}, {Rows}};
            }),
            "p.ptp: train_step action walk slot 1 substitutes buffer #2 for "
            "buffer #3, which is not another arena buffer of its type and "
            "shape");
  EXPECT_EQ(broken([](runtime::Function &f, Program &) {
              f.walk->slots[1] = {{Act, Act}, {ActCopy, Sum}};
            }),
            "p.ptp: train_step action walk slot 1 substitutes buffer #3 or "
            "buffer #5 twice");
}

} // namespace
