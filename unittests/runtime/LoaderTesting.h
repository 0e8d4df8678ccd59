//===- LoaderTesting.h - load a hand-made program, or its error -*- C++ -*-===//
//
// GoogleTest helpers for the loader's tests: a Program written to .ptp
// bytes (SerializeProgram.h) and loaded again, so the loader's checks run,
// and the one-line message it refuses a program with.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_UNITTESTS_RUNTIME_LOADERTESTING_H
#define PARTITION_UNITTESTS_RUNTIME_LOADERTESTING_H

#include "runtime/program/Program.h"
#include "unittests/runtime/SerializeProgram.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

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

} // namespace partition::testprograms

#endif // PARTITION_UNITTESTS_RUNTIME_LOADERTESTING_H
