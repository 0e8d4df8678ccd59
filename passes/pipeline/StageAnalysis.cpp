//===- StageAnalysis.cpp - what each op of a training step is, for a pipeline ===//

#include "passes/pipeline/StageAnalysis.h"

#include "dialects/CheckedSize.h"

#include "dialects/Dist/DistOps.h"
#include "dialects/Xfmr/XfmrOps.h"
#include "passes/analysis/LossGradient.h"
#include "passes/frontend/StepEntries.h"
#include "passes/partition/Layout.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <algorithm>
#include <iterator>
#include <set>

using namespace mlir;
using namespace partition::xfmr;

namespace partition::pipeline {

int64_t valueBytes(Value value) {
  return isa<RankedTensorType>(value.getType())
             ? saturatedByteSize(value.getType())
             : 0;
}

double opCost(Operation *op) {
  double cost = 0;
  if (auto matmul = dyn_cast<MatmulFlopsOpInterface>(op))
    cost += static_cast<double>(matmul.getMatmulFlops().value_or(0));
  for (Value result : op->getResults())
    cost += static_cast<double>(valueBytes(result));
  return cost;
}

namespace {

/// Cheap work on inputs every stage may redo for itself: not a model op
/// (but a cast of a parameter), not communication. A `dist.all_slice` is
/// local (each rank keeps its block): with sequence parallelism and a
/// loss at a smaller tensor-parallel degree than the stream's (per-part
/// degrees), the targets are sliced along the sequence, and the last
/// stage, which computes the loss, must slice them itself rather than
/// receive them from the first.
bool mayRunOnDemand(Operation *op) {
  if (isa<CastOp, dist::AxisIndexOp, dist::AllSliceOp>(op))
    return true;
  StringRef dialect = op->getDialect() ? op->getDialect()->getNamespace() : "";
  return dialect != XfmrDialect::getDialectNamespace() &&
         dialect != dist::DistDialect::getDialectNamespace();
}

bool recomputed(Operation *op) {
  return op->hasAttr(dist::DistDialect::kRecomputedAttrName);
}

/// The micro-batch a slice of a batch input selects, or -1 for other ops:
/// under the micro-batch loop, its index among the micro-batches the step
/// builds (scheduling/MicrobatchLoop.h), which the schedule numbers.
int sliceMicrobatch(Operation &op, func::FuncOp step, Block &body,
                    const std::optional<LoopLayout> &loop) {
  auto slice = dyn_cast<tensor::ExtractSliceOp>(op);
  if (!slice)
    return -1;
  auto arg = dyn_cast<BlockArgument>(slice.getSource());
  if (arg && arg.getOwner() == &body &&
      step.getArgAttr(arg.getArgNumber(), XfmrDialect::kInputAttrName) &&
      !slice.getStaticOffsets().empty() &&
      !ShapedType::isDynamic(slice.getStaticOffsets()[0]) &&
      !ShapedType::isDynamic(slice.getStaticSizes()[0]) &&
      slice.getStaticSizes()[0] > 0) {
    int real = static_cast<int>(slice.getStaticOffsets()[0] /
                                slice.getStaticSizes()[0]);
    return loop ? loop->compiledOf(real) : real;
  }
  return -1;
}

/// The parameter whose update a gradient flows into through sums alone.
BlockArgument updatedParameter(Operation *op, func::FuncOp step) {
  for (int depth = 0; op && depth < 64; ++depth) {
    if (op->getNumResults() != 1 || !op->getResult(0).hasOneUse())
      return {};
    Operation *user = *op->getResult(0).getUsers().begin();
    if (auto adamw = dyn_cast<AdamWOp>(user))
      return adamw.getGrad() == op->getResult(0)
                 ? parameterArgument(adamw.getParam(), step)
                 : BlockArgument();
    op = user;
  }
  return {};
}

/// Builds a StepAnalysis: each op's micro-batch, phase and place, then the
/// backward plumbing's places, then the B/W split.
class StepAnalyzer {
public:
  StepAnalyzer(func::FuncOp step, int layers,
               const llvm::DenseSet<Operation *> &optimizer)
      : step(step), body(step.getBody().front()), layers(layers),
        optimizer(optimizer), loop(recordedLoop(step)) {
    analysis.layers = layers;
  }

  StepAnalysis run() {
    seedDataValues();
    int maxMicrobatch = 0;
    for (Operation &op : body) {
      if (isa<func::ReturnOp>(op))
        continue;
      OpRole role;
      int mb = propagateMicrobatch(op);
      maxMicrobatch = std::max(maxMicrobatch, mb);
      role.microbatch = std::max(mb, 0);
      role.phase = classify(op);
      if (role.phase == Phase::Forward || role.phase == Phase::BackwardInput)
        place(op, role);
      roles[&op] = role;
    }
    analysis.microbatches = maxMicrobatch + 1;
    placePlumbing();
    splitWeightGradients();
    return std::move(analysis);
  }

private:
  bool definedBy(Value value, Phase phase) const {
    Operation *def = value.getDefiningOp();
    if (!def)
      return false;
    auto it = roles.find(def);
    return it != roles.end() && it->second.phase == phase;
  }

  /// Marks the step's data arguments (not the constants or the step counter).
  void seedDataValues() {
    // Values computed from the model's data (parameters, optimizer state,
    // the batch): work on them is placed; work on constants and the step
    // counter alone may run anywhere.
    for (BlockArgument arg : body.getArguments()) {
      auto input = step.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), XfmrDialect::kInputAttrName);
      if (!input || input.getValue() == "tokens" ||
          input.getValue() == "targets")
        fromData.insert(arg);
    }
  }

  /// The micro-batch of `op` (-1: none), recorded for its results.
  int propagateMicrobatch(Operation &op) {
    // A slice of a batch input is one micro-batch.
    int mb = sliceMicrobatch(op, step, body, loop);
    for (Value operand : op.getOperands())
      mb = std::max(mb, microbatchOf.lookup_or(operand, -1));
    for (Value result : op.getResults())
      microbatchOf[result] = mb;
    return mb;
  }

  /// The phase of `op` (backward ops as BackwardInput for now); records
  /// whether its results derive from the model's data.
  Phase classify(Operation &op) {
    bool readsData = llvm::any_of(op.getOperands(), [&](Value v) {
      return fromData.contains(v);
    });
    if (readsData)
      for (Value result : op.getResults())
        fromData.insert(result);
    bool operandsOnDemand = llvm::all_of(op.getOperands(), [&](Value v) {
      return isa<BlockArgument>(v) || definedBy(v, Phase::OnDemand);
    });
    bool afterOptimizer = llvm::any_of(op.getOperands(), [&](Value v) {
      return definedBy(v, Phase::Optimizer);
    });
    bool communicates = isa<dist::DistDialect>(op.getDialect()) &&
                        !isa<dist::AxisIndexOp, dist::AllSliceOp>(op);
    // A routing bias's update (aux-free balancing) is an optimizer update:
    // after every micro-batch, on its parameter's stage.
    if (isa<AdamWOp, MoeBiasUpdateOp>(op) || afterOptimizer ||
        optimizer.contains(&op))
      return Phase::Optimizer;
    if (operandsOnDemand && !op.getNumRegions() &&
        !op.hasTrait<OpTrait::IsTerminator>() && !communicates &&
        (mayRunOnDemand(&op) || !readsData))
      return Phase::OnDemand;
    if (isLossGradient(&op) || recomputed(&op) ||
        llvm::any_of(op.getOperands(), [&](Value value) {
          return definedBy(value, Phase::BackwardInput);
        }))
      // Backward; B or W is decided below, once the users are known.
      return Phase::BackwardInput;
    return Phase::Forward;
  }

  /// Sets the position of forward or backward `op`; backward ops placed by
  /// their gradient operands alone go to `plumbing`.
  void place(Operation &op, OpRole &role) {
    // Forward work, and its clones in the backward, is where its latest
    // operand is; other backward work where the forward work it
    // differentiates is.
    bool forwardLike = role.phase == Phase::Forward || recomputed(&op);
    std::optional<int> layered;
    bool unlayeredParam = false;
    for (Value operand : op.getOperands())
      if (std::optional<int64_t> layer = parameterLayer(operand, step)) {
        if (*layer >= 0 && !layered)
          layered = static_cast<int>(*layer);
        unlayeredParam |= *layer < 0;
      }
    int latestForward = -1, earliestBackward = layers;
    bool readsForward = false, readsBackward = false;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def)
        continue;
      auto it = roles.find(def);
      if (it == roles.end())
        continue;
      bool forwardValue = it->second.phase == Phase::Forward ||
                          (it->second.phase == Phase::BackwardInput &&
                           recomputed(def));
      if (forwardValue) {
        readsForward = true;
        latestForward = std::max(latestForward, it->second.position);
      } else if (it->second.phase == Phase::BackwardInput) {
        readsBackward = true;
        earliestBackward = std::min(earliestBackward, it->second.position);
      }
    }
    if (layered)
      role.position = *layered;
    else if (forwardLike || readsForward)
      // Forward work outside the layers reading a parameter is the
      // embedding before them, or the final norm / LM head after them.
      role.position = unlayeredParam && latestForward >= 0 ? layers
                                                           : latestForward;
    else if (readsBackward)
      role.position = earliestBackward;
    else
      role.position = layers; // the loss gradient seed
    if (role.phase == Phase::BackwardInput && !layered && !forwardLike &&
        !readsForward && readsBackward)
      plumbing.push_back(&op);
  }

  /// Where each parameter is read by forward work.
  llvm::DenseMap<BlockArgument, std::set<int>> forwardParameterPlaces() const {
    llvm::DenseMap<BlockArgument, std::set<int>> parameterPlaces;
    for (auto &[op, role] : roles)
      if (role.phase == Phase::Forward)
        for (Value operand : op->getOperands())
          if (BlockArgument param = parameterArgument(operand, step))
            parameterPlaces[param].insert(role.position);
    return parameterPlaces;
  }

  /// Moves the plumbing ops to the place their results are needed, where
  /// that is cheaper.
  void placePlumbing() {
    // Such an op whose users are all at an earlier place (a
    // sequence-parallel gather of a gradient, the backward of a
    // reduce-scatter) runs there when its result is larger than the
    // operands it would then receive.
    llvm::DenseMap<BlockArgument, std::set<int>> parameterPlaces =
        forwardParameterPlaces();
    for (Operation *op : llvm::reverse(plumbing)) {
      OpRole &role = roles[op];
      // The weight gradient of work before the layers (the embeddings'
      // grads read only the gradient of the layers' input): placed with
      // that work, so that the gradient it reads counts as the layers'
      // input gradient.
      if (BlockArgument param = updatedParameter(op, step)) {
        const std::set<int> &places = parameterPlaces[param];
        auto below = places.upper_bound(role.position);
        if (below != places.begin() && *std::prev(below) < role.position)
          role.position = *std::prev(below);
        // Otherwise it stays where its contribution is made, even when its
        // users (the sum of a tied parameter's contributions) sit earlier
        // and it is larger than its operand: the bf16 -> fp32 cast of the
        // LM head's weight gradient moved to the embedding's stage would
        // leave the tied gradient with one stage's partials only, and the
        // other stage's copy of the parameter never updated.
        continue;
      }
      moveToUsers(op, role);
    }
  }

  /// Moves plumbing `op` to its earliest placed user when its result is
  /// larger than the operands it would then receive.
  void moveToUsers(Operation *op, OpRole &role) {
    int users = role.position;
    bool positioned = false;
    for (Operation *user : op->getUsers()) {
      auto it = roles.find(user);
      if (it == roles.end() || (it->second.phase != Phase::BackwardInput &&
                                it->second.phase != Phase::Forward))
        continue;
      users = positioned ? std::min(users, it->second.position)
                         : it->second.position;
      positioned = true;
    }
    if (!positioned || users >= role.position)
      return;
    int64_t resultBytes = 0, operandBytes = 0;
    for (Value result : op->getResults())
      resultBytes += valueBytes(result);
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && roles.contains(def) && roles.lookup(def).position > users)
        operandBytes += valueBytes(operand);
    if (operandBytes < resultBytes)
      role.position = users;
  }

  /// Marks as BackwardWeight the backward ops whose results feed only W
  /// ops and the optimizer.
  void splitWeightGradients() {
    // An input gradient handed to an earlier place (another layer, the
    // embedding) is what the rest of the backward waits for: B.
    for (Operation &op : llvm::reverse(body)) {
      auto it = roles.find(&op);
      if (it == roles.end() || it->second.phase != Phase::BackwardInput)
        continue;
      bool weightOnly = true;
      for (Operation *user : op.getUsers()) {
        auto userRole = roles.find(user);
        if (userRole == roles.end())
          continue; // the return
        Phase phase = userRole->second.phase;
        if (phase == Phase::Optimizer)
          continue;
        if (phase == Phase::BackwardWeight &&
            userRole->second.position >= it->second.position)
          continue;
        weightOnly = false;
      }
      if (weightOnly)
        it->second.phase = Phase::BackwardWeight;
    }
  }

  func::FuncOp step;
  Block &body;
  int layers;
  const llvm::DenseSet<Operation *> &optimizer;
  StepAnalysis analysis;
  llvm::DenseMap<Operation *, OpRole> &roles = analysis.roles;
  llvm::DenseMap<Value, int> microbatchOf;
  /// The micro-batch loop the step records, if any.
  std::optional<LoopLayout> loop;
  // Values computed from the model's data.
  llvm::DenseSet<Value> fromData;
  // Backward ops placed by their gradient operands alone (sums, the
  // collectives of tensor parallelism).
  llvm::SmallVector<Operation *> plumbing;
};

} // namespace

StepAnalysis analyzeStep(func::FuncOp step, int layers,
                         const llvm::DenseSet<Operation *> &optimizer) {
  return StepAnalyzer(step, layers, optimizer).run();
}

} // namespace partition::pipeline
