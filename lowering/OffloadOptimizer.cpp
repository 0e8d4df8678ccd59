//===- OffloadOptimizer.cpp - AdamW's moments in a tier of their own ------===//
//
// --rt-offload-optimizer: marks the moment arguments of every function with
// their tier (host or nvme), and, with `parameters`, ZeRO-3's parameter
// shards with theirs, and rewrites each adamw kernel on them into slices
// whose tiered operands are read from the tier into staging buffers of the
// arena, updated there and written back; each flat_pack of a tiered shard
// (the packing of a ZeRO-3 all-gather) packs slices read into staging
// buffers the same way. Each update first moves up to
// where its gradient is complete (into the backward pass), reads start as
// many slices ahead as half the staging budget (buffer-bytes) holds, and
// write-backs are waited for as late as the budget allows; the kernels
// keep their arithmetic and only cross kernels they commute with, so the
// result is bit-identical to the step without offload (docs/offload.md).
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"
#include "lowering/RtEffects.h"

#include "dialects/Dist/DistDialect.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Rt/RtTiers.h"
#include "passes/plan/Plan.h"
#include "runtime/program/KernelTable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/SetVector.h"

#include <deque>

namespace partition {
#define GEN_PASS_DEF_OFFLOADOPTIMIZERPASS
#include "lowering/Passes.h.inc"
} // namespace partition

using namespace mlir;
using partition::rt::KernelOp;
using partition::rt::RtDialect;

namespace partition {
namespace {

using Offload = Plan::Offload;

/// adamw's operands (runtime/program/Kernels.def): inputs param, grad, m,
/// v, step, lr; outputs param', m', v'.
constexpr unsigned kParam = 0, kGrad = 1, kMoment1 = 2, kMoment2 = 3,
                   kStep = 4, kLearningRate = 5;
constexpr unsigned kNewParam = 0, kNewMoment1 = 1, kNewMoment2 = 2;


bool isAdamW(Operation *op) {
  auto kernel = dyn_cast<KernelOp>(op);
  return kernel && kernel.getInfo().id == runtime::KernelId::AdamW;
}

/// A flat_pack of one tensor into a one-row bucket: its slices can be
/// packed one by one (a slice [o, o + n) of x takes columns [offset + o,
/// offset + o + n)), which is how ZeRO-3 packs a shard for its all-gather.
bool isOneRowPack(KernelOp kernel) {
  if (kernel.getInfo().id != runtime::KernelId::FlatPack)
    return false;
  auto bucket = cast<MemRefType>(kernel.getOutputs()[0].getType());
  return bucket.getRank() == 2 && bucket.getDimSize(0) == 1 &&
         kernel.getInputs()[0] != kernel.getOutputs()[0];
}

/// Where the first slice's reads start: before the last kernel that
/// computes parameter gradients ahead of the first update (the backward
/// pass's last weight gradient, which they then overlap), else before the
/// kernel just before it, else at the update.
Operation *firstReadPoint(KernelOp update) {
  Operation *nearest = nullptr;
  for (Operation *op = update->getPrevNode(); op; op = op->getPrevNode()) {
    auto kernel = dyn_cast<KernelOp>(op);
    if (!kernel)
      continue;
    runtime::KernelRole role = kernel.getInfo().role;
    if (role == runtime::KernelRole::ParameterGradients ||
        role == runtime::KernelRole::ParameterGradientsAfterFirst)
      return op;
    if (!nearest)
      nearest = op;
  }
  return nearest ? nearest : update.getOperation();
}

/// One slice of one staged kernel: elements [offset, offset + size) of an
/// adamw kernel's tensors, or of the shard a flat_pack packs (the whole
/// tensor when `whole`).
struct Unit {
  /// The adamw (an update: its tiered operands read, updated in place and
  /// written back) or the flat_pack (a pack: its shard read, packed, and
  /// the staging buffer free after it).
  KernelOp update;
  bool pack = false;
  /// The operands staged: moment1, moment2 and the parameter when in a
  /// tier (an update); the packed shard (a pack).
  SmallVector<unsigned, 3> staged;
  int64_t offset = 0, size = 0;
  bool whole = true;
  /// Staging bytes in the arena (each staged operand's slice rounded up to
  /// whole I/O blocks, as the memory plan places them).
  int64_t bytes = 0;
  /// The reads' waits (just before the slice's kernel) and the
  /// write-backs' waits (placed by the schedule).
  SmallVector<rt::WaitOp, 2> readWaits, writeWaits;
  bool writeWaited = false;
};

/// `value` seen as a flat vector of its elements [offset, offset + size):
/// a collapse to one dimension (for a rank above one; made once per value,
/// in `flat`, the first slice's being the earliest) and a subview.
Value flatSlice(OpBuilder &builder, Location loc, Value value, int64_t offset,
                int64_t size, DenseMap<Value, Value> &flat) {
  auto type = cast<MemRefType>(value.getType());
  if (type.getRank() != 1) {
    Value &collapsed = flat[value];
    if (!collapsed) {
      SmallVector<ReassociationIndices> all(1);
      for (int64_t dim = 0; dim < type.getRank(); ++dim)
        all[0].push_back(dim);
      collapsed = memref::CollapseShapeOp::create(builder, loc, value, all);
    }
    value = collapsed;
  }
  return memref::SubViewOp::create(
      builder, loc, value, ArrayRef<int64_t>{offset}, ArrayRef<int64_t>{size},
      ArrayRef<int64_t>{1});
}

struct OffloadOptimizerPass
    : impl::OffloadOptimizerPassBase<OffloadOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tier != "none" && !rt::isTierName(tier)) {
      module.emitError() << "--rt-offload-optimizer: tier must be none, "
                            "host or nvme, not '"
                         << static_cast<std::string>(tier) << "'";
      return signalPassFailure();
    }
    if (parameters != "none" && !rt::isTierName(parameters)) {
      module.emitError() << "--rt-offload-optimizer: parameters must be "
                            "none, host or nvme, not '"
                         << static_cast<std::string>(parameters) << "'";
      return signalPassFailure();
    }
    if (tier == "none" && parameters == "none") {
      module.emitError("--rt-offload-optimizer: nothing to offload (tier "
                       "and parameters are both none); leave out the pass");
      return signalPassFailure();
    }
    if (bufferBytes < Offload::kMinBufferBytes) {
      module.emitError() << "--rt-offload-optimizer: buffer-bytes "
                         << static_cast<int64_t>(bufferBytes) << " is below "
                         << Offload::kMinBufferBytes
                         << ", three 4096-byte slices of both moments";
      return signalPassFailure();
    }
    bool nvme = tier == "nvme" || parameters == "nvme";
    if (nvme && path.empty()) {
      module.emitError("--rt-offload-optimizer: the nvme tier needs path, "
                       "the directory of the offload files");
      return signalPassFailure();
    }
    bool anyMoment = false, anyShard = false;
    for (auto function : module.getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      if (failed(offloadFunction(function, anyMoment, anyShard)))
        return signalPassFailure();
    }
    if (tier != "none" && !anyMoment) {
      module.emitError("--rt-offload-optimizer: the step has no AdamW "
                       "moments to offload (compiled with --optimizer none?); "
                       "leave out offload.optimizer");
      return signalPassFailure();
    }
    if (parameters != "none" && !anyShard) {
      module.emitError("--rt-offload-optimizer: the step has no ZeRO-3 "
                       "parameter shards to offload (parameters=" +
                       parameters +
                       " needs zero.stage 3 over dp > 1); leave out "
                       "offload.parameters or give zero.stage 3");
      return signalPassFailure();
    }
    if (nvme)
      module->setAttr(RtDialect::kOffloadPathAttrName,
                      StringAttr::get(&getContext(), path));
  }

  /// Marks the moments of `function` with `tier` and, with `parameters`,
  /// its ZeRO-3 parameter shards with theirs, and stages every update and
  /// pack of them; sets `anyMoment` / `anyShard` when it has any.
  LogicalResult offloadFunction(func::FuncOp function, bool &anyMoment,
                                bool &anyShard) {
    Block &body = function.getBody().front();
    llvm::SmallDenseMap<Value, StringRef, 8> moments;
    llvm::SmallDenseSet<Value, 8> shards;
    for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i) {
      auto role =
          function.getArgAttrOfType<StringAttr>(i, RtDialect::kRoleAttrName);
      if (!role)
        continue;
      bool moment =
          role.getValue() == "moment1" || role.getValue() == "moment2";
      // ZeRO-3's shards are flat shards (dist.flat_shard); other
      // parameters stay in the arena.
      bool shard =
          role.getValue() == "param" &&
          function.getArgAttr(i, dist::DistDialect::kFlatShardAttrName);
      if (moment && tier != "none") {
        function.setArgAttr(i, RtDialect::kTierAttrName,
                            StringAttr::get(&getContext(), tier));
        moments[body.getArgument(i)] = role.getValue();
      } else if (shard && parameters != "none") {
        function.setArgAttr(i, RtDialect::kTierAttrName,
                            StringAttr::get(&getContext(), parameters));
        shards.insert(body.getArgument(i));
      } else if (role.getValue() == "param" && parameters != "none") {
        return function.emitError()
               << "parameter '" << nameOf(function, i)
               << "' is no ZeRO-3 shard (no dist.flat_shard): "
                  "--rt-offload-optimizer parameters="
               << parameters
               << " offloads ZeRO-3's parameter shards; compile with "
                  "zero.stage 3, or leave out offload.parameters";
      }
    }
    anyMoment |= !moments.empty();
    anyShard |= !shards.empty();
    if (moments.empty() && shards.empty())
      return success();
    // Every use of a moment is an adamw that updates it in place, every
    // use of a shard such an adamw or a flat_pack into a one-row bucket:
    // the ops the pass knows how to stage.
    SmallVector<KernelOp> updates, packs;
    llvm::SmallDenseSet<Value, 8> updated;
    for (Operation &op : body) {
      bool usesMoment = llvm::any_of(op.getOperands(), [&](Value operand) {
        return moments.count(operand);
      });
      bool usesShard = llvm::any_of(op.getOperands(), [&](Value operand) {
        return shards.count(operand);
      });
      if (!usesMoment && !usesShard)
        continue;
      auto kernel = dyn_cast<KernelOp>(op);
      if (usesShard && !usesMoment && kernel && isOneRowPack(kernel)) {
        packs.push_back(kernel);
        continue;
      }
      bool adamw = kernel && isAdamW(kernel);
      bool stagedMoments =
          adamw &&
          (tier == "none" ||
           (moments.count(kernel.getInputs()[kMoment1]) &&
            moments.count(kernel.getInputs()[kMoment2]) &&
            kernel.getOutputs()[kNewMoment1] == kernel.getInputs()[kMoment1] &&
            kernel.getOutputs()[kNewMoment2] == kernel.getInputs()[kMoment2]));
      if (usesMoment && !stagedMoments)
        return op.emitOpError()
               << "uses an AdamW moment, which --rt-offload-optimizer moves "
                  "to the "
               << tier
               << " tier: only an adamw kernel that updates both moments in "
                  "place can be staged";
      Value param = adamw ? kernel.getInputs()[kParam] : Value();
      bool stagedShard = adamw && shards.count(param) &&
                         kernel.getOutputs()[kNewParam] == param &&
                         llvm::count(op.getOperands(), param) == 2;
      if (usesShard && isa<rt::AllGatherOp>(op))
        return op.emitOpError()
               << "all-gathers a ZeRO-3 parameter shard straight from the "
                  "argument, which --rt-offload-optimizer moves to the "
               << parameters
               << " tier and can stage only through a pack: lower with "
                  "--lower-to-rt=gather-shards-per-tensor=false (as "
                  "partition-compile does when the plan offloads "
                  "parameters)";
      if (usesShard && !stagedShard)
        return op.emitOpError()
               << "uses a ZeRO-3 parameter shard, which "
                  "--rt-offload-optimizer moves to the "
               << parameters
               << " tier: only an adamw kernel that updates it in place and "
                  "a flat_pack into a one-row bucket (the all-gather's "
                  "packing) can be staged";
      for (unsigned index : {kMoment1, kMoment2, kParam}) {
        Value operand = kernel.getInputs()[index];
        if ((moments.count(operand) || shards.count(operand)) &&
            !updated.insert(operand).second)
          return kernel.emitOpError()
                 << "updates a "
                 << (index == kParam ? "parameter shard" : "moment")
                 << " that an earlier adamw of @" << function.getSymName()
                 << " updates too; each "
                 << (index == kParam ? "shard" : "moment")
                 << " is staged once per step";
      }
      updates.push_back(kernel);
    }
    hoist(body, updates);
    // Every pack of a shard comes before its update (the update moved
    // below the last read of its parameter): a pack reads the tier, so the
    // write-back must not be pending there.
    for (KernelOp pack : packs)
      for (KernelOp update : updates)
        if (update.getInputs()[kParam] == pack.getInputs()[0] &&
            update->isBeforeInBlock(pack))
          return pack.emitOpError()
                 << "packs a ZeRO-3 parameter shard after its adamw in the "
                    "same step; --rt-offload-optimizer stages a shard's "
                    "packs before its update only";
    SmallVector<Unit> units = cut(updates, moments, shards, packs);
    stageByRegion(function, units);
    for (KernelOp update : updates)
      update.erase();
    for (KernelOp pack : packs)
      pack.erase();
    return success();
  }

  static std::string nameOf(func::FuncOp function, unsigned arg) {
    auto name =
        function.getArgAttrOfType<StringAttr>(arg, RtDialect::kNameAttrName);
    return name ? name.getValue().str() : "#" + std::to_string(arg);
  }

  /// Moves `op` up to just below the last op it depends on: one that
  /// defines an operand of it, that it conflicts with
  /// (rteffects::conflicts), or that nothing may cross. The step computes
  /// the same values.
  /// With `withBuffers`, the allocations and views of its operands move up
  /// first (the memory plan counts a buffer live from its allocation, so
  /// only the step counter's few bytes do).
  static void hoistOp(Block &body, Operation *op, bool withBuffers = false) {
    if (withBuffers)
      for (Value operand : op->getOperands())
        if (Operation *definition = operand.getDefiningOp())
          if (definition->getBlock() == &body &&
              isa<memref::AllocOp, memref::SubViewOp, memref::CollapseShapeOp,
                  arith::ConstantOp>(definition))
            hoistOp(body, definition, /*withBuffers=*/true);
    for (Operation *above = op->getPrevNode(); above;
         above = above->getPrevNode()) {
      bool definesOperand = llvm::any_of(above->getResults(), [&](Value v) {
        return llvm::is_contained(op->getOperands(), v);
      });
      if (definesOperand || !rteffects::movableAcross(above) ||
          rteffects::conflicts(op, above)) {
        op->moveAfter(above);
        return;
      }
    }
    op->moveBefore(&body.front());
  }

  /// Moves each update up to just below the last op it depends on (the
  /// kernel that completes its gradient, the wait of its bucket's
  /// reduction, the last read of the parameter), so that the moments'
  /// transfers run under the backward pass that follows instead of after
  /// it, as ZeRO-Offload updates each bucket once its gradient is ready.
  /// The step counter's increment, which the train step places after the
  /// backward pass and every update reads, moves up first (with the
  /// kernels that compute its operands). Only non-conflicting ops are
  /// crossed, so the step computes the same values: AdamW is elementwise
  /// and each update touches its own parameter and moments, reading the
  /// shared step and learning rate. `updates` comes back in the new
  /// program order.
  void hoist(Block &body, SmallVectorImpl<KernelOp> &updates) {
    llvm::SmallPtrSet<Operation *, 8> isUpdate;
    llvm::SmallPtrSet<Value, 4> shared;
    for (KernelOp update : updates) {
      isUpdate.insert(update);
      for (unsigned index : {kStep, kLearningRate})
        shared.insert(rteffects::baseBuffer(update.getInputs()[index]));
    }
    // The writers of the step (and learning rate), and transitively the
    // kernels writing their inputs, in program order.
    llvm::SetVector<Operation *> chain;
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    llvm::SmallPtrSet<Value, 8> wanted(shared.begin(), shared.end());
    for (Operation *op : llvm::reverse(ops)) {
      if (isUpdate.contains(op) || !isa<KernelOp>(op) ||
          !rteffects::writesAny(op, wanted))
        continue;
      chain.insert(op);
      for (Value input : cast<KernelOp>(op).getInputs())
        wanted.insert(rteffects::baseBuffer(input));
    }
    for (Operation *op : llvm::reverse(chain))
      hoistOp(body, op, /*withBuffers=*/true);
    for (KernelOp update : updates)
      hoistOp(body, update);
    llvm::sort(updates, [](KernelOp a, KernelOp b) {
      return a->isBeforeInBlock(b);
    });
  }

  /// The slices of each update and pack, in program order: each staged
  /// operand's slice of `buffer-bytes / (6 x the staged operands)` bytes
  /// (`buffer-bytes / 12` per moment when both moments alone are staged),
  /// whole I/O blocks, so that a unit is a sixth of the budget.
  SmallVector<Unit> cut(ArrayRef<KernelOp> updates,
                        const llvm::SmallDenseMap<Value, StringRef, 8> &moments,
                        const llvm::SmallDenseSet<Value, 8> &shards,
                        ArrayRef<KernelOp> packs) {
    SmallVector<KernelOp> kernels(updates);
    kernels.append(packs.begin(), packs.end());
    llvm::sort(kernels,
               [](KernelOp a, KernelOp b) { return a->isBeforeInBlock(b); });
    llvm::SmallPtrSet<Operation *, 8> isPack;
    for (KernelOp pack : packs)
      isPack.insert(pack);
    SmallVector<Unit> units;
    for (KernelOp kernel : kernels) {
      bool pack = isPack.contains(kernel);
      SmallVector<unsigned, 3> staged;
      if (pack)
        staged.push_back(0);
      else
        for (unsigned index : {kMoment1, kMoment2, kParam})
          if (moments.count(kernel.getInputs()[index]) ||
              shards.count(kernel.getInputs()[index]))
            staged.push_back(index);
      auto type = cast<MemRefType>(kernel.getInputs()[staged[0]].getType());
      int64_t elementBytes = type.getElementTypeBitWidth() / 8;
      int64_t sliceBytes =
          Offload::sliceBytes(bufferBytes * 2 / int64_t(staged.size()));
      int64_t slice = sliceBytes / elementBytes;
      int64_t elements = type.getNumElements();
      for (int64_t offset = 0; offset < elements || offset == 0;
           offset += slice) {
        Unit unit;
        unit.update = kernel;
        unit.pack = pack;
        unit.staged = staged;
        unit.offset = offset;
        unit.size = std::min(slice, elements - offset);
        unit.whole = unit.size == elements;
        unit.bytes =
            int64_t(staged.size()) *
            llvm::alignTo(unit.size * elementBytes, Offload::kSliceAlignment);
        units.push_back(unit);
        if (elements == 0)
          break;
      }
    }
    return units;
  }

  /// Whether `a` and `b` read elements of one tier buffer in common.
  static bool overlaps(Unit &a, Unit &b) {
    for (unsigned x : a.staged)
      for (unsigned y : b.staged)
        if (a.update.getInputs()[x] == b.update.getInputs()[y] &&
            a.offset < b.offset + std::max<int64_t>(b.size, 1) &&
            b.offset < a.offset + std::max<int64_t>(a.size, 1))
          return true;
    return false;
  }

  /// The transfers of every unit, in order. Each unit's reads start as
  /// many units ahead as half of buffer-bytes holds (the units read and
  /// not yet updated, this one included; at least one ahead: before the
  /// previous unit's update, the first unit's before the kernel that
  /// precedes its update) and are waited for just before its own update;
  /// each write-back starts right after the update and is waited for just
  /// before the first later read that would exceed buffer-bytes of
  /// staging (oldest first), else at the end of the function. Reading
  /// ahead keeps the disk busy through updates that follow each other
  /// (a large tensor's slices) and through the backward pass between
  /// hoisted ones; the other half of the budget is for the write-backs in
  /// flight. A pack (a shard's flat_pack) is a unit without write-back:
  /// its staging is free once packed, and its reads run ahead of the
  /// all-gather's packing as an update's run ahead of the update.
  /// stage() for each run of units on one side of the micro-batch loop's
  /// edges (before it, in it, after it): a transfer the loop's code starts
  /// it also waits for, in the same run (--rt-microbatch-loop).
  void stageByRegion(func::FuncOp function, MutableArrayRef<Unit> units) {
    Block &body = function.getBody().front();
    Operation *loopBegin = nullptr, *loopEnd = nullptr;
    for (Operation &op : body) {
      if (isa<rt::MicrobatchLoopBeginOp>(op))
        loopBegin = &op;
      if (isa<rt::MicrobatchLoopEndOp>(op))
        loopEnd = &op;
    }
    // 0: before the loop (or no loop), 1: in it, 2: after it.
    auto regionOf = [&](Operation *op) {
      if (!loopBegin || op->isBeforeInBlock(loopBegin))
        return 0;
      return op->isBeforeInBlock(loopEnd) ? 1 : 2;
    };
    Operation *starts[3] = {&body.front(),
                            loopBegin ? loopBegin->getNextNode() : nullptr,
                            loopEnd ? loopEnd->getNextNode() : nullptr};
    Operation *ends[3] = {loopBegin ? loopBegin : body.getTerminator(),
                          loopEnd, body.getTerminator()};
    flat.clear();
    for (size_t first = 0; first < units.size();) {
      int region = regionOf(units[first].update);
      size_t last = first + 1;
      while (last < units.size() && regionOf(units[last].update) == region)
        ++last;
      stage(function, units.slice(first, last - first), starts[region],
            ends[region]);
      first = last;
    }
  }

  /// The transfers of `units`, all between `start` and `end`: reads start
  /// at `start` at the earliest, write-backs are waited for by `end`.
  void stage(func::FuncOp function, MutableArrayRef<Unit> units,
             Operation *start, Operation *end) {
    std::deque<Unit *> pending; // written back, not yet waited for
    int64_t stagedBytes = 0;
    size_t ahead = 0;      // the unit before whose update reads start
    int64_t aheadBytes = 0; // staging of units [ahead, i)
    size_t written = 0;     // units [0, written) are in `pending` or waited
    for (size_t i = 0; i < units.size(); ++i) {
      Unit &unit = units[i];
      Operation *at = firstReadPoint(unit.update);
      if (at->isBeforeInBlock(start))
        at = start;
      if (i > 0) {
        aheadBytes += units[i - 1].bytes;
        while (ahead + 1 < i && aheadBytes + unit.bytes > bufferBytes / 2) {
          aheadBytes -= units[ahead].bytes;
          ++ahead;
        }
        at = units[ahead].readWaits.front().getOperation();
        // A tier buffer's elements are read by one transfer at a time (a
        // shard's pack and its update read the same slice): the reads
        // start after the wait of the last overlapping one.
        std::optional<size_t> conflict;
        for (size_t k = ahead; k < i; ++k)
          if (overlaps(units[k], unit))
            conflict = k;
        if (conflict) {
          size_t next = std::min(*conflict + 1, i - 1);
          for (; ahead < next; ++ahead)
            aheadBytes -= units[ahead].bytes;
          at = *conflict + 1 < i
                   ? units[ahead].readWaits.front().getOperation()
                   : units[*conflict].readWaits.back()->getNextNode();
        }
      }
      // Units before `ahead` have started their write-backs before `at`
      // (packs have packed their slice there, which frees its staging):
      // the oldest are waited for there while this unit's staging would
      // not fit.
      for (; written < ahead; ++written)
        if (units[written].pack)
          stagedBytes -= units[written].bytes;
        else
          pending.push_back(&units[written]);
      while (!pending.empty() && stagedBytes + unit.bytes > bufferBytes) {
        Unit *oldest = pending.front();
        pending.pop_front();
        for (rt::WaitOp wait : oldest->writeWaits)
          wait->moveBefore(at);
        oldest->writeWaited = true;
        stagedBytes -= oldest->bytes;
      }
      build(function, unit, at);
      stagedBytes += unit.bytes;
    }
    for (Unit &unit : units)
      if (!unit.writeWaited)
        for (rt::WaitOp wait : unit.writeWaits)
          wait->moveBefore(end);
  }

  /// The ops of `unit`: the views of its staged operands' slices, their
  /// staging buffers and the reads into them before `at`; the reads'
  /// waits and the kernel on the slice at its kernel, then (an update) the
  /// write-backs, with their waits, which stage() moves.
  /// Each multi-dimensional tensor seen flat (flatSlice), per function.
  DenseMap<Value, Value> flat;

  void build(func::FuncOp function, Unit &unit, Operation *at) {
    KernelOp update = unit.update;
    Location loc = update.getLoc();
    OpBuilder builder(at);
    auto slice = [&](Value value) {
      return unit.whole
                 ? value
                 : flatSlice(builder, loc, value, unit.offset, unit.size, flat);
    };
    // "moment1 h.0.attn.c_attn.weight [0, 4096)": what an I/O error names.
    auto label = [&](unsigned index) {
      auto arg = cast<BlockArgument>(update.getInputs()[index]);
      std::string text = function
                             .getArgAttrOfType<StringAttr>(
                                 arg.getArgNumber(), RtDialect::kRoleAttrName)
                             .getValue()
                             .str();
      if (auto name = function.getArgAttrOfType<StringAttr>(
              arg.getArgNumber(), RtDialect::kNameAttrName))
        text += " " + name.getValue().str();
      if (!unit.whole)
        text += " [" + std::to_string(unit.offset) + ", " +
                std::to_string(unit.offset + unit.size) + ")";
      return text;
    };
    auto tokenType = rt::TokenType::get(&getContext());
    SmallVector<Value, 3> tiered, staged;
    SmallVector<Value, 3> reads;
    for (unsigned index : unit.staged) {
      Value buffer = update.getInputs()[index];
      auto type = cast<MemRefType>(buffer.getType());
      Value part = slice(buffer);
      auto staging = memref::AllocOp::create(
          builder, loc,
          unit.whole ? type
                     : MemRefType::get({unit.size}, type.getElementType()));
      reads.push_back(rt::TierReadOp::create(builder, loc, tokenType, part,
                                             staging, label(index))
                          .getToken());
      tiered.push_back(part);
      staged.push_back(staging);
    }
    builder.setInsertionPoint(update);
    for (auto [read, part, staging] : llvm::zip(reads, tiered, staged))
      unit.readWaits.push_back(
          rt::WaitOp::create(builder, loc, read, ValueRange{part, staging}));
    if (unit.pack) {
      // The slice's columns of the one-row bucket: the same bytes the
      // whole shard's pack writes there.
      SmallVector<int64_t> ints(update.getInts());
      ints[0] += unit.offset;
      KernelOp::create(builder, loc, update.getKernelAttr(), staged,
                       update.getOutputs(), builder.getDenseI64ArrayAttr(ints),
                       update.getFloatsAttr());
      return;
    }
    // The kernel on the slice, updating the staging buffers in place.
    SmallVector<Value> inputs(update.getInputs()), outputs(update.getOutputs());
    Value param = update.getInputs()[kParam];
    if (!llvm::is_contained(unit.staged, kParam)) {
      inputs[kParam] = slice(param);
      outputs[kNewParam] = outputs[kNewParam] == param
                               ? inputs[kParam]
                               : slice(outputs[kNewParam]);
    }
    inputs[kGrad] = slice(update.getInputs()[kGrad]);
    // Moments left in the arena (parameter offload alone): their slice.
    for (auto [index, result] :
         {std::pair{kMoment1, kNewMoment1}, std::pair{kMoment2, kNewMoment2}})
      if (!llvm::is_contained(unit.staged, index)) {
        Value moment = update.getInputs()[index];
        inputs[index] = slice(moment);
        outputs[result] =
            outputs[result] == moment ? inputs[index] : slice(outputs[result]);
      }
    for (auto [index, staging] : llvm::zip(unit.staged, staged)) {
      inputs[index] = staging;
      outputs[index == kParam     ? kNewParam
              : index == kMoment1 ? kNewMoment1
                                  : kNewMoment2] = staging;
    }
    KernelOp::create(builder, loc, update.getKernelAttr(), inputs, outputs,
                     update.getIntsAttr(), update.getFloatsAttr());
    for (auto [index, part, staging] : llvm::zip(unit.staged, tiered, staged)) {
      Value write = rt::TierWriteOp::create(builder, loc, tokenType, staging,
                                            part, label(index))
                        .getToken();
      unit.writeWaits.push_back(
          rt::WaitOp::create(builder, loc, write, ValueRange{staging, part}));
    }
  }
};

} // namespace
} // namespace partition
