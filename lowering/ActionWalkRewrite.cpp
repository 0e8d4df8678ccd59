//===- ActionWalkRewrite.cpp - --rt-action-walk's walk from its match -----===//
//
// Once every micro-batch's actions match the next's (ActionWalkFormation.cpp),
// micro-batch 1's action of each kind becomes a region: sums are written in
// place in their starts, the values one action makes and another reads
// become slot buffers (ActionWalkSlots.cpp), views of the input rows
// become buffers the runtime fills per action, what the last micro-batch
// does with finished sums follows the walk, and the other micro-batches'
// code goes. GPipe's first backward keeps a region of its own, where its
// sums start.
//
//===----------------------------------------------------------------------===//

#include "lowering/ActionWalkFormation.h"
#include "lowering/RepeatedKernels.h"

#include "dialects/Rt/RtViews.h"
#include "scheduling/ActionSlots.h"
#include "scheduling/MicrobatchLoop.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace partition::actionwalk {

using rt::KernelOp;

Value WalkFormation::rootOf(Value value) const {
  for (size_t steps = 0; sumBefore.count(value) && steps <= actions.size();
       ++steps)
    value = sumBefore.lookup(value);
  return value;
}

bool WalkFormation::runsOnTemplates(int a) const {
  // Every value it reads from another of its micro-batch's actions has
  // micro-batch 1's match, in an action micro-batch 1's regions keep.
  for (size_t i = actions[a].begin; i < actions[a].end; ++i)
    if (ops[i])
      for (Value operand : ops[i]->getOperands()) {
        int from = actionOf(operand);
        if (from < 0 || from == a)
          continue;
        Value match = next.lookup(operand);
        if (actions[from].microbatch != actions[a].microbatch || !match ||
            actionOf(match) < 0 ||
            actions[actionOf(match)].microbatch != 1)
          return false;
      }
  return true;
}

void WalkFormation::chooseTemplates() {
  std::vector<int> chosen;
  for (size_t a = 0; a < update; ++a)
    if (actions[a].microbatch == 1)
      chosen.push_back(static_cast<int>(a));
  // GPipe's first backward (micro-batch 0's, before every other) as a
  // region of its own, its code as the unrolled step has it: its sums
  // start where it first writes them (fillSumsAtFirstUse), where the
  // shared B code, placed for every backward, holds them whole from the
  // start.
  if (schedule.config.kind == pipeline::ScheduleKind::GPipe && !forwardOnly &&
      fuseWeightGradients)
    for (size_t a = 0; a < update; ++a)
      if (actions[a].microbatch == 0 && actions[a].kind.first == "B" &&
          runsOnTemplates(static_cast<int>(a))) {
        chosen.push_back(static_cast<int>(a));
        firstBackwards.insert(static_cast<int>(a));
      }
  llvm::sort(chosen);
  for (int a : chosen) {
    (firstBackwards.contains(a) ? firstRegionOf : regionOf)[actions[a].kind] =
        static_cast<int>(templates.size());
    templates.push_back(a);
  }
  isTemplate.insert(templates.begin(), templates.end());
  // The first backward reads micro-batch 1's values for micro-batch 0's:
  // it runs in micro-batch 0's slot, whose buffers the regions name.
  for (int a : firstBackwards)
    for (size_t i = actions[a].begin; i < actions[a].end; ++i)
      if (ops[i])
        for (OpOperand &use : ops[i]->getOpOperands())
          if (int from = actionOf(use.get()); from >= 0 && from != a)
            use.set(next.lookup(use.get()));
  for (auto &[kind, instances] : byKind)
    lastActions.insert(instances.rbegin()->second);
}

LogicalResult WalkFormation::resolveSums() {
  // The last matched micro-batch's sum (which only the last one reads)
  // continues its chain.
  SmallVector<std::pair<Value, Value>> continued;
  for (auto &[value, before] : sumBefore)
    if (Value later = next.lookup(value); later && !sumBefore.count(later))
      continued.push_back({later, value});
  for (auto [later, value] : continued)
    sumBefore[later] = value;
  // The last micro-batch's actions (not matched: they finish the sums) add
  // into a sum what the regions add for every micro-batch: a kernel there
  // that reads a sum writes its final value.
  DenseSet<Value> chained;
  for (auto &[value, before] : sumBefore) {
    chained.insert(value);
    chained.insert(before);
  }
  for (int a : lastActions)
    for (size_t i = actions[a].begin; i < actions[a].end; ++i) {
      auto kernel = dyn_cast<KernelOp>(ops[i]);
      if (!kernel || kernel.getOutputs().size() != 1)
        continue;
      Value out = kernel.getOutputs().front();
      for (Value input : kernel.getInputs())
        if (chained.contains(input) && input != out &&
            input.getType() == out.getType()) {
          if (out.getDefiningOp<memref::AllocOp>())
            sumBefore[out] = input;
          break;
        }
    }
  for (auto &[value, before] : sumBefore) {
    Value root = rootOf(value);
    Operation *def = root.getDefiningOp();
    if (!def || !isa<memref::AllocOp>(def) || !beforeActions(def))
      return fail() << "a sum the actions carry (" << value.getType()
                    << ") does not start in a buffer written before them";
    if (mergedValues.contains(root))
      return fail() << "a sum the actions carry (" << value.getType()
                    << ") starts in a value that several micro-batches "
                       "read; it needs a buffer of its own";
    sums.insert(root);
  }
  return success();
}

LogicalResult WalkFormation::planActions() {
  // The plan's schedule on this stage; a micro-batch holds a slot of each
  // local chunk from its first action there to its last.
  const pipeline::ScheduleConfig &config = schedule.config;
  walked.clear();
  for (const pipeline::Action &action : order)
    if (!(fuseWeightGradients &&
          action.kind == pipeline::ActionKind::BackwardWeight))
      walked.push_back(action);
  // Where a value crosses from one chunk's action to another's, a
  // micro-batch holds one slot for all its chunks on the stage, from its
  // first action here to its last.
  std::vector<pipeline::Action> holders = walked;
  if (crossesChunks)
    for (pipeline::Action &action : holders)
      action.chunk = 0;
  std::vector<int> slotOf = pipeline::assignSlots(holders, slotCount);
  if (crossesChunks)
    for (int chunk = 1; chunk < config.chunks; ++chunk)
      slotCount[chunk] = slotCount[0];
  std::set<Kind> seen;
  for (auto [i, action] : llvm::enumerate(walked)) {
    std::string letter(1, pipeline::actionLetter(action.kind));
    int64_t model = int64_t(action.chunk) * config.stages + schedule.stage;
    // A kind's first action runs its first region, when it has one.
    bool first = seen.insert({letter, model}).second;
    auto region = first && firstRegionOf.count({letter, model})
                      ? firstRegionOf.find({letter, model})
                      : regionOf.find({letter, model});
    if (region == regionOf.end())
      return fail() << "the plan's schedule runs " << letter
                    << " of model chunk " << model
                    << ", which the step does not hold";
    triples.append({region->second, slotOf[i], action.microbatch});
  }
  for (auto &[chunk, count] : slotCount)
    slots = std::max(slots, count);
  return success();
}

void WalkFormation::replaceSums() {
  for (auto &[value, before] : sumBefore) {
    Value root = rootOf(value);
    for (Value step : {value, before})
      if (step != root)
        step.replaceAllUsesWith(root);
  }
}

void WalkFormation::addRowsBuffers(Operation *first) {
  // Each region's views of the input rows read from a buffer of its own,
  // filled before each action with the action's micro-batch's rows.
  OpBuilder builder(first);
  rows.resize(templates.size());
  for (auto [region, a] : llvm::enumerate(templates)) {
    DenseMap<Value, Value> rowsBuffer;
    for (size_t i = actions[a].begin; i < actions[a].end; ++i)
      for (OpOperand &use : ops[i]->getOpOperands()) {
        Value view = use.get();
        if (!rowViews.contains(view) || rt::isView(ops[i]))
          continue;
        Value &buffer = rowsBuffer[view];
        if (!buffer) {
          auto type = cast<MemRefType>(view.getType());
          buffer = memref::AllocOp::create(
              builder, view.getLoc(),
              MemRefType::get(type.getShape(), type.getElementType()));
          rows[region].push_back(
              {buffer, view.getDefiningOp<memref::SubViewOp>().getSource()});
        }
        use.set(buffer);
      }
  }
}

void WalkFormation::takeFinishing() {
  // What the last micro-batch's actions do with finished sums alone (send
  // a tied embedding's gradient partial to its other stage, all-reduce a
  // gradient over dp or reduce-scatter its bucket, scale the loss's sum
  // into the mean, all-reduce it and write the step's result) follows the
  // walk: transfers, collectives and kernels that read only what the step
  // holds outside the actions (the sums, in their starts now; parameters;
  // not the input rows) or what another such op wrote, and write those or
  // a buffer of their own action (whose allocation moves too) that no
  // other op of the actions reads.
  SetVector<Operation *> taken;
  // Their own allocations -> their writer, and back.
  DenseMap<Value, Operation *> writerOf;
  DenseMap<Operation *, SmallVector<Value, 1>> ownOf;
  auto isFixed = [&](Value operand) {
    Value buffer = rt::viewedBuffer(operand);
    return (actionOf(buffer) < 0 && !isRowsInput(buffer)) ||
           writerOf.count(buffer);
  };
  for (int a : lastActions)
    for (size_t i = actions[a].begin + 1; i < actions[a].end; ++i) {
      Operation *op = ops[i];
      // What it reads and writes, as its memory effects say (a view, an
      // allocation or a receive reads nothing).
      auto effects = dyn_cast_or_null<MemoryEffectOpInterface>(op);
      if (!effects)
        continue;
      SmallVector<MemoryEffects::EffectInstance> accesses;
      effects.getEffects(accesses);
      SmallVector<Value> reads, writes;
      for (const MemoryEffects::EffectInstance &access : accesses)
        if (Value buffer = access.getValue();
            buffer && isa<MemoryEffects::Read>(access.getEffect()))
          reads.push_back(buffer);
        else if (buffer && isa<MemoryEffects::Write>(access.getEffect()))
          writes.push_back(buffer);
      if (reads.empty() || !llvm::all_of(reads, isFixed))
        continue;
      SmallVector<Value, 1> own;
      bool writesFixed = llvm::all_of(writes, [&](Value out) {
        Value buffer = rt::viewedBuffer(out);
        auto alloc = buffer.getDefiningOp<memref::AllocOp>();
        if (alloc && actionOf(alloc.getOperation()) == a) {
          own.push_back(buffer);
          return true;
        }
        return isFixed(buffer);
      });
      if (!writesFixed)
        continue;
      for (Value buffer : own)
        writerOf[buffer] = op;
      ownOf[op] = own;
      taken.insert(op);
    }
  // What writes a buffer that an op left in the actions reads stays there
  // (a weight's bf16 copy for the last micro-batch's own forward), and so
  // does what reads it.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto &[buffer, writer] : writerOf) {
      if (!taken.contains(writer))
        continue;
      if (anyReader(buffer, [&](Operation *user) {
            return actionOf(user) >= 0 && !taken.contains(user);
          })) {
        taken.remove(writer);
        changed = true;
      }
    }
    for (Operation *op : llvm::to_vector(taken))
      if (llvm::any_of(op->getOperands(), [&](Value operand) {
            Operation *writer = writerOf.lookup(rt::viewedBuffer(operand));
            return writer && writer != op && !taken.contains(writer);
          })) {
        taken.remove(op);
        changed = true;
      }
  }
  auto take = [&](Operation *op) {
    finishing.push_back(op);
    actionAt.erase(op);
    ops[position.lookup(op)] = nullptr;
  };
  DenseSet<Operation *> views;
  for (Operation *op : taken) {
    // The views it reads through, where a last action made them (one in
    // a region stays, and the walk cannot use one of another micro-batch).
    for (Value operand : op->getOperands())
      for (Operation *def = operand.getDefiningOp();
           def && rt::isView(def) && lastActions.contains(actionOf(def));
           def = def->getOperand(0).getDefiningOp())
        if (views.insert(def).second)
          take(def);
    for (Value buffer : ownOf.lookup(op))
      take(buffer.getDefiningOp());
    take(op);
  }
}

LogicalResult WalkFormation::eraseOtherMicrobatches() {
  for (size_t a = update; a-- > 0;) {
    if (isTemplate.contains(static_cast<int>(a)))
      continue;
    for (size_t i = actions[a].end; i-- > actions[a].begin;) {
      Operation *op = ops[i];
      if (!op)
        continue;
      for (Value result : op->getResults())
        if (!result.use_empty()) {
          Operation *user = *result.getUsers().begin();
          return fail() << "op #" << position.lookup(user) << " ("
                        << user->getName() << ") reads micro-batch "
                        << actions[a].microbatch << "'s op #" << i << " ("
                        << op->getName() << "), which the walk does not keep";
        }
      op->erase();
      ops[i] = nullptr;
    }
  }
  // The template's own allocations of a sum's later values, which now go
  // to the sum's start, are unused.
  for (int a : templates)
    for (size_t i = actions[a].begin; i < actions[a].end; ++i)
      if (ops[i] && isa<memref::AllocOp>(ops[i]) && ops[i]->use_empty()) {
        ops[i]->erase();
        ops[i] = nullptr;
      }
  // The regions' marks go too (a fused weight gradient's among them): the
  // walk's ops take their places.
  for (int a : templates)
    for (size_t i = actions[a].begin; i < actions[a].end; ++i)
      if (ops[i] && isa<rt::ActionMarkOp>(ops[i])) {
        ops[i]->erase();
        ops[i] = nullptr;
      }
  return success();
}

void WalkFormation::fillSumsAtFirstUse() {
  // A sum whose zero fill above the walk nothing else there touches, and
  // which no region before a first backward touches, starts in that
  // backward, as in the unrolled step: its buffer and fill move to just
  // before the first op there that touches it. GPipe runs every forward
  // before its first backward, so the program's order is the run's: the
  // forwards' temporaries may take the sum's bytes, and so may the first
  // backward's before it reaches the sum.
  for (int a : firstBackwards) {
    Operation *marker = nullptr;
    for (size_t i = actions[a].begin; i < actions[a].end && !marker; ++i)
      if (ops[i])
        marker = ops[i]->getPrevNode();
    if (!marker || !isa<rt::ActionRegionOp>(marker))
      continue;
    Block *block = marker->getBlock();
    Operation *begin = *block->getOps<rt::ActionWalkBeginOp>().begin();
    Operation *regionEnd = marker->getNextNode();
    while (regionEnd &&
           !isa<rt::ActionRegionOp, rt::ActionWalkEndOp>(regionEnd))
      regionEnd = regionEnd->getNextNode();
    if (!regionEnd)
      continue;
    // Decided first, moved after: each move would renumber the block for
    // the next sum's order queries.
    SmallVector<std::tuple<Operation *, Operation *, Operation *>> moves;
    for (Value root : sums) {
      auto alloc = root.getDefiningOp<memref::AllocOp>();
      if (!alloc || alloc->getBlock() != block)
        continue;
      KernelOp fill;
      Operation *firstUse = nullptr;
      bool movable = true;
      for (Operation *user : root.getUsers()) {
        if (user->isBeforeInBlock(begin)) {
          auto kernel = dyn_cast<KernelOp>(user);
          if (fill || !kernel || kernel.getKernel() != "fill" ||
              !kernel.getInputs().empty() ||
              kernel.getOutputs() != ValueRange{root})
            movable = false;
          fill = kernel;
        } else if (user->isBeforeInBlock(marker)) {
          movable = false; // An earlier region touches it.
        } else if (!firstUse || user->isBeforeInBlock(firstUse)) {
          firstUse = user;
        }
      }
      if (!movable || !fill || !firstUse ||
          !firstUse->isBeforeInBlock(regionEnd))
        continue;
      moves.push_back({alloc, fill, firstUse});
    }
    for (auto [alloc, fill, firstUse] : moves) {
      alloc->moveBefore(firstUse);
      fill->moveBefore(firstUse);
    }
  }
}

LogicalResult WalkFormation::emitWalk() {
  Operation *updateMark =
      update < actions.size() ? ops[actions[update].begin] : nullptr;
  // What the regions use from before them stays live to the walk's end.
  SetVector<Value> live;
  for (auto &[value, chunk] : slotted)
    if (!regionLocal.contains(value))
      live.insert(value);
  live.insert(slotCopies.begin(), slotCopies.end());
  live.insert(sums.begin(), sums.end());
  SmallVector<Value> rowsValues, rowsSources;
  SmallVector<int32_t> regionRows;
  for (auto &list : rows) {
    regionRows.push_back(static_cast<int32_t>(list.size()));
    for (auto [buffer, source] : list) {
      rowsValues.push_back(buffer);
      rowsSources.push_back(source);
    }
  }
  auto firstOf = [&](int a) -> Operation * {
    for (size_t i = actions[a].begin; i < actions[a].end; ++i)
      if (ops[i])
        return ops[i];
    return nullptr;
  };
  Operation *regionStart = firstOf(templates.front());
  if (!regionStart)
    return fail() << "micro-batch 1's first action is empty";
  OpBuilder builder(regionStart);
  rt::ActionWalkBeginOp::create(builder, function.getLoc(), triples,
                                slotSizes, regionRows, slotRepeats,
                                /*slot_strides=*/nullptr, slotTemplates,
                                slotCopies, rowsValues, rowsSources);
  for (int a : templates) {
    Operation *firstOp = firstOf(a);
    if (!firstOp)
      return fail() << "micro-batch 1's " << actions[a].kind.first
                    << " of chunk " << actions[a].kind.second << " is empty";
    builder.setInsertionPoint(firstOp);
    std::string name = actions[a].kind.first + " chunk " +
                       std::to_string(actions[a].kind.second);
    rt::ActionRegionOp::create(builder, function.getLoc(),
                               builder.getStringAttr(name));
    for (size_t i = actions[a].begin; i < actions[a].end; ++i)
      if (ops[i])
        for (Value operand : ops[i]->getOperands()) {
          Value base = rt::viewedBuffer(operand);
          Operation *def = base.getDefiningOp();
          if (def && isa<memref::AllocOp>(def) &&
              def->isBeforeInBlock(regionStart))
            live.insert(base);
        }
  }
  builder.setInsertionPoint(updateMark
                                ? updateMark
                                : function.getBody().front().getTerminator());
  auto end = rt::ActionWalkEndOp::create(builder, function.getLoc(),
                                         live.getArrayRef());
  // In the order the last actions had them.
  llvm::sort(finishing, [&](Operation *x, Operation *y) {
    return position.lookup(x) < position.lookup(y);
  });
  Operation *previous = end;
  for (Operation *op : finishing) {
    op->moveAfter(previous);
    previous = op;
  }
  if (updateMark)
    updateMark->erase();
  return success();
}

LogicalResult WalkFormation::rewrite() {
  chooseTemplates();
  if (failed(resolveSums()))
    return failure();
  findSlotBuffers();
  if (failed(planActions()))
    return failure();
  findRegionLocalSlots();
  shareSlots();
  copyBackwardTemporaries();
  replaceSums();
  Operation *first = ops[actions[templates.front()].begin];
  addRowsBuffers(first);
  copySlots(first);
  takeFinishing();
  if (failed(eraseOtherMicrobatches()) || failed(emitWalk()))
    return failure();
  fillSumsAtFirstUse();
  return success();
}

} // namespace partition::actionwalk
