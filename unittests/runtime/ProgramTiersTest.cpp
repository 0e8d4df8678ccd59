//===- ProgramTiersTest.cpp - the offload's tiers in the loader and on CPU ===//
//
// A program that keeps a moment in a tier of its own (docs/offload.md):
// the loader's round trip of tiers, tier copies and the offload path, its
// one-line refusals of each thing wrong (and of an older schema version),
// and the CPU backend moving a moment between its tier and the arena,
// host and NVMe, whole and in slices that do not end on a 4096-byte block.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"
#include "runtime/program/Program.h"
#include "runtime/program/ProgramFormat.h"
#include "unittests/runtime/LoaderTesting.h"
#include "unittests/runtime/SerializeProgram.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <filesystem>
#include <numeric>
#include <vector>

using namespace partition;
using runtime::BufferInfo;
using runtime::Instruction;
using runtime::Program;
using runtime::Role;
using runtime::Tier;
using runtime::TierCopy;

namespace {

using testprograms::rejection;
using testprograms::roundTrip;

constexpr uint64_t kBlock = runtime::kTierBlock;

Instruction copy(bool write, uint32_t from, uint32_t to, bool started,
                 std::string label) {
  Instruction instruction;
  instruction.args = {from, to};
  instruction.tierCopy = TierCopy{write, std::move(label), started};
  return instruction;
}

Instruction waitFor(uint32_t started) {
  Instruction instruction;
  instruction.waitFor = started;
  return instruction;
}

/// Appends an f32 buffer of `elements` at `offset` of `tier`.
uint32_t addBuffer(Program &program, Role role, std::string name,
                   int64_t elements, uint64_t offset, Tier tier) {
  BufferInfo buffer;
  buffer.role = role;
  buffer.name = std::move(name);
  buffer.shape = {elements};
  buffer.elements = elements;
  buffer.bytes = uint64_t(elements) * 4;
  buffer.offset = offset;
  buffer.tier = tier;
  program.buffers.push_back(buffer);
  return uint32_t(program.buffers.size() - 1);
}

/// minimalProgram with a moment "w" of `elements` in `tier` (buffer #6),
/// its slices of `slice` elements (#7, ...) and an arena staging buffer
/// per slice at whole blocks; the step reads every slice (started), scales
/// it by 2 in place and writes it back (started), each write-back waited
/// for at the end.
Program tierProgram(Tier tier, int64_t elements, int64_t slice) {
  Program program = testprograms::minimalProgram();
  uint64_t tierBytes = (uint64_t(elements) * 4 + kBlock - 1) / kBlock * kBlock;
  (tier == Tier::Host ? program.hostBytes : program.nvmeBytes) = tierBytes;
  if (tier == Tier::Nvme)
    program.offloadPath = ::testing::TempDir();
  addBuffer(program, Role::Moment1, "w", elements, 0, tier);
  uint64_t arena = kBlock;
  std::vector<Instruction> &code = program.functions[0].instructions;
  std::vector<size_t> writes;
  for (int64_t at = 0; at < elements; at += slice) {
    int64_t size = std::min(slice, elements - at);
    uint32_t part =
        addBuffer(program, Role::Temporary, "", size, uint64_t(at) * 4, tier);
    uint32_t staging =
        addBuffer(program, Role::Temporary, "", size, arena, Tier::Arena);
    arena += (uint64_t(size) * 4 + kBlock - 1) / kBlock * kBlock;
    std::string label = "moment1 w [" + std::to_string(at) + ", " +
                        std::to_string(at + size) + ")";
    code.push_back(copy(false, part, staging, true, label));
    code.push_back(waitFor(uint32_t(code.size() - 1)));
    Instruction scale;
    scale.kernel = runtime::KernelId::Scale;
    scale.args = {staging, staging};
    scale.floats = {2.0f};
    code.push_back(scale);
    code.push_back(copy(true, staging, part, true, label));
    writes.push_back(code.size() - 1);
  }
  for (size_t write : writes)
    code.push_back(waitFor(uint32_t(write)));
  program.arenaBytes = arena;
  return program;
}

TEST(ProgramTiers, RoundTrip) {
  Program loaded = roundTrip(tierProgram(Tier::Nvme, 2048, 1024));
  EXPECT_EQ(loaded.nvmeBytes, 8192u);
  EXPECT_EQ(loaded.hostBytes, 0u);
  EXPECT_EQ(loaded.offloadPath, ::testing::TempDir());
  EXPECT_TRUE(loaded.hasTiers());
  EXPECT_EQ(loaded.buffers[6].tier, Tier::Nvme);
  EXPECT_EQ(loaded.buffers[6].role, Role::Moment1);
  EXPECT_EQ(loaded.buffers[8].tier, Tier::Arena);
  const std::vector<Instruction> &code = loaded.functions[0].instructions;
  ASSERT_TRUE(code[0].tierCopy);
  EXPECT_FALSE(code[0].tierCopy->write);
  EXPECT_TRUE(code[0].started());
  EXPECT_FALSE(code[0].isKernel());
  EXPECT_EQ(code[0].tierCopy->label, "moment1 w [0, 1024)");
  EXPECT_TRUE(code[3].tierCopy->write);
  EXPECT_EQ(*code.back().waitFor, 7u);
  // Without a tier the program has none.
  EXPECT_FALSE(roundTrip(testprograms::minimalProgram()).hasTiers());
}

// A file of an older schema (10, 11: before tiers) is refused in one line.
TEST(ProgramTiers, RejectsAnOlderSchemaVersion) {
  Program program = testprograms::minimalProgram();
  std::string bytes =
      testprograms::serializeProgram(program, ptp::kSchemaVersion - 1);
  try {
    Program::parse(reinterpret_cast<const uint8_t *>(bytes.data()),
                   bytes.size(), "old.ptp");
    FAIL() << "an older program loaded";
  } catch (const runtime::ProgramError &error) {
    EXPECT_EQ(std::string(error.what()),
              "old.ptp: program schema version " +
                  std::to_string(ptp::kSchemaVersion - 1) +
                  ", but this runtime reads version " +
                  std::to_string(ptp::kSchemaVersion) +
                  "; recompile it with this partition-compile");
  }
}

TEST(ProgramTiers, ParameterShardInATier) {
  // ZeRO-3's parameter shards (a flat shard over dp) may live in a tier.
  Program program = tierProgram(Tier::Nvme, 2048, 1024);
  program.mesh = {{"dp", 2, runtime::AxisRole::Data}};
  program.buffers[6].role = Role::Param;
  program.buffers[6].flatAxes = {0};
  program.buffers[6].flatShape = {4096};
  Program loaded = roundTrip(program);
  EXPECT_EQ(loaded.buffers[6].role, Role::Param);
  EXPECT_EQ(loaded.buffers[6].tier, Tier::Nvme);
}

TEST(ProgramTiers, RejectsBadTiers) {
  auto broken = [](auto change) {
    Program program = tierProgram(Tier::Nvme, 2048, 1024);
    change(program);
    return rejection(program);
  };
  EXPECT_EQ(broken([](Program &p) { p.nvmeBytes = 4096; }),
            "p.ptp: buffer #6 [0, +8192) lies outside the nvme tier of 4096 "
            "bytes");
  EXPECT_EQ(broken([](Program &p) { p.nvmeBytes = 8200; }),
            "p.ptp: the nvme tier's 8200 bytes are not whole 4096-byte "
            "blocks up to 2^48; the file is corrupt");
  EXPECT_EQ(broken([](Program &p) { p.buffers[9].offset = 100; }),
            "p.ptp: buffer #9 starts at byte 100 of the nvme tier, not at a "
            "whole 4096-byte block");
  EXPECT_EQ(broken([](Program &p) { p.buffers[6].role = Role::Param; }),
            "p.ptp: buffer #6 ('w') is a parameter but no ZeRO-3 shard in "
            "the nvme tier; only moments and ZeRO-3 parameter shards (and "
            "slices of them) are offloaded");
  EXPECT_EQ(broken([](Program &p) { p.offloadPath.clear(); }),
            "p.ptp: has an nvme tier but the program names no offload path; "
            "recompile it");
  // Kernels touch the arena only.
  EXPECT_EQ(broken([](Program &p) {
              p.functions[0].instructions[2].args = {7, 7};
            }),
            "p.ptp: train_step instruction #2 uses buffer #7 (''), which "
            "lives in the nvme tier; only tier copies reach a tier");
  // Each copy's sides: a tier and the arena, one size, whole blocks.
  EXPECT_EQ(broken([](Program &p) {
              p.functions[0].instructions[0].args = {8, 7};
            }),
            "p.ptp: train_step instruction #0 (tier_read 'moment1 w [0, "
            "1024)') must read from a tier into the arena, but it names "
            "buffers of the arena and the nvme");
  EXPECT_EQ(broken([](Program &p) {
              p.functions[0].instructions[0].args = {6, 8};
            }),
            "p.ptp: train_step instruction #0 (tier_read 'moment1 w [0, "
            "1024)') moves 8192 bytes of f32 into 4096 bytes of f32; both "
            "sides must have one type and size");
  EXPECT_EQ(broken([](Program &p) { p.buffers[8].offset = 4160; }),
            "p.ptp: train_step instruction #0 (tier_read 'moment1 w [0, "
            "1024)') stages in buffer #8 at byte 4160 of the arena, not at "
            "a whole 4096-byte block");
  EXPECT_EQ(broken([](Program &p) {
              p.functions[0].instructions[0].args.push_back(8);
            }),
            "p.ptp: train_step instruction #0 (tier_read 'moment1 w [0, "
            "1024)') has 3 buffers; a tier copy moves one between a tier "
            "and the arena");
  // The staging buffer belongs to the read until its wait.
  EXPECT_EQ(broken([](Program &p) {
              std::swap(p.functions[0].instructions[1],
                        p.functions[0].instructions[2]);
              p.functions[0].instructions[2].waitFor = 0;
            }),
            "p.ptp: train_step instruction #1 touches the buffers of "
            "train_step instruction #0 (moment1 w [0, 1024)), which runs "
            "until its wait at instruction #2");
}

/// A fresh directory for the NVMe tier's file.
std::string freshDirectory() {
  std::string pattern = ::testing::TempDir() + "/tiers-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  EXPECT_NE(::mkdtemp(name.data()), nullptr);
  return name.data();
}

/// The number of files in `directory`.
size_t files(const std::string &directory) {
  size_t count = 0;
  for (const auto &entry : std::filesystem::directory_iterator(directory))
    count += entry.is_regular_file();
  return count;
}

/// Runs `program`'s step twice on the CPU backend: every element of the
/// moment doubled twice, through its tier, whatever the slices.
void expectStepsUpdateTheTier(const Program &program,
                              const runtime::OffloadOptions &offload) {
  Program loaded = roundTrip(program);
  const BufferInfo &moment = loaded.buffers[6];
  std::vector<float> values(size_t(moment.elements));
  std::iota(values.begin(), values.end(), 1.0f);
  {
    std::unique_ptr<runtime::Backend> backend =
        runtime::createCpuBackend(loaded, nullptr, offload);
    backend->write(moment, values.data());
    backend->run(0);
    backend->run(0);
    std::vector<float> result(values.size());
    backend->read(moment, result.data());
    for (size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(result[i], 4.0f * values[i]) << "element " << i;
  }
}

TEST(ProgramTiers, CpuBackendHostTier) {
  expectStepsUpdateTheTier(tierProgram(Tier::Host, 2048, 1024), {});
  expectStepsUpdateTheTier(tierProgram(Tier::Host, 1500, 1024), {});
}

// Whole blocks, a last slice that ends inside a block (1500 elements: 476
// in the second slice), a moment smaller than one block; the file under
// the options' path (not the program's), removed when the backend goes.
TEST(ProgramTiers, CpuBackendNvmeTier) {
  std::string directory = freshDirectory();
  runtime::OffloadOptions offload{directory, "test"};
  for (auto [elements, slice] :
       {std::pair<int64_t, int64_t>{2048, 1024}, {1500, 1024}, {100, 1024}}) {
    Program program = tierProgram(Tier::Nvme, elements, slice);
    program.offloadPath = "/nonexistent";
    expectStepsUpdateTheTier(program, offload);
    EXPECT_EQ(files(directory), 0u);
  }
}

// A missing directory is said before anything runs, naming it.
TEST(ProgramTiers, CpuBackendMissingPath) {
  Program loaded = roundTrip(tierProgram(Tier::Nvme, 2048, 1024));
  try {
    runtime::createCpuBackend(loaded, nullptr, {"/nonexistent/dir", "test"});
    FAIL() << "a missing offload path was accepted";
  } catch (const runtime::ProgramError &error) {
    EXPECT_EQ(std::string(error.what()),
              "the offload's nvme tier (8192 bytes of optimizer state for "
              "this rank): the offload path '/nonexistent/dir' is not a "
              "directory: create it or give another path");
  }
}

} // namespace
