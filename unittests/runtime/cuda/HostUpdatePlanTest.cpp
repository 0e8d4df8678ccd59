//===- HostUpdatePlanTest.cpp - which updates run on the CPU, no GPU ------===//
//
// runtime/backend/cuda/HostUpdatePlan.h on hand-written programs shaped as
// --rt-offload-optimizer writes them: an update whose moments are staged
// from the host tier runs on the CPU and replaces its copies and their
// waits; from the NVMe tier, it runs on the CPU between the copies, which
// stay; one whose moments are in the arena, or whose copies do not pair
// up, stays the GPU's.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/HostUpdatePlan.h"

#include <gtest/gtest.h>

using namespace partition::runtime;
using namespace partition::runtime::cuda;

namespace {

/// A program's buffers and one function, written instruction by
/// instruction.
struct Builder {
  Program program;
  Function function;

  uint32_t buffer(const std::string &name, Tier tier = Tier::Arena,
                  DType dtype = DType::F32) {
    BufferInfo info;
    info.name = name;
    info.tier = tier;
    info.dtype = dtype;
    info.shape = {16};
    info.elements = 16;
    info.bytes = 64;
    program.buffers.push_back(info);
    return uint32_t(program.buffers.size() - 1);
  }
  size_t copy(bool write, uint32_t from, uint32_t to, bool started = true) {
    Instruction instruction;
    instruction.args = {from, to};
    TierCopy tierCopy;
    tierCopy.write = write;
    tierCopy.started = started;
    tierCopy.label = program.buffers[write ? to : from].name;
    instruction.tierCopy = tierCopy;
    function.instructions.push_back(instruction);
    return function.instructions.size() - 1;
  }
  size_t wait(size_t started) {
    Instruction instruction;
    instruction.waitFor = uint32_t(started);
    function.instructions.push_back(instruction);
    return function.instructions.size() - 1;
  }
  size_t kernel(KernelId id, std::vector<uint32_t> args) {
    Instruction instruction;
    instruction.kernel = id;
    instruction.args = std::move(args);
    function.instructions.push_back(instruction);
    return function.instructions.size() - 1;
  }
};

std::vector<size_t> sorted(std::vector<size_t> values) {
  std::sort(values.begin(), values.end());
  return values;
}

TEST(HostUpdatePlan, AnUpdateOnHostTierMomentsRunsOnTheCpu) {
  Builder b;
  uint32_t w = b.buffer("w"), g = b.buffer("g"), step = b.buffer("step"),
           lr = b.buffer("lr");
  uint32_t M = b.buffer("moment1 w", Tier::Host),
           V = b.buffer("moment2 w", Tier::Host);
  uint32_t m = b.buffer("staging m"), v = b.buffer("staging v");
  uint32_t other = b.buffer("h");
  size_t rm = b.copy(false, M, m);           // 0
  size_t rv = b.copy(false, V, v);           // 1
  b.kernel(KernelId::Gelu, {other, other});  // 2: the read runs under it
  size_t wrm = b.wait(rm), wrv = b.wait(rv); // 3, 4
  size_t update =
      b.kernel(KernelId::AdamW, {w, g, m, v, step, lr, w, m, v}); // 5
  size_t tm = b.copy(true, m, M), tv = b.copy(true, v, V);        // 6, 7
  b.kernel(KernelId::Gelu, {other, other});                       // 8
  size_t wtm = b.wait(tm), wtv = b.wait(tv);                      // 9, 10

  std::vector<HostUpdate> plan = planHostUpdates(b.program, b.function);
  ASSERT_EQ(plan.size(), 1u);
  const HostUpdate &u = plan[0];
  EXPECT_EQ(u.adamw, update);
  EXPECT_EQ(u.param, w);
  EXPECT_FALSE(u.tierParam);
  EXPECT_EQ(u.gradient, g);
  // The CPU reads and writes the moments in the tier, not the staging.
  EXPECT_EQ(u.moment1.tierBuffer, M);
  EXPECT_EQ(u.moment1.tier, Tier::Host);
  EXPECT_EQ(u.moment1.read, rm);
  EXPECT_EQ(u.moment1.write, tm);
  EXPECT_EQ(u.moment2.tierBuffer, V);
  EXPECT_EQ(u.moment2.read, rv);
  EXPECT_EQ(u.moment2.write, tv);
  EXPECT_EQ(u.step, step);
  EXPECT_EQ(u.lr, lr);
  EXPECT_EQ(sorted(u.replaced), sorted({rm, rv, wrm, wrv, tm, tv, wtm, wtv}));
}

TEST(HostUpdatePlan, AParameterShardInTheHostTierIsUpdatedWhereItIs) {
  Builder b;
  uint32_t g = b.buffer("g"), step = b.buffer("step"), lr = b.buffer("lr");
  uint32_t W = b.buffer("w", Tier::Host), M = b.buffer("moment1 w", Tier::Host),
           V = b.buffer("moment2 w", Tier::Host);
  uint32_t pack = b.buffer("staging pack"), bucket = b.buffer("bucket");
  uint32_t w = b.buffer("staging w"), m = b.buffer("staging m"),
           v = b.buffer("staging v");
  // The forward's pack read of the shard is not the update's: it stays.
  size_t rp = b.copy(false, W, pack);
  b.wait(rp);
  b.kernel(KernelId::FlatPack, {pack, bucket});
  size_t rw = b.copy(false, W, w), rm = b.copy(false, M, m),
         rv = b.copy(false, V, v);
  size_t w1 = b.wait(rw), w2 = b.wait(rm), w3 = b.wait(rv);
  b.kernel(KernelId::AdamW, {w, g, m, v, step, lr, w, m, v});
  size_t tw = b.copy(true, w, W), tm = b.copy(true, m, M),
         tv = b.copy(true, v, V, /*started=*/false);
  size_t w4 = b.wait(tw), w5 = b.wait(tm);

  std::vector<HostUpdate> plan = planHostUpdates(b.program, b.function);
  ASSERT_EQ(plan.size(), 1u);
  ASSERT_TRUE(plan[0].tierParam);
  EXPECT_EQ(plan[0].tierParam->tierBuffer, W);
  EXPECT_EQ(plan[0].tierParam->read, rw);
  EXPECT_EQ(plan[0].tierParam->write, tw);
  EXPECT_EQ(sorted(plan[0].replaced),
            sorted({rw, rm, rv, w1, w2, w3, tw, tm, tv, w4, w5}));
}

TEST(HostUpdatePlan, OnNvmeTheCopiesStayAndTheCpuUpdatesBetweenThem) {
  Builder b;
  uint32_t g = b.buffer("g"), step = b.buffer("step"), lr = b.buffer("lr");
  // The moments on NVMe, ZeRO-3's shard in the host tier (bf16's masters
  // on NVMe and moments in host memory are the same, mirrored).
  uint32_t W = b.buffer("w", Tier::Host), M = b.buffer("moment1 w", Tier::Nvme),
           V = b.buffer("moment2 w", Tier::Nvme);
  uint32_t w = b.buffer("staging w"), m = b.buffer("staging m"),
           v = b.buffer("staging v");
  size_t rw = b.copy(false, W, w), rm = b.copy(false, M, m),
         rv = b.copy(false, V, v);
  size_t w1 = b.wait(rw);
  b.wait(rm);
  b.wait(rv);
  b.kernel(KernelId::AdamW, {w, g, m, v, step, lr, w, m, v});
  size_t tw = b.copy(true, w, W), tm = b.copy(true, m, M),
         tv = b.copy(true, v, V);
  size_t w4 = b.wait(tw);
  b.wait(tm);
  b.wait(tv);

  std::vector<HostUpdate> plan = planHostUpdates(b.program, b.function);
  ASSERT_EQ(plan.size(), 1u);
  const HostUpdate &u = plan[0];
  EXPECT_EQ(u.moment1.tier, Tier::Nvme);
  EXPECT_EQ(u.moment1.read, rm);
  EXPECT_EQ(u.moment1.write, tm);
  EXPECT_EQ(u.moment2.tier, Tier::Nvme);
  EXPECT_EQ(u.moment2.read, rv);
  EXPECT_EQ(u.moment2.write, tv);
  ASSERT_TRUE(u.tierParam);
  EXPECT_EQ(u.tierParam->tier, Tier::Host);
  // Only the host tier's copies are not run; the NVMe ones fill and empty
  // the pinned blocks the CPU updates.
  EXPECT_EQ(sorted(u.replaced), sorted({rw, tw, w1, w4}));
}

TEST(HostUpdatePlan, UpdatesOnArenaMomentsStayOnTheGpu) {
  Builder b;
  uint32_t w = b.buffer("w"), g = b.buffer("g"), step = b.buffer("step"),
           lr = b.buffer("lr");
  // Moments in the arena (parameter offload alone).
  uint32_t m = b.buffer("moment1 u"), v = b.buffer("moment2 u");
  b.kernel(KernelId::AdamW, {w, g, m, v, step, lr, w, m, v});
  EXPECT_TRUE(planHostUpdates(b.program, b.function).empty());
}

TEST(HostUpdatePlan, CopiesThatDoNotPairUpLeaveTheUpdateToTheGpu) {
  Builder b;
  uint32_t w = b.buffer("w"), g = b.buffer("g"), step = b.buffer("step"),
           lr = b.buffer("lr");
  uint32_t M = b.buffer("moment1 w", Tier::Host),
           V = b.buffer("moment2 w", Tier::Host),
           elsewhere = b.buffer("moment1 u", Tier::Host);
  uint32_t m = b.buffer("staging m"), v = b.buffer("staging v");
  b.wait(b.copy(false, M, m));
  b.wait(b.copy(false, V, v));
  // Not in place: the kernel writes new buffers.
  uint32_t w2 = b.buffer("w'"), m2 = b.buffer("m'"), v2 = b.buffer("v'");
  b.kernel(KernelId::AdamW, {w, g, m, v, step, lr, w2, m2, v2});
  // In place, but moment1's staging is written back to another tier buffer.
  b.kernel(KernelId::AdamW, {w, g, m, v, step, lr, w, m, v});
  b.wait(b.copy(true, m, elsewhere));
  b.wait(b.copy(true, v, V));
  EXPECT_TRUE(planHostUpdates(b.program, b.function).empty());
}

} // namespace
