//===- LoaderTesting.h - load a hand-made program, or its error -*- C++ -*-===//
//
// GoogleTest helpers for the loader's tests: a Program written to .ptp
// bytes (SerializeProgram.h) and loaded again, so the loader's checks run,
// the one-line message it refuses a program with, and the instructions and
// small programs several of them build on.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_UNITTESTS_RUNTIME_LOADERTESTING_H
#define PARTITION_UNITTESTS_RUNTIME_LOADERTESTING_H

#include "runtime/program/Program.h"
#include "unittests/runtime/SerializeProgram.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace partition::testprograms {

/// `program` through the .ptp bytes and the loader.
inline runtime::Program roundTrip(const runtime::Program &program) {
  std::string bytes = serializeProgram(program);
  return runtime::Program::parse(
      reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(), "p.ptp");
}

/// The loader's message for `program` (checked to be one line), or "" when
/// it loads.
inline std::string rejection(const runtime::Program &program) {
  try {
    roundTrip(program);
  } catch (const runtime::ProgramError &error) {
    std::string message = error.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  }
  return "";
}

/// An all-reduce over `axes` of buffers `args`.
inline runtime::Instruction allReduce(std::vector<uint32_t> args, std::vector<uint32_t> axes,
                      std::string label = "grads bucket 0",
                      runtime::ReduceKind reduce = runtime::ReduceKind::Avg) {
  runtime::Instruction instruction;
  instruction.args = std::move(args);
  instruction.collective =
      runtime::Collective{runtime::CollectiveKind::AllReduce, reduce, std::move(axes),
                 std::move(label)};
  return instruction;
}

/// minimalProgram on a dp=2 x tp=2 mesh with one valid bucket.
inline runtime::Program meshProgram() {
  runtime::Program program = testprograms::minimalProgram();
  program.mesh = {{"dp", 2, runtime::AxisRole::Data}, {"pp", 1}, {"tp", 2}};
  program.functions[0].instructions.push_back(allReduce({0, 1}, {0}));
  return program;
}

/// A kernel instruction: gelu of buffer `in` into buffer `out` (both [4]
/// or both [5] in minimalProgram).
inline runtime::Instruction gelu(uint32_t in, uint32_t out) {
  runtime::Instruction instruction;
  instruction.kernel = runtime::KernelId::Gelu;
  instruction.args = {in, out};
  return instruction;
}

inline runtime::Instruction waitFor(uint32_t collective) {
  runtime::Instruction instruction;
  instruction.waitFor = collective;
  return instruction;
}

/// meshProgram whose bucket (buffers a and b) is started, then waited for
/// after a kernel on other buffers.
inline runtime::Program startedProgram() {
  runtime::Program program = meshProgram();
  std::vector<runtime::Instruction> &code = program.functions[0].instructions;
  code[0].collective->started = true;
  code.push_back(gelu(2, 2));
  code.push_back(waitFor(0));
  return program;
}

} // namespace partition::testprograms

#endif // PARTITION_UNITTESTS_RUNTIME_LOADERTESTING_H
