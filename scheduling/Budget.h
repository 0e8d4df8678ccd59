//===- Budget.h - the cheapest recomputation within a memory budget -*- C++ -*-===//
//
// The selection behind `recompute.policy = "budget"`, as plain C++ (no MLIR),
// so that tests can compare it with brute force.
//
// The problem. The forward pass is a DAG of nodes (one per forward op, in
// program order: a node's inputs come before it). A node is `saved` when a
// backward op reads it. Choosing a set R of `recomputable` nodes to rebuild
// in the backward pass (the way --dist-recompute's Rebuilder does it) means:
//  - a saved node in R is rebuilt, and so is every node of R that a rebuilt
//    node reads (each once);
//  - a node is kept (alive from its forward computation into the backward)
//    when it is saved or read by a rebuilt node, and is not rebuilt itself;
//  - the choice costs the FLOPs of the rebuilt nodes and keeps the bytes of
//    the kept ones.
// budgetFrontier finds, for every reachable kept size, the least FLOPs (the
// Pareto frontier), exactly: it visits the nodes in reverse program order
// and keeps, per "cut" (which not yet visited nodes rebuilt nodes read), the
// Pareto-optimal partial choices. On a layer chain the cuts are few (a
// layer's nodes only read the layer's input and each other), so this is the
// dynamic programme over checkpoints, generalised to the DAG inside a layer.
//
// Kept bytes are not the arena peak: the memory plan also holds gradients,
// workspaces and the transient recomputed values, and its placement leaves
// gaps, so the real peak does not even fall monotonically along the
// frontier. searchFrontier therefore decides with the caller's measurement
// of the real peak (--dist-recompute runs the lowering and memory planner
// on a copy of the step) and a lower bound on it (what must be live at the
// forward/backward boundary): it skips the cheap points whose lower bound
// exceeds the budget and measures the others, cheapest first, until one
// fits. That point is the cheapest on the frontier whose real peak fits.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_SCHEDULING_BUDGET_H
#define PARTITION_SCHEDULING_BUDGET_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace partition::recompute {

struct BudgetNode {
  /// What keeping it costs.
  int64_t bytes = 0;
  /// What rebuilding it costs.
  int64_t flops = 0;
  /// A backward op reads it.
  bool saved = false;
  /// It may be rebuilt (otherwise it is kept whenever needed).
  bool recomputable = false;
  /// The nodes it reads, all of smaller index.
  std::vector<size_t> inputs;
};

/// One choice: the nodes rebuilt, what they cost and what stays kept.
struct BudgetChoice {
  int64_t keptBytes = 0;
  int64_t extraFlops = 0;
  /// Per node: rebuilt in the backward pass.
  std::vector<bool> rebuilt;
};

/// What choosing to recompute `recompute` (per node; non-recomputable nodes
/// are ignored) costs and keeps: the definition the frontier optimises.
BudgetChoice evaluateChoice(const std::vector<BudgetNode> &nodes,
                            const std::vector<bool> &recompute);

/// Every Pareto-optimal choice, cheapest first: extraFlops strictly
/// increasing, keptBytes strictly decreasing. The first keeps everything
/// (0 FLOPs); the last keeps the least. Sums saturate at INT64_MAX.
///
/// With `quantum` 1 the frontier is exact. Real models need coarser: the
/// layers' many small values (a bf16 copy of each weight, norm outputs)
/// make the exact frontier of a 32-layer Llama millions of points apart by
/// a few bytes. With a larger quantum each partial frontier keeps only the
/// cheapest point per `quantum` bytes, so a choice may keep up to
/// (nodes x quantum) bytes more than the exact frontier's at the same
/// FLOPs; --dist-recompute sets it to 1/4096 of what `none` keeps.
std::vector<BudgetChoice> budgetFrontier(const std::vector<BudgetNode> &nodes,
                                         int64_t quantum = 1);

/// The cheapest choice of `frontier` keeping at most `limit` bytes.
std::optional<size_t> cheapestWithin(const std::vector<BudgetChoice> &frontier,
                                     int64_t limit);

/// The outcome of searchFrontier.
struct BudgetSearch {
  /// The chosen frontier index; nullopt when even the last does not fit.
  std::optional<size_t> chosen;
  /// The measured peak of the chosen point, or of the last when none fits.
  int64_t peak = 0;
  /// The peak (measured, else its lower bound) of the point just cheaper
  /// than the chosen one, which does not fit; none when the first fits.
  std::optional<int64_t> cheaperPeak;
  /// How many points were measured.
  unsigned measured = 0;
};

/// The cheapest point of a frontier of `size` points (cheapest first) whose
/// `peakOf` is at most `budget`. `lowerBound(i)` must not exceed
/// `peakOf(i)` and must not grow with i (kept bytes fall along the
/// frontier): the points before the first whose bound fits are skipped,
/// the rest measured in order. When none fits, `peak` is the last point's.
BudgetSearch searchFrontier(size_t size, int64_t budget,
                            const std::function<int64_t(size_t)> &lowerBound,
                            const std::function<int64_t(size_t)> &peakOf);

} // namespace partition::recompute

#endif // PARTITION_SCHEDULING_BUDGET_H
