//===- RecomputeBudget.cpp - --dist-recompute's budget policy -------------===//
//
// The budget policy (recompute.policy = "budget", recompute.budget_bytes)
// picks the cheapest recomputation whose real arena peak fits: the forward
// ops of one micro-batch become the nodes of scheduling/Budget.h
// (bytes: their results; cost: their matmul FLOPs, else one per output
// element; recomputable: what `full` would rebuild), budgetFrontier finds
// the Pareto frontier of kept bytes against extra FLOPs, and
// searchFrontier walks it cheapest first with the memory planner's real
// peak: each measured choice is applied to a copy of the module nested in
// it, lowered with --lower-to-rt and planned with --lower-memory-plan (the
// passes partition-compile runs next, as a dynamic pipeline), and its
// rt.arena_bytes read back; a lower bound (what is live at the
// forward/backward boundary) skips the points that cannot fit. Every
// micro-batch gets the same choice (they have the same ops; what they
// share, like the 1/m seed constant, is kept). With a pipeline, the passes
// run on each copy cut it into stages first, and the peak is the largest
// stage's arena. docs/recompute.md has the whole story and the figures.
//
//===----------------------------------------------------------------------===//

#include "passes/recompute/RecomputeStep.h"

#include "dialects/CheckedSize.h"
#include "dialects/Dist/DistOps.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Xfmr/XfmrOps.h"
#include "passes/analysis/LossGradient.h"
#include "passes/partition/Layout.h"
#include "scheduling/Budget.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;
using namespace partition::xfmr;

namespace partition::recompute {
namespace {

/// The step's forward ops as Budget.h nodes: one per op of the first
/// micro-batch, standing for that op in every micro-batch.
struct BudgetGraph {
  std::vector<recompute::BudgetNode> nodes;
  /// Per node: the op in each micro-batch.
  std::vector<SmallVector<Operation *>> ops;
  /// Per node: its layer (-1 outside the layers).
  std::vector<int64_t> layers;
  /// How many micro-batches the step runs.
  int64_t microbatches = 1;
};

/// An op's result bytes (saturating; the memory planner refuses sizes
/// that do not fit long before).
int64_t resultBytes(Operation *op) {
  int64_t bytes = 0;
  for (Type type : op->getResultTypes())
    if (auto shaped = dyn_cast<RankedTensorType>(type))
      bytes = saturatingAdd(bytes, saturatedByteSize(shaped));
  return bytes;
}

/// What rebuilding an op costs: its matmul FLOPs, else one per output
/// element (so that cheap work is not rebuilt for nothing either).
int64_t rebuildCost(Operation *op) {
  if (auto matmul = dyn_cast<MatmulFlopsOpInterface>(op))
    if (int64_t flops = matmul.getMatmulFlops().value_or(0); flops > 0)
      return flops;
  int64_t elements = 0;
  for (Type type : op->getResultTypes())
    if (auto shaped = dyn_cast<RankedTensorType>(type))
      elements = saturatingAdd(
          elements, checkedElementCount(shaped.getShape()).value_or(INT64_MAX));
  return std::max<int64_t>(elements, 1);
}

/// The micro-batches each forward op of `step` belongs to, as indices of
/// the loss gradients (one per micro-batch, in program order): those its
/// value reaches, through forward ops, a loss gradient or the backward work
/// descending from one. A micro-batch's own forward work reaches its loss
/// gradient alone. What several reach is shared by them: a constant (the
/// 1/m seed every loss gradient reads), a cast or gather of a parameter
/// that CSE made once for every micro-batch. What none reaches (the loss
/// value, read only by the step's loss sum) is no micro-batch's saved
/// work. The step's return reads every micro-batch's work and decides
/// nothing: it does not count.
llvm::DenseMap<Operation *, llvm::SmallBitVector>
microbatchesReached(func::FuncOp step, const StepStructure &structure,
                    unsigned count) {
  Block &body = step.getBody().front();
  // Backward ops: the loss gradients they descend from.
  llvm::DenseMap<Operation *, llvm::SmallBitVector> reached;
  unsigned seeds = 0;
  for (Operation &op : body) {
    if (!structure.backward.contains(&op))
      continue;
    llvm::SmallBitVector bits(count);
    if (isLossGradient(&op))
      bits.set(seeds++);
    for (Value operand : op.getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (auto it = reached.find(def);
            it != reached.end() && structure.backward.contains(def))
          bits |= it->second;
    reached[&op] = std::move(bits);
  }
  // Forward ops, users first.
  for (Operation &op : llvm::reverse(body)) {
    if (!structure.layer.contains(&op))
      continue;
    llvm::SmallBitVector bits(count);
    for (Operation *user : op.getUsers())
      if (Operation *inBody = body.findAncestorOpInBlock(*user))
        if (auto it = reached.find(inBody);
            it != reached.end() && !inBody->hasTrait<OpTrait::IsTerminator>())
          bits |= it->second;
    reached[&op] = std::move(bits);
  }
  return reached;
}

FailureOr<BudgetGraph> buildBudgetGraph(func::FuncOp step,
                                        const StepStructure &structure) {
  unsigned count = 0;
  for (Operation &op : step.getBody().front())
    count += isLossGradient(&op);
  if (count == 0)
    return step.emitError("recompute policy 'budget' found no loss gradient "
                          "in the training step");
  llvm::DenseMap<Operation *, llvm::SmallBitVector> reached =
      microbatchesReached(step, structure, count);
  // A forward op's micro-batch: the one loss gradient it reaches, else (it
  // reaches none) how many loss gradients come before it. Either way it
  // must stand in that micro-batch's forward, before its loss gradient: a
  // forward op made after it (a gather the partitioner placed right before
  // the weight gradient that reads it) is not kept across the boundary.
  // After the last loss gradient come the backward pass and the optimizer;
  // what they read that no gradient computes (the loss sum) is not a
  // micro-batch's forward value.
  SmallVector<SmallVector<Operation *>> microbatches(count);
  unsigned before = 0;
  for (Operation &op : step.getBody().front()) {
    if (isLossGradient(&op))
      ++before;
    // Constants (a looped step's zero sums) belong to no micro-batch.
    if (!structure.layer.contains(&op) || op.getNumResults() == 0 ||
        isa<arith::ConstantOp>(op) ||
        !llvm::all_of(op.getResultTypes(), [](Type type) {
          return isa<RankedTensorType>(type);
        }))
      continue;
    // What no loss gradient reaches (a micro-batch's loss, the running sum
    // of the losses or expert loads that each micro-batch adds after its
    // backward pass) is nothing the backward pass reads: no choice keeps
    // or rebuilds it.
    const llvm::SmallBitVector &bits = reached[&op];
    if (bits.count() == 1 && unsigned(bits.find_first()) == before)
      microbatches[before].push_back(&op);
  }
  ArrayRef<Operation *> first = microbatches.front();
  for (auto [index, ops] : llvm::enumerate(microbatches)) {
    size_t same = 0;
    while (same < ops.size() && same < first.size() &&
           ops[same]->getName() == first[same]->getName())
      ++same;
    if (same == ops.size() && same == first.size())
      continue;
    InFlightDiagnostic diag = step.emitError();
    diag << "recompute policy 'budget' needs every micro-batch to run the "
            "same forward ops, but micro-batch "
         << index << " differs from micro-batch 0 at its forward op " << same
         << " (";
    auto name = [&](ArrayRef<Operation *> list) {
      return same < list.size() ? "'" + list[same]->getName().getStringRef().str() + "'"
                                : std::string("none");
    };
    diag << name(ops) << " against " << name(first)
         << "): use recompute policy 'selective' or 'full' for this step, or "
            "one micro-batch";
    return diag;
  }

  BudgetGraph graph;
  graph.microbatches = count;
  llvm::DenseMap<Operation *, size_t> nodeOf;
  for (auto [index, op] : llvm::enumerate(first)) {
    recompute::BudgetNode node;
    node.bytes = resultBytes(op);
    node.flops = rebuildCost(op);
    node.saved = llvm::any_of(op->getUsers(), [&](Operation *user) {
      return structure.backward.contains(user);
    });
    int64_t layer = structure.layer.lookup(op);
    node.recomputable =
        isClonable(op) && layer >= 0 &&
        llvm::none_of(op->getResults(), [&](Value result) {
          return structure.layerInputs.contains(result);
        });
    for (Value operand : op->getOperands())
      if (auto it = nodeOf.find(operand.getDefiningOp()); it != nodeOf.end())
        node.inputs.push_back(it->second);
    nodeOf[op] = index;
    graph.nodes.push_back(std::move(node));
    SmallVector<Operation *> copies;
    for (ArrayRef<Operation *> ops : microbatches)
      copies.push_back(ops[index]);
    graph.ops.push_back(std::move(copies));
    graph.layers.push_back(layer);
  }
  return graph;
}

/// The values a choice rebuilds, in every micro-batch.
llvm::DenseSet<Value> recomputedValues(const BudgetGraph &graph,
                                       const std::vector<bool> &rebuilt,
                                       const StepStructure &structure) {
  llvm::DenseSet<Value> values;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (rebuilt[i])
      for (Operation *op : graph.ops[i])
        for (Value result : op->getResults())
          if (!structure.layerInputs.contains(result))
            values.insert(result);
  return values;
}

/// What must be live at the forward/backward boundary of some micro-batch
/// (its loss gradient op) whatever the choice: the step's arguments
/// (placed in the arena for the whole step), the loss gradient and every
/// tensor computed before and read at or after it, except the
/// micro-batch's saved forward values, which the choice keeps or not.
int64_t boundaryBytes(func::FuncOp step, const BudgetGraph &graph) {
  Block &body = step.getBody().front();
  auto bytesOf = [](Type type) -> int64_t {
    auto shaped = dyn_cast<ShapedType>(type);
    return shaped && shaped.hasStaticShape()
               ? checkedByteSize(shaped).value_or(0)
               : 0;
  };
  int64_t arguments = 0;
  for (BlockArgument argument : body.getArguments())
    arguments = saturatingAdd(arguments, bytesOf(argument.getType()));
  llvm::DenseMap<Operation *, size_t> position;
  SmallVector<size_t> boundaries;
  for (auto [index, op] : llvm::enumerate(body)) {
    position[&op] = index;
    if (isLossGradient(&op))
      boundaries.push_back(index);
  }
  // A micro-batch's saved values: kept by `none`, counted by the choice.
  llvm::DenseSet<Operation *> saved;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (graph.nodes[i].saved)
      saved.insert(graph.ops[i].begin(), graph.ops[i].end());
  SmallVector<int64_t> live(boundaries.size(), 0);
  for (Operation &op : body) {
    if (saved.contains(&op))
      continue;
    size_t defined = position[&op];
    for (Value result : op.getResults()) {
      size_t last = defined;
      for (Operation *user : result.getUsers())
        last = std::max(last, position.lookup(
                                  body.findAncestorOpInBlock(*user)));
      for (auto [k, boundary] : llvm::enumerate(boundaries))
        if (defined <= boundary && boundary <= last)
          live[k] = saturatingAdd(live[k], bytesOf(result.getType()));
    }
  }
  return saturatingAdd(arguments, *llvm::max_element(live));
}

/// How finely the frontier resolves kept bytes (see Budget.h).
constexpr int64_t kFrontierBuckets = 4096;

/// `bytes` with thousands separators: 4,123,456.
std::string withSeparators(int64_t bytes) {
  std::string digits = std::to_string(bytes), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

/// The real arena peak of the module with `rebuilt` applied to the step:
/// a copy of the module, nested in it so that it can run as a dynamic
/// pipeline of this pass, taken through `after`: the passes
/// partition-compile runs next, up to the memory plan. Without a pipeline
/// that lowers the one step; with one, the step is first cut into stages,
/// each with its own arena on its own ranks, and the peak is the largest
/// stage's.
class PeakMeter {
public:
  PeakMeter(ModuleOp module, func::FuncOp step, const BudgetGraph &graph,
            const OpPassManager &after,
            function_ref<LogicalResult(OpPassManager &, Operation *)> run)
      : module(module), step(step), graph(graph), after(after), run(run) {
    for (auto [index, op] : llvm::enumerate(step.getBody().front()))
      position[&op] = index;
  }

  /// The arena of each function the step became (one, or one per pipeline
  /// stage in stage order).
  FailureOr<SmallVector<int64_t>> measureEach(const std::vector<bool> &rebuilt) {
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    auto copy = cast<ModuleOp>(builder.clone(*module));
    llvm::scope_exit erase([&] { copy->erase(); });
    auto copyStep = copy.lookupSymbol<func::FuncOp>(step.getSymName());
    SmallVector<Operation *> ops;
    for (Operation &op : copyStep.getBody().front())
      ops.push_back(&op);
    // The choice, on the copy: the same ops at the same positions.
    BudgetGraph copyGraph = graph;
    for (SmallVector<Operation *> &copies : copyGraph.ops)
      for (Operation *&op : copies)
        op = ops[position.lookup(op)];
    StepStructure structure = analyzeStep(copyStep);
    rewriteStep(copyStep, structure,
                recomputedValues(copyGraph, rebuilt, structure));
    OpPassManager pm = after;
    if (failed(run(pm, copy)))
      return failure();
    // The step itself, or its stages (`<step>_stage<k>`, --dist-pipeline).
    SmallVector<int64_t> arenas;
    std::string stagePrefix = (step.getSymName() + "_stage").str();
    for (auto function : copy.getOps<func::FuncOp>()) {
      StringRef name = function.getSymName();
      if (name != step.getSymName() && !name.starts_with(stagePrefix))
        continue;
      auto arena = function->getAttrOfType<IntegerAttr>(
          rt::RtDialect::kArenaBytesAttrName);
      if (!arena)
        return step.emitError("the memory plan gave ")
               << name << " no arena size";
      arenas.push_back(arena.getInt());
    }
    if (arenas.empty())
      return step.emitError("the passes after --dist-recompute left no "
                            "lowered training step to measure");
    return arenas;
  }

  FailureOr<int64_t> measure(const std::vector<bool> &rebuilt) {
    FailureOr<SmallVector<int64_t>> arenas = measureEach(rebuilt);
    if (failed(arenas))
      return failure();
    stages = arenas->size();
    return *llvm::max_element(*arenas);
  }

  /// How many arenas the last measurement found (pipeline stages, or 1).
  size_t stages = 1;

private:
  ModuleOp module;
  func::FuncOp step;
  const BudgetGraph &graph;
  const OpPassManager &after;
  function_ref<LogicalResult(OpPassManager &, Operation *)> run;
  llvm::DenseMap<Operation *, size_t> position;
};

} // namespace

LogicalResult recomputeWithinBudget(
    ModuleOp module, func::FuncOp step, int64_t budget, bool report,
    bool exhaustiveCheck, const OpPassManager &after,
    function_ref<LogicalResult(OpPassManager &, Operation *)> run) {
  StepStructure structure = analyzeStep(step);
  FailureOr<BudgetGraph> graph = buildBudgetGraph(step, structure);
  if (failed(graph))
    return failure();
  // The frontier's resolution: 1/4096 of what `none` keeps (see Budget.h).
  int64_t noneKept = recompute::evaluateChoice(graph->nodes, {}).keptBytes;
  std::vector<recompute::BudgetChoice> frontier = recompute::budgetFrontier(
      graph->nodes, std::max<int64_t>(1, noneKept / kFrontierBuckets));
  PeakMeter meter(module, step, *graph, after, run);
  bool failedToMeasure = false;
  std::map<size_t, int64_t> measured;
  auto peakOf = [&](size_t index) {
    if (auto it = measured.find(index); it != measured.end())
      return it->second;
    FailureOr<int64_t> peak = failedToMeasure
                                  ? FailureOr<int64_t>(failure())
                                  : meter.measure(frontier[index].rebuilt);
    failedToMeasure |= failed(peak);
    return measured[index] = succeeded(peak) ? *peak : INT64_MAX;
  };
  // The lower bound: what is live at the forward/backward boundary besides
  // the kept values, plus the kept values. Tensors the lowering makes views
  // rather than buffers would make it too high; measuring `none` finds out
  // by how much, and the bound drops by that much for every choice.
  int64_t fixed = boundaryBytes(step, *graph);
  int64_t nonePeak = peakOf(0);
  int64_t slack = std::max<int64_t>(
      0, saturatingAdd(fixed, frontier[0].keptBytes) - nonePeak);
  // Pipeline stages hold several micro-batches' kept values at once (all m
  // under GPipe, fewer under 1F1B), so there a choice keeping D fewer bytes
  // per micro-batch lowers the largest stage's peak by at most m x D.
  int64_t inFlight = meter.stages > 1 ? graph->microbatches : 0;
  auto lowerBound = [&](size_t index) -> int64_t {
    if (inFlight > 0) {
      int64_t saved = frontier[0].keptBytes - frontier[index].keptBytes, most;
      if (__builtin_mul_overflow(saved, inFlight, &most))
        return 0;
      return std::max<int64_t>(0, nonePeak - most);
    }
    return saturatingAdd(fixed, frontier[index].keptBytes) - slack;
  };
  recompute::BudgetSearch search =
      recompute::searchFrontier(frontier.size(), budget, lowerBound, peakOf);
  search.measured = measured.size();
  // For tests: measure every point, and refuse a search that missed a
  // cheaper fitting point or a bound above a real peak.
  if (exhaustiveCheck && !failedToMeasure) {
    for (size_t index = 0; index < frontier.size(); ++index) {
      int64_t peak = peakOf(index);
      if (lowerBound(index) > peak)
        return step.emitError()
               << "recompute budget check: the lower bound "
               << lowerBound(index) << " of frontier point " << index
               << " exceeds its arena peak " << peak;
      if (peak <= budget && (!search.chosen || index < *search.chosen))
        return step.emitError()
               << "recompute budget check: frontier point " << index
               << " fits (arena peak " << peak
               << ") and is cheaper than the chosen one";
    }
  }
  if (failedToMeasure)
    return step.emitError("cannot measure the arena peak of a recompute "
                          "choice (see the diagnostic above)");
  if (!search.chosen)
    return module.emitError()
           << "recompute budget " << budget
           << " bytes is below the " << withSeparators(search.peak)
           << " bytes that full recomputation needs: raise "
              "recompute.budget_bytes or partition the model over more "
              "ranks";
  const recompute::BudgetChoice &chosen = frontier[*search.chosen];
  if (report) {
    llvm::raw_ostream &os = llvm::outs();
    os << "recompute: budget " << budget << " bytes: arena peak "
       << search.peak << " bytes";
    if (*search.chosen == 0)
      os << " with nothing recomputed";
    else
      os << ", the next cheaper choice at least " << *search.cheaperPeak
         << " bytes";
    os << "; " << llvm::count(chosen.rebuilt, true)
       << " forward ops rebuilt per micro-batch (" << search.measured
       << " of " << frontier.size() << " Pareto-optimal choices measured)\n";
    // With a pipeline, the peak above is the largest stage's: each stage's.
    if (meter.stages > 1) {
      FailureOr<SmallVector<int64_t>> arenas = meter.measureEach(chosen.rebuilt);
      if (failed(arenas))
        return failure();
      os << "recompute: arena peak per pipeline stage:";
      for (auto [stage, arena] : llvm::enumerate(*arenas))
        os << (stage ? ", " : " ") << "stage " << stage << " " << arena;
      os << " bytes\n";
    }
    // Per layer, per micro-batch and rank: what stays kept, against none.
    std::map<int64_t, std::pair<int64_t, int64_t>> kept;
    std::vector<bool> read(graph->nodes.size(), false);
    for (size_t v = graph->nodes.size(); v-- > 0;) {
      const recompute::BudgetNode &node = graph->nodes[v];
      int64_t layer = graph->layers[v];
      if (node.saved)
        kept[layer].second += node.bytes;
      if (!node.saved && !read[v])
        continue;
      if (chosen.rebuilt[v])
        for (size_t input : node.inputs)
          read[input] = true;
      else
        kept[layer].first += node.bytes;
    }
    for (auto &[layer, bytes] : kept)
      if (layer >= 0)
        os << "recompute: layer " << layer << " keeps " << bytes.first
           << " bytes per micro-batch (none: " << bytes.second << ")\n";
    os.flush();
  }
  rewriteStep(step, structure,
              recomputedValues(*graph, chosen.rebuilt, structure));
  return success();
}


} // namespace partition::recompute
