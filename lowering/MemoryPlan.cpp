//===- MemoryPlan.cpp - liveness-based arena placement --------------------===//
//
// --lower-memory-plan: lays the state out once per arena (shared by the
// functions of a stage), places each function's temporaries after it by
// live range, and rewrites every buffer as a view of one arena argument.
// What the report says about the result is in MemoryReport.cpp, the
// communication lines in CommunicationCount.cpp.
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"

#include "lowering/ActionWalkMemory.h"
#include "lowering/InOrderParallel.h"
#include "lowering/PipelineStages.h"
#include "lowering/RtEffects.h"

#include "dialects/CheckedSize.h"
#include "dialects/Dist/DistOps.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Rt/RtTiers.h"
#include "dialects/Rt/RtViews.h"
#include "lowering/MemoryReport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include <array>
#include <vector>

namespace partition {
#define GEN_PASS_DEF_MEMORYPLANPASS
#include "lowering/Passes.h.inc"
} // namespace partition

using namespace mlir;
using partition::rt::AllGatherOp;
using partition::rt::AllReduceOp;
using partition::rt::ReduceScatterOp;
using partition::rt::KernelOp;
using partition::rt::RecvOp;
using partition::rt::RtDialect;
using partition::rt::SendOp;
using partition::rt::WaitOp;

namespace partition {
namespace {

constexpr int64_t kAlignment = 64;
/// Buffers of a tier, and the staging buffers their transfers fill, start
/// and end at whole I/O blocks: O_DIRECT moves 4096-byte blocks between
/// 4096-aligned addresses and file offsets (runtime/offload/IoEngine.h).
constexpr int64_t kIoBlock = 4096;

/// `bytes` rounded up to `alignment`, a power of two (kAlignment or
/// kIoBlock): a mask, not a division, in the placement's inner loop.
int64_t alignUp(int64_t bytes, int64_t alignment = kAlignment) {
  assert(llvm::isPowerOf2_64(alignment) && "alignments are powers of two");
  return (bytes + alignment - 1) & ~(alignment - 1);
}

/// What `type` lacks to be placed in the arena, or "" when nothing.
StringRef missingForPlacement(MemRefType type) {
  if (!type.hasStaticShape())
    return "a static shape";
  if (!type.getLayout().isIdentity())
    return "the identity layout";
  Type element = type.getElementType();
  if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() % 8 != 0)
    return "a whole-byte integer or float element type";
  return "";
}

/// What a machine can address, and what to do, for messages.
constexpr StringLiteral kAddressable = "the 2^48 bytes a machine can address";
constexpr StringLiteral kAdvice =
    "; partition the model over more ranks or make it smaller";

/// The bytes of a buffer to place: refused when they do not fit int64 or
/// exceed kMaxAddressableBytes, so that no offset or sum of the plan can
/// overflow.
FailureOr<int64_t> placeableBytes(MemRefType type,
                                  function_ref<InFlightDiagnostic()> emitError) {
  std::optional<int64_t> bytes = checkedByteSize(type);
  if (!bytes)
    return emitError() << "buffer " << type << " needs about "
                       << llvm::formatv("{0:e2}", approximateByteSize(type))
                       << " bytes, more than 64-bit sizes can count"
                       << kAdvice;
  if (*bytes > kMaxAddressableBytes)
    return emitError() << "buffer " << type << " needs " << *bytes
                       << " bytes, more than " << kAddressable << kAdvice;
  return *bytes;
}

/// State buffers (function arguments) keyed by role and name, so that every
/// function of the module (train_step, eval_step) sees the same parameters at
/// the same offsets. They live for the whole run.
class StateLayout {
public:
  LogicalResult add(func::FuncOp function, MemoryReport &report);
  /// The offset of argument `arg`: in the arena, or in its tier's space
  /// when it has an rt.tier.
  int64_t offsetOf(func::FuncOp function, unsigned arg) const {
    return offsets.lookup(keyOf(function, arg)).first;
  }
  int64_t bytes() const { return end; }
  /// The bytes of the host and NVMe tiers (0: the stage has none).
  int64_t tierBytes(StringRef tier) const {
    return tier == "host" ? hostEnd : nvmeEnd;
  }

private:
  using Key = std::pair<StringRef, StringRef>;
  static Key keyOf(func::FuncOp function, unsigned arg) {
    auto get = [&](StringRef attr) {
      auto value = function.getArgAttrOfType<StringAttr>(arg, attr);
      return value ? value.getValue() : StringRef();
    };
    return {get(RtDialect::kRoleAttrName), get(RtDialect::kNameAttrName)};
  }
  llvm::DenseMap<Key, std::pair<int64_t, Type>> offsets;
  int64_t end = 0, hostEnd = 0, nvmeEnd = 0;
};

LogicalResult StateLayout::add(func::FuncOp function, MemoryReport &report) {
  // Within one function two arguments with one key would share a buffer.
  llvm::DenseMap<Key, unsigned> seen;
  std::optional<StringRef> expertAxis;
  if (auto module = function->getParentOfType<ModuleOp>())
    if (dist::PlanAttr plan = dist::getPlan(module))
      expertAxis = plan.getAxis(dist::AxisRole::Expert);
  for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i) {
    Type argType = function.getArgumentTypes()[i];
    auto type = dyn_cast<MemRefType>(argType);
    if (!type)
      return function.emitError()
             << "argument #" << i << " must be a memref, but is " << argType;
    if (StringRef missing = missingForPlacement(type); !missing.empty())
      return function.emitError() << "argument #" << i << " needs " << missing
                                  << " to be planned, but is " << type;
    Key key = keyOf(function, i);
    if (key.first.empty())
      return function.emitError() << "argument #" << i << " has no rt.role";
    if (auto [it, inserted] = seen.try_emplace(key, i); !inserted)
      return function.emitError()
             << "arguments #" << it->second << " and #" << i
             << " are both the " << key.first
             << (key.second.empty() ? "" : " of ") << key.second;
    FailureOr<int64_t> bytes =
        placeableBytes(type, [&] { return function.emitError(); });
    if (failed(bytes))
      return failure();
    // A tiered buffer (the offload's moments) is laid out in its tier's
    // own space, at whole I/O blocks; the arena does not hold it.
    auto tier = function.getArgAttrOfType<StringAttr>(i, RtDialect::kTierAttrName);
    int64_t &space = !tier                        ? end
                     : tier.getValue() == "host" ? hostEnd
                                                  : nvmeEnd;
    if (tier)
      space = alignUp(space, kIoBlock);
    auto [it, inserted] = offsets.try_emplace(key, space, type);
    if (!inserted) {
      if (it->second.second != type)
        return function.emitError()
               << "argument #" << i << " (" << key.first
               << (key.second.empty() ? "" : " ") << key.second << ") is "
               << type << " here but " << it->second.second
               << " in another function";
      continue;
    }
    // Both terms are at most 2^48: the sum cannot overflow.
    space = alignUp(space + *bytes, tier ? kIoBlock : kAlignment);
    if (space > kMaxAddressableBytes)
      return function.emitError()
             << "the parameters, optimizer state and inputs need more than "
             << kAddressable << " (reached at argument #" << i << ", "
             << key.first << (key.second.empty() ? "" : " ") << key.second
             << ")" << kAdvice;
    if (tier) {
      bool host = tier.getValue() == "host";
      // ZeRO-3's parameter shards (--rt-offload-optimizer parameters=...)
      // or the moments.
      if (key.first == "param")
        (host ? report.hostParameters : report.nvmeParameters) += *bytes;
      else
        (host ? report.hostState : report.nvmeState) += *bytes;
      (host ? report.hostBytes : report.nvmeBytes) = space;
      if (key.first != "param")
        continue;
    }
    if (key.first == "param") {
      if (!tier)
        report.parameters += *bytes;
      int64_t elements = type.getNumElements();
      auto block = function.getArgAttrOfType<dist::ShardingAttr>(
          i, dist::DistDialect::kLocalShardingAttrName);
      if (Attribute flat =
              function.getArgAttr(i, dist::DistDialect::kFlatShardAttrName))
        if (FailureOr<dist::FlatShard> shard = dist::readFlatShard(flat);
            succeeded(shard)) {
          elements = 1;
          for (int64_t dim : shard->shape)
            elements *= dim;
          block = shard->blockOf;
        }
      report.parameterElements += elements;
      if (block && expertAxis)
        for (unsigned dim = 0, rank = block.getDims().size(); dim < rank;
             ++dim)
          if (llvm::is_contained(block.getDimAxes(dim), *expertAxis)) {
            report.expertElements += elements;
            break;
          }
    }
    else if (key.first == "moment1" || key.first == "moment2" ||
             key.first == "step")
      report.optimizerState += *bytes;
    else if (key.first == "gradient")
      report.gradients += *bytes;
    else
      report.inputs += *bytes;
  }
  return success();
}

/// The holes in the life of the buffers the micro-batch loop carries from
/// run to run: such a buffer spans the loop, but within each run it holds
/// nothing between the last access to the value it was handed and the op
/// that overwrites it whole with the one it hands on (a pipeline stage's
/// activation slot, between the backward that reads a micro-batch's
/// activations and the forward that writes the next one's). Other buffers
/// may use its bytes there, as the unrolled step's do.
void findCarriedHoles(Block &body,
                      const DenseMap<Operation *, unsigned> &positions,
                      TemporaryPlan &plan) {
  Operation *loopBegin = nullptr, *loopEnd = nullptr;
  for (Operation &op : body) {
    if (isa<rt::MicrobatchLoopBeginOp>(op))
      loopBegin = &op;
    else if (isa<rt::MicrobatchLoopEndOp>(op))
      loopEnd = &op;
  }
  if (!loopBegin || !loopEnd)
    return;
  unsigned begin = positions.lookup(loopBegin), end = positions.lookup(loopEnd);
  // Per carried buffer: the last access before its first whole write in
  // the body, and that write.
  struct Accesses {
    std::optional<unsigned> lastBefore, write;
  };
  DenseMap<unsigned, Accesses> carried;
  for (Interval &interval : plan.intervals)
    if (interval.first < begin && interval.last >= end)
      carried[&interval - plan.intervals.data()] = {};
  if (carried.empty())
    return;
  for (Operation *op = loopBegin->getNextNode(); op != loopEnd;
       op = op->getNextNode()) {
    unsigned at = positions.lookup(op);
    for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
      Value base = rt::viewedBuffer(operand);
      auto interval = plan.intervalOf.find(base);
      if (interval == plan.intervalOf.end())
        continue;
      auto it = carried.find(interval->second);
      if (it == carried.end() || it->second.write)
        continue;
      if (rteffects::overwritesWhole(op, index))
        it->second.write = at;
      else
        it->second.lastBefore = at;
    }
  }
  for (auto &[index, accesses] : carried) {
    if (!accesses.write || !accesses.lastBefore ||
        *accesses.lastBefore + 1 >= *accesses.write)
      continue;
    plan.intervals[index].deadFrom = *accesses.lastBefore + 1;
    plan.intervals[index].deadTo = *accesses.write;
  }
}

/// The live range of every temporary of `body` (views extend their base's
/// range), each checked for placement.
FailureOr<TemporaryPlan> liveRanges(Block &body) {
  DenseMap<Operation *, unsigned> positions;
  for (auto [index, op] : llvm::enumerate(body))
    positions[&op] = index;
  TemporaryPlan plan;
  SmallVector<Interval> &intervals = plan.intervals;
  DenseMap<Value, unsigned> &intervalOf = plan.intervalOf;
  for (Operation &op : body) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      if (StringRef missing = missingForPlacement(alloc.getType());
          !missing.empty())
        return alloc.emitOpError() << "needs " << missing
                                   << " to be planned, but is "
                                   << alloc.getType();
      FailureOr<int64_t> bytes = placeableBytes(
          alloc.getType(), [&] { return alloc.emitOpError(); });
      if (failed(bytes))
        return failure();
      intervalOf[alloc.getResult()] = intervals.size();
      unsigned position = positions[&op];
      intervals.push_back({alloc, *bytes, position, position});
      // A tier transfer's staging buffer: whole I/O blocks.
      if (llvm::any_of(alloc->getUsers(), [](Operation *user) {
            return isa<rt::TierReadOp, rt::TierWriteOp>(user);
          })) {
        intervals.back().isStaging = true;
        intervals.back().alignment = kIoBlock;
        intervals.back().bytes = alignUp(*bytes, kIoBlock);
      }
      continue;
    }
    // Every operand is live at its op: kernel inputs and outputs alike, the
    // buffers of an rt.all_reduce, which it reads and writes in place, and
    // those of an rt.wait: a started collective owns them until then.
    for (Value operand : op.getOperands()) {
      Value base = rt::viewedBuffer(operand);
      auto it = intervalOf.find(base);
      if (it != intervalOf.end())
        intervals[it->second].last =
            std::max(intervals[it->second].last, positions[&op]);
    }
  }
  findCarriedHoles(body, positions, plan);
  if (failed(reserveRepeatedSlots(body, plan, kMaxAddressableBytes)))
    return failure();
  findHeldSlots(body, plan);
  return plan;
}

/// The placed buffers, in offset order, indexed by time: each short-lived
/// buffer in the spans of op positions it touches, the long-lived ones in
/// one list. A buffer live together with a short-lived one is in one of the
/// latter's spans or in the long list, so a placement need only walk those
/// (merged by offset) rather than every placed buffer, most of which live
/// at other times.
class PlacedBuffers {
public:
  explicit PlacedBuffers(MutableArrayRef<Interval> intervals)
      : intervals(intervals) {
    unsigned end = 0;
    for (const Interval &interval : intervals)
      end = std::max(end, interval.last + 1);
    width = std::max(1u, (end + kMaxSpans - 1) / kMaxSpans);
    spans.resize((end + width - 1) / width);
    all.reserve(intervals.size());
  }

  /// Calls `visit` on every placed buffer that may be live together with
  /// `interval`, in nondecreasing offset order (some twice, which the walk
  /// in placeLargestFirst does not mind), until it returns false.
  template <typename Visit>
  void walk(const Interval &interval, Visit &&visit) {
    unsigned first = interval.first / width, last = interval.last / width;
    if (last - first < kShortSpans)
      return mergeWalk(first, last, visit);
    // A long-lived buffer: every placed one, already in offset order. Its
    // conflicts gathered from its spans and sorted cost more: 22% of the
    // compile of an interleaved pipeline stage (llama-70b dp4 x tp8 x pp4
    // v2, 32 micro-batches: 8.45 s with the sort, 6.6-6.8 s without).
    // Those live at other times are skipped on the list's own copy of
    // their lifetimes, read in order, rather than on the Intervals
    // themselves: that walk (8,000 long-lived buffers of 29,000 on such a
    // stage, 130 million buffers looked at, 85% of them live at other
    // times) was 19% of the compile, most of it cache misses.
    for (const Placed &other : all) {
      if (other.first > interval.last || interval.first > other.last)
        continue;
      if (!visit(&intervals[other.index]))
        return;
    }
  }

  void add(Interval *interval) {
    const uint32_t index = interval - intervals.data();
    all.insert(llvm::upper_bound(all, interval->offset,
                                 [&](int64_t value, const Placed &other) {
                                   return value < intervals[other.index].offset;
                                 }),
               Placed{interval->first, interval->last, index});
    unsigned first = interval->first / width, last = interval->last / width;
    if (last - first >= kShortSpans) {
      insertByOffset(longLived, interval);
      return;
    }
    for (unsigned s = first; s <= last; ++s)
      insertByOffset(spans[s], interval);
  }

private:
  static constexpr unsigned kMaxSpans = 1024, kShortSpans = 4;
  /// The short-lived buffers of spans [first, last] and the long-lived
  /// ones, merged by offset.
  template <typename Visit>
  void mergeWalk(unsigned first, unsigned last, Visit &visit) const {
    std::array<ArrayRef<Interval *>, kShortSpans + 1> lists;
    unsigned count = 0;
    for (unsigned s = first; s <= last; ++s)
      lists[count++] = spans[s];
    lists[count++] = longLived;
    while (true) {
      ArrayRef<Interval *> *next = nullptr;
      for (unsigned i = 0; i < count; ++i)
        if (!lists[i].empty() &&
            (!next || lists[i].front()->offset < next->front()->offset))
          next = &lists[i];
      if (!next)
        return;
      Interval *other = next->front();
      *next = next->drop_front();
      if (!visit(other))
        return;
    }
  }
  static void insertByOffset(std::vector<Interval *> &list,
                             Interval *interval) {
    list.insert(llvm::upper_bound(list, interval->offset,
                                  [](int64_t value, const Interval *b) {
                                    return value < b->offset;
                                  }),
                interval);
  }
  MutableArrayRef<Interval> intervals;
  unsigned width = 1;
  std::vector<std::vector<Interval *>> spans;
  std::vector<Interval *> longLived;
  /// Every placed buffer, in offset order: its lifetime and its index in
  /// `intervals`.
  struct Placed {
    unsigned first, last;
    uint32_t index;
  };
  std::vector<Placed> all;
};

/// Greedy by size: largest first, each at the lowest offset that overlaps
/// no placed buffer live at the same time: a walk over the placed buffers
/// in offset order, skipping those live at other times, that stops at the
/// first gap that fits. PlacedBuffers leaves out of the walk most of the
/// buffers live at other times (the offsets are those of a walk over all
/// of them, which was half the compile of an interleaved pipeline stage of
/// 32 micro-batches, 58,000 buffers: llama-70b dp4 x tp8 x pp4 interleaved
/// v2 compiled in 17.5 s before, 12.2 s after, to the same program).
LogicalResult placeLargestFirst(func::FuncOp function, TemporaryPlan &plan) {
  SmallVector<Interval> &intervals = plan.intervals;
  SmallVector<Interval *> order;
  for (Interval &interval : intervals)
    order.push_back(&interval);
  // An action walk's slot buffers first, a held class after another: the
  // longest held first (a slot's activations before the backward
  // temporaries that land on their finished part), then the largest. A
  // class never held with one placed before it then lands on its bytes
  // buffer by buffer, where shapes match (one pool slot of two chunks of
  // an interleaved stage).
  std::vector<int64_t> classBytes(plan.heldTogether.size(), 0);
  for (const Interval &interval : intervals)
    if (interval.heldClass >= 0)
      classBytes[interval.heldClass] += interval.bytes;
  auto key = [&](const Interval *interval) {
    bool held = interval->heldClass >= 0;
    return std::make_tuple(
        !held, held ? -plan.heldActions[interval->heldClass] : 0,
        held ? -classBytes[interval->heldClass] : 0, interval->heldClass,
        -interval->bytes);
  };
  llvm::stable_sort(order, [&](const Interval *a, const Interval *b) {
    return key(a) < key(b);
  });
  PlacedBuffers placed(intervals);
  for (Interval *interval : order) {
    int64_t offset = 0;
    placed.walk(*interval, [&](const Interval *other) {
      if (!plan.liveTogether(*other, *interval))
        return true;
      if (offset + interval->bytes <= other->offset)
        return false;
      offset = std::max(offset, alignUp(other->offset + other->bytes,
                                        interval->alignment));
      return true;
    });
    // Offsets and sizes are at most 2^48 (checked here as each buffer is
    // placed), so these sums cannot overflow.
    if (offset + interval->bytes > kMaxAddressableBytes)
      return function.emitError()
             << "the temporaries of @" << function.getSymName()
             << " need more than " << kAddressable
             << " (reached placing buffer " << interval->alloc.getType()
             << ")" << kAdvice;
    interval->offset = offset;
    plan.peak = std::max(plan.peak, offset + interval->bytes);
    placed.add(interval);
  }
  return success();
}

/// The temporaries of one function: their live ranges, what they hold, and
/// their offsets relative to the end of the state.
FailureOr<TemporaryPlan> planTemporaries(func::FuncOp function) {
  Block &body = function.getBody().front();
  FailureOr<TemporaryPlan> plan = liveRanges(body);
  if (failed(plan))
    return failure();
  classifyTemporaries(body, *plan);
  if (failed(placeLargestFirst(function, *plan)))
    return failure();
  return plan;
}

/// Gives `function` one arena argument and makes every buffer a view of it.
LogicalResult rewriteWithArena(func::FuncOp function, const StateLayout &state,
                               int64_t temporariesStart, TemporaryPlan &plan,
                               int64_t arenaBytes) {
  Block &body = function.getBody().front();
  OpBuilder builder = OpBuilder::atBlockBegin(&body);
  Location loc = function.getLoc();
  auto arenaType = MemRefType::get({arenaBytes}, builder.getI8Type());
  unsigned numState = function.getNumArguments();
  if (failed(function.insertArgument(numState, arenaType, DictionaryAttr(),
                                     loc)))
    return failure();
  BlockArgument arena = body.getArgument(numState);
  auto makeView = [&](Location viewLoc, int64_t offset, MemRefType type) {
    Value offsetValue = arith::ConstantIndexOp::create(builder, viewLoc, offset);
    return memref::ViewOp::create(builder, viewLoc, type, arena, offsetValue,
                                  ValueRange{});
  };
  // One argument per tier after the arena, its bytes at whole blocks, so
  // that every function of the stage takes the same arguments.
  unsigned numArgs = numState + 1;
  llvm::StringMap<BlockArgument> tiers;
  for (StringRef tier : {"host", "nvme"}) {
    if (state.tierBytes(tier) == 0)
      continue;
    auto tierType = MemRefType::get({state.tierBytes(tier)},
                                    builder.getI8Type());
    if (failed(function.insertArgument(
            numArgs, tierType,
            builder.getDictionaryAttr(builder.getNamedAttr(
                RtDialect::kTierAttrName, builder.getStringAttr(tier))),
            loc)))
      return failure();
    tiers[tier] = body.getArgument(numArgs++);
  }
  for (unsigned i = 0; i < numState; ++i) {
    BlockArgument arg = body.getArgument(i);
    auto tier = function.getArgAttrOfType<StringAttr>(i, RtDialect::kTierAttrName);
    Value offsetValue = arith::ConstantIndexOp::create(
        builder, arg.getLoc(), state.offsetOf(function, i));
    auto view = memref::ViewOp::create(
        builder, arg.getLoc(), cast<MemRefType>(arg.getType()),
        tier ? tiers.lookup(tier.getValue()) : arena, offsetValue,
        ValueRange{});
    if (DictionaryAttr attrs = function.getArgAttrDict(i))
      for (NamedAttribute attr : attrs)
        view->setAttr(attr.getName(), attr.getValue());
    arg.replaceAllUsesWith(view);
  }
  for (Interval &interval : plan.intervals) {
    builder.setInsertionPoint(interval.alloc);
    auto view = makeView(interval.alloc.getLoc(),
                         temporariesStart + interval.offset,
                         interval.alloc.getType());
    interval.alloc.replaceAllUsesWith(view.getResult());
    interval.alloc.erase();
  }
  llvm::BitVector stateArgs(numArgs, false);
  stateArgs.set(0, numState);
  if (failed(function.eraseArguments(stateArgs)))
    return failure();
  function->setAttr(RtDialect::kArenaBytesAttrName,
                    builder.getI64IntegerAttr(arenaBytes));
  return success();
}

struct MemoryPlanPass : impl::MemoryPlanPassBase<MemoryPlanPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<func::FuncOp> functions;
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal() &&
          llvm::any_of(function.getBody().getOps(), [](Operation &op) {
            return isa<KernelOp, AllReduceOp, AllGatherOp, ReduceScatterOp,
                       rt::RingShiftOp, rt::AllToAllOp, WaitOp, SendOp,
                       RecvOp>(op);
          }))
        functions.push_back(function);
    if (functions.empty()) {
      getOperation().emitError("no function with rt.kernel or rt.all_reduce "
                               "ops to plan (run --lower-to-rt first)");
      return signalPassFailure();
    }

    // One arena per pipeline stage (a stream of the program); without a
    // pipeline, one for all.
    FailureOr<SmallVector<SmallVector<func::FuncOp>>> stages =
        groupByPipelineStage(getOperation(), functions);
    if (failed(stages))
      return signalPassFailure();
    // The state of each stage first (its errors come before any
    // temporary's, as when one loop did both).
    SmallVector<Arena> arenas(stages->size());
    for (auto [stage, arena] : llvm::zip(*stages, arenas))
      for (func::FuncOp function : stage)
        if (failed(arena.state.add(function, arena.totals)))
          return signalPassFailure();
    // Then each function's temporaries, on their own on the context's
    // threads: the placement is most of the pass, and until a stage's
    // arena is laid out its functions share nothing (a pipeline's stages
    // and their evaluation steps: 8 functions, 4 of them large, for pp 4).
    // Diagnostics are a loop's: in order, up to the first failure.
    SmallVector<func::FuncOp> ordered;
    for (const SmallVector<func::FuncOp> &stage : *stages)
      llvm::append_range(ordered, stage);
    SmallVector<std::optional<TemporaryPlan>> placed(ordered.size());
    if (failed(failableParallelForEachInOrder(
            &getContext(), ordered.size(), [&](size_t index) {
              FailureOr<TemporaryPlan> plan = planTemporaries(ordered[index]);
              if (failed(plan))
                return failure();
              placed[index] = std::move(*plan);
              return success();
            })))
      return signalPassFailure();
    size_t next = 0;
    for (auto [index, stage] : llvm::enumerate(*stages)) {
      MutableArrayRef<std::optional<TemporaryPlan>> plans(
          placed.data() + next, stage.size());
      next += stage.size();
      if (failed(layOutArena(stage, plans, arenas[index],
                             stages->size() > 1
                                 ? "stage " + std::to_string(index) + " "
                                 : std::string())))
        return signalPassFailure();
    }
  }

  /// One stage's arena: its functions never run at the same time, so they
  /// share the state and reuse one temporary region.
  struct Arena {
    MemoryReport totals;
    StateLayout state;
  };

  /// Lays out one stage's functions, their state already in `arena` and
  /// their temporaries placed (`placed`, one per function), in one arena;
  /// `prefix` ("stage 1 ") qualifies the report's lines when there are
  /// several stages.
  LogicalResult layOutArena(ArrayRef<func::FuncOp> functions,
                            MutableArrayRef<std::optional<TemporaryPlan>> placed,
                            Arena &arena, const std::string &prefix) {
    MemoryReport &totals = arena.totals;
    const StateLayout &state = arena.state;
    SmallVector<Communication, 2> communication;
    for (auto [function, plan] : llvm::zip(functions, placed)) {
      recordPeak(func::FuncOp(function).getBody().front(), *plan, totals);
      FailureOr<Communication> comm = countCommunication(function);
      if (failed(comm))
        return failure();
      communication.push_back(*comm);
    }
    // Each term is at most 2^48 (checked as it was laid out). Staging
    // buffers start at whole I/O blocks of the arena: so does the room
    // of the temporaries after the state.
    int64_t stateBytes = totals.hasStaging ? alignUp(state.bytes(), kIoBlock)
                                           : state.bytes();
    totals.arena = alignUp(stateBytes + totals.temporariesPeak);
    if (totals.arena > kMaxAddressableBytes)
      return getOperation().emitError()
             << "the arena " << (prefix.empty() ? "" : "of " + prefix)
             << "needs " << totals.arena << " bytes (state "
             << state.bytes() << ", temporaries " << totals.temporariesPeak
             << "), more than " << kAddressable << kAdvice;
    for (auto [function, plan] : llvm::zip(functions, placed))
      if (failed(rewriteWithArena(function, state, stateBytes, *plan,
                                  totals.arena)))
        return failure();

    if (!report)
      return success();
    printMemoryReport(getOperation(), totals, communication, prefix,
                      llvm::outs());
    llvm::outs().flush();
    return success();
  }
};

} // namespace
} // namespace partition
