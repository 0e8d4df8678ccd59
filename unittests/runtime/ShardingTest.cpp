//===- ShardingTest.cpp - sharded state: blocks and the loader's checks ---===//
//
// The block arithmetic of runtime/train/Sharding.h against blocks written out by
// hand (dimensions split over one axis and over two, in either order), and
// the loader's reading and checking of Buffer.sharding.
//
//===----------------------------------------------------------------------===//

#include "runtime/program/Program.h"
#include "runtime/train/Sharding.h"
#include "unittests/runtime/LoaderTesting.h"
#include "unittests/runtime/SerializeProgram.h"

#include <gtest/gtest.h>

#include <numeric>

using namespace partition;
using namespace partition::runtime;

namespace {

using testprograms::rejection;
using testprograms::roundTrip;

// Mesh dp=2 x tp=2: axis 0 is dp, axis 1 is tp.
const std::vector<int64_t> kMesh = {2, 2};

std::vector<float> iota(int64_t n) {
  std::vector<float> values(n);
  std::iota(values.begin(), values.end(), 0.0f);
  return values;
}

std::vector<float> extract(const std::vector<float> &logical,
                           const std::vector<int64_t> &logicalShape,
                           const std::vector<int64_t> &local,
                           const std::vector<int64_t> &block) {
  int64_t elements = 1;
  for (int64_t dim : local)
    elements *= dim;
  std::vector<float> out(elements, -1.0f);
  extractBlock(logical.data(), logicalShape, local, block, out.data());
  return out;
}

TEST(Sharding, BlockIndexOfOneAxis) {
  Sharding rows = {{1}, {}}; // [[tp], []]
  EXPECT_EQ(blockIndices(rows, {0, 0}, kMesh), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(blockIndices(rows, {1, 1}, kMesh), (std::vector<int64_t>{1, 0}));
  Sharding columns = {{}, {0}}; // [[], [dp]]
  EXPECT_EQ(blockIndices(columns, {1, 0}, kMesh), (std::vector<int64_t>{0, 1}));
}

TEST(Sharding, BlockIndexOfTwoAxesIsMajorFirst) {
  // [[dp, tp]]: dp major, so (dp=1, tp=0) holds block 2 of 4.
  EXPECT_EQ(blockIndices({{0, 1}}, {1, 0}, kMesh), (std::vector<int64_t>{2}));
  EXPECT_EQ(blockIndices({{0, 1}}, {0, 1}, kMesh), (std::vector<int64_t>{1}));
  // [[tp, dp]]: tp major, so the same device holds block 1.
  EXPECT_EQ(blockIndices({{1, 0}}, {1, 0}, kMesh), (std::vector<int64_t>{1}));
  EXPECT_EQ(blockIndices({{1, 0}}, {0, 1}, kMesh), (std::vector<int64_t>{2}));
}

TEST(Sharding, ExtractsRowAndColumnBlocks) {
  // Logical [4, 3] = 0..11 row-major.
  std::vector<float> logical = iota(12);
  EXPECT_EQ(extract(logical, {4, 3}, {2, 3}, {1, 0}),
            (std::vector<float>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(extract(logical, {4, 3}, {4, 1}, {0, 2}),
            (std::vector<float>{2, 5, 8, 11}));
  // A dimension split over both axes: [4, 3] in 4 blocks of one row.
  EXPECT_EQ(extract(logical, {4, 3}, {1, 3}, {2, 0}),
            (std::vector<float>{6, 7, 8}));
  // Both dimensions split: logical [4, 4], block (1, 0) of [2, 2].
  EXPECT_EQ(extract(iota(16), {4, 4}, {2, 2}, {1, 0}),
            (std::vector<float>{8, 9, 12, 13}));
}

TEST(Sharding, EveryDevicesBlockRebuildsTheTensor) {
  // [2, 4, 6] split [[dp], [], [tp]] and [[], [tp, dp], []]: inserting the
  // block of every device of the mesh gives the logical tensor back.
  for (const auto &[sharding, local] :
       std::vector<std::pair<Sharding, std::vector<int64_t>>>{
           {{{0}, {}, {1}}, {1, 4, 3}}, {{{}, {1, 0}, {}}, {2, 1, 6}}}) {
    std::vector<int64_t> shape = {2, 4, 6};
    std::vector<float> logical = iota(48), rebuilt(48, -1.0f);
    for (int64_t dp = 0; dp < 2; ++dp)
      for (int64_t tp = 0; tp < 2; ++tp) {
        std::vector<int64_t> block = blockIndices(sharding, {dp, tp}, kMesh);
        std::vector<float> values = extract(logical, shape, local, block);
        insertBlock(values.data(), local, block, shape, rebuilt.data());
      }
    EXPECT_EQ(rebuilt, logical);
  }
}

TEST(Sharding, GroupsAndTheirMembers) {
  EXPECT_EQ(shardingGroup({{2}, {0}}), (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(shardingGroup({{1, 0}, {}}), (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(shardingGroup({}).empty());
  // Mesh [dp=2, pp=3, tp=2], the device (1, 2, 0): the group over [dp, tp]
  // keeps pp = 2 and ranks its members dp major.
  std::vector<int64_t> sizes = {2, 3, 2};
  EXPECT_EQ(groupMemberCoordinates({1, 2, 0}, {0, 2}, sizes, 1),
            (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(groupMemberCoordinates({1, 2, 0}, {0, 2}, sizes, 2),
            (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(groupMemberCoordinates({1, 2, 0}, {1}, sizes, 0),
            (std::vector<int64_t>{1, 0, 0}));
}

//===----------------------------------------------------------------------===//
// The loader
//===----------------------------------------------------------------------===//

/// minimalProgram on a dp=2 x tp=2 mesh whose buffer "b" [2, 3] is the
/// parameter "w", split [[tp], []]: logical [4, 3].
Program shardedProgram() {
  Program program = testprograms::minimalProgram();
  program.mesh = {{"dp", 2, runtime::AxisRole::Data}, {"tp", 2}};
  BufferInfo &b = program.buffers[1];
  b.role = Role::Param;
  b.name = "w";
  b.sharding = {{1}, {}};
  return program;
}

TEST(ShardedBuffers, RoundTrip) {
  Program loaded = roundTrip(shardedProgram());
  const BufferInfo &w = loaded.buffers[1];
  EXPECT_TRUE(w.sharded());
  EXPECT_EQ(w.sharding, (Sharding{{1}, {}}));
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w.logicalShape(), (std::vector<int64_t>{4, 3}));
  // Unsharded buffers are their own logical tensor.
  EXPECT_FALSE(loaded.buffers[0].sharded());
  EXPECT_EQ(loaded.buffers[0].logicalShape(), loaded.buffers[0].shape);

  Program both = shardedProgram();
  both.buffers[1].sharding = {{1, 0}, {}};
  EXPECT_EQ(roundTrip(both).buffers[1].logicalShape(),
            (std::vector<int64_t>{8, 3}));
  both.buffers[1].sharding = {{0}, {1}};
  EXPECT_EQ(roundTrip(both).buffers[1].logicalShape(),
            (std::vector<int64_t>{4, 6}));
}

TEST(ShardedBuffers, NoAxesIsReplicated) {
  Program program = shardedProgram();
  program.buffers[1].sharding = {{}, {}};
  EXPECT_FALSE(roundTrip(program).buffers[1].sharded());
  // Moments may be sharded as their parameter is.
  program.buffers[1].role = Role::Moment2;
  program.buffers[1].sharding = {{}, {0}};
  EXPECT_TRUE(roundTrip(program).buffers[1].sharded());
  // So may logits (partition-compile --logits): the runtime gathers them.
  program.buffers[1].role = Role::Logits;
  EXPECT_TRUE(roundTrip(program).buffers[1].sharded());
}

TEST(ShardedBuffers, Rejections) {
  auto with = [](auto change) {
    Program program = shardedProgram();
    change(program);
    return rejection(program);
  };
  EXPECT_EQ(with([](Program &p) { p.buffers[1].role = Role::Temporary; }),
            "p.ptp: sharded buffer #1 ('w') has role temporary; only "
            "parameters, moments, tokens, targets and logits can be sharded");
  EXPECT_EQ(with([](Program &p) { p.buffers[1].sharding = {{1}}; }),
            "p.ptp: sharded buffer #1 ('w') has a sharding of 1 dimensions, "
            "but its shape [2,3] has rank 2");
  EXPECT_EQ(with([](Program &p) { p.buffers[1].sharding = {{1}, {}, {}}; }),
            "p.ptp: sharded buffer #1 ('w') has a sharding of 3 dimensions, "
            "but its shape [2,3] has rank 2");
  EXPECT_EQ(with([](Program &p) { p.buffers[1].sharding = {{2}, {}}; }),
            "p.ptp: sharded buffer #1 ('w') splits dimension 0 over axis #2, "
            "but the mesh has 2 axes");
  EXPECT_EQ(with([](Program &p) { p.buffers[1].sharding = {{1}, {1}}; }),
            "p.ptp: sharded buffer #1 ('w') uses mesh axis 'tp' twice");
  EXPECT_EQ(with([](Program &p) { p.buffers[1].sharding = {{0, 0}, {}}; }),
            "p.ptp: sharded buffer #1 ('w') uses mesh axis 'dp' twice");
  EXPECT_EQ(with([](Program &p) { p.mesh.clear(); }),
            "p.ptp: sharded buffer #1 ('w') needs a device mesh, but the "
            "program has none");
  EXPECT_EQ(with([](Program &p) { p.buffers[1].dtype = DType::I32; }),
            "p.ptp: sharded buffer #1 ('w') is not f32");
  EXPECT_EQ(with([](Program &p) {
              p.buffers[1].role = Role::Step;
            }),
            "p.ptp: sharded buffer #1 ('w') has role step; only parameters, "
            "moments, tokens, targets and logits can be sharded");
  // Logits (partition-compile --logits) are f32 blocks, never flat.
  EXPECT_EQ(with([](Program &p) {
              p.buffers[1].role = Role::Logits;
              p.buffers[1].dtype = DType::I32;
            }),
            "p.ptp: sharded buffer #1 ('w') is not f32");
}

/// ZeRO's flat shards: "w" is chunk i of the flattened [2, 5] tensor
/// (10 elements, chunks of 5 over dp = 2), optionally of a block of it.
Program flatProgram() {
  Program program = shardedProgram();
  BufferInfo &w = program.buffers[1];
  w.sharding.clear();
  w.flatAxes = {0};
  w.flatShape = {2, 5};
  w.shape = {5};
  return program;
}

TEST(FlatShards, RoundTrip) {
  Program loaded = roundTrip(flatProgram());
  const BufferInfo &w = loaded.buffers[1];
  EXPECT_TRUE(w.sharded());
  EXPECT_TRUE(w.flat());
  EXPECT_EQ(w.shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(w.blockShape(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(w.logicalShape(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(w.stateGroup(), (std::vector<uint32_t>{0}));
  // A chunk of a tensor-parallel block: the logical tensor is the block's.
  Program block = flatProgram();
  block.buffers[1].sharding = {{1}, {}};
  Program blockLoaded = roundTrip(block);
  const BufferInfo &b = blockLoaded.buffers[1];
  EXPECT_EQ(b.logicalShape(), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(b.stateGroup(), (std::vector<uint32_t>{0, 1}));
}

TEST(FlatShards, Rejections) {
  auto with = [](auto change) {
    Program program = flatProgram();
    change(program);
    return rejection(program);
  };
  EXPECT_EQ(with([](Program &p) { p.buffers[1].shape = {4}; }),
            "p.ptp: sharded buffer #1 ('w') is a flat shard of 10 elements "
            "over 2 devices, so its shape must be [5], not [4]");
  EXPECT_EQ(with([](Program &p) { p.buffers[1].flatAxes = {2}; }),
            "p.ptp: sharded buffer #1 ('w') is a flat shard over axis #2, "
            "but the mesh has 2 axes");
  EXPECT_EQ(with([](Program &p) { p.buffers[1].flatAxes = {0, 0}; }),
            "p.ptp: sharded buffer #1 ('w') uses mesh axis 'dp' twice");
  EXPECT_EQ(with([](Program &p) { p.buffers[1].sharding = {{0}, {}}; }),
            "p.ptp: sharded buffer #1 ('w') uses mesh axis 'dp' twice");
  EXPECT_EQ(with([](Program &p) { p.buffers[1].flatShape = {2, 0}; }),
            "p.ptp: sharded buffer #1 ('w') has a flat_shape [2,0] that is "
            "empty or too large");
  EXPECT_EQ(with([](Program &p) { p.buffers[1].sharding = {{1}}; }),
            "p.ptp: sharded buffer #1 ('w') has a sharding of 1 dimensions, "
            "but its shape [2,5] has rank 2");
}

} // namespace
