//===- MemoryPlan.cpp - liveness-based arena placement --------------------===//

#include "lowering/Passes.h"

#include "lowering/PipelineStages.h"

#include "dialects/CheckedSize.h"
#include "dialects/Dist/DistOps.h"
#include "dialects/Rt/RtOps.h"
#include "lowering/ZeroMemory.h"
#include "runtime/program/KernelTable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

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

namespace partition {
namespace {

constexpr int64_t kAlignment = 64;

int64_t alignUp(int64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
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

/// The bytes of a buffer already placed (and so checked).
int64_t byteSize(MemRefType type) { return *checkedByteSize(type); }

/// A temporary buffer and the op positions during which it holds data.
struct Interval {
  memref::AllocOp alloc;
  int64_t bytes = 0;
  unsigned first = 0, last = 0;
  int64_t offset = -1;
  bool isGradient = false;
  /// A forward value (computed in the forward pass, or recomputed for the
  /// backward one): see writesActivation.
  bool isActivation = false;
  /// A flat bucket (ZeRO): written by flat_pack, or a reduce-scatter or
  /// all-gather of one. Reported on a line of its own.
  bool isBucket = false;
};

/// The table's id of an rt.kernel (its verifier rejects unknown names).
runtime::KernelId kernelId(KernelOp kernel) {
  StringRef name = kernel.getKernel();
  return runtime::lookupKernel(std::string_view(name.data(), name.size()))->id;
}

/// Whether `output` of `kernel` is a parameter gradient (weight-side
/// backward), by the kernel's Role column (runtime/program/Kernels.def).
bool writesGradient(KernelOp kernel, Value output) {
  using runtime::KernelRole;
  switch (runtime::kernelInfo(kernelId(kernel)).role) {
  case KernelRole::ParameterGradients:
    return true;
  case KernelRole::ParameterGradientsAfterFirst:
    return output != kernel.getOutputs().front();
  // Mixed precision: a cast to f32 is the backward of a parameter's cast,
  // a parameter gradient (the forward casts go the other way).
  case KernelRole::Cast:
    return cast<MemRefType>(output.getType()).getElementType().isF32();
  case KernelRole::Forward:
  case KernelRole::ForwardIfActivationInput:
  case KernelRole::Other:
    return false;
  }
  return false;
}

/// Whether a kernel's outputs are forward values (activations): the
/// forward kernels, and the element-wise ones (add, scale, copy, slice, cast
/// to a narrower type) when they read an activation (a residual sum, not a
/// sum of gradients). ZeRO's bucket copies are counted on their own line
/// (gather/scatter buffers) or as the gradients they carry.
bool writesActivation(KernelOp kernel, llvm::function_ref<bool(Value)> isActivation) {
  using runtime::KernelRole;
  switch (runtime::kernelInfo(kernelId(kernel)).role) {
  case KernelRole::Forward:
    return true;
  case KernelRole::ForwardIfActivationInput:
  case KernelRole::Cast:
    return llvm::any_of(kernel.getInputs(), isActivation);
  case KernelRole::ParameterGradients:
  case KernelRole::ParameterGradientsAfterFirst:
  case KernelRole::Other:
    return false;
  }
  return false;
}

/// Bytes per category. State counts once; temporaries count for the function
/// that has the most of them.
struct Report {
  int64_t parameters = 0, optimizerState = 0, inputs = 0;
  /// Gradient arguments (steps without an optimizer), then temporaries.
  int64_t gradients = 0, temporaryGradients = 0;
  int64_t activations = 0;
  /// Temporaries that are neither (activation gradients, workspaces).
  int64_t otherTemporaries = 0;
  /// ZeRO's flat buckets live at the peak, and the most live at once.
  int64_t bucketsAtPeak = 0, bucketsPeak = 0;
  /// The most gradient bytes (temporaries) live at once, and the bytes of
  /// the parameters' elements (f32 state; per replica, before any ZeRO
  /// sharding of parameters).
  int64_t gradientsPeak = 0;
  bool hasBuckets = false;
  /// Elements of the parameters (a flat shard counts its whole tensor).
  int64_t parameterElements = 0;
  int64_t temporariesPeak = 0, arena = 0;
};

/// State buffers (function arguments) keyed by role and name, so that every
/// function of the module (train_step, eval_step) sees the same parameters at
/// the same offsets. They live for the whole run.
class StateLayout {
public:
  LogicalResult add(func::FuncOp function, Report &report);
  int64_t offsetOf(func::FuncOp function, unsigned arg) const {
    return offsets.lookup(keyOf(function, arg)).first;
  }
  int64_t bytes() const { return end; }

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
  int64_t end = 0;
};

LogicalResult StateLayout::add(func::FuncOp function, Report &report) {
  // Within one function two arguments with one key would share a buffer.
  llvm::DenseMap<Key, unsigned> seen;
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
    auto [it, inserted] = offsets.try_emplace(key, end, type);
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
    end = alignUp(end + *bytes);
    if (end > kMaxAddressableBytes)
      return function.emitError()
             << "the parameters, optimizer state and inputs need more than "
             << kAddressable << " (reached at argument #" << i << ", "
             << key.first << (key.second.empty() ? "" : " ") << key.second
             << ")" << kAdvice;
    if (key.first == "param") {
      report.parameters += *bytes;
      int64_t elements = type.getNumElements();
      if (Attribute flat =
              function.getArgAttr(i, dist::DistDialect::kFlatShardAttrName))
        if (FailureOr<dist::FlatShard> shard = dist::readFlatShard(flat);
            succeeded(shard)) {
          elements = 1;
          for (int64_t dim : shard->shape)
            elements *= dim;
        }
      report.parameterElements += elements;
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

/// The temporaries of one function, placed relative to the end of the state.
struct TemporaryPlan {
  SmallVector<Interval> intervals;
  int64_t peak = 0;
};

FailureOr<TemporaryPlan> planTemporaries(func::FuncOp function,
                                         Report &report) {
  Block &body = function.getBody().front();
  DenseMap<Operation *, unsigned> positions;
  for (auto [index, op] : llvm::enumerate(body))
    positions[&op] = index;

  // --- Live ranges (views extend their base's range). --------------------
  TemporaryPlan plan;
  SmallVector<Interval> &intervals = plan.intervals;
  DenseMap<Value, unsigned> intervalOf;
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
      continue;
    }
    // Every operand is live at its op: kernel inputs and outputs alike, and
    // the buffers of an rt.all_reduce, which it reads and writes in place.
    for (Value operand : op.getOperands()) {
      Value base = operand;
      while (auto view = base.getDefiningOp<memref::SubViewOp>())
        base = view.getSource();
      auto it = intervalOf.find(base);
      if (it != intervalOf.end())
        intervals[it->second].last =
            std::max(intervals[it->second].last, positions[&op]);
    }
    // A gradient gathered or reduce-scattered (ZeRO) is still a gradient,
    // an activation gathered (sequence parallelism) still an activation.
    if (isa<AllGatherOp, ReduceScatterOp>(op)) {
      auto from = intervalOf.find(op.getOperand(0));
      auto to = intervalOf.find(op.getOperand(1));
      if (from != intervalOf.end() && to != intervalOf.end()) {
        intervals[to->second].isGradient |= intervals[from->second].isGradient;
        intervals[to->second].isActivation |=
            intervals[from->second].isActivation;
        intervals[to->second].isBucket |= intervals[from->second].isBucket;
      }
    }
    if (auto kernel = dyn_cast<KernelOp>(op)) {
      auto isActivation = [&](Value input) {
        Value base = input;
        while (auto view = base.getDefiningOp<memref::SubViewOp>())
          base = view.getSource();
        auto it = intervalOf.find(base);
        return it != intervalOf.end() && intervals[it->second].isActivation;
      };
      if (writesActivation(kernel, isActivation))
        for (Value output : kernel.getOutputs())
          if (auto it = intervalOf.find(output);
              it != intervalOf.end() && !writesGradient(kernel, output))
            intervals[it->second].isActivation = true;
      for (Value output : kernel.getOutputs())
        if (auto it = intervalOf.find(output);
            it != intervalOf.end() && writesGradient(kernel, output))
          intervals[it->second].isGradient = true;
      // A bucket of gradients, and the chunks unpacked from it, are still
      // gradients.
      runtime::KernelId id = kernelId(kernel);
      if (id == runtime::KernelId::FlatPack ||
          id == runtime::KernelId::FlatUnpack) {
        auto from = intervalOf.find(kernel.getInputs().front());
        auto to = intervalOf.find(kernel.getOutputs().front());
        if (to != intervalOf.end()) {
          intervals[to->second].isBucket |= id == runtime::KernelId::FlatPack;
          if (from != intervalOf.end())
            intervals[to->second].isGradient |=
                intervals[from->second].isGradient;
        }
      }
      // A gradient copied into a buffer of its own (so that an all-reduce
      // can overwrite it) is still a gradient.
      if (kernelId(kernel) == runtime::KernelId::Copy) {
        auto from = intervalOf.find(kernel.getInputs().front());
        auto to = intervalOf.find(kernel.getOutputs().front());
        if (from != intervalOf.end() && to != intervalOf.end() &&
            intervals[from->second].isGradient)
          intervals[to->second].isGradient = true;
      }
    }
  }

  // --- Greedy by size: largest first, lowest offset that fits. ----------
  SmallVector<Interval *> order;
  for (Interval &interval : intervals)
    order.push_back(&interval);
  llvm::stable_sort(order, [](const Interval *a, const Interval *b) {
    return a->bytes > b->bytes;
  });
  SmallVector<Interval *> placed;
  for (Interval *interval : order) {
    // Placed buffers whose lifetime overlaps, by increasing offset.
    SmallVector<Interval *> conflicts;
    for (Interval *other : placed)
      if (other->first <= interval->last && interval->first <= other->last)
        conflicts.push_back(other);
    llvm::sort(conflicts, [](const Interval *a, const Interval *b) {
      return a->offset < b->offset;
    });
    int64_t offset = 0;
    for (Interval *other : conflicts) {
      if (offset + interval->bytes <= other->offset)
        break;
      offset = std::max(offset, alignUp(other->offset + other->bytes));
    }
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
    placed.push_back(interval);
  }

  // --- What is live at the peak: the op at which the most temporary bytes
  // are live (no placement can need less than that), by category. ---------
  SmallVector<int64_t> delta(body.getOperations().size() + 1, 0);
  SmallVector<int64_t> gradientDelta(delta.size(), 0), bucketDelta(delta.size(), 0);
  for (const Interval &interval : intervals) {
    delta[interval.first] += interval.bytes;
    delta[interval.last + 1] -= interval.bytes;
    if (interval.isBucket) {
      bucketDelta[interval.first] += interval.bytes;
      bucketDelta[interval.last + 1] -= interval.bytes;
    } else if (interval.isGradient) {
      gradientDelta[interval.first] += interval.bytes;
      gradientDelta[interval.last + 1] -= interval.bytes;
    }
  }
  // The most gradient bytes and bucket bytes live at once, wherever.
  int64_t gradientsPeak = 0, bucketsPeak = 0;
  for (int64_t g = 0, b = 0, at = 0; at + 1 < static_cast<int64_t>(delta.size());
       ++at) {
    g += gradientDelta[at];
    b += bucketDelta[at];
    gradientsPeak = std::max(gradientsPeak, g);
    bucketsPeak = std::max(bucketsPeak, b);
  }
  unsigned peakAt = 0;
  for (int64_t live = 0, most = -1, at = 0;
       at + 1 < static_cast<int64_t>(delta.size()); ++at) {
    live += delta[at];
    if (live > most)
      most = live, peakAt = at;
  }
  int64_t gradients = 0, activations = 0, others = 0, buckets = 0;
  for (const Interval &interval : intervals)
    if (interval.first <= peakAt && peakAt <= interval.last)
      (interval.isBucket       ? buckets
       : interval.isGradient   ? gradients
       : interval.isActivation ? activations
                               : others) += interval.bytes;
  report.gradientsPeak = std::max(report.gradientsPeak, gradientsPeak);
  report.bucketsPeak = std::max(report.bucketsPeak, bucketsPeak);
  report.hasBuckets |= llvm::any_of(
      intervals, [](const Interval &interval) { return interval.isBucket; });
  // Functions never run at the same time: report the one whose
  // temporaries need the most room.
  if (plan.peak >= report.temporariesPeak) {
    report.temporaryGradients = gradients;
    report.activations = activations;
    report.otherTemporaries = others;
    report.bucketsAtPeak = buckets;
    report.temporariesPeak = plan.peak;
  }
  return plan;
}

/// Bytes per group of axes ("dp=2", "dp=2,tp=2"), in order of first use.
using BytesByGroup = SmallVector<std::pair<std::string, int64_t>>;

/// The bytes one rank sends in the collectives of one function.
struct Communication {
  StringRef function;
  int64_t sentBytes = 0;
  unsigned buckets = 0, gathers = 0, scatters = 0, sends = 0;
  /// All-reduce: the bytes reduced; all-gather: the bytes of its output;
  /// reduce-scatter: the bytes of its input.
  BytesByGroup reducedBytes, gatheredBytes, scatteredBytes;
  /// rt.send: the bytes sent, by peer ("pp=1").
  BytesByGroup sentBytesByPeer;
};

void addBytes(BytesByGroup &byGroup, const std::string &group, int64_t bytes) {
  auto entry = llvm::find_if(byGroup,
                             [&](const auto &e) { return e.first == group; });
  if (entry == byGroup.end())
    byGroup.push_back({group, bytes});
  else
    entry->second += bytes;
}

/// `total` plus what one rank sends for a collective of `bytes` over `ranks`
/// ranks: (ranks - 1) / ranks of them, twice for an all-reduce; nullopt once
/// anything overflows.
std::optional<int64_t> sendBytes(std::optional<int64_t> total, int64_t bytes,
                                 int64_t ranks, bool twice) {
  std::optional<int64_t> sent =
      llvm::checkedMul(bytes, (twice ? 2 : 1) * (ranks - 1));
  if (!total || !sent)
    return std::nullopt;
  return llvm::checkedAdd(*total, *sent / ranks);
}

/// Counts the collectives of `function`, as ring algorithms over N ranks
/// send them from every rank, rounded down per collective: an all-reduce
/// of S bytes 2 (N - 1) / N * S (a reduce-scatter and an all-gather, each
/// N - 1 steps of S / N bytes); an all-gather (N - 1) / N of its output
/// (every rank forwards the N - 1 blocks it does not own); a
/// reduce-scatter (N - 1) / N of its input.
FailureOr<Communication> countCommunication(func::FuncOp function) {
  Communication result;
  result.function = function.getSymName();
  SymbolTableCollection tables;
  WalkResult walk = function.walk([&](Operation *op) {
    // A send moves its buffer once, to one peer.
    if (auto send = dyn_cast<SendOp>(op)) {
      int64_t bytes = byteSize(cast<MemRefType>(send.getInput().getType()));
      std::optional<int64_t> sent = llvm::checkedAdd(result.sentBytes, bytes);
      if (!sent) {
        op->emitOpError() << "the bytes " << function.getSymName()
                          << " sends per step overflow 64 bits";
        return WalkResult::interrupt();
      }
      result.sentBytes = *sent;
      addBytes(result.sentBytesByPeer,
               cast<StringAttr>(send.getPeerAxes()[0]).getValue().str() + "=" +
                   std::to_string(send.getPeerCoords()[0]),
               bytes);
      ++result.sends;
      return WalkResult::advance();
    }
    if (!isa<AllReduceOp, AllGatherOp, ReduceScatterOp>(op))
      return WalkResult::advance();
    auto meshName = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
    FailureOr<dist::MeshShape> mesh = dist::lookupMeshShape(
        op, meshName, &tables, [&] { return op->emitOpError(); });
    if (failed(mesh))
      return WalkResult::interrupt();
    int64_t ranks = 1;
    std::optional<int64_t> sent = result.sentBytes;
    std::string group;
    llvm::raw_string_ostream os(group);
    for (auto [index, axis] :
         llvm::enumerate(op->getAttrOfType<ArrayAttr>("axes"))) {
      StringRef name = cast<StringAttr>(axis).getValue();
      int64_t at = mesh->find(name);
      if (at < 0) {
        op->emitOpError() << "axis '" << name << "' is not an axis of "
                          << meshName;
        return WalkResult::interrupt();
      }
      ranks *= mesh->sizes[at]; // The mesh verifier bounds its size.
      os << (index ? "," : "") << name << "=" << mesh->sizes[at];
    }
    if (auto allReduce = dyn_cast<AllReduceOp>(op)) {
      int64_t bytes = 0;
      for (Value buffer : allReduce.getBuffers())
        bytes += byteSize(cast<MemRefType>(buffer.getType()));
      sent = sendBytes(sent, bytes, ranks, /*twice=*/true);
      addBytes(result.reducedBytes, group, bytes);
      ++result.buckets;
    } else if (auto allGather = dyn_cast<AllGatherOp>(op)) {
      int64_t bytes = byteSize(cast<MemRefType>(allGather.getOutput().getType()));
      sent = sendBytes(sent, bytes, ranks, /*twice=*/false);
      addBytes(result.gatheredBytes, group, bytes);
      ++result.gathers;
    } else {
      int64_t bytes =
          byteSize(cast<MemRefType>(cast<ReduceScatterOp>(op).getInput().getType()));
      sent = sendBytes(sent, bytes, ranks, /*twice=*/false);
      addBytes(result.scatteredBytes, group, bytes);
      ++result.scatters;
    }
    if (!sent) {
      op->emitOpError() << "the bytes " << function.getSymName()
                        << " sends per step overflow 64 bits";
      return WalkResult::interrupt();
    }
    result.sentBytes = *sent;
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return result;
}

/// One line per function, for instance
///   communication: train_step sends 1536 bytes per rank per step (2
///   all-reduce buckets, 1536 bytes reduced over dp=2; 1 all-gather, 512
///   bytes gathered over tp=2)
void printCommunication(const Communication &comm, llvm::raw_ostream &os) {
  os << "communication: " << comm.function << " sends " << comm.sentBytes
     << " bytes per rank per step (";
  if (comm.buckets + comm.gathers + comm.scatters + comm.sends == 0) {
    os << "no collectives)\n";
    return;
  }
  StringRef separator = "";
  auto part = [&](unsigned count, StringRef singular, StringRef plural,
                  const BytesByGroup &byGroup, StringRef verb) {
    if (count == 0)
      return;
    os << separator << count << " " << (count == 1 ? singular : plural);
    for (const auto &[group, bytes] : byGroup)
      os << ", " << bytes << " bytes " << verb
         << (verb == "sent to" ? " " : " over ") << group;
    separator = "; ";
  };
  part(comm.buckets, "all-reduce bucket", "all-reduce buckets",
       comm.reducedBytes, "reduced");
  part(comm.gathers, "all-gather", "all-gathers", comm.gatheredBytes,
       "gathered");
  part(comm.scatters, "reduce-scatter", "reduce-scatters",
       comm.scatteredBytes, "scattered");
  part(comm.sends, "send", "sends", comm.sentBytesByPeer, "sent to");
  os << ")\n";
}

/// After the communication lines: the gradient bytes live at most at once
/// (ZeRO shards them), ZeRO's flat buckets, and, for a data-parallel plan,
/// the model state per rank as ZeRO's closed forms give it for the plan's
/// stage (lowering/ZeroMemory.h), next to the measured lines above.
void printModelState(ModuleOp module, const Report &totals,
                     llvm::raw_ostream &os, const std::string &memory) {
  os << memory << "gradients_peak " << totals.gradientsPeak << "\n";
  if (totals.hasBuckets)
    os << memory << "gather_scatter_buffers " << totals.bucketsAtPeak
       << " at the arena peak, " << totals.bucketsPeak << " at most\n";
  dist::PlanAttr plan = dist::getPlan(module);
  if (!plan)
    return;
  std::optional<StringRef> dataAxis = plan.getAxis(dist::AxisRole::Data);
  FailureOr<dist::MeshShape> mesh =
      dist::lookupMeshShape(module, plan.getMesh());
  if (!dataAxis || failed(mesh) || mesh->find(*dataAxis) < 0)
    return;
  int64_t ranks = mesh->sizes[mesh->find(*dataAxis)];
  if (ranks < 2)
    return;
  // Whole tensors per replica, whatever ZeRO shards.
  double psi = static_cast<double>(totals.parameterElements);
  ZeroStateBytes model = zeroStateBytes(plan.getZeroStage(), psi, ranks);
  os << memory << llvm::formatv("zero stage {0} over {1}={2}: parameters {3} + "
                      "gradients {4} + optimizer_state {5} = {6} bytes per "
                      "rank (closed form, 16 bytes of fp32 AdamW state for "
                      "each of {7} parameters)\n",
                      plan.getZeroStage(), *dataAxis, ranks,
                      static_cast<int64_t>(model.parameters),
                      static_cast<int64_t>(model.gradients),
                      static_cast<int64_t>(model.optimizerState),
                      static_cast<int64_t>(model.total()),
                      static_cast<int64_t>(psi));
}

/// Gives `function` one arena argument and makes every buffer a view of it.
LogicalResult rewriteWithArena(func::FuncOp function, const StateLayout &state,
                               TemporaryPlan &plan, int64_t arenaBytes) {
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
  for (unsigned i = 0; i < numState; ++i) {
    BlockArgument arg = body.getArgument(i);
    auto view = makeView(arg.getLoc(), state.offsetOf(function, i),
                         cast<MemRefType>(arg.getType()));
    if (DictionaryAttr attrs = function.getArgAttrDict(i))
      for (NamedAttribute attr : attrs)
        view->setAttr(attr.getName(), attr.getValue());
    arg.replaceAllUsesWith(view);
  }
  for (Interval &interval : plan.intervals) {
    builder.setInsertionPoint(interval.alloc);
    auto view = makeView(interval.alloc.getLoc(),
                         state.bytes() + interval.offset,
                         interval.alloc.getType());
    interval.alloc.replaceAllUsesWith(view.getResult());
    interval.alloc.erase();
  }
  llvm::BitVector stateArgs(numState + 1, true);
  stateArgs.reset(numState);
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
                       SendOp, RecvOp>(op);
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
    for (auto [index, stage] : llvm::enumerate(*stages))
      if (failed(planStage(stage, stages->size() > 1
                                      ? "stage " + std::to_string(index) + " "
                                      : std::string())))
        return signalPassFailure();
  }

  /// Plans the functions of one stage into one arena; `prefix` ("stage 1 ")
  /// qualifies the report's lines when there are several stages.
  LogicalResult planStage(ArrayRef<func::FuncOp> functions,
                          const std::string &prefix) {
    // Functions never run at the same time: they share the state and reuse
    // one temporary region.
    Report totals;
    StateLayout state;
    SmallVector<TemporaryPlan> plans;
    SmallVector<Communication, 2> communication;
    for (func::FuncOp function : functions) {
      if (failed(state.add(function, totals)))
        return failure();
      // Temporaries first: placing them checks every buffer's size.
      FailureOr<TemporaryPlan> plan = planTemporaries(function, totals);
      if (failed(plan))
        return failure();
      plans.push_back(std::move(*plan));
      FailureOr<Communication> comm = countCommunication(function);
      if (failed(comm))
        return failure();
      communication.push_back(*comm);
    }
    // Each term is at most 2^48 (checked as it was laid out).
    totals.arena = alignUp(state.bytes() + totals.temporariesPeak);
    if (totals.arena > kMaxAddressableBytes)
      return getOperation().emitError()
             << "the arena " << (prefix.empty() ? "" : "of " + prefix)
             << "needs " << totals.arena << " bytes (state "
             << state.bytes() << ", temporaries " << totals.temporariesPeak
             << "), more than " << kAddressable << kAdvice;
    for (auto [function, plan] : llvm::zip(functions, plans))
      if (failed(rewriteWithArena(function, state, plan, totals.arena)))
        return failure();

    if (!report)
      return success();
    llvm::raw_ostream &os = llvm::outs();
    std::string memory = "memory: " + prefix;
    os << memory << "parameters " << totals.parameters << "\n"
       << memory << "optimizer_state " << totals.optimizerState << "\n"
       << memory << "inputs " << totals.inputs << "\n"
       << memory << "gradients "
       << totals.gradients + totals.temporaryGradients << "\n"
       << memory << "activations " << totals.activations << "\n"
       << memory << "temporaries_peak " << totals.temporariesPeak << "\n"
       << memory << "arena_peak " << totals.arena << "\n";
    // The arena at its peak, in parts that sum to it exactly; the rest is
    // alignment and the room the placement leaves between live buffers.
    int64_t gradients = totals.gradients + totals.temporaryGradients;
    int64_t unused = totals.arena - totals.parameters -
                     totals.optimizerState - totals.inputs - gradients -
                     totals.activations - totals.otherTemporaries -
                     totals.bucketsAtPeak;
    os << memory << "arena_peak = parameters " << totals.parameters
       << " + optimizer_state " << totals.optimizerState << " + inputs "
       << totals.inputs << " + gradients " << gradients << " + activations "
       << totals.activations << " + other_temporaries "
       << totals.otherTemporaries;
    if (totals.hasBuckets)
      os << " + gather_scatter_buffers " << totals.bucketsAtPeak;
    os << " + alignment_and_fragmentation " << unused << "\n";
    for (const Communication &comm : communication)
      printCommunication(comm, os);
    printModelState(getOperation(), totals, os, memory);
    os.flush();
    return success();
  }
};

} // namespace
} // namespace partition
