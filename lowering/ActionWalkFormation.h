//===- ActionWalkFormation.h - --rt-action-walk's state ---------*- C++ -*-===//
//
// The state of --rt-action-walk on one pipeline stage function (its
// actions, the match of each micro-batch's against the next, and the walk
// it builds), shared by ActionWalkFormation.cpp (finding and matching the
// actions), ActionWalkRewrite.cpp (building the walk) and
// ActionWalkSlots.cpp (its slot buffers).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_LOWERING_ACTIONWALKFORMATION_H
#define PARTITION_LOWERING_ACTIONWALKFORMATION_H

#include "dialects/Rt/RtOps.h"
#include "scheduling/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <map>
#include <string>
#include <vector>

namespace partition::actionwalk {

using namespace mlir;

/// (phase, model chunk): one kind of action.
using Kind = std::pair<std::string, int64_t>;

/// One action's code: ops [begin, end) of the function's op list.
struct ActionCode {
  Kind kind;
  int64_t microbatch = 0; // compiled
  size_t begin = 0, end = 0;
};

/// The schedule the stage walks: from the module's dist.pipeline.
struct StageSchedule {
  pipeline::ScheduleConfig config;
  int stage = 0;
};

/// A step input whose rows differ by micro-batch (rt.role tokens or
/// targets).
bool isRowsInput(Value buffer);

class WalkFormation {
public:
  WalkFormation(func::FuncOp function, const StageSchedule &schedule,
                bool forwardOnly)
      : function(function), schedule(schedule), forwardOnly(forwardOnly) {}
  LogicalResult run();

private:
  InFlightDiagnostic fail() {
    return function.emitError() << "--rt-action-walk: @"
                                << function.getSymName() << ": ";
  }
  void index();
  LogicalResult scheduleOrder();
  LogicalResult findActions();
  bool hoistInvariants();
  static size_t kernelKey(rt::KernelOp kernel);
  rt::KernelOp hoistedLike(rt::KernelOp kernel);
  bool moveOneTimeReceives();
  LogicalResult matchAll();
  LogicalResult matchPair(const ActionCode &first, const ActionCode &second);
  LogicalResult matchOperand(Operation *at, Value x, Value y);
  // ActionWalkRewrite.cpp: the walk from the matched actions (the slot
  // buffers' steps in ActionWalkSlots.cpp).
  LogicalResult rewrite();
  bool runsOnTemplates(int a) const;
  void chooseTemplates();
  LogicalResult resolveSums();
  void findSlotBuffers();
  LogicalResult planActions();
  void findRegionLocalSlots();
  void shareSlots();
  void copyBackwardTemporaries();
  void replaceSums();
  void addRowsBuffers(Operation *first);
  void copySlots(Operation *first);
  void takeFinishing();
  LogicalResult eraseOtherMicrobatches();
  LogicalResult emitWalk();
  void fillSumsAtFirstUse();
  Value rootOf(Value value) const;

  int actionOf(Operation *op) const {
    auto it = actionAt.find(op);
    return it == actionAt.end() ? -1 : it->second;
  }
  int actionOf(Value value) const {
    Operation *def = value.getDefiningOp();
    return def ? actionOf(def) : -1;
  }
  bool beforeActions(Operation *op) const {
    auto it = position.find(op);
    return it != position.end() && it->second < actions.front().begin;
  }

  func::FuncOp function;
  const StageSchedule &schedule;
  bool forwardOnly;
  /// The plan's schedule on this stage, and whether each weight gradient
  /// is one action with its input gradient.
  std::vector<pipeline::Action> order;
  bool fuseWeightGradients = false;
  SmallVector<Operation *> ops;
  DenseMap<Operation *, size_t> position;
  DenseMap<Operation *, int> actionAt;
  std::vector<ActionCode> actions;
  /// The index into `actions` of the update's mark (ops after it follow the
  /// walk), or actions.size() when the step has none (evaluation).
  size_t update = 0;
  /// Per kind, its actions by compiled micro-batch.
  std::map<Kind, std::map<int64_t, int>> byKind;
  /// A micro-batch's value -> the next micro-batch's (per matched pair).
  DenseMap<Value, Value> next;
  /// Sums: a value the next micro-batch reads where this one read the
  /// previous micro-batch's -> that previous value (union to its start).
  DenseMap<Value, Value> sumBefore;
  /// Hoisted constants' outputs (sums start in them), and the values that
  /// hoisting made one for several micro-batches (read-only: no sum may
  /// start in one).
  DenseSet<Value> constantValues, mergedValues;
  /// The kernels hoisted above the walk, by kernelKey.
  DenseMap<size_t, SmallVector<rt::KernelOp, 1>> hoistedByKey;
  /// Views of the step's input rows the actions read.
  SetVector<Value> rowViews;

  // What rewrite() builds.
  /// Micro-batch 1's action of each kind (the regions, in order), and its
  /// region index per kind.
  std::vector<int> templates;
  std::map<Kind, int> regionOf;
  /// GPipe: micro-batch 0's backward of each kind, a region of its own
  /// that the kind's first action runs.
  DenseSet<int> firstBackwards;
  std::map<Kind, int> firstRegionOf;
  DenseSet<int> isTemplate;
  /// The last micro-batch's action of each kind.
  DenseSet<int> lastActions;
  /// The sums' starts.
  SetVector<Value> sums;
  /// Slot buffers (micro-batch 1's) and the model chunk that makes them.
  llvm::MapVector<Value, int64_t> slotted;
  /// Whether a slot buffer one chunk's action writes another's reads.
  bool crossesChunks = false;
  /// Slot buffers live from their region to their last reader's only.
  DenseSet<Value> regionLocal;
  /// The actions the walk runs (the plan's schedule on this stage, each W
  /// in its B when fused), their (region, slot, micro-batch), and the slots
  /// each local chunk needs.
  std::vector<pipeline::Action> walked;
  SmallVector<int32_t> triples;
  std::map<int, int> slotCount;
  int slots = 1;
  /// Per region, its rows buffers and their inputs.
  std::vector<SmallVector<std::pair<Value, Value>>> rows;
  SmallVector<Value> slotTemplates, slotCopies;
  SmallVector<int32_t> slotSizes;
  /// How many more slots repeat the last one's copies at a stride.
  int32_t slotRepeats = 0;
  /// Ops of the last actions that follow the walk.
  SmallVector<Operation *> finishing;
};


} // namespace partition::actionwalk

#endif // PARTITION_LOWERING_ACTIONWALKFORMATION_H
