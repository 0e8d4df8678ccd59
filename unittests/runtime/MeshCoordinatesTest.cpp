//===- MeshCoordinatesTest.cpp - rank numbering and groups on one process -===//
//
// The parts of MeshCommunicators that need no MPI: coordinates (first axis
// major), the checks before any communication, and a one-device mesh on
// the one-process world (what partition-run uses without a launcher). The
// groups over real ranks: unittests/runtime/comm/MeshTest.cpp (mpirun).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MeshCommunicators.h"
#include "runtime/comm/SelfCommunicator.h"

#include <gtest/gtest.h>

#include <stdexcept>

using namespace partition::runtime::comm;

namespace {

TEST(MeshCoordinates, FirstAxisMajor) {
  std::vector<int64_t> sizes = {2, 3, 4};
  EXPECT_EQ(meshCoordinates(0, sizes), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(meshCoordinates(1, sizes), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(meshCoordinates(4, sizes), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(meshCoordinates(23, sizes), (std::vector<int64_t>{1, 2, 3}));
  for (int64_t rank = 0; rank < 24; ++rank)
    EXPECT_EQ(meshRank(meshCoordinates(rank, sizes), sizes), rank);
}

TEST(MeshCoordinates, OneDeviceOnTheSelfWorld) {
  SelfCommunicator self;
  MeshCommunicators mesh(self, {{"dp", 1}, {"pp", 1}, {"tp", 1}},
                         {{0}, {0, 2}, {0}});
  EXPECT_EQ(mesh.coordinate("dp"), 0);
  EXPECT_EQ(mesh.axisSize("tp"), 1);
  ASSERT_NE(mesh.group({0}), nullptr);
  ASSERT_NE(mesh.group({0, 2}), nullptr);
  EXPECT_EQ(mesh.group({2}), nullptr);
  EXPECT_EQ(mesh.group({0})->size(), 1);
  float values[2] = {3, 4};
  mesh.group({0, 2})->allReduce(values, 2, ReduceOp::Avg, {"loss", 1});
  EXPECT_EQ(values[0], 3);
  EXPECT_EQ(values[1], 4);
}

TEST(MeshCoordinates, ChecksBeforeCommunicating) {
  SelfCommunicator self;
  EXPECT_THROW(MeshCommunicators(self, {{"dp", 2}}, {{0}}),
               std::invalid_argument);
  EXPECT_THROW(MeshCommunicators(self, {{"dp", 1}}, {{1}}),
               std::invalid_argument);
  EXPECT_THROW(MeshCommunicators(self, {{"dp", 1}, {"tp", 1}}, {{1, 0}}),
               std::invalid_argument);
  EXPECT_THROW(MeshCommunicators(self, {{"dp", 1}}, {{}}),
               std::invalid_argument);
}

} // namespace
