//===- MicrobatchLoopProgramTest.cpp - the loader's micro-batch loops -----===//
//
// A function's micro-batch loop (program format 13, its stride 14): it
// round-trips, backends walk it in order, and every wrong loop (outside
// its function, never run, rows past the input, a refill reading rows an
// earlier one overwrote, a wait across its edge) is refused in one line.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"
#include "runtime/program/Program.h"
#include "unittests/runtime/LoaderTesting.h"
#include "unittests/runtime/SerializeProgram.h"

#include <gtest/gtest.h>

using namespace partition;
using runtime::Instruction;
using runtime::Program;

namespace {

using testprograms::gelu;
using testprograms::rejection;
using testprograms::roundTrip;
using testprograms::startedProgram;

/// A step of `rows` micro-batches of one row whose loop runs instruction
/// #1 `count` times, `stride` micro-batches a run: the tokens (buffer #3)
/// hold the rows, buffers #6, #7, ... are `sliceRows` of them. By default
/// 4 micro-batches, micro-batch 1's row refilled for micro-batches 1 to 3.
Program loopProgram(int rows = 4, std::vector<int> sliceRows = {1},
                    int64_t count = 3, int64_t stride = 1) {
  Program program = testprograms::minimalProgram();
  runtime::BufferInfo &tokens = program.buffers[3];
  tokens.shape = {rows, 2};
  tokens.elements = 2 * rows;
  tokens.bytes = 8 * rows;
  tokens.offset = program.arenaBytes;
  std::vector<uint32_t> slices;
  for (int row : sliceRows) {
    runtime::BufferInfo slice = tokens;
    slice.role = runtime::Role::Temporary;
    slice.name = "";
    slice.shape = {1, 2};
    slice.elements = 2;
    slice.bytes = 8;
    slice.offset = tokens.offset + 8 * row;
    slices.push_back(static_cast<uint32_t>(program.buffers.size()));
    program.buffers.push_back(slice);
  }
  program.arenaBytes += 8 * rows;
  std::vector<Instruction> &code = program.functions[0].instructions;
  code.push_back(gelu(0, 0));
  code.push_back(gelu(2, 2));
  code.push_back(gelu(0, 0));
  runtime::MicrobatchLoop loop{1, 2, count, slices};
  loop.stride = stride;
  program.functions[0].loop = loop;
  return program;
}


TEST(ProgramLoader, MicrobatchLoopRoundTrip) {
  Program loaded = roundTrip(loopProgram());
  ASSERT_TRUE(loaded.functions[0].loop);
  const runtime::MicrobatchLoop &loop = *loaded.functions[0].loop;
  EXPECT_EQ(loop.begin, 1u);
  EXPECT_EQ(loop.end, 2u);
  EXPECT_EQ(loop.count, 3);
  EXPECT_EQ(loop.slices, std::vector<uint32_t>{6});
  EXPECT_EQ(runtime::instructionRuns(loaded.functions[0])[0], 1);
  EXPECT_EQ(runtime::instructionRuns(loaded.functions[0])[1], 3);
  EXPECT_EQ(runtime::instructionRuns(loaded.functions[0])[2], 1);
  // The order a backend runs the instructions in, and when it reads the
  // next micro-batch's rows.
  std::vector<std::string> walk;
  runtime::walkFunction(
      loaded.functions[0],
      [&](size_t begin, size_t end) {
        walk.push_back(std::to_string(begin) + "-" + std::to_string(end));
      },
      [&](int64_t run) { walk.push_back("rows " + std::to_string(run)); },
      [](size_t) {});
  EXPECT_EQ(walk, (std::vector<std::string>{"0-1", "1-2", "rows 1", "1-2",
                                            "rows 2", "1-2", "2-3"}));
  EXPECT_FALSE(roundTrip(testprograms::minimalProgram()).functions[0].loop);
}

/// A pipeline stage's loop: 8 micro-batches of one row, instruction #1
/// run 3 times over rows 1 and 2 (buffers #6 and #7), two micro-batches a
/// run (rows 3-4, then 5-6).
Program stridedLoopProgram() { return loopProgram(8, {1, 2}, 3, 2); }

TEST(ProgramLoader, StridedMicrobatchLoop) {
  Program loaded = roundTrip(stridedLoopProgram());
  ASSERT_TRUE(loaded.functions[0].loop);
  EXPECT_EQ(loaded.functions[0].loop->stride, 2);
  EXPECT_EQ(loaded.functions[0].loop->slices, (std::vector<uint32_t>{6, 7}));
  EXPECT_EQ(roundTrip(loopProgram()).functions[0].loop->stride, 1);
  auto broken = [](auto change) {
    Program program = stridedLoopProgram();
    change(*program.functions[0].loop);
    return rejection(program);
  };
  using Loop = runtime::MicrobatchLoop;
  EXPECT_EQ(broken([](Loop &loop) { loop.stride = 0; }),
            "p.ptp: train_step micro-batch loop advances 0 micro-batches per "
            "run; it must be between 1 and 2^20");
  // The last run would read rows 7 and 8 of 8.
  EXPECT_EQ(broken([](Loop &loop) { loop.stride = 3; }),
            "p.ptp: train_step micro-batch loop reads 3 micro-batches' rows "
            "from buffer #7, which lies in no tokens or targets buffer that "
            "holds them");
  // Refilling row 2 first (from row 3), then row 1 from row 2, which
  // already holds row 3's: refused rather than a silently wrong batch.
  EXPECT_EQ(broken([](Loop &loop) {
              loop.stride = 1;
              loop.slices = {7, 6};
            }),
            "p.ptp: train_step micro-batch loop run 1 reads the rows of "
            "buffer #6 from where buffer #7 was already refilled");
}

// A loop outside its function, one that never runs, rows past the input,
// and a collective waited for across its edge: one line each.
TEST(ProgramLoader, RejectsBadMicrobatchLoops) {
  auto broken = [](auto change) {
    Program program = loopProgram();
    change(program, *program.functions[0].loop);
    return rejection(program);
  };
  using Loop = runtime::MicrobatchLoop;
  EXPECT_EQ(broken([](Program &, Loop &loop) { loop.end = 5; }),
            "p.ptp: train_step micro-batch loop runs instructions #1 to #5, "
            "but the function has 3");
  EXPECT_EQ(broken([](Program &, Loop &loop) { loop.count = 0; }),
            "p.ptp: train_step micro-batch loop runs 0 times; it must run at "
            "least once");
  EXPECT_EQ(broken([](Program &, Loop &loop) { loop.count = 4; }),
            "p.ptp: train_step micro-batch loop reads 4 micro-batches' rows "
            "from buffer #6, which lies in no tokens or targets buffer that "
            "holds them");
  EXPECT_EQ(broken([](Program &, Loop &loop) { loop.slices = {0}; }),
            "p.ptp: train_step micro-batch loop reads 3 micro-batches' rows "
            "from buffer #0, which lies in no tokens or targets buffer that "
            "holds them");
  EXPECT_EQ(broken([](Program &, Loop &loop) { loop.slices = {9}; }),
            "p.ptp: train_step micro-batch loop refers to buffer #9 of 7");
  Program started = startedProgram();
  started.functions[0].loop = Loop{0, 2, 2, {}};
  EXPECT_EQ(rejection(started),
            "p.ptp: train_step instruction #2 waits for instruction #0 "
            "across the edge of the micro-batch loop (#0 to #2)");
}

} // namespace
