//===- OffloadOptimizer.cpp - AdamW's moments in a tier of their own ------===//
//
// --rt-offload-optimizer: marks the moment arguments of every function with
// their tier (host or nvme), and rewrites each adamw kernel on them into
// slices whose moments are read from the tier into staging buffers of the
// arena, updated there and written back. Each update first moves up to
// where its gradient is complete (into the backward pass), reads start as
// many slices ahead as half the staging budget (buffer-bytes) holds, and
// write-backs are waited for as late as the budget allows; the kernels
// keep their arithmetic and only cross kernels they commute with, so the
// result is bit-identical to the step without offload (docs/offload.md).
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"
#include "lowering/RtEffects.h"

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

const runtime::KernelInfo &infoOf(KernelOp kernel) {
  StringRef name = kernel.getKernel();
  // The rt.kernel verifier has checked the name.
  return *runtime::lookupKernel(std::string_view(name.data(), name.size()));
}

bool isAdamW(Operation *op) {
  auto kernel = dyn_cast<KernelOp>(op);
  return kernel && infoOf(kernel).id == runtime::KernelId::AdamW;
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
    runtime::KernelRole role = infoOf(kernel).role;
    if (role == runtime::KernelRole::ParameterGradients ||
        role == runtime::KernelRole::ParameterGradientsAfterFirst)
      return op;
    if (!nearest)
      nearest = op;
  }
  return nearest ? nearest : update.getOperation();
}

/// One slice of one update: elements [offset, offset + size) of an adamw
/// kernel's tensors (the whole tensor when `whole`).
struct Unit {
  KernelOp update;
  int64_t offset = 0, size = 0;
  bool whole = true;
  /// Staging bytes in the arena (both moments, each rounded up to whole
  /// I/O blocks, as the memory plan places them).
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
    if (!rt::isTierName(tier)) {
      module.emitError() << "--rt-offload-optimizer: tier must be host or "
                            "nvme, not '"
                         << static_cast<std::string>(tier) << "'";
      return signalPassFailure();
    }
    if (bufferBytes < Offload::kMinBufferBytes) {
      module.emitError() << "--rt-offload-optimizer: buffer-bytes "
                         << static_cast<int64_t>(bufferBytes) << " is below "
                         << Offload::kMinBufferBytes
                         << ", three 4096-byte slices of both moments";
      return signalPassFailure();
    }
    if (tier == "nvme" && path.empty()) {
      module.emitError("--rt-offload-optimizer: tier nvme needs path, the "
                       "directory of the offload files");
      return signalPassFailure();
    }
    bool any = false;
    for (auto function : module.getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      FailureOr<bool> offloaded = offloadFunction(function);
      if (failed(offloaded))
        return signalPassFailure();
      any |= *offloaded;
    }
    if (!any) {
      module.emitError("--rt-offload-optimizer: the step has no AdamW "
                       "moments to offload (compiled with --optimizer none?); "
                       "leave out offload.optimizer");
      return signalPassFailure();
    }
    if (tier == "nvme")
      module->setAttr(RtDialect::kOffloadPathAttrName,
                      StringAttr::get(&getContext(), path));
  }

  /// Marks the moments of `function` with the tier and stages every update
  /// of them; whether it has any.
  FailureOr<bool> offloadFunction(func::FuncOp function) {
    Block &body = function.getBody().front();
    llvm::SmallDenseMap<Value, StringRef, 8> moments;
    for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i) {
      auto role =
          function.getArgAttrOfType<StringAttr>(i, RtDialect::kRoleAttrName);
      if (!role ||
          (role.getValue() != "moment1" && role.getValue() != "moment2"))
        continue;
      function.setArgAttr(i, RtDialect::kTierAttrName,
                          StringAttr::get(&getContext(), tier));
      moments[body.getArgument(i)] = role.getValue();
    }
    if (moments.empty())
      return false;
    // Every use of a moment is an adamw that updates it in place: the one
    // op the pass knows how to stage.
    SmallVector<KernelOp> updates;
    llvm::SmallDenseSet<Value, 8> updated;
    for (Operation &op : body) {
      bool usesMoment = llvm::any_of(op.getOperands(), [&](Value operand) {
        return moments.count(operand);
      });
      if (!usesMoment)
        continue;
      auto kernel = dyn_cast<KernelOp>(op);
      bool staged =
          kernel && isAdamW(kernel) &&
          moments.count(kernel.getInputs()[kMoment1]) &&
          moments.count(kernel.getInputs()[kMoment2]) &&
          kernel.getOutputs()[kNewMoment1] == kernel.getInputs()[kMoment1] &&
          kernel.getOutputs()[kNewMoment2] == kernel.getInputs()[kMoment2];
      if (!staged)
        return op.emitOpError()
               << "uses an AdamW moment, which --rt-offload-optimizer moves "
                  "to the "
               << tier
               << " tier: only an adamw kernel that updates both moments in "
                  "place can be staged";
      for (unsigned index : {kMoment1, kMoment2})
        if (!updated.insert(kernel.getInputs()[index]).second)
          return kernel.emitOpError()
                 << "updates a moment that an earlier adamw of @"
                 << function.getSymName()
                 << " updates too; each moment is staged once per step";
      updates.push_back(kernel);
    }
    hoist(body, updates);
    SmallVector<Unit> units = cut(updates);
    stage(function, units);
    for (KernelOp update : updates)
      update.erase();
    return true;
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

  /// The slices of each update: of `buffer-bytes / 6` bytes per moment,
  /// whole I/O blocks.
  SmallVector<Unit> cut(ArrayRef<KernelOp> updates) {
    SmallVector<Unit> units;
    for (KernelOp update : updates) {
      auto type = cast<MemRefType>(update.getInputs()[kMoment1].getType());
      int64_t elementBytes = type.getElementTypeBitWidth() / 8;
      int64_t slice = Offload::sliceBytes(bufferBytes) / elementBytes;
      int64_t elements = type.getNumElements();
      for (int64_t offset = 0; offset < elements || offset == 0;
           offset += slice) {
        Unit unit;
        unit.update = update;
        unit.offset = offset;
        unit.size = std::min(slice, elements - offset);
        unit.whole = unit.size == elements;
        unit.bytes = 2 * llvm::alignTo(unit.size * elementBytes,
                                       Offload::kSliceAlignment);
        units.push_back(unit);
        if (elements == 0)
          break;
      }
    }
    return units;
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
  /// flight.
  void stage(func::FuncOp function, MutableArrayRef<Unit> units) {
    Block &body = function.getBody().front();
    flat.clear();
    std::deque<Unit *> pending; // written back, not yet waited for
    int64_t stagedBytes = 0;
    size_t ahead = 0;      // the unit before whose update reads start
    int64_t aheadBytes = 0; // staging of units [ahead, i)
    size_t written = 0;     // units [0, written) are in `pending` or waited
    for (size_t i = 0; i < units.size(); ++i) {
      Unit &unit = units[i];
      Operation *at = firstReadPoint(unit.update);
      if (i > 0) {
        aheadBytes += units[i - 1].bytes;
        while (ahead + 1 < i && aheadBytes + unit.bytes > bufferBytes / 2) {
          aheadBytes -= units[ahead].bytes;
          ++ahead;
        }
        at = units[ahead].readWaits.front().getOperation();
      }
      // Units before `ahead` have started their write-backs before `at`:
      // the oldest are waited for there while this unit's staging would
      // not fit.
      for (; written < ahead; ++written)
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
    Operation *end = body.getTerminator();
    for (Unit &unit : units)
      if (!unit.writeWaited)
        for (rt::WaitOp wait : unit.writeWaits)
          wait->moveBefore(end);
  }

  /// The ops of `unit`: the views of its moments' slices, its staging
  /// buffers and the reads into them before `at`; the reads' waits, the
  /// kernel on the slice and the write-backs (with their waits, which
  /// stage() moves) at its update.
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
    SmallVector<Value, 2> tiered, staged;
    SmallVector<Value, 2> reads;
    for (unsigned index : {kMoment1, kMoment2}) {
      Value moment = update.getInputs()[index];
      auto type = cast<MemRefType>(moment.getType());
      Value part = slice(moment);
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
    // The kernel on the slice, updating the staging buffers in place.
    SmallVector<Value> inputs(update.getInputs()), outputs(update.getOutputs());
    Value param = update.getInputs()[kParam];
    inputs[kParam] = slice(param);
    inputs[kGrad] = slice(update.getInputs()[kGrad]);
    outputs[kNewParam] = outputs[kNewParam] == param
                             ? inputs[kParam]
                             : slice(outputs[kNewParam]);
    inputs[kMoment1] = outputs[kNewMoment1] = staged[0];
    inputs[kMoment2] = outputs[kNewMoment2] = staged[1];
    KernelOp::create(builder, loc, update.getKernelAttr(), inputs, outputs,
                     update.getIntsAttr(), update.getFloatsAttr());
    const unsigned moments[] = {kMoment1, kMoment2};
    for (auto [index, part, staging] : llvm::zip(moments, tiered, staged)) {
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
