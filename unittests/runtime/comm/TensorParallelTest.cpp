//===- TensorParallelTest.cpp - rank-dependent values and block collectives ===//
//
// A plain program run by ctest under mpirun with 2 and 4 ranks, on a
// dp=(ranks/2) x pp=1 x tp=2 mesh; exits non-zero if any rank saw a wrong
// value. One hand-built .ptp program, loaded and run by the CPU backend,
// exercises what tensor parallelism needs from the runtime:
//  - AxisIndex buffers over [tp], [dp, tp] and [tp, dp] (first listed axis
//    major), written by the backend before the first step;
//  - AllGather along dimensions 0, 1 and 2 (the last two need the backend's
//    block interleaving) over [tp] and [dp, tp];
//  - ReduceScatter (sum, max) along dimensions 0, 1 and 2;
//  - slice_block reading those AxisIndex buffers (dist.all_slice).
// Every expected value is computed from every rank's known inputs.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"
#include "runtime/comm/MeshCommunicators.h"
#include "runtime/comm/MpiCommunicator.h"
#include "unittests/runtime/SerializeProgram.h"

#include <algorithm>
#include <cstdio>
#include <functional>
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
    if (failures <= 20)
      std::fprintf(stderr, "rank %d: %s\n", worldRank, what.c_str());
  }
}

using Shape = std::vector<int64_t>;

int64_t elements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Element i of input buffer `buffer` on world rank r: distinct everywhere,
/// exact in f32.
float initial(int r, int buffer, int64_t i) {
  return float(1000 * r + 100 * buffer + i);
}

/// A tensor as [outer, dimSize, inner] around dimension `dim`.
struct Split {
  int64_t outer = 1, dimSize = 0, inner = 1;
  Split(const Shape &shape, size_t dim) : dimSize(shape[dim]) {
    for (size_t d = 0; d < dim; ++d)
      outer *= shape[d];
    for (size_t d = dim + 1; d < shape.size(); ++d)
      inner *= shape[d];
  }
};

class ProgramBuilder {
public:
  ProgramBuilder() : program(testprograms::minimalProgram()) {
    offset = program.arenaBytes;
  }
  uint32_t add(Role role, const std::string &name, DType dtype, Shape shape) {
    BufferInfo buffer;
    buffer.role = role;
    buffer.name = name;
    buffer.dtype = dtype;
    buffer.shape = shape;
    buffer.elements = elements(shape);
    buffer.bytes = uint64_t(buffer.elements) * 4;
    buffer.offset = offset;
    offset += (buffer.bytes + 63) / 64 * 64;
    program.buffers.push_back(buffer);
    program.arenaBytes = offset;
    return uint32_t(program.buffers.size() - 1);
  }
  void collective(CollectiveKind kind, uint32_t in, uint32_t out,
                  std::vector<uint32_t> axes, uint32_t dim,
                  ReduceKind reduce = ReduceKind::Sum) {
    Instruction instruction;
    instruction.args = {in, out};
    instruction.collective = Collective{
        kind, reduce, std::move(axes), "test " + std::to_string(count++), dim};
    program.functions[0].instructions.push_back(instruction);
  }
  void slice(uint32_t in, uint32_t index, uint32_t out, int64_t dim,
             int64_t blocks) {
    Instruction instruction;
    instruction.kernel = KernelId::SliceBlock;
    instruction.args = {in, index, out};
    instruction.ints = {dim, blocks};
    program.functions[0].instructions.push_back(instruction);
  }
  Program program;

private:
  uint64_t offset = 0;
  int count = 0;
};

void run(comm::Communicator &world) {
  const int ranks = world.size();
  const int dpSize = ranks / 2, dp = worldRank / 2, tp = worldRank % 2;
  // Group members (world ranks) in group order, and this rank's index.
  const std::vector<int> tpGroup = {2 * dp, 2 * dp + 1};
  std::vector<int> allGroup;
  for (int r = 0; r < ranks; ++r)
    allGroup.push_back(r);

  ProgramBuilder b;
  b.program.mesh = {{"dp", dpSize, runtime::AxisRole::Data}, {"pp", 1}, {"tp", 2}};
  uint32_t idxTp = b.add(Role::AxisIndex, "tp", DType::I32, {});
  uint32_t idxDpTp = b.add(Role::AxisIndex, "dp,tp", DType::I32, {});
  uint32_t idxTpDp = b.add(Role::AxisIndex, "tp,dp", DType::I32, {});

  struct Case {
    const char *what;
    CollectiveKind kind;
    Shape in;
    std::vector<uint32_t> axes; // mesh indices: dp 0, tp 2
    uint32_t dim;
    ReduceKind reduce;
    uint32_t input = 0, output = 0;
  };
  std::vector<Case> cases = {
      {"gather tp dim 0", CollectiveKind::AllGather, {3, 2, 4}, {2}, 0,
       ReduceKind::Sum},
      {"gather tp dim 1", CollectiveKind::AllGather, {3, 2, 4}, {2}, 1,
       ReduceKind::Sum},
      {"gather dp+tp dim 2", CollectiveKind::AllGather, {3, 2, 3}, {0, 2}, 2,
       ReduceKind::Sum},
      {"scatter dp+tp dim 0", CollectiveKind::ReduceScatter, {4, 3, 2}, {0, 2},
       0, ReduceKind::Sum},
      {"scatter tp dim 1", CollectiveKind::ReduceScatter, {3, 4, 5}, {2}, 1,
       ReduceKind::Sum},
      {"scatter tp dim 2 max", CollectiveKind::ReduceScatter, {3, 2, 4}, {2},
       2, ReduceKind::Max},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    Case &k = cases[c];
    int64_t group = k.axes.size() == 2 ? ranks : 2;
    Shape out = k.in;
    if (k.kind == CollectiveKind::AllGather)
      out[k.dim] *= group;
    else
      out[k.dim] /= group;
    k.input = b.add(Role::Temporary, "in" + std::to_string(c), DType::F32,
                    k.in);
    k.output = b.add(Role::Temporary, "out" + std::to_string(c), DType::F32,
                     out);
    b.collective(k.kind, k.input, k.output, k.axes, k.dim, k.reduce);
  }
  // all_slice: the same [4, 8] everywhere, cut by each axis index.
  struct SliceCase {
    const char *what;
    uint32_t index;
    int64_t dim, blocks, expectedIndex;
    uint32_t output = 0;
  };
  uint32_t whole = b.add(Role::Temporary, "whole", DType::F32, {4, 8});
  std::vector<SliceCase> slices = {
      {"slice tp dim 1", idxTp, 1, 2, tp},
      {"slice dp,tp dim 0", idxDpTp, 0, ranks, dp * 2 + tp},
      {"slice tp,dp dim 1", idxTpDp, 1, ranks, tp * dpSize + dp},
  };
  for (SliceCase &s : slices) {
    Shape out = {4, 8};
    out[s.dim] /= s.blocks;
    s.output = b.add(Role::Temporary, s.what, DType::F32, out);
    b.slice(whole, s.index, s.output, s.dim, s.blocks);
  }

  std::string bytes = testprograms::serializeProgram(b.program);
  Program loaded = Program::parse(
      reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(), "tp");
  comm::MeshCommunicators mesh(
      world, {{"dp", dpSize}, {"pp", 1}, {"tp", 2}}, {{2}, {0, 2}});
  std::unique_ptr<Backend> backend = createCpuBackend(loaded, &mesh);

  auto readI32 = [&](uint32_t buffer) {
    int32_t value = -1;
    backend->read(loaded.buffers[buffer], &value);
    return value;
  };
  expect(readI32(idxTp) == tp, "axis index tp = " +
                                   std::to_string(readI32(idxTp)));
  expect(readI32(idxDpTp) == dp * 2 + tp,
         "axis index dp,tp = " + std::to_string(readI32(idxDpTp)));
  expect(readI32(idxTpDp) == tp * dpSize + dp,
         "axis index tp,dp = " + std::to_string(readI32(idxTpDp)));

  for (size_t c = 0; c < cases.size(); ++c) {
    std::vector<float> values(elements(cases[c].in));
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = initial(worldRank, int(c), int64_t(i));
    backend->write(loaded.buffers[cases[c].input], values.data());
  }
  {
    std::vector<float> values(32);
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = float(i);
    backend->write(loaded.buffers[whole], values.data());
  }
  backend->run(0, 1);

  for (size_t c = 0; c < cases.size(); ++c) {
    const Case &k = cases[c];
    const std::vector<int> &members = k.axes.size() == 2 ? allGroup : tpGroup;
    int64_t n = int64_t(members.size());
    int64_t me = std::find(members.begin(), members.end(), worldRank) -
                 members.begin();
    const BufferInfo &output = loaded.buffers[k.output];
    std::vector<float> values(output.elements);
    backend->read(output, values.data());
    Split in(k.in, k.dim), out(output.shape, k.dim);
    for (int64_t o = 0; o < out.outer; ++o)
      for (int64_t j = 0; j < out.dimSize; ++j)
        for (int64_t i = 0; i < out.inner; ++i) {
          float expected;
          if (k.kind == CollectiveKind::AllGather) {
            // Block j / in.dimSize comes from that member of the group.
            int64_t source = (o * in.dimSize + j % in.dimSize) * in.inner + i;
            expected = initial(members[j / in.dimSize], int(c), source);
          } else {
            int64_t source = (o * in.dimSize + me * out.dimSize + j) * in.inner + i;
            expected = k.reduce == ReduceKind::Max ? -1e30f : 0.0f;
            for (int m = 0; m < n; ++m) {
              float v = initial(members[m], int(c), source);
              expected = k.reduce == ReduceKind::Max ? std::max(expected, v)
                                                     : expected + v;
            }
          }
          int64_t at = (o * out.dimSize + j) * out.inner + i;
          expect(values[at] == expected,
                 std::string(k.what) + "[" + std::to_string(at) + "] = " +
                     std::to_string(values[at]) + ", expected " +
                     std::to_string(expected));
        }
  }
  for (const SliceCase &s : slices) {
    const BufferInfo &output = loaded.buffers[s.output];
    std::vector<float> values(output.elements);
    backend->read(output, values.data());
    Split out(output.shape, size_t(s.dim));
    for (int64_t o = 0; o < out.outer; ++o)
      for (int64_t j = 0; j < out.dimSize; ++j)
        for (int64_t i = 0; i < out.inner; ++i) {
          float expected = float(
              (o * out.dimSize * s.blocks + s.expectedIndex * out.dimSize + j) *
                  out.inner + i);
          int64_t at = (o * out.dimSize + j) * out.inner + i;
          expect(values[at] == expected,
                 std::string(s.what) + "[" + std::to_string(at) + "] = " +
                     std::to_string(values[at]) + ", expected " +
                     std::to_string(expected));
        }
  }
}

} // namespace

int main(int argc, char **argv) {
  auto world = comm::MpiCommunicator::world(&argc, &argv, {30.0});
  worldRank = world->rank();
  if (world->size() % 2 != 0) {
    std::fprintf(stderr, "run with an even number of ranks\n");
    return 2;
  }
  try {
    run(*world);
  } catch (const std::exception &error) {
    expect(false, std::string("exception: ") + error.what());
  }
  float failed = float(failures);
  world->allReduce(&failed, 1, comm::ReduceOp::Max, {"result"});
  if (worldRank == 0)
    std::printf("tensor parallel (%d ranks): %s\n", world->size(),
                failed == 0 ? "all ranks passed" : "FAILED");
  return failed == 0 ? 0 : 1;
}
