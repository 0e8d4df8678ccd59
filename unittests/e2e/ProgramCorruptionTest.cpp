//===- ProgramCorruptionTest.cpp - every byte of a program, corrupted -----===//
//
// A real program (a small GPT-2 compiled as partition-compile does: AdamW
// step + eval step) with one byte changed, at every offset of the file and
// in several ways, must either be rejected with a ProgramError (by the
// loader, by the backend's shape checks, or by a kernel's run-time checks)
// or run. It must never crash, hang, throw anything else, or allocate
// memory out of proportion to the file: the file fixes the arena, so a
// corrupt size field must not turn into a multi-gigabyte allocation.
// Running the corrupted programs also exercises the CPU kernels on whatever
// shapes and constants pass the checks.
//
// The libFuzzer target fuzz/ProgramLoaderFuzzer.cpp explores further (any
// number of changes) but stops at the loader and checkInstruction; this
// test is exhaustive over single-byte changes and runs them.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"
#include "runtime/program/Program.h"
#include "unittests/e2e/TestPrograms.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

using namespace partition;

namespace {

enum class Outcome { Rejected, RejectedByBackend, RejectedAtRun, Ran };

/// Loads `bytes` and runs every function once on valid inputs.
Outcome loadAndRun(const std::string &bytes, int64_t vocab) {
  runtime::Program program;
  try {
    program = runtime::Program::parse(
        reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(),
        "<corrupted>");
  } catch (const runtime::ProgramError &) {
    return Outcome::Rejected;
  }
  std::unique_ptr<runtime::Backend> backend;
  try {
    backend = runtime::createCpuBackend(program);
  } catch (const runtime::ProgramError &) {
    return Outcome::RejectedByBackend;
  }
  try {
    // Whatever the (possibly corrupted) shapes, the host data fits them.
    for (runtime::Role role : {runtime::Role::Tokens, runtime::Role::Targets}) {
      const runtime::BufferInfo &buffer = program.single(role);
      std::vector<int32_t> ids(buffer.elements);
      for (size_t i = 0; i < ids.size(); ++i)
        ids[i] = int32_t((i * 7 + 3) % uint64_t(vocab));
      backend->write(buffer, ids.data());
    }
    for (size_t index : program.withRole(runtime::Role::Param)) {
      const runtime::BufferInfo &buffer = program.buffers[index];
      std::vector<float> values(buffer.elements);
      for (size_t i = 0; i < values.size(); ++i)
        values[i] = 0.02f * float(int(i % 13) - 6);
      backend->write(buffer, values.data());
    }
    for (size_t index : program.withRole(runtime::Role::LearningRate)) {
      float lr = 1e-3f;
      if (program.buffers[index].elements == 1)
        backend->write(program.buffers[index], &lr);
    }
    for (size_t f = 0; f < program.functions.size(); ++f)
      backend->run(f);
    float loss;
    backend->read(program.single(runtime::Role::Loss), &loss);
  } catch (const runtime::ProgramError &) {
    return Outcome::RejectedAtRun;
  }
  return Outcome::Ran;
}

/// GPT-2 as small as it gets with every kind of instruction (one layer,
/// C 16, 2 heads): a shorter file and cheaper runs, the same structure.
model::ModelConfig tinyGpt2() {
  model::ModelConfig config = e2e::smallGpt2();
  config.layers = 1;
  config.hidden = 16;
  config.heads = 2;
  config.kvHeads = 2;
  config.ffn = 32;
  config.vocab = 32;
  config.seqLen = 8;
  config.batch = 1;
  return config;
}

TEST(ProgramCorruption, EverySingleByte) {
  model::ModelConfig config = tinyGpt2();
  std::string original = e2e::compileProgram(config, 1, "adamw");
  ASSERT_FALSE(original.empty());
  ASSERT_EQ(loadAndRun(original, config.vocab), Outcome::Ran);

  auto start = std::chrono::steady_clock::now();
  // XOR 0xFF flips every bit (sizes and offsets jump far), XOR 0x01 makes
  // the smallest change (an off-by-one shape, index or kernel id), 0x00
  // clears (vector lengths and offsets to zero).
  const std::vector<std::pair<const char *, uint8_t (*)(uint8_t)>> changes = {
      {"xor 0xff", [](uint8_t b) -> uint8_t { return b ^ 0xff; }},
      {"xor 0x01", [](uint8_t b) -> uint8_t { return b ^ 0x01; }},
      {"zero", [](uint8_t) -> uint8_t { return 0; }},
  };
  std::map<Outcome, size_t> outcomes;
  size_t unchanged = 0;
  for (auto &[what, change] : changes)
    for (size_t offset = 0; offset < original.size(); ++offset) {
      std::string bytes = original;
      uint8_t before = uint8_t(bytes[offset]);
      bytes[offset] = char(change(before));
      if (bytes[offset] == char(before)) {
        ++unchanged;
        continue;
      }
      try {
        ++outcomes[loadAndRun(bytes, config.vocab)];
      } catch (const std::exception &error) {
        ADD_FAILURE() << "byte " << offset << " (" << what
                      << "): not a ProgramError: " << error.what();
      }
    }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  std::printf("program of %zu bytes, %zu single-byte corruptions: %zu "
              "rejected by the loader, %zu by the backend's checks, %zu at "
              "run time, %zu ran; %.2f s\n",
              original.size(), changes.size() * original.size() - unchanged,
              outcomes[Outcome::Rejected],
              outcomes[Outcome::RejectedByBackend],
              outcomes[Outcome::RejectedAtRun], outcomes[Outcome::Ran],
              seconds);
  // The loader verifies the structure: most changes must be caught before
  // anything runs (measured: 77% of 32252; 23% run, mostly changes to
  // names, float constants and parameter values the checks cannot know).
  EXPECT_GT(outcomes[Outcome::Rejected] + outcomes[Outcome::RejectedByBackend],
            outcomes[Outcome::Ran]);
}

/// The arena size is one field of the file; changed, it is rejected with a
/// message instead of becoming an allocation (and memset) of up to 1 TiB.
/// (Before the loader compared it with the buffers, a change of one byte
/// made partition-run allocate and zero ~17 GB.)
TEST(ProgramCorruption, OversizedArena) {
  std::string original = e2e::compileProgram(tinyGpt2(), 1, "adamw");
  ASSERT_FALSE(original.empty());
  runtime::Program program = runtime::Program::parse(
      reinterpret_cast<const uint8_t *>(original.data()), original.size(),
      "<original>");
  std::string field(reinterpret_cast<const char *>(&program.arenaBytes), 8);
  size_t offset = original.find(field);
  ASSERT_NE(offset, std::string::npos);
  ASSERT_EQ(original.find(field, offset + 1), std::string::npos)
      << "the arena size is not a unique byte pattern; pick another model";
  for (uint64_t arena : {program.arenaBytes + 4096, program.arenaBytes * 2,
                         uint64_t(1) << 34, uint64_t(1) << 40}) {
    std::string bytes = original;
    bytes.replace(offset, 8, reinterpret_cast<const char *>(&arena), 8);
    try {
      runtime::Program::parse(reinterpret_cast<const uint8_t *>(bytes.data()),
                              bytes.size(), "<oversized>");
      ADD_FAILURE() << "an arena of " << arena << " bytes was accepted";
    } catch (const runtime::ProgramError &error) {
      EXPECT_NE(std::string(error.what()).find("arena size"),
                std::string::npos)
          << error.what();
    }
  }
  // Padding up to a page is accepted.
  uint64_t padded = (program.arenaBytes + 4095) / 4096 * 4096;
  std::string bytes = original;
  bytes.replace(offset, 8, reinterpret_cast<const char *>(&padded), 8);
  EXPECT_EQ(loadAndRun(bytes, 32), Outcome::Ran);
}

/// A truncated program is rejected whatever the length, unless only the
/// zero padding after the last string was cut off (the verifier checks every
/// byte the program refers to, so then the whole program is still there).
TEST(ProgramCorruption, EveryTruncation) {
  model::ModelConfig config = e2e::smallLlama();
  std::string original = e2e::compileProgram(config, 1, "adamw");
  ASSERT_FALSE(original.empty());
  size_t padding = 0;
  while (padding < original.size() &&
         original[original.size() - 1 - padding] == 0)
    ++padding;
  for (size_t length = 0; length < original.size(); ++length) {
    Outcome outcome = loadAndRun(original.substr(0, length), config.vocab);
    // Cutting the terminator of the last string is caught; the padding
    // after it cannot be.
    if (length + padding < original.size())
      EXPECT_EQ(outcome, Outcome::Rejected) << "truncated to " << length;
    else
      EXPECT_TRUE(outcome == Outcome::Rejected || outcome == Outcome::Ran)
          << "truncated to " << length;
  }
}

} // namespace
