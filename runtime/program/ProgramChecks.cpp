//===- ProgramChecks.cpp - cross-checks of a decoded program --------------===//
//
// What the loader checks beyond one field at a time: a collective's buffers
// against its kind and group, a transfer against the pipeline axis, the
// axis-index and sharded buffers against the mesh, the roles each stream
// must hold, and that every send has its receive.
//
//===----------------------------------------------------------------------===//

#include "runtime/program/ProgramChecks.h"

#include "runtime/program/ActionWalk.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace partition::runtime::check {

void fail(const std::string &origin, const std::string &what) {
  throw ProgramError(origin + ": " + what);
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

/// An AllGather or ReduceScatter: [input, output], f32 or bf16 (an
/// all-gather also i32), of one type, disjoint, and the
/// output is the input with `dim` multiplied (gather) or divided (scatter)
/// by the group's size, so the backend's block copies stay inside both.
/// An all_to_all's counts of filled rows (args[2], args[3]): i32, the
/// input's and the output's dimensions before rows_dim, which comes after
/// the split and concatenated dimensions and before the last one.
void checkCountedRows(const Collective &collective, const Instruction &decoded,
                      const Program &program, const std::string &origin,
                      const std::string &what) {
  const BufferInfo &input = program.buffers[decoded.args[0]];
  uint32_t rows = collective.rowsDim;
  if (collective.kind != CollectiveKind::AllToAll)
    fail(origin, what + " has rows_dim " + std::to_string(rows) +
                     ", which only an all_to_all takes");
  if (rows <= collective.dim || rows <= collective.concatDim ||
      rows + 1 >= input.shape.size())
    fail(origin, what + " has rows_dim " + std::to_string(rows) +
                     ", which must come after split_dim and concat_dim and "
                     "before the last dimension of its input " +
                     shapeText(input.shape));
  for (size_t k : {size_t(2), size_t(3)}) {
    if (decoded.args[k] >= program.buffers.size())
      fail(origin, what + " refers to buffer #" +
                       std::to_string(decoded.args[k]) + " of " +
                       std::to_string(program.buffers.size()));
    const BufferInfo &counts = program.buffers[decoded.args[k]];
    const BufferInfo &cells = program.buffers[decoded.args[k - 2]];
    std::vector<int64_t> shape(cells.shape.begin(),
                               cells.shape.begin() + rows);
    if (counts.dtype != DType::I32 || counts.shape != shape)
      fail(origin, what + " counts the " +
                       (k == 2 ? "input's" : "output's") +
                       " filled rows in buffer #" +
                       std::to_string(decoded.args[k]) + " ('" +
                       counts.name + "'), which must be i32 " +
                       shapeText(shape));
  }
}

void checkBlockCollective(const Collective &collective,
                          const Instruction &decoded, const Program &program,
                          const std::string &origin, const std::string &what) {
  size_t buffers = collective.rowsDim ? 4 : 2;
  if (decoded.args.size() != buffers)
    fail(origin, what + " has " + std::to_string(decoded.args.size()) +
                     " buffers; it takes an input and an output" +
                     (collective.rowsDim ? " and their counts of filled rows"
                                         : ""));
  for (uint32_t arg : {decoded.args[0], decoded.args[1]}) {
    if (arg >= program.buffers.size())
      fail(origin, what + " refers to buffer #" + std::to_string(arg) +
                       " of " + std::to_string(program.buffers.size()));
    // A gather moves words (token ids too); a reduction adds floats.
    bool words = (collective.kind == CollectiveKind::AllGather ||
                  collective.kind == CollectiveKind::RingShift ||
                  collective.kind == CollectiveKind::AllToAll) &&
                 program.buffers[arg].dtype == DType::I32;
    if (!isFloat(program.buffers[arg].dtype) && !words)
      fail(origin, what + " uses buffer #" + std::to_string(arg) + " ('" +
                       program.buffers[arg].name +
                       "'), which is neither f32 nor bf16");
  }
  if (program.buffers[decoded.args[0]].dtype !=
      program.buffers[decoded.args[1]].dtype)
    fail(origin, what + " has an input and an output of different types");
  if (collective.rowsDim)
    checkCountedRows(collective, decoded, program, origin, what);
  const BufferInfo &input = program.buffers[decoded.args[0]];
  const BufferInfo &output = program.buffers[decoded.args[1]];
  if (input.offset < output.offset + output.bytes &&
      output.offset < input.offset + input.bytes)
    fail(origin, what + " has an input and an output that overlap in the "
                        "arena");
  if (collective.dim >= input.shape.size())
    fail(origin, what + " has dim " + std::to_string(collective.dim) +
                     ", but its input " + shapeText(input.shape) +
                     " has rank " + std::to_string(input.shape.size()));
  int64_t group = 1;
  for (uint32_t axis : collective.axes)
    group *= program.mesh[axis].size;
  if (collective.kind == CollectiveKind::RingShift) {
    if (output.shape != input.shape)
      fail(origin, what + " output " + shapeText(output.shape) +
                       " must be its input's " + shapeText(input.shape));
    return;
  }
  std::vector<int64_t> expected = input.shape;
  if (collective.kind == CollectiveKind::AllToAll) {
    uint32_t split = collective.dim, concat = collective.concatDim;
    if (concat >= input.shape.size() || concat == split)
      fail(origin, what + " has concat_dim " + std::to_string(concat) +
                       ", which must be a dimension of its input " +
                       shapeText(input.shape) + " other than split_dim " +
                       std::to_string(split));
    if (expected[split] % group != 0)
      fail(origin, what + " cuts dimension " + std::to_string(split) +
                       " of " + shapeText(input.shape) + " into " +
                       std::to_string(group) +
                       " blocks, which does not divide");
    expected[split] /= group;
    expected[concat] *= group;
    if (output.shape != expected)
      fail(origin, what + " output " + shapeText(output.shape) +
                       " must be " + shapeText(expected) + " (input " +
                       shapeText(input.shape) + ", group of " +
                       std::to_string(group) + ")");
    return;
  }
  bool gather = collective.kind == CollectiveKind::AllGather;
  if (!gather && expected[collective.dim] % group != 0)
    fail(origin, what + " splits dimension " + std::to_string(collective.dim) +
                     " of " + shapeText(input.shape) + " into " +
                     std::to_string(group) + " blocks, which does not divide");
  if (gather)
    expected[collective.dim] *= group;
  else
    expected[collective.dim] /= group;
  if (output.shape != expected)
    fail(origin, what + " output " + shapeText(output.shape) + " must be " +
                     shapeText(expected) + " (input " +
                     shapeText(input.shape) + ", group of " +
                     std::to_string(group) + ")");
}

/// An AllReduce: one or more buffers (a bucket), all f32 or all bf16, each
/// reduced once: no index twice, no two sharing bytes in the arena.
void checkAllReduceBucket(const Instruction &decoded, const Program &program,
                          const std::string &origin, const std::string &what) {
  if (decoded.args.empty())
    fail(origin, what + " has no buffers");
  std::vector<const BufferInfo *> buffers;
  for (uint32_t arg : decoded.args) {
    if (arg >= program.buffers.size())
      fail(origin, what + " refers to buffer #" + std::to_string(arg) +
                       " of " + std::to_string(program.buffers.size()));
    const BufferInfo &buffer = program.buffers[arg];
    if (!isFloat(buffer.dtype))
      fail(origin, what + " reduces buffer #" + std::to_string(arg) + " ('" +
                       buffer.name + "'), which is neither f32 nor bf16");
    if (buffer.dtype != program.buffers[decoded.args[0]].dtype)
      fail(origin, what + " mixes f32 and bf16 buffers in one bucket");
    buffers.push_back(&buffer);
  }
  std::vector<std::pair<const BufferInfo *, uint32_t>> sorted;
  for (size_t i = 0; i < buffers.size(); ++i)
    sorted.push_back({buffers[i], decoded.args[i]});
  std::sort(sorted.begin(), sorted.end(), [](const auto &a, const auto &b) {
    return std::make_pair(a.first->offset, a.second) <
           std::make_pair(b.first->offset, b.second);
  });
  // Sorted by offset, a buffer overlaps an earlier one exactly when it
  // starts before the furthest end so far.
  const std::pair<const BufferInfo *, uint32_t> *furthest = nullptr;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const auto &[buffer, index] = sorted[i];
    if (i > 0 && sorted[i - 1].second == index)
      fail(origin, what + " lists buffer #" + std::to_string(index) +
                       " twice");
    if (buffer->bytes == 0)
      continue;
    if (furthest &&
        furthest->first->offset + furthest->first->bytes > buffer->offset)
      fail(origin, what + " reduces buffers #" +
                       std::to_string(furthest->second) + " and #" +
                       std::to_string(index) + ", which overlap in the arena");
    if (!furthest || buffer->offset + buffer->bytes >
                         furthest->first->offset + furthest->first->bytes)
      furthest = &sorted[i];
  }
}

/// A send or receive of stream `stage`: one buffer, no parameters, along
/// the pipeline axis to another stage of the mesh.
void checkTransfer(const Transfer &transfer, const Instruction &decoded,
                   const Program &program, const std::string &origin,
                   const std::string &what, size_t stage) {
  int pipeline = program.pipelineAxisIndex();
  if (pipeline < 0)
    fail(origin, what + " needs a pipeline axis, but the program's " +
                     program.describeMesh() +
                     " has none; recompile it with a plan whose mesh has pp");
  if (transfer.axis != uint32_t(pipeline))
    fail(origin, what + " names mesh axis " +
                     (transfer.axis < program.mesh.size()
                          ? "'" + program.mesh[transfer.axis].name + "'"
                          : "#" + std::to_string(transfer.axis)) +
                     ", but transfers run between pipeline stages, along '" +
                     program.mesh[pipeline].name + "'");
  int64_t stages = program.mesh[pipeline].size;
  if (transfer.peer < 0 || transfer.peer >= stages)
    fail(origin, what + (transfer.send ? " sends to" : " receives from") +
                     " stage " + std::to_string(transfer.peer) +
                     ", outside the mesh's " + std::to_string(stages) +
                     " stages ('" + program.mesh[pipeline].name + "')");
  if (transfer.peer == int64_t(stage))
    fail(origin, what + (transfer.send ? " sends to" : " receives from") +
                     " its own stage " + std::to_string(stage));
  if (decoded.args.size() != 1)
    fail(origin, what + " has " + std::to_string(decoded.args.size()) +
                     " buffers; a transfer moves exactly one");
  if (decoded.args[0] >= program.buffers.size())
    fail(origin, what + " refers to buffer #" + std::to_string(decoded.args[0]) +
                     " of " + std::to_string(program.buffers.size()));
  if (!decoded.ints.empty() || !decoded.floats.empty())
    fail(origin, what + " has integer or float parameters; transfers take "
                        "none");
}

void checkInArena(const Instruction &decoded, const Program &program,
                  const std::string &origin, const std::string &where) {
  for (uint32_t arg : decoded.args)
    if (arg < program.buffers.size() &&
        program.buffers[arg].tier != Tier::Arena)
      fail(origin, where + " uses buffer #" + std::to_string(arg) + " ('" +
                       program.buffers[arg].name + "'), which lives in the " +
                       tierName(program.buffers[arg].tier) +
                       " tier; only tier copies reach a tier");
}

void checkTierCopy(const TierCopy &copy, const Instruction &decoded,
                   const Program &program, const std::string &origin,
                   const std::string &what) {
  if (decoded.args.size() != 2)
    fail(origin, what + " has " + std::to_string(decoded.args.size()) +
                     " buffers; a tier copy moves one between a tier and "
                     "the arena");
  for (uint32_t arg : decoded.args)
    if (arg >= program.buffers.size())
      fail(origin, what + " refers to buffer #" + std::to_string(arg) +
                       " of " + std::to_string(program.buffers.size()));
  if (!decoded.ints.empty() || !decoded.floats.empty())
    fail(origin, what + " has integer or float parameters; tier copies "
                        "take none");
  const BufferInfo &tiered = program.buffers[decoded.args[copy.tierArg()]];
  const BufferInfo &staged = program.buffers[decoded.args[copy.arenaArg()]];
  if (tiered.tier == Tier::Arena || staged.tier != Tier::Arena)
    fail(origin, what + (copy.write ? " must write from the arena into a "
                                      "tier"
                                    : " must read from a tier into the "
                                      "arena") +
                     ", but it names buffers of the " +
                     tierName(program.buffers[decoded.args[0]].tier) +
                     " and the " +
                     tierName(program.buffers[decoded.args[1]].tier));
  if (tiered.dtype != staged.dtype || tiered.bytes != staged.bytes)
    fail(origin, what + " moves " + std::to_string(tiered.bytes) + " bytes of " +
                     dtypeName(tiered.dtype) + " into " +
                     std::to_string(staged.bytes) + " bytes of " +
                     dtypeName(staged.dtype) +
                     "; both sides must have one type and size");
  // O_DIRECT: whole blocks in memory as in the file (the tier's buffers
  // were checked as decoded).
  if (tiered.tier == Tier::Nvme && staged.offset % kTierBlock != 0)
    fail(origin, what + " stages in buffer #" +
                     std::to_string(decoded.args[copy.arenaArg()]) +
                     " at byte " + std::to_string(staged.offset) +
                     " of the arena, not at a whole " +
                     std::to_string(kTierBlock) + "-byte block");
}

/// Each AxisIndex buffer is an i32 scalar whose name lists distinct axes of
/// the mesh, and no two share a name (one buffer per group of axes).
void checkAxisIndexBuffers(const Program &program, const std::string &origin) {
  std::set<std::string> names;
  for (size_t index : program.withRole(Role::AxisIndex)) {
    const BufferInfo &buffer = program.buffers[index];
    std::string what = "axis index buffer #" + std::to_string(index) + " ('" +
                       buffer.name + "')";
    if (program.mesh.empty())
      fail(origin, what + " needs a device mesh, but the program has none");
    if (buffer.dtype != DType::I32 || buffer.elements != 1 ||
        !buffer.shape.empty())
      fail(origin, what + " must be an i32 scalar");
    try {
      (void)program.axisIndexAxes(buffer);
    } catch (const ProgramError &error) {
      fail(origin, what + ": " + error.what());
    }
    if (!names.insert(buffer.name).second)
      fail(origin, what + " appears twice");
  }
}

/// A sharded buffer is f32 state (a parameter or a moment: what is
/// initialised and checkpointed as a logical tensor), has one entry per
/// dimension, and uses each mesh axis at most once; fills in its logical
/// shape.
void checkShardedBuffers(Program &program, const std::string &origin) {
  for (size_t index = 0; index < program.buffers.size(); ++index) {
    BufferInfo &buffer = program.buffers[index];
    if (!buffer.sharded())
      continue;
    std::string what = "sharded buffer #" + std::to_string(index) + " ('" +
                       buffer.name + "')";
    bool state = buffer.role == Role::Param || buffer.role == Role::Moment1 ||
                 buffer.role == Role::Moment2;
    bool tokens = buffer.role == Role::Tokens || buffer.role == Role::Targets;
    bool logits = buffer.role == Role::Logits;
    if (!state && !tokens && !logits)
      fail(origin, what + " has role " + roleName(buffer.role) +
                       "; only parameters, moments, tokens, targets and "
                       "logits can be sharded");
    if (buffer.dtype != (state || logits ? DType::F32 : DType::I32))
      fail(origin, what + (state || logits ? " is not f32" : " is not i32"));
    if (program.mesh.empty())
      fail(origin, what + " needs a device mesh, but the program has none");
    std::set<uint32_t> used;
    if (buffer.flat()) {
      if (!state)
        fail(origin, what + " is a flat shard; only parameters and moments "
                            "can be");
      int64_t group = 1, elements = 1;
      for (uint32_t axis : buffer.flatAxes) {
        if (axis >= program.mesh.size())
          fail(origin, what + " is a flat shard over axis #" +
                           std::to_string(axis) + ", but the mesh has " +
                           std::to_string(program.mesh.size()) + " axes");
        if (!used.insert(axis).second)
          fail(origin, what + " uses mesh axis '" + program.mesh[axis].name +
                           "' twice");
        group *= program.mesh[axis].size;
      }
      for (int64_t dim : buffer.flatShape) {
        if (dim < 1 || elements > std::numeric_limits<int64_t>::max() / 4 / dim)
          fail(origin, what + " has a flat_shape " +
                           shapeText(buffer.flatShape) +
                           " that is empty or too large");
        elements *= dim;
      }
      int64_t chunk = (elements + group - 1) / group;
      if (buffer.shape != std::vector<int64_t>{chunk})
        fail(origin, what + " is a flat shard of " + std::to_string(elements) +
                         " elements over " + std::to_string(group) +
                         " devices, so its shape must be [" +
                         std::to_string(chunk) + "], not " +
                         shapeText(buffer.shape));
      if (buffer.sharding.empty())
        buffer.sharding.assign(buffer.flatShape.size(), {});
    }
    const std::vector<int64_t> &blockShape = buffer.blockShape();
    if (buffer.sharding.size() != blockShape.size())
      fail(origin, what + " has a sharding of " +
                       std::to_string(buffer.sharding.size()) +
                       " dimensions, but its shape " + shapeText(blockShape) +
                       " has rank " + std::to_string(blockShape.size()));
    buffer.logical = blockShape;
    int64_t elements = 1;
    for (size_t dim = 0; dim < blockShape.size(); ++dim) {
      for (uint32_t axis : buffer.sharding[dim]) {
        if (axis >= program.mesh.size())
          fail(origin, what + " splits dimension " + std::to_string(dim) +
                           " over axis #" + std::to_string(axis) +
                           ", but the mesh has " +
                           std::to_string(program.mesh.size()) + " axes");
        if (!used.insert(axis).second)
          fail(origin, what + " uses mesh axis '" + program.mesh[axis].name +
                           "' twice");
        if (buffer.logical[dim] >
            std::numeric_limits<int64_t>::max() / 4 / program.mesh[axis].size)
          fail(origin, what + " has a logical shape too large to hold");
        buffer.logical[dim] *= program.mesh[axis].size;
      }
      int64_t size = buffer.logical[dim];
      if (size > 0 && elements > std::numeric_limits<int64_t>::max() / 4 / size)
        fail(origin, what + " has a logical shape too large to hold");
      elements *= size;
    }
  }
}

/// The roles the trainer relies on: one stream has exactly one tokens,
/// targets and loss buffer; with pipeline stages the first stage holds the
/// tokens, the last the targets, the loss and the logits, and a parameter
/// held by two stages (a tied embedding) has one shape in both.
void checkStreamRoles(const Program &program, const std::string &origin) {
  size_t stages = program.streams.size();
  for (size_t k = 0; k < stages; ++k) {
    const Stream &stream = program.streams[k];
    std::string where =
        stages > 1 ? origin + " stage " + std::to_string(k) : origin;
    auto count = [&](Role role) {
      return std::count_if(stream.buffers.begin(), stream.buffers.end(),
                           [&](const BufferInfo &b) { return b.role == role; });
    };
    for (Role role : {Role::Tokens, Role::Targets, Role::Loss}) {
      bool needed = stages == 1 || (role == Role::Tokens && k == 0) ||
                    (role != Role::Tokens && k + 1 == stages);
      if (needed ? count(role) != 1 : count(role) > 1)
        fail(where, std::string(needed ? "program needs exactly one "
                                       : "program has more than one ") +
                        roleName(role) + " buffer");
    }
    // logits_step's outputs are made where the loss is: the last stage.
    if (k + 1 < stages && count(Role::Logits) > 0)
      fail(where, "program has logits buffers on a stage other than the "
                  "last, which makes them");
    std::set<std::string> names;
    for (const BufferInfo &buffer : stream.buffers)
      if (buffer.role == Role::Param && !names.insert(buffer.name).second)
        fail(where, "parameter '" + buffer.name + "' appears twice");
  }
  for (Role role : {Role::Param, Role::Moment1, Role::Moment2}) {
    std::map<std::string, std::pair<size_t, const BufferInfo *>> first;
    for (size_t k = 0; k < stages; ++k)
      for (const BufferInfo &buffer : program.streams[k].buffers) {
        if (buffer.role != role)
          continue;
        auto [it, inserted] = first.try_emplace(buffer.name, k, &buffer);
        if (!inserted && it->second.second->tensorShape() != buffer.tensorShape())
          fail(origin, std::string(roleName(role)) + " '" + buffer.name +
                           "' is " + shapeText(it->second.second->tensorShape()) +
                           " on stage " + std::to_string(it->second.first) +
                           " but " + shapeText(buffer.tensorShape()) +
                           " on stage " + std::to_string(k) +
                           "; a tensor two stages hold must be one tensor");
      }
  }
}

void checkMicrobatchLoop(const Function &function, const Program &program,
                         const std::string &origin) {
  if (!function.loop)
    return;
  const MicrobatchLoop &loop = *function.loop;
  std::string where = function.name + " micro-batch loop";
  size_t size = function.instructions.size();
  if (loop.begin > loop.end || loop.end > size)
    fail(origin, where + " runs instructions #" + std::to_string(loop.begin) +
                     " to #" + std::to_string(loop.end) + ", but the function "
                     "has " + std::to_string(size));
  if (loop.count < 1)
    fail(origin, where + " runs " + std::to_string(loop.count) +
                     " times; it must run at least once");
  if (loop.stride < 1 || loop.stride > (int64_t(1) << 20))
    fail(origin, where + " advances " + std::to_string(loop.stride) +
                     " micro-batches per run; it must be between 1 and 2^20");
  const uint64_t lastRun =
      static_cast<uint64_t>(loop.count - 1) * static_cast<uint64_t>(loop.stride);
  for (uint32_t slice : loop.slices) {
    if (slice >= program.buffers.size())
      fail(origin, where + " refers to buffer #" + std::to_string(slice) +
                       " of " + std::to_string(program.buffers.size()));
    const BufferInfo &rows = program.buffers[slice];
    // Run i reads the bytes i x stride times the slice's size past it: the
    // last run's must still be in the input.
    bool inside = false;
    for (const BufferInfo &input : program.buffers)
      if ((input.role == Role::Tokens || input.role == Role::Targets) &&
          input.tier == rows.tier && rows.bytes > 0 &&
          rows.offset >= input.offset &&
          rows.offset - input.offset <= input.bytes &&
          (input.offset + input.bytes - rows.offset) / rows.bytes >=
              lastRun + 1)
        inside = true;
    if (!inside)
      fail(origin, where + " reads " + std::to_string(loop.count) +
                       " micro-batches' rows from buffer #" +
                       std::to_string(slice) + ", which lies in no tokens or "
                       "targets buffer that holds them");
  }
  // The runtime refills the slices in order, copying within the input: no
  // run may read rows that a refill (an earlier slice's in this run, any
  // slice's in an earlier run) has already overwritten.
  auto overlaps = [](uint64_t a, uint64_t aBytes, uint64_t b, uint64_t bBytes) {
    return a < b + bBytes && b < a + aBytes;
  };
  for (int64_t run = 1; run < loop.count; ++run)
    for (size_t i = 0; i < loop.slices.size(); ++i) {
      const BufferInfo &rows = program.buffers[loop.slices[i]];
      uint64_t source = rows.offset + static_cast<uint64_t>(run) *
                                          static_cast<uint64_t>(loop.stride) *
                                          rows.bytes;
      for (size_t j = 0; j < loop.slices.size(); ++j) {
        const BufferInfo &other = program.buffers[loop.slices[j]];
        bool written = run > 1 || j < i;
        if (written && other.tier == rows.tier &&
            overlaps(source, rows.bytes, other.offset, other.bytes))
          fail(origin, where + " run " + std::to_string(run) +
                           " reads the rows of buffer #" +
                           std::to_string(loop.slices[i]) + " from where "
                           "buffer #" + std::to_string(loop.slices[j]) +
                           " was already refilled");
      }
    }
  for (size_t i = 0; i < size; ++i) {
    const Instruction &wait = function.instructions[i];
    if (!wait.waitFor)
      continue;
    bool waitInside = i >= loop.begin && i < loop.end;
    bool startInside = *wait.waitFor >= loop.begin && *wait.waitFor < loop.end;
    if (waitInside != startInside)
      fail(origin, function.name + " instruction #" + std::to_string(i) +
                       " waits for instruction #" +
                       std::to_string(*wait.waitFor) + " across the edge of "
                       "the micro-batch loop (#" + std::to_string(loop.begin) +
                       " to #" + std::to_string(loop.end) + ")");
  }
}

void checkStartedCollectives(const Function &function, const Program &program,
                             const std::string &origin) {
  auto labelOf = [](const Instruction &started) {
    return started.collective ? started.collective->label
                              : started.tierCopy->label;
  };
  const std::vector<Instruction> &code = function.instructions;
  auto name = [&](size_t i) {
    return function.name + " instruction #" + std::to_string(i);
  };
  auto overlaps = [&](const Instruction &a, const Instruction &b) {
    for (uint32_t x : a.args)
      for (uint32_t y : b.args) {
        // Indices were checked against the buffer table as decoded.
        const BufferInfo &p = program.buffers[x], &q = program.buffers[y];
        if (p.tier == q.tier && p.offset < q.offset + q.bytes &&
            q.offset < p.offset + p.bytes)
          return true;
      }
    return false;
  };
  // Whether instruction `j` writes buffer `arg` (its outputs; an
  // all-reduce's buckets; an out-of-place collective's output; a receive).
  auto writes = [&](const Instruction &j, uint32_t arg) {
    auto at = [&](size_t from) {
      return std::find(j.args.begin() + std::min(from, j.args.size()),
                       j.args.end(), arg) != j.args.end();
    };
    if (j.collective)
      return j.collective->kind == CollectiveKind::AllReduce
                 ? at(0)
                 : j.args.size() > 1 && j.args[1] == arg;
    if (j.transfer)
      return !j.transfer->send && at(0);
    if (j.tierCopy)
      return j.args.size() > 1 && j.args[1] == arg;
    if (j.waitFor)
      return false;
    return at(size_t(kernelInfo(j.kernel).inputs));
  };
  // A ring shift only reads its input: other instructions may read it
  // while it runs (the current key-value block's attention), not write it.
  auto conflictsWith = [&](const Instruction &start, const Instruction &j) {
    if (!start.collective ||
        start.collective->kind != CollectiveKind::RingShift)
      return overlaps(start, j);
    Instruction output = start, input = start;
    output.args = {start.args[1]};
    input.args = {start.args[0]};
    if (overlaps(output, j))
      return true;
    for (uint32_t arg : j.args) {
      Instruction one = j;
      one.args = {arg};
      if (overlaps(input, one) && (writes(j, arg) || arg != start.args[0]))
        return true;
    }
    return false;
  };
  // Per started collective, the index of its wait once seen.
  std::map<size_t, size_t> waitOf;
  for (size_t i = 0; i < code.size(); ++i) {
    if (!code[i].waitFor)
      continue;
    size_t start = *code[i].waitFor;
    if (start >= i || !code[start].started())
      fail(origin, name(i) + " waits for instruction #" +
                       std::to_string(start) +
                       ", which is not an earlier started collective or "
                       "tier copy");
    if (auto [it, inserted] = waitOf.emplace(start, i); !inserted)
      fail(origin, name(i) + " waits for " + name(start) +
                       " again (first waited for by instruction #" +
                       std::to_string(it->second) + ")");
    // The buffers belong to the collective while it runs: any other
    // instruction on their bytes would race with it.
    for (size_t j = start + 1; j < i; ++j)
      if (conflictsWith(code[start], code[j]))
        fail(origin, name(j) + " touches the buffers of " + name(start) +
                         " (" + labelOf(code[start]) +
                         "), which runs until its wait at instruction #" +
                         std::to_string(i));
  }
  for (size_t i = 0; i < code.size(); ++i)
    if (code[i].started() && !waitOf.count(i))
      fail(origin, name(i) + " (" + labelOf(code[i]) +
                       ") is started but never waited for");
}

/// Every send has its receive: per function and per ordered pair of stages,
/// the sends of one and the receives of the other move the same bytes in
/// the same order (the order they run: an action walk's in its actions'),
/// so no rank waits for a transfer that never comes.
void checkTransfersMatch(const Program &program, const std::string &origin) {
  size_t stages = program.streams.size();
  if (stages < 2)
    return;
  // (function, from, to) -> bytes and labels in program order.
  using Key = std::tuple<std::string, int64_t, int64_t>;
  std::map<Key, std::vector<std::pair<uint64_t, std::string>>> sends, recvs;
  for (size_t k = 0; k < stages; ++k)
    for (const Function &function : program.streams[k].functions)
      forEachExecuted(function, [&](size_t index) {
        const Instruction &instruction = function.instructions[index];
        if (!instruction.transfer)
          return;
        const Transfer &transfer = *instruction.transfer;
        uint64_t bytes = program.streams[k].buffers[instruction.args[0]].bytes;
        if (transfer.send)
          sends[{function.name, int64_t(k), transfer.peer}].push_back(
              {bytes, transfer.label});
        else
          recvs[{function.name, transfer.peer, int64_t(k)}].push_back(
              {bytes, transfer.label});
      });
  auto check = [&](const Key &key, const auto &mine, const auto &theirs) {
    const auto &[function, from, to] = key;
    std::string pair = function + ": stage " + std::to_string(from) +
                       " sends stage " + std::to_string(to) + " ";
    if (mine.size() != theirs.size())
      fail(origin, pair + std::to_string(mine.size()) +
                       " buffers, but stage " + std::to_string(to) +
                       " receives " + std::to_string(theirs.size()) +
                       " from it; every send needs its receive");
    for (size_t i = 0; i < mine.size(); ++i)
      if (mine[i].first != theirs[i].first)
        fail(origin, pair + std::to_string(mine[i].first) + " bytes as '" +
                         mine[i].second + "', but its receive #" +
                         std::to_string(i) + " ('" + theirs[i].second +
                         "') expects " + std::to_string(theirs[i].first));
  };
  const std::vector<std::pair<uint64_t, std::string>> none;
  for (const auto &[key, list] : sends) {
    auto found = recvs.find(key);
    check(key, list, found == recvs.end() ? none : found->second);
  }
  for (const auto &[key, list] : recvs)
    if (!sends.count(key))
      check(key, none, list);
}

} // namespace partition::runtime::check
