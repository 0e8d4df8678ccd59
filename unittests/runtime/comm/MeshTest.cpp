//===- MeshTest.cpp - mesh groups and the CPU backend's all-reduces -------===//
//
// A plain program run by ctest under mpirun with 4 ranks on a dp=2 x pp=1 x
// tp=2 mesh; exits non-zero if any rank saw a wrong value:
//  - MeshCommunicators: each rank's coordinates (first axis major), and the
//    groups over [dp], [tp] and [dp, tp]: sizes, ranks, and members (an
//    all-gather of world ranks);
//  - the CPU backend running a program's AllReduce instructions: a bucket of
//    two buffers (packed into one message) summed over dp, one buffer maxed
//    over tp, one averaged over dp+tp, each checked against values every
//    rank can compute.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"
#include "runtime/comm/MeshCommunicators.h"
#include "runtime/comm/MpiCommunicator.h"
#include "unittests/runtime/SerializeProgram.h"

#include <cstdio>
#include <string>
#include <vector>

using namespace partition;
using namespace partition::runtime;

namespace {

int failures = 0;
int worldRank = 0;

void expect(bool condition, const std::string &what) {
  if (!condition) {
    ++failures;
    std::fprintf(stderr, "rank %d: %s\n", worldRank, what.c_str());
  }
}

void expectEq(double actual, double expected, const std::string &what) {
  expect(actual == expected, what + ": got " + std::to_string(actual) +
                                 ", expected " + std::to_string(expected));
}

const std::vector<comm::MeshAxisSize> kMesh = {{"dp", 2}, {"pp", 1}, {"tp", 2}};

// World rank of the mesh point (dp, tp).
int rankOf(int dp, int tp) { return dp * 2 + tp; }

void testGroups(comm::Communicator &world) {
  comm::MeshCommunicators mesh(world, kMesh, {{2}, {0}, {0, 2}, {0}});
  int dp = worldRank / 2, tp = worldRank % 2;
  expectEq(mesh.coordinate("dp"), dp, "dp coordinate");
  expectEq(mesh.coordinate("tp"), tp, "tp coordinate");
  expectEq(mesh.coordinate("pp"), 0, "pp coordinate");
  expectEq(mesh.coordinate("ep"), 0, "coordinate on a missing axis");
  expectEq(mesh.axisSize("dp"), 2, "dp size");
  expectEq(mesh.axisSize("ep"), 1, "size of a missing axis");
  expect(comm::meshRank(mesh.coordinates(), {2, 1, 2}) == worldRank,
         "meshRank inverts the coordinates");
  expect(mesh.group({1}) == nullptr, "no group over pp was asked for");
  expect(mesh.groupName({0, 2}) == "dp+tp", "group name");

  struct Expected {
    std::vector<uint32_t> axes;
    std::vector<int> members; // world ranks, in group rank order
  };
  for (const Expected &group : {Expected{{0}, {rankOf(0, tp), rankOf(1, tp)}},
                                Expected{{2}, {rankOf(dp, 0), rankOf(dp, 1)}},
                                Expected{{0, 2}, {0, 1, 2, 3}}}) {
    std::string name = mesh.groupName(group.axes);
    comm::Communicator *communicator = mesh.group(group.axes);
    expect(communicator != nullptr, name + ": created");
    if (!communicator)
      continue;
    expectEq(communicator->size(), double(group.members.size()),
             name + " size");
    float me = float(worldRank);
    std::vector<float> members(communicator->size());
    communicator->allGather(&me, members.data(), 1, {name.c_str(), 0});
    for (size_t r = 0; r < members.size(); ++r)
      expectEq(members[r], group.members[r],
               name + " member " + std::to_string(r));
    expectEq(group.members[communicator->rank()], worldRank, name + " rank");
  }
}

Instruction allReduce(std::vector<uint32_t> args, std::vector<uint32_t> axes,
                      ReduceKind reduce, const char *label) {
  Instruction instruction;
  instruction.args = std::move(args);
  instruction.collective =
      Collective{CollectiveKind::AllReduce, reduce, std::move(axes), label};
  return instruction;
}

// Element i of buffer `buffer` on world rank r before the reductions.
float initial(int r, int buffer, size_t i) {
  return float(100 * r + 10 * buffer + int(i));
}

void testBackend(comm::Communicator &world) {
  Program program = testprograms::minimalProgram(); // a [4], b [2,3], c [5]
  program.mesh = {{"dp", 2, runtime::AxisRole::Data}, {"pp", 1}, {"tp", 2}};
  program.functions[0].instructions = {
      allReduce({0, 1}, {0}, ReduceKind::Sum, "bucket a+b"),
      allReduce({2}, {2}, ReduceKind::Max, "c"),
      allReduce({0}, {0, 2}, ReduceKind::Avg, "a again"),
  };
  std::string bytes = testprograms::serializeProgram(program);
  Program loaded = Program::parse(
      reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(), "mesh");
  comm::MeshCommunicators mesh(world, kMesh, {{0}, {2}, {0, 2}});
  std::unique_ptr<Backend> backend = createCpuBackend(loaded, &mesh);
  for (int b = 0; b < 3; ++b) {
    std::vector<float> values(loaded.buffers[b].elements);
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = initial(worldRank, b, i);
    backend->write(loaded.buffers[b], values.data());
  }
  backend->run(0, 1);

  int dp = worldRank / 2, tp = worldRank % 2;
  int dpPeer = rankOf(1 - dp, tp), tpPeer = rankOf(dp, 1 - tp);
  for (int b = 0; b < 3; ++b) {
    std::vector<float> values(loaded.buffers[b].elements);
    backend->read(loaded.buffers[b], values.data());
    for (size_t i = 0; i < values.size(); ++i) {
      float expected;
      if (b == 1) // summed over dp
        expected = initial(worldRank, 1, i) + initial(dpPeer, 1, i);
      else if (b == 2) // maxed over tp
        expected = std::max(initial(worldRank, 2, i), initial(tpPeer, 2, i));
      else { // summed over dp, then averaged over all four
        float sum = 0;
        for (int r = 0; r < 4; ++r) {
          int peer = rankOf(1 - r / 2, r % 2);
          sum += initial(r, 0, i) + initial(peer, 0, i);
        }
        expected = sum / 4;
      }
      expectEq(values[i], expected,
               "buffer " + std::to_string(b) + "[" + std::to_string(i) + "]");
    }
  }
}

} // namespace

int main(int argc, char **argv) {
  auto world = comm::MpiCommunicator::world(&argc, &argv, {30.0});
  worldRank = world->rank();
  if (world->size() != 4) {
    std::fprintf(stderr, "run with 4 ranks\n");
    return 2;
  }
  try {
    testGroups(*world);
    testBackend(*world);
  } catch (const std::exception &error) {
    expect(false, std::string("exception: ") + error.what());
  }
  float failed = float(failures);
  world->allReduce(&failed, 1, comm::ReduceOp::Max, {"result"});
  if (worldRank == 0)
    std::printf("%s\n",
                failed == 0 ? "mesh: all ranks passed" : "mesh: FAILED");
  return failed == 0 ? 0 : 1;
}
