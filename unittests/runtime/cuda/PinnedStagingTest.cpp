//===- PinnedStagingTest.cpp - the NVMe tier's pinned blocks, no GPU ------===//
//
// Where each NVMe tier copy of a GPU rank stages in pinned host memory
// (runtime/backend/cuda/PinnedStaging.h): copies in flight at once never
// share bytes, freed blocks are reused (the pool stays at the bytes in
// flight), a read that reuses an earlier read's block waits for that
// read's device copy, and a CPU update's NVMe pair holds one block from
// its read to its write-back's wait.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/PinnedStaging.h"

#include <gtest/gtest.h>

#include <random>

using namespace partition::runtime;
using namespace partition::runtime::cuda;

namespace {

constexpr size_t kNone = PinnedStagingPlan::kNone;

StagedCopy readOf(size_t start, size_t wait, uint64_t bytes) {
  return {start, wait, bytes, /*read=*/true};
}
StagedCopy writeOf(size_t start, size_t wait, uint64_t bytes) {
  return {start, wait, bytes, /*read=*/false};
}

/// Every pair of copies whose start..wait intervals meet has disjoint
/// blocks, within the pool.
void expectDisjointInFlight(const std::vector<StagedCopy> &copies,
                            const PinnedStagingPlan &plan) {
  auto rounded = [](uint64_t b) {
    return std::max<uint64_t>(1, (b + 4095) / 4096) * 4096;
  };
  for (size_t a = 0; a < copies.size(); ++a) {
    EXPECT_EQ(plan.offset[a] % 4096, 0u) << a;
    EXPECT_LE(plan.offset[a] + rounded(copies[a].bytes), plan.bytes) << a;
    for (size_t b = a + 1; b < copies.size(); ++b) {
      bool together = copies[a].start <= copies[b].wait &&
                      copies[b].start <= copies[a].wait;
      bool share = plan.offset[a] < plan.offset[b] + rounded(copies[b].bytes) &&
                   plan.offset[b] < plan.offset[a] + rounded(copies[a].bytes);
      EXPECT_FALSE(together && share) << "copies " << a << " and " << b;
    }
  }
}

TEST(PinnedStaging, CopiesInFlightTogetherGetTheirOwnBlocks) {
  // An update's two moment reads, read ahead, then their write-backs.
  std::vector<StagedCopy> copies = {
      readOf(0, 4, 8192),   // moment1 slice
      readOf(1, 5, 8192),   // moment2 slice
      writeOf(7, 12, 8192), // moment1 back
      writeOf(8, 12, 8192), // moment2 back
  };
  PinnedStagingPlan plan = planPinnedStaging(copies);
  EXPECT_EQ(plan.offset[0], 0u);
  EXPECT_EQ(plan.offset[1], 8192u);
  // The reads are done on the host by the writes' start: their blocks are
  // reused, and the pool is the two blocks in flight.
  EXPECT_EQ(plan.offset[2], 0u);
  EXPECT_EQ(plan.offset[3], 8192u);
  EXPECT_EQ(plan.bytes, 16384u);
  // Writes wait for nothing on the host: their device-to-host copies are
  // ordered after the reads' on the compute stream.
  EXPECT_EQ(plan.after[2], kNone);
  EXPECT_EQ(plan.after[3], kNone);
  expectDisjointInFlight(copies, plan);
}

TEST(PinnedStaging, AReadReusingAReadsBlockWaitsForItsDeviceCopy) {
  std::vector<StagedCopy> copies = {
      readOf(0, 2, 4096),  // 0
      readOf(3, 5, 4096),  // 1: reuses 0's block
      readOf(4, 9, 4096),  // 2: 1 is in flight: a block of its own
      readOf(10, 11, 100), // 3: reuses the first block again (partial)
  };
  PinnedStagingPlan plan = planPinnedStaging(copies);
  EXPECT_EQ(plan.offset[1], 0u);
  EXPECT_EQ(plan.after[0], kNone);
  EXPECT_EQ(plan.after[1], 0u);
  EXPECT_EQ(plan.offset[2], 4096u);
  EXPECT_EQ(plan.after[2], kNone);
  // Both earlier blocks are free; the first fits. Of the reads that used
  // it (0 and 1), the later one's copy implies the other's.
  EXPECT_EQ(plan.offset[3], 0u);
  EXPECT_EQ(plan.after[3], 1u);
  EXPECT_EQ(plan.bytes, 8192u);
  expectDisjointInFlight(copies, plan);
}

TEST(PinnedStaging, ACopyThatIsNotStartedHoldsItsBlockOnlyWhereItIs) {
  std::vector<StagedCopy> copies = {
      readOf(0, 0, 12288), // completes at once
      writeOf(1, 1, 4096),
      readOf(2, 3, 4096),
  };
  PinnedStagingPlan plan = planPinnedStaging(copies);
  EXPECT_EQ(plan.offset[0], 0u);
  EXPECT_EQ(plan.offset[1], 0u);
  EXPECT_EQ(plan.offset[2], 0u);
  EXPECT_EQ(plan.after[2], 0u);
  EXPECT_EQ(plan.bytes, 12288u);
}

TEST(PinnedStaging, ThePoolIsAtMostTheBytesInFlight) {
  // A random schedule as the compiler's: reads ahead and write-backs waited
  // for late, the in-flight bytes within a budget.
  std::mt19937 random(7);
  const uint64_t budget = 64 * 4096;
  std::vector<StagedCopy> copies;
  size_t at = 0;
  uint64_t most = 0;
  for (int c = 0; c < 400; ++c) {
    uint64_t bytes = 4096 * (1 + random() % 8);
    // Close the copies whose bytes would exceed the budget (oldest first),
    // as the pass waits for write-backs.
    auto inFlight = [&] {
      uint64_t total = 0;
      for (const StagedCopy &copy : copies)
        if (copy.wait >= at)
          total += copy.bytes;
      return total;
    };
    while (inFlight() + bytes > budget)
      ++at;
    copies.push_back(
        StagedCopy{at, at + 1 + random() % 12, bytes, random() % 2 == 0});
    most = std::max(most, inFlight());
    ++at;
  }
  PinnedStagingPlan plan = planPinnedStaging(copies);
  expectDisjointInFlight(copies, plan);
  // First fit fragments a little; never past twice the budget here.
  EXPECT_LE(plan.bytes, 2 * budget);
  EXPECT_GE(plan.bytes, most);
  for (size_t c = 0; c < copies.size(); ++c)
    if (plan.after[c] != kNone) {
      EXPECT_TRUE(copies[c].read);
      EXPECT_TRUE(copies[plan.after[c]].read);
      EXPECT_LT(copies[plan.after[c]].wait, copies[c].start);
    }
}

TEST(PinnedStaging, ACpuUpdatesPairHoldsOneBlockFromItsReadToItsWriteBack) {
  // gpt2-tiny's shape: moment reads, their waits, the update, the
  // write-backs waited for late; a host-tier copy takes no block.
  Program program;
  auto buffer = [&](Tier tier, uint64_t bytes) {
    BufferInfo info;
    info.tier = tier;
    info.bytes = bytes;
    program.buffers.push_back(info);
    return uint32_t(program.buffers.size() - 1);
  };
  uint32_t M = buffer(Tier::Nvme, 8192), V = buffer(Tier::Nvme, 8192),
           H = buffer(Tier::Host, 4096), U = buffer(Tier::Nvme, 4096);
  uint32_t m = buffer(Tier::Arena, 8192), v = buffer(Tier::Arena, 8192),
           h = buffer(Tier::Arena, 4096), u = buffer(Tier::Arena, 4096);
  Function function;
  auto copy = [&](bool write, uint32_t from, uint32_t to) {
    Instruction instruction;
    instruction.args = {from, to};
    TierCopy tierCopy;
    tierCopy.write = write;
    tierCopy.started = true;
    instruction.tierCopy = tierCopy;
    function.instructions.push_back(instruction);
    return function.instructions.size() - 1;
  };
  auto wait = [&](size_t started) {
    Instruction instruction;
    instruction.waitFor = uint32_t(started);
    function.instructions.push_back(instruction);
    return function.instructions.size() - 1;
  };
  size_t rm = copy(false, M, m), rv = copy(false, V, v); // 0, 1
  size_t rh = copy(false, H, h);                         // 2: host tier
  wait(rm), wait(rv), wait(rh);                          // 3, 4, 5
  function.instructions.push_back(Instruction{});        // 6: the update
  size_t tm = copy(true, m, M), tv = copy(true, v, V);   // 7, 8
  size_t ru = copy(false, U, u);                         // 9: a GPU update's
  size_t wu = wait(ru);                                  // 10
  size_t wtm = wait(tm), wtv = wait(tv);                 // 11, 12
  std::map<size_t, size_t> pairs = {{rm, tm}, {rv, tv}};

  std::vector<StagedCopy> copies =
      nvmeCopiesOf(program, function, /*replaced=*/{}, pairs);
  ASSERT_EQ(copies.size(), 3u);
  // The pairs at their reads, held to their write-backs' waits; the
  // write-backs take no block of their own.
  EXPECT_EQ(copies[0].start, rm);
  EXPECT_EQ(copies[0].wait, wtm);
  EXPECT_EQ(copies[0].bytes, 8192u);
  EXPECT_EQ(copies[1].start, rv);
  EXPECT_EQ(copies[1].wait, wtv);
  EXPECT_EQ(copies[2].start, ru);
  EXPECT_EQ(copies[2].wait, wu);
  // So the GPU update's read, between them, cannot take their blocks.
  PinnedStagingPlan plan = planPinnedStaging(copies);
  expectDisjointInFlight(copies, plan);
  EXPECT_EQ(plan.offset[2], 16384u);
  EXPECT_EQ(plan.bytes, 20480u);
  // Without the pairs (the update on the GPU), the moments' reads free
  // their blocks at their waits, and the write-backs take blocks again.
  std::vector<StagedCopy> staged =
      nvmeCopiesOf(program, function, /*replaced=*/{}, /*cpuPairs=*/{});
  ASSERT_EQ(staged.size(), 5u);
  EXPECT_EQ(staged[0].wait, 3u);
  EXPECT_EQ(staged[2].start, tm);
  EXPECT_FALSE(staged[2].read);
  // A replaced copy takes none.
  EXPECT_EQ(nvmeCopiesOf(program, function, {rm, tm}, {}).size(), 3u);
}

} // namespace
