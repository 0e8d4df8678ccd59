//===- ActionWalkFormation.cpp - a pipeline stage's schedule as data ------===//
//
// --rt-action-walk: a pipeline stage's step whose actions carry
// rt.action_mark (--dist-pipeline=mark-actions=true) keeps one copy of each
// kind of action (phase, model chunk) and walks the schedule as data
// (docs/action-walk.md). Micro-batch 1's code of each
// kind is the region; every other micro-batch's code of that kind must be
// the same instructions (checked pair by pair, micro-batch i against i+1,
// as --rt-microbatch-loop checks its body against its copy), reading its
// own values where micro-batch 1 reads its own, the same invariant buffers,
// the next rows of the inputs, and the previous micro-batch's sums where
// micro-batch 1 reads micro-batch 0's. Then:
//  - sums (gradients, the loss) are written in place in their zero start,
//    which moves above the walk;
//  - a value one action makes and another reads (an activation kept for the
//    backward) is a slot buffer: the stage holds a copy per micro-batch in
//    flight, assigned by walking the plan's schedule;
//  - each view of the step's input rows becomes a buffer the runtime fills
//    with the action's micro-batch's rows;
//  - the other micro-batches' code goes, and what follows the actions reads
//    the sums.
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"
#include "lowering/InOrderParallel.h"
#include "lowering/ActionWalkFormation.h"
#include "lowering/RepeatedKernels.h"

#include "dialects/Rt/RtOps.h"
#include "dialects/Rt/RtViews.h"
#include "passes/frontend/StepEntries.h"
#include "runtime/program/KernelTable.h"
#include "scheduling/MicrobatchLoop.h"
#include "scheduling/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <map>

namespace partition {
#define GEN_PASS_DEF_ACTIONWALKPASS
#include "lowering/Passes.h.inc"
} // namespace partition

using namespace mlir;
using partition::rt::KernelOp;

namespace partition::actionwalk {

void WalkFormation::index() {
  ops.clear();
  position.clear();
  for (Operation &op : function.getBody().front()) {
    position[&op] = ops.size();
    ops.push_back(&op);
  }
}

LogicalResult WalkFormation::scheduleOrder() {
  const pipeline::ScheduleConfig &config = schedule.config;
  if (forwardOnly) {
    order = pipeline::forwardOrder(config.stages, config.chunks,
                                   config.microbatches);
  } else {
    OrError<pipeline::Schedule> generated = pipeline::generateSchedule(config);
    if (!generated)
      return fail() << "the plan's schedule: " << generated.error();
    order = generated->actions[schedule.stage];
  }
  // Where every weight gradient runs right after its input gradient (all
  // schedules but the zero-bubble ones), the two are one action: what B
  // makes for W is then the region's own temporary, not a slot buffer that
  // lives through the walk.
  fuseWeightGradients = true;
  for (auto [i, action] : llvm::enumerate(order))
    if (action.kind == pipeline::ActionKind::BackwardWeight) {
      const pipeline::Action *before = i ? &order[i - 1] : nullptr;
      fuseWeightGradients &=
          before && before->kind == pipeline::ActionKind::BackwardInput &&
          before->microbatch == action.microbatch &&
          before->chunk == action.chunk;
    }
  return success();
}

LogicalResult WalkFormation::findActions() {
  index();
  actions.clear();
  actionAt.clear();
  byKind.clear();
  update = SIZE_MAX;
  for (auto [i, op] : llvm::enumerate(ops)) {
    auto mark = dyn_cast<rt::ActionMarkOp>(op);
    if (!mark)
      continue;
    // A weight gradient fused with its input gradient continues it (the
    // step holds them one after the other).
    if (fuseWeightGradients && mark.getPhase() == "W" && !actions.empty() &&
        actions.back().kind ==
            Kind{"B", static_cast<int64_t>(mark.getModelChunk())} &&
        actions.back().microbatch == static_cast<int64_t>(mark.getMicrobatch()))
      continue;
    if (!actions.empty())
      actions.back().end = i;
    if (mark.getPhase() == "update") {
      update = actions.size();
      actions.push_back({{"update", 0}, 0, i, ops.size()});
      for (size_t j = i + 1; j < ops.size(); ++j)
        if (isa<rt::ActionMarkOp>(ops[j]))
          return fail() << "marks an action after its update (op #" << j
                        << "); the update follows every action";
      break;
    }
    actions.push_back({{mark.getPhase().str(),
                        static_cast<int64_t>(mark.getModelChunk())},
                       static_cast<int64_t>(mark.getMicrobatch()), i, 0});
  }
  if (update == SIZE_MAX) {
    // No optimizer after the actions: they run to the return.
    actions.back().end = ops.size() - 1;
    update = actions.size();
  }
  if (update == 0)
    return fail() << "marks its update but no action before it";
  for (size_t a = 0; a < update; ++a) {
    for (size_t i = actions[a].begin; i < actions[a].end; ++i)
      actionAt[ops[i]] = static_cast<int>(a);
    if (!byKind[actions[a].kind].insert({actions[a].microbatch, int(a)}).second)
      return fail() << "marks " << actions[a].kind.first << " of chunk "
                    << actions[a].kind.second << " micro-batch "
                    << actions[a].microbatch << " twice";
  }
  for (auto &[kind, instances] : byKind)
    if (instances.size() < 3 || !instances.count(1))
      return fail() << "holds " << instances.size() << " micro-batches of "
                    << kind.first << " on chunk " << kind.second
                    << "; a walk needs micro-batches 0, 1 and 2 at least";
  return success();
}

bool isRowsInput(Value buffer) {
  StringRef role = rt::argumentRole(buffer);
  return role == "tokens" || role == "targets";
}

KernelOp WalkFormation::hoistedLike(KernelOp kernel) {
  auto it = hoistedByKey.find(kernelKey(kernel));
  if (it == hoistedByKey.end())
    return nullptr;
  for (KernelOp other : it->second)
    if (other.getInputs() == kernel.getInputs() &&
        other.getOutputs().getTypes() == kernel.getOutputs().getTypes() &&
        sameAttributesButLabels(other, kernel))
      return other;
  return nullptr;
}

size_t WalkFormation::kernelKey(KernelOp kernel) {
  return llvm::hash_combine(
      kernel.getKernel(), attributesHash(kernel),
      llvm::hash_combine_range(kernel.getInputs().begin(),
                               kernel.getInputs().end()));
}

bool WalkFormation::hoistInvariants() {
  // Buffers an action writes (kernels' outputs, other ops' operands).
  DenseSet<Value> written;
  for (size_t a = 0; a < update; ++a)
    for (size_t i = actions[a].begin; i < actions[a].end; ++i)
      addWrittenBuffers(ops[i], written);
  // A kernel of an action whose inputs are the step's arguments (unwritten
  // by the actions), constants, hoisted results or other such kernels'
  // outputs, and whose output only it writes, computes the same value for
  // every micro-batch. It moves above the walk when it has no inputs (a
  // sum's zero start, the loss gradient's seed: each its own buffer), when
  // it reads such a constant (the seed scaled by 1/dp), or when another action reads its value, directly
  // or through such kernels (a bf16 plan's cast of a weight, which each
  // micro-batch's forward makes and its backward reads; a tensor-parallel
  // bias cast and scaled by 1/tp, which micro-batch 0's forward computes
  // for itself and the later ones read). One above the walk already
  // computing the same (the same kernel on the same inputs) serves it
  // instead. A kernel whose value its own action alone reads (a weight's
  // bf16 copy that a recomputing backward casts anew) stays: its buffer
  // lives no longer than the action. Returns whether any moved; what reads
  // a value merged now is found by the next call.
  SmallVector<KernelOp> constants, candidates;
  DenseMap<Value, KernelOp> candidateOf;
  DenseSet<Operation *> needed;
  for (size_t a = 0; a < update; ++a)
    for (size_t i = actions[a].begin; i < actions[a].end; ++i) {
      auto kernel = dyn_cast<KernelOp>(ops[i]);
      if (!kernel || kernel.getOutputs().size() != 1)
        continue;
      Value out = kernel.getOutputs().front();
      auto alloc = out.getDefiningOp<memref::AllocOp>();
      if (!alloc)
        continue;
      if (kernel.getInputs().empty()) {
        // A constant (a fill, which a fused kernel may then accumulate
        // into) when it writes its buffer first.
        bool firstUse = llvm::none_of(out.getUsers(), [&](Operation *user) {
          return user != kernel.getOperation() &&
                 position.lookup(user) < position.lookup(kernel);
        });
        if (firstUse)
          constants.push_back(kernel);
        continue;
      }
      if (soleKernelWriter(out) != kernel)
        continue;
      bool fromConstants = false;
      bool invariant = llvm::all_of(kernel.getInputs(), [&](Value input) {
        Value buffer = rt::viewedBuffer(input);
        if (isRowsInput(buffer))
          return false; // A micro-batch's rows.
        if (candidateOf.count(buffer))
          return true;
        Operation *def = buffer.getDefiningOp();
        bool fixed = isa<BlockArgument>(buffer) || (def && beforeActions(def));
        fromConstants |= constantValues.contains(buffer);
        return fixed && !written.contains(buffer) &&
               (!input.getDefiningOp() || actionOf(input) < 0 ||
                rt::isView(input.getDefiningOp()));
      });
      if (!invariant)
        continue;
      candidates.push_back(kernel);
      candidateOf[out] = kernel;
      if (fromConstants ||
          llvm::any_of(out.getUsers(),
                       [&](Operation *user) { return actionOf(user) != int(a); }))
        needed.insert(kernel);
    }
  // What a needed kernel reads from another moves too.
  for (KernelOp kernel : llvm::reverse(candidates))
    if (needed.contains(kernel))
      for (Value input : kernel.getInputs())
        if (KernelOp producer = candidateOf.lookup(rt::viewedBuffer(input)))
          needed.insert(producer);
  Operation *top = ops[actions.front().begin];
  // Each goes right after the latest writer of what it reads above the
  // walk (so that a buffer only the next link of a chain reads dies at
  // once rather than living beside every other), with the views it reads
  // through.
  auto hoist = [&](KernelOp kernel) {
    Operation *after = nullptr;
    for (Value input : kernel.getInputs()) {
      Value buffer = rt::viewedBuffer(input);
      Operation *writer = soleKernelWriter(buffer);
      if (!writer)
        writer = buffer.getDefiningOp();
      if (writer && writer->isBeforeInBlock(top) &&
          (!after || after->isBeforeInBlock(writer)))
        after = writer;
    }
    Operation *anchor = after ? after->getNextNode() : top;
    for (Value input : kernel.getInputs()) {
      SmallVector<Operation *> views;
      for (Operation *def = input.getDefiningOp(); def && rt::isView(def);
           def = def->getOperand(0).getDefiningOp())
        if (!def->isBeforeInBlock(anchor))
          views.push_back(def);
      for (Operation *view : llvm::reverse(views))
        view->moveBefore(anchor);
    }
    kernel.getOutputs().front().getDefiningOp()->moveBefore(anchor);
    kernel->moveBefore(anchor);
  };
  bool changed = false;
  for (KernelOp constant : constants) {
    hoist(constant);
    constantValues.insert(constant.getOutputs().front());
    changed = true;
  }
  for (KernelOp kernel : candidates) {
    // Inputs merged above may make it one that is there already.
    Value out = kernel.getOutputs().front();
    if (KernelOp same = hoistedLike(kernel)) {
      Operation *alloc = out.getDefiningOp();
      out.replaceAllUsesWith(same.getOutputs().front());
      mergedValues.insert(same.getOutputs().front());
      kernel->erase();
      alloc->erase();
      changed = true;
      continue;
    }
    if (!needed.contains(kernel))
      continue;
    hoist(kernel);
    hoistedByKey[kernelKey(kernel)].push_back(kernel);
    if (llvm::any_of(kernel.getInputs(), [&](Value input) {
          return constantValues.contains(rt::viewedBuffer(input));
        }))
      constantValues.insert(out);
    changed = true;
  }
  return changed;
}

LogicalResult WalkFormation::matchOperand(Operation *at, Value x, Value y) {
  const int64_t mine = actions[actionOf(at)].microbatch;
  int ax = actionOf(x), ay = actionOf(y);
  auto microbatchOf = [&](int action) {
    return action < 0 ? int64_t(-1) : actions[action].microbatch;
  };
  if (x == y && ax < 0)
    return success(); // Invariant: the same buffer for every micro-batch.
  // Each micro-batch its own value.
  if (microbatchOf(ax) == mine && next.lookup(x) == y)
    return success();
  // The rows of the inputs: views of a tokens / targets argument, a
  // micro-batch apart.
  auto rowsOf = [](Value value) -> memref::SubViewOp {
    auto view = value.getDefiningOp<memref::SubViewOp>();
    if (!view || !isRowsInput(view.getSource()))
      return nullptr;
    return view;
  };
  if (auto a = rowsOf(x), b = rowsOf(y);
      a && b && a.getSource() == b.getSource() &&
      a.getStaticSizes() == b.getStaticSizes()) {
    rowViews.insert(x);
    rowViews.insert(y);
    return success();
  }
  // A sum: the first reads an earlier micro-batch's (or its start, before
  // the actions), the second the first's.
  if (microbatchOf(ax) != mine && microbatchOf(ay) == mine &&
      x.getType() == y.getType() && isa<MemRefType>(x.getType())) {
    sumBefore[y] = x;
    return success();
  }
  return fail() << "micro-batch " << mine << "'s op #"
                << position.lookup(at) << " (" << at->getName()
                << ") reads a buffer the next micro-batch's does not read "
                   "in its place";
}

LogicalResult WalkFormation::matchPair(const ActionCode &first,
                                       const ActionCode &second) {
  if (first.end - first.begin != second.end - second.begin)
    return fail() << first.kind.first << " of chunk " << first.kind.second
                  << " has " << first.end - first.begin << " ops for "
                  << "micro-batch " << first.microbatch << " and "
                  << second.end - second.begin << " for micro-batch "
                  << second.microbatch;
  // Each starts with its mark.
  for (size_t k = 1; k < first.end - first.begin; ++k) {
    Operation *a = ops[first.begin + k], *b = ops[second.begin + k];
    auto differ = [&] {
      return fail() << "micro-batch " << second.microbatch << "'s op #"
                    << position.lookup(b) << " (" << b->getName()
                    << ") is not micro-batch " << first.microbatch << "'s ("
                    << a->getName() << ")";
    };
    if (a->getName() != b->getName() ||
        a->getNumOperands() != b->getNumOperands())
      return differ();
    if (isa<rt::ActionMarkOp>(a))
      continue; // A fused weight gradient's: its micro-batch's.
    if (auto view = dyn_cast<memref::SubViewOp>(a);
        view && isRowsInput(view.getSource())) {
      // A view of the input rows: another micro-batch's rows.
      auto other = cast<memref::SubViewOp>(b);
      if (other.getSource() != view.getSource() ||
          other.getStaticSizes() != view.getStaticSizes())
        return differ();
      rowViews.insert(a->getResult(0));
      rowViews.insert(b->getResult(0));
      next[a->getResult(0)] = b->getResult(0);
      continue;
    }
    // The regions' transfers go by micro-batch 1's labels.
    if (a->getResultTypes() != b->getResultTypes() ||
        !sameAttributesButLabels(a, b))
      return differ();
    for (auto [x, y] : llvm::zip(a->getOperands(), b->getOperands()))
      if (failed(matchOperand(a, x, y)))
        return failure();
    for (auto [x, y] : llvm::zip(a->getResults(), b->getResults()))
      next[x] = y;
  }
  return success();
}

LogicalResult WalkFormation::matchAll() {
  // Micro-batch i's actions against i+1's, in the function's order (so
  // that a backward's reads of its forward's values are mapped first).
  std::vector<std::pair<int, int>> pairs;
  for (size_t a = 0; a < update; ++a) {
    const auto &instances = byKind[actions[a].kind];
    auto it = instances.find(actions[a].microbatch);
    // The last micro-batch's action may differ (it finishes the sums:
    // rewrite() takes what it does beyond the others after the walk).
    if (std::next(it) != instances.end() &&
        std::next(std::next(it)) != instances.end())
      pairs.push_back({int(a), std::next(it)->second});
  }
  std::stable_sort(pairs.begin(), pairs.end(), [&](auto p, auto q) {
    return actions[p.second].begin < actions[q.second].begin;
  });
  for (auto [a, b] : pairs)
    if (failed(matchPair(actions[a], actions[b])))
      return failure();
  return success();
}

bool WalkFormation::moveOneTimeReceives() {
  // A receive whose buffer only the code after the actions reads (a tied
  // embedding's gradient partial from the other stage, which that stage
  // sends after its own walk) follows the walk too, in order.
  if (update >= actions.size())
    return false;
  SmallVector<Operation *> moving;
  for (size_t a = 0; a < update; ++a)
    for (size_t i = actions[a].begin; i < actions[a].end; ++i) {
      auto recv = dyn_cast<rt::RecvOp>(ops[i]);
      if (!recv)
        continue;
      Value buffer = recv->getOperand(0);
      auto alloc = buffer.getDefiningOp<memref::AllocOp>();
      if (!alloc || actionOf(alloc.getOperation()) != static_cast<int>(a) ||
          llvm::any_of(buffer.getUsers(), [&](Operation *user) {
            return user != recv.getOperation() && actionOf(user) >= 0;
          }))
        continue;
      moving.push_back(alloc);
      moving.push_back(recv);
    }
  Operation *previous = ops[actions[update].begin];
  for (Operation *op : moving) {
    op->moveAfter(previous);
    previous = op;
  }
  return !moving.empty();
}

LogicalResult WalkFormation::run() {
  // A sum's tensor-parallel zero start as a fill of the block, not a slice
  // of a full-shape fill (as the loop does).
  fillBlocksOfFills(function.getBody().front());
  if (failed(scheduleOrder()) || failed(findActions()))
    return failure();
  if (moveOneTimeReceives() && failed(findActions()))
    return failure();
  // Each round hoists what reads the last one's values (each moves ops
  // out of the actions, so the rounds end).
  while (hoistInvariants())
    if (failed(findActions()))
      return failure();
  if (failed(matchAll()))
    return failure();
  return rewrite();
}

} // namespace partition::actionwalk

namespace partition {
namespace {

using actionwalk::StageSchedule;
using actionwalk::WalkFormation;

/// The schedule of `function`'s stage, from the module's dist.pipeline
/// and the step's recorded micro-batches.
FailureOr<StageSchedule> stageSchedule(func::FuncOp function) {
  auto module = function->getParentOfType<ModuleOp>();
  auto info = module->getAttrOfType<DictionaryAttr>("dist.pipeline");
  auto stage = function->getAttrOfType<IntegerAttr>("dist.pipeline_stage");
  if (!info || !stage)
    return function.emitError()
           << "--rt-action-walk: @" << function.getSymName()
           << " is no pipeline stage (dist.pipeline_stage, and the module's "
              "dist.pipeline)";
  auto schedule = info.getAs<StringAttr>("schedule");
  auto stages = info.getAs<IntegerAttr>("stages");
  auto chunks = info.getAs<IntegerAttr>("virtual_stages");
  auto microbatches = info.getAs<IntegerAttr>("microbatches");
  std::optional<pipeline::ScheduleKind> kind =
      schedule ? pipeline::parseScheduleKind(schedule.getValue().str())
               : std::nullopt;
  if (!kind || !stages || !chunks || !microbatches || stages.getInt() < 1 ||
      chunks.getInt() < 1 || stage.getInt() < 0 ||
      stage.getInt() >= stages.getInt())
    return function.emitError()
           << "--rt-action-walk: @" << function.getSymName()
           << ": the module's dist.pipeline needs a known schedule ("
           << pipeline::scheduleNames()
           << "), stages and virtual_stages of at least 1 and microbatches, "
              "and the stage must be one of its stages";
  StageSchedule result;
  result.stage = static_cast<int>(stage.getInt());
  result.config.kind = *kind;
  result.config.stages = static_cast<int>(stages.getInt());
  result.config.chunks = static_cast<int>(chunks.getInt());
  result.config.microbatches = static_cast<int>(microbatches.getInt());
  if (std::optional<pipeline::LoopLayout> loop = recordedLoop(function))
    result.config.microbatches = loop->microbatches;
  return result;
}

struct ActionWalkPass : impl::ActionWalkPassBase<ActionWalkPass> {
  void runOnOperation() override {
    SmallVector<func::FuncOp> stages;
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (function.isExternal() ||
          function.getBody().getOps<rt::ActionMarkOp>().empty())
        continue;
      // Too few micro-batches to walk (fewer than 3): the step holds them
      // all, and runs them as they are.
      if (!recordedLoop(function)) {
        for (auto mark : llvm::make_early_inc_range(
                 function.getBody().getOps<rt::ActionMarkOp>()))
          mark.erase();
        continue;
      }
      stages.push_back(function);
    }
    std::vector<StageSchedule> schedules;
    for (func::FuncOp function : stages) {
      FailureOr<StageSchedule> schedule = stageSchedule(function);
      if (failed(schedule))
        return signalPassFailure();
      schedules.push_back(*schedule);
    }
    if (failed(failableParallelForEachInOrder(
            &getContext(), stages.size(), [&](size_t index) {
              bool forwardOnly =
                  !stages[index]->hasAttr("xfmr.train_step");
              return WalkFormation(stages[index], schedules[index],
                                   forwardOnly)
                  .run();
            })))
      signalPassFailure();
  }
};

} // namespace
} // namespace partition
