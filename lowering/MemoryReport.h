//===- MemoryReport.h - what the arena holds, by category -------*- C++ -*-===//
//
// The memory plan (--lower-memory-plan) places buffers; this is what its
// report (--memory-report) says about them: each temporary classified as a
// gradient, an activation, one of ZeRO's flat buckets or something else
// (by the kernels' Role column, runtime/program/Kernels.def, and through
// the collectives and copies that carry them), the categories live at the
// arena's peak, and the lines printed per pipeline stage.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_LOWERING_MEMORYREPORT_H
#define PARTITION_LOWERING_MEMORYREPORT_H

#include "lowering/CommunicationCount.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <memory>
#include <tuple>
#include <vector>

namespace partition {

/// A temporary buffer and the op positions during which it holds data.
struct Interval {
  mlir::memref::AllocOp alloc;
  int64_t bytes = 0;
  unsigned first = 0, last = 0;
  int64_t offset = -1;
  bool isGradient = false;
  /// A forward value (computed in the forward pass, or recomputed for the
  /// backward one).
  bool isActivation = false;
  /// A flat bucket (ZeRO): written by flat_pack, or a reduce-scatter or
  /// all-gather of one. Reported on a line of its own.
  bool isBucket = false;
  /// A staging buffer of a tier transfer (rt.tier_read / rt.tier_write):
  /// placed at whole I/O blocks (`alignment`, its `bytes` rounded up to
  /// them), as the NVMe tier's O_DIRECT transfers need.
  bool isStaging = false;
  int64_t alignment = 64;
  /// Positions [deadFrom, deadTo) inside [first, last] where it holds
  /// nothing: a buffer the micro-batch loop carries from run to run, dead
  /// in each run between the last read of the value it was handed and the
  /// write of the one it hands on (empty when deadFrom == deadTo).
  unsigned deadFrom = 0, deadTo = 0;
  /// An action walk's slot buffer (a template or a copy, which the program
  /// keeps live across the whole walk): the class of the actions during
  /// which it holds a micro-batch's values (ActionWalkMemory.h), and
  /// whether it does at the action where the walk holds the most.
  int heldClass = -1;
  bool heldAtPeak = false;
  /// A walk region's own temporary (allocated and used in region
  /// `region` alone): it holds data only while that region runs.
  int region = -1;

  bool isLiveAt(unsigned position) const {
    return first <= position && position <= last &&
           !(deadFrom <= position && position < deadTo);
  }
};

/// Whether two buffers hold data at some same position (may not share
/// bytes).
inline bool liveTogether(const Interval &a, const Interval &b) {
  if (a.first > b.last || b.first > a.last)
    return false;
  if (a.deadFrom >= a.deadTo && b.deadFrom >= b.deadTo)
    return true; // The common case, in the placement's inner loop.
  auto segments = [](const Interval &i) {
    llvm::SmallVector<std::pair<unsigned, unsigned>, 2> out;
    if (i.deadFrom < i.deadTo) {
      if (i.deadFrom > i.first)
        out.push_back({i.first, i.deadFrom - 1});
      if (i.deadTo <= i.last)
        out.push_back({i.deadTo, i.last});
    } else {
      out.push_back({i.first, i.last});
    }
    return out;
  };
  for (auto [a1, a2] : segments(a))
    for (auto [b1, b2] : segments(b))
      if (a1 <= b2 && b1 <= a2)
        return true;
  return false;
}

struct WalkLife;

/// The temporaries of one function, placed relative to the end of the state.
struct TemporaryPlan {
  llvm::SmallVector<Interval> intervals;
  /// Each allocation's interval.
  llvm::DenseMap<mlir::Value, unsigned> intervalOf;
  int64_t peak = 0;
  /// An action walk's slot buffers: per held class, the classes held at
  /// some same action (itself included; a class no action holds: every
  /// class).
  std::vector<llvm::BitVector> heldTogether;
  /// Per held class, how many actions hold it (the longest held are
  /// placed first: a backward's temporaries then fit their own slot).
  std::vector<int64_t> heldActions;
  /// Per slot buffer (by interval index; empty for others) and walk
  /// region: the op positions of that region at which it holds data in
  /// some action running the region ([first, last]; first > last: none).
  /// A region's own temporaries may take its bytes elsewhere: the place a
  /// backward has finished reading, where no other action holds it.
  std::vector<llvm::SmallVector<std::pair<unsigned, unsigned>, 0>> heldLife;
  /// Two held classes (the lower first) that meet only at actions where
  /// neither holds data through the whole region: each such (region,
  /// kind of the first, kind of the second). Their buffers conflict only
  /// where their positions there overlap (a backward's temporary in its
  /// own slot's finished part).
  llvm::DenseMap<std::pair<int, int>,
                 llvm::SmallVector<std::tuple<unsigned, uint8_t, uint8_t>, 2>>
      heldMeetings;
  /// What the report needs to count held bytes per position
  /// (ActionWalkMemory.h).
  std::shared_ptr<const WalkLife> walkLife;

  /// Whether two buffers may not share bytes: both hold data at some same
  /// position, and, for a walk's slot buffers, at some same action.
  bool liveTogether(const Interval &a, const Interval &b) const {
    if (!partition::liveTogether(a, b))
      return false;
    if (a.heldClass >= 0 && b.heldClass >= 0)
      return heldTogether[a.heldClass].test(b.heldClass) &&
             (heldMeetings.empty() || heldBuffersMeet(a, b));
    if (a.heldClass >= 0 && b.region >= 0)
      return heldMeetsTemporary(a, b);
    if (b.heldClass >= 0 && a.region >= 0)
      return heldMeetsTemporary(b, a);
    return true;
  }

private:
  /// Two held buffers whose classes meet: whether at some action.
  bool heldBuffersMeet(const Interval &a, const Interval &b) const;
  bool heldMeetsTemporary(const Interval &held, const Interval &temporary) const {
    auto [first, last] = heldLife[&held - intervals.data()][temporary.region];
    return first <= temporary.last && temporary.first <= last;
  }
};

/// Bytes per category. State counts once; temporaries count for the function
/// that has the most of them.
struct MemoryReport {
  int64_t parameters = 0, optimizerState = 0, inputs = 0;
  /// Gradient arguments (steps without an optimizer), then temporaries.
  int64_t gradients = 0, temporaryGradients = 0;
  int64_t activations = 0;
  /// Temporaries that are neither (activation gradients, workspaces).
  int64_t otherTemporaries = 0;
  /// ZeRO's flat buckets live at the peak, and the most live at once.
  int64_t bucketsAtPeak = 0, bucketsPeak = 0;
  /// The most gradient bytes (temporaries) live at once.
  int64_t gradientsPeak = 0;
  bool hasBuckets = false;
  /// Elements of the parameters (per replica, before any ZeRO sharding: a
  /// flat shard counts its whole tensor).
  int64_t parameterElements = 0;
  /// Of those, the experts' (split over the plan's expert axis): ZeRO
  /// shards their state over their expert-data-parallel group alone.
  int64_t expertElements = 0;
  int64_t temporariesPeak = 0, arena = 0;
  /// Offload (--rt-offload-optimizer): the optimizer state laid out in
  /// each tier outside the arena (its bytes, and the tier's size with
  /// every buffer at whole I/O blocks), and the staging buffers live at
  /// the peak and at most.
  int64_t hostState = 0, nvmeState = 0, hostBytes = 0, nvmeBytes = 0;
  /// ZeRO-3's parameter shards in each tier (parameter offload).
  int64_t hostParameters = 0, nvmeParameters = 0;
  int64_t stagingAtPeak = 0, stagingPeak = 0;
  bool hasStaging = false;
};

/// Marks each temporary of `body` (its live ranges already in `plan`) as a
/// gradient, an activation or a bucket.
void classifyTemporaries(mlir::Block &body, TemporaryPlan &plan);

/// Adds what `plan` (placed, its peak known) has live at its peak, by
/// category, to `report`: the function whose temporaries need the most
/// room decides the categories, since functions never run at once.
void recordPeak(mlir::Block &body, const TemporaryPlan &plan,
                MemoryReport &report);

/// The report's lines for one arena, `prefix` ("stage 1 ") qualifying them
/// when a program has several.
void printMemoryReport(mlir::ModuleOp module, const MemoryReport &totals,
                       llvm::ArrayRef<Communication> communication,
                       const std::string &prefix, llvm::raw_ostream &os);

} // namespace partition

#endif // PARTITION_LOWERING_MEMORYREPORT_H
