//===- MicrobatchLoop.cpp - one copy of the steady state's code -----------===//
//
// --rt-microbatch-loop: a step built with `microbatch-loop` holds the
// micro-batches its loop needs (--xfmr-train-step,
// scheduling/MicrobatchLoop.h): a prefix, the body, a copy of the body
// `stride` micro-batches later, and the tail. Without a pipeline the body
// is micro-batch 1 (the step holds 0, 1, 2 and k-1); a pipeline stage's
// body is one period of its schedule's steady state, and
// dist.microbatch_loop_anchors (--dist-pipeline) names the forwards where
// body, copy and tail start. This pass checks that the copy's code is the
// body's (the same ops, reading the same buffers, the body's results where
// the body read earlier ones, rows `stride` micro-batches later), deletes
// it, makes the body read and write the buffers it carries from one run to
// the next in place, and brackets it with rt.microbatch_loop_begin / _end:
// the runtime runs it `count` times. The step's size and compile time then
// no longer grow with the micro-batch count.
//
// Why matching the code is enough: the copy's code is correct after the
// body's (the compiled step is); if it is the same instructions on the
// same buffers, running those instructions once more after themselves is
// correct again, for any number of runs, the inputs aside (the runtime
// copies each run's rows into the body's slices). That the runs are the
// schedule's periods, and the tail its last micro-batches, the layout
// checked against the whole schedule.
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"
#include "lowering/InOrderParallel.h"
#include "lowering/RepeatedKernels.h"

#include "dialects/Rt/RtOps.h"
#include "dialects/Rt/RtViews.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "passes/frontend/StepEntries.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace partition {
#define GEN_PASS_DEF_MICROBATCHLOOPPASS
#include "lowering/Passes.h.inc"
} // namespace partition

using namespace mlir;
using partition::rt::KernelOp;
using partition::rt::RtDialect;

namespace partition {
namespace {

/// The micro-batch whose rows of a step input (an argument with rt.role
/// "tokens" or "targets") `op` views, or -1.
int64_t sliceMicroBatch(Operation *op) {
  auto subview = dyn_cast_or_null<memref::SubViewOp>(op);
  if (!subview)
    return -1;
  StringRef role = rt::argumentRole(subview.getSource());
  if (role != "tokens" && role != "targets")
    return -1;
  int64_t rows = subview.getStaticSizes()[0];
  if (rows <= 0 || ShapedType::isDynamic(subview.getStaticOffsets()[0]))
    return -1;
  return subview.getStaticOffsets()[0] / rows;
}

/// The rows of micro-batch `micro` of a [k * rows, ...] input, whole rows:
/// the layout the runtime's copies assume.
bool isWholeRows(memref::SubViewOp slice) {
  auto source = cast<MemRefType>(slice.getSource().getType());
  ArrayRef<int64_t> offsets = slice.getStaticOffsets();
  ArrayRef<int64_t> sizes = slice.getStaticSizes();
  ArrayRef<int64_t> strides = slice.getStaticStrides();
  if (!source.getLayout().isIdentity() || sizes[0] <= 0 ||
      offsets[0] % sizes[0] != 0)
    return false;
  for (unsigned dim = 0; dim < offsets.size(); ++dim)
    if (strides[dim] != 1 ||
        (dim > 0 && (offsets[dim] != 0 || sizes[dim] != source.getDimSize(dim))))
      return false;
  return true;
}

/// Kernels that may write their result over their first input, element by
/// element (a gradient added to the accumulated one).
bool isElementwiseInPlace(Operation *op) {
  auto kernel = dyn_cast<KernelOp>(op);
  return kernel && kernel.getKernel() == "add";
}

/// The micro-batch loop of one function.
class Reroll {
public:
  Reroll(func::FuncOp function, const pipeline::LoopLayout &layout)
      : function(function), layout(layout) {}
  LogicalResult run();

private:
  InFlightDiagnostic fail() {
    return function.emitError()
           << "--rt-microbatch-loop: cannot keep one copy of @"
           << function.getSymName() << "'s middle micro-batches: ";
  }
  /// The compiled micro-batch whose rows `op` views (the step's numbering,
  /// which the schedule follows), -1 for other ops, -2 for rows the step
  /// does not build.
  int64_t compiledSlice(Operation *op) const {
    int64_t real = sliceMicroBatch(op);
    if (real < 0)
      return -1;
    int compiled = layout.compiledOf(static_cast<int>(real));
    return compiled < 0 ? -2 : compiled;
  }
  /// Whether y views the rows `stride` micro-batches after x's, as x.
  bool isNextSlice(Value x, Value y) const {
    auto a = x.getDefiningOp<memref::SubViewOp>();
    auto b = y.getDefiningOp<memref::SubViewOp>();
    int64_t first = compiledSlice(a), second = compiledSlice(b);
    return a && b && first >= 0 && second >= 0 && first < layout.split &&
           second == first + layout.stride &&
           a.getSource() == b.getSource() &&
           a.getStaticSizes() == b.getStaticSizes() && isWholeRows(a) &&
           isWholeRows(b);
  }
  FailureOr<size_t> anchorPosition(StringRef anchor, StringRef what);
  /// Whether x and y, both written before the body, hold the same values:
  /// each a buffer that one kernel alone writes, the same kernel on the
  /// same inputs (a tensor-parallel bias scaled once per micro-batch, which
  /// a pipeline stage computes up front). The body may then read x on
  /// every run.
  bool isSameValueBefore(Value x, Value y) const;
  LogicalResult findBlocks();
  /// Moves above the body the kernels of the body and its copy that only
  /// read buffers defined before the body which the loop never writes, and
  /// that another micro-batch reads (a parameter's tensor-parallel block,
  /// sliced once) or that are constants (kernelsToHoist), with the buffers
  /// they alone write: with the body the first period after the warm-up,
  /// such work that later micro-batches reuse sits in it and not in its
  /// copy. Returns whether anything moved.
  bool hoistInvariants();
  LogicalResult match();
  LogicalResult matchOp(Operation *first, Operation *second);
  LogicalResult matchOperand(Operation *first, Value x, Value y);
  LogicalResult checkCarried();
  void rewrite();

  bool beforeBody(Operation *op) const {
    auto it = position.find(op);
    return it != position.end() && it->second < begin[0];
  }
  bool inFirst(Operation *op) const {
    auto it = position.find(op);
    return it != position.end() && it->second >= begin[0] &&
           it->second < begin[1];
  }
  bool inSecond(Operation *op) const {
    auto it = position.find(op);
    return it != position.end() && it->second >= begin[1] &&
           it->second < begin[2];
  }
  bool inFirst(Value value) const {
    Operation *op = value.getDefiningOp();
    return op && inFirst(op);
  }

  func::FuncOp function;
  const pipeline::LoopLayout &layout;
  SmallVector<Operation *> ops;
  DenseMap<Operation *, size_t> position;
  /// Where the body, its copy and the tail start. The loop's code is
  /// [begin[0], begin[1]), the copy it must match [begin[1], begin[2]).
  size_t begin[3] = {0, 0, 0};
  /// Micro-batch 2's values for micro-batch 1's.
  IRMapping secondOf;
  /// Buffers one micro-batch hands the next: micro-batch 1's code reads x,
  /// written before it, where micro-batch 2's reads y, written by micro-
  /// batch 1's code. In order of discovery.
  llvm::MapVector<Value, Value> carried;
  /// The body's views of its rows (its own, and earlier ones it reads).
  SetVector<Value> slices;
  /// Whether mergeRepeatedKernels ran.
  bool merged = false;
};

bool Reroll::isSameValueBefore(Value x, Value y) const {
  KernelOp a = soleKernelWriter(x), b = soleKernelWriter(y);
  if (!a || !b || !beforeBody(a) || !beforeBody(b) || a.getOutputs().size() != 1 ||
      b.getOutputs().size() != 1 || x.getType() != y.getType() ||
      !sameAttributes(a, b) ||
      a.getInputs().size() != b.getInputs().size())
    return false;
  // Inputs that nothing before the body writes (the function's arguments
  // as the caller passed them), or computed alike from them (a bf16 copy,
  // then scaled).
  auto unwrittenArgument = [&](Value input) {
    if (!isa<BlockArgument>(input))
      return false;
    for (OpOperand &use : input.getUses()) {
      auto kernel = dyn_cast<KernelOp>(use.getOwner());
      bool reads = kernel && use.getOperandNumber() < kernel.getInputs().size();
      if (!reads && beforeBody(use.getOwner()))
        return false;
    }
    return true;
  };
  for (auto [p, q] : llvm::zip(a.getInputs(), b.getInputs()))
    if (!(p == q && unwrittenArgument(p)) && !isSameValueBefore(p, q))
      return false;
  return true;
}

FailureOr<size_t> Reroll::anchorPosition(StringRef anchor, StringRef what) {
  std::optional<size_t> found;
  int64_t rows = -1;
  if (anchor.consume_front("rows ") && anchor.getAsInteger(10, rows))
    rows = -1;
  for (auto [index, op] : llvm::enumerate(ops)) {
    bool matches;
    if (rows >= 0) {
      matches = compiledSlice(op) == rows;
    } else {
      auto label = op->getAttrOfType<StringAttr>("label");
      matches = isa<rt::RecvOp>(op) && label &&
                label.getValue().starts_with((anchor + " ").str());
    }
    if (matches) {
      found = index;
      break;
    }
  }
  if (!found) {
    InFlightDiagnostic diag = fail() << "its loop's " << what << " starts at ";
    if (rows >= 0)
      diag << "the first op viewing micro-batch " << rows << "'s rows";
    else
      diag << "the receive of '" << anchor << "'";
    diag << ", which the function does not hold";
    return failure();
  }
  // The buffers an action writes first are allocated right before it.
  size_t at = *found;
  while (at > 0 && isa<memref::AllocOp>(ops[at - 1]))
    --at;
  return at;
}

bool Reroll::hoistInvariants() {
  // Every buffer the body or its copy may write: kernels' outputs, and
  // every buffer operand of any other op that is not a view or allocation
  // (collectives write theirs).
  DenseSet<Value> written;
  for (size_t k = begin[0]; k < begin[2]; ++k)
    addWrittenBuffers(ops[k], written);
  DenseSet<Operation *> hoisted;
  auto before = [&](Value value) {
    Operation *def = value.getDefiningOp();
    if (!def)
      return true; // a function argument
    auto it = position.find(def);
    return hoisted.contains(def) ||
           (it != position.end() && it->second < begin[0]);
  };
  // From the copy too: work each micro-batch repeats moves from both, and
  // the match then pairs the two results (isSameValueBefore).
  SmallVector<Operation *> moving;
  SmallVector<KernelOp> candidates;
  for (size_t k = begin[0]; k < begin[2]; ++k) {
    auto kernel = dyn_cast<KernelOp>(ops[k]);
    if (!kernel || kernel.getOutputs().empty())
      continue;
    // Only the step's own arguments (parameters, axis indices), constants
    // (filled by a kernel without inputs before the body) and what moved
    // already: another buffer written before the body is a carried
    // activation, which each run reads anew.
    auto isConstant = [&](Value buffer) {
      KernelOp writer = soleKernelWriter(buffer);
      return writer && writer.getInputs().empty() && beforeBody(writer);
    };
    bool invariant = llvm::all_of(kernel.getInputs(), [&](Value input) {
      Value buffer = rt::viewedBuffer(input);
      bool argument = isa<BlockArgument>(buffer) || isConstant(buffer) ||
                      (buffer.getDefiningOp() &&
                       hoisted.contains(buffer.getDefiningOp()));
      return argument && before(input) && !written.contains(buffer);
    });
    invariant = invariant && llvm::all_of(kernel.getOutputs(), [&](Value out) {
      return out.getDefiningOp<memref::AllocOp>() &&
             soleKernelWriter(out) == kernel;
    });
    if (!invariant)
      continue;
    for (Value out : kernel.getOutputs()) {
      hoisted.insert(out.getDefiningOp());
      written.erase(out); // written once, above the loop
    }
    hoisted.insert(kernel);
    candidates.push_back(kernel);
  }
  // Of those, what another micro-batch reads (RepeatedKernels.h).
  auto block = [&](Operation *op) {
    return inFirst(op) ? 0 : inSecond(op) ? 1 : 2;
  };
  DenseSet<Operation *> shared =
      kernelsToHoist(candidates, block, [&](KernelOp writer) {
        return writer.getInputs().empty() && beforeBody(writer);
      });
  hoisted.clear();
  for (KernelOp kernel : candidates) {
    if (!shared.contains(kernel))
      continue;
    for (Value out : kernel.getOutputs())
      if (hoisted.insert(out.getDefiningOp()).second)
        moving.push_back(out.getDefiningOp());
    hoisted.insert(kernel);
    moving.push_back(kernel);
  }
  // A buffer the body fills and the copy goes on writing (a gradient's
  // accumulator, zero-filled where first used): the loop-carried start,
  // filled once above the loop. A buffer the copy does not touch is the
  // body's own and is filled on every run.
  for (size_t k = begin[0]; k < begin[1]; ++k) {
    auto kernel = dyn_cast<KernelOp>(ops[k]);
    if (!kernel || !kernel.getInputs().empty() ||
        kernel.getOutputs().size() != 1 || hoisted.contains(kernel))
      continue;
    Value buffer = kernel.getOutputs().front();
    auto alloc = buffer.getDefiningOp<memref::AllocOp>();
    if (!alloc || hoisted.contains(alloc) ||
        llvm::any_of(buffer.getUsers(), [&](Operation *user) {
          auto it = position.find(user);
          return user != kernel.getOperation() &&
                 (it == position.end() || it->second < k);
        }) ||
        llvm::none_of(buffer.getUsers(),
                      [&](Operation *user) { return inSecond(user); }))
      continue;
    hoisted.insert(alloc);
    hoisted.insert(kernel);
    moving.push_back(alloc);
    moving.push_back(kernel);
  }
  Operation *top = ops[begin[0]];
  for (Operation *op : moving)
    op->moveBefore(top);
  return !moving.empty();
}

LogicalResult Reroll::findBlocks() {
  Block &body = function.getBody().front();
  for (Operation &op : body) {
    position[&op] = ops.size();
    ops.push_back(&op);
  }
  // Without a pipeline the body, its copy and the tail are the last three
  // compiled micro-batches (0, 1 and 2, the tail being the step's k-1: the
  // split); a pipeline stage names its own.
  SmallVector<std::string, 3> anchors;
  for (int offset : {2, 1, 0})
    anchors.push_back("rows " + std::to_string(layout.split - offset));
  if (auto named = function->getAttrOfType<ArrayAttr>(
          "dist.microbatch_loop_anchors")) {
    anchors.clear();
    for (Attribute anchor : named)
      anchors.push_back(cast<StringAttr>(anchor).getValue().str());
  } else if (layout.stride != 1) {
    return fail() << "a loop of stride " << layout.stride
                  << " needs dist.microbatch_loop_anchors (--dist-pipeline)";
  }
  const char *what[3] = {"body", "copy", "tail"};
  for (int i = 0; i < 3; ++i) {
    FailureOr<size_t> at = anchorPosition(anchors[i], what[i]);
    if (failed(at))
      return failure();
    begin[i] = *at;
  }
  if (!(begin[0] < begin[1] && begin[1] < begin[2]))
    return fail() << "its loop's body, copy and tail do not start in that "
                     "order (ops #"
                  << begin[0] << ", #" << begin[1] << ", #" << begin[2] << ")";
  // The body may compute once what later micro-batches reuse (CSE kept
  // the first computation): those move above it, then the blocks again.
  if (begin[1] - begin[0] != begin[2] - begin[1] && hoistInvariants()) {
    ops.clear();
    position.clear();
    return findBlocks();
  }
  if (begin[1] - begin[0] != begin[2] - begin[1])
    return fail() << "the body has " << begin[1] - begin[0]
                  << " ops and its copy " << begin[2] - begin[1];
  // What the warm-up and the tail compute alike from the step's arguments
  // while the first result is still read, computed once: a weight's bf16
  // copy, else one per micro-batch in flight, each live through the loop.
  // The body and its copy stay as they are, for the match.
  if (!merged) {
    merged = true;
    if (mergeRepeatedKernels(ops, [&](Operation *op) {
          return !inFirst(op) && !inSecond(op);
        })) {
      ops.clear();
      position.clear();
      return findBlocks();
    }
  }
  return success();
}

LogicalResult Reroll::matchOperand(Operation *first, Value x, Value y) {
  if (inFirst(x)) {
    // A value of micro-batch 1: micro-batch 2 reads its own.
    if (secondOf.lookupOrNull(x) != y)
      return fail() << "micro-batch 2 reads another value than micro-batch "
                       "1's counterpart at "
                    << first->getName() << " (op #" << position.lookup(first)
                    << ")";
    return success();
  }
  if (x == y)
    return success(); // Written before both: the same for every run.
  if (isSameValueBefore(x, y))
    return success(); // Computed twice before the body, alike.
  if (isNextSlice(x, y)) {
    // Rows viewed before the body (a backward reading its forward's):
    // the runtime refills them for each run as the body's own.
    slices.insert(x);
    return success();
  }
  if (inFirst(y)) {
    // Handed on: x was written before the loop, y by micro-batch 1.
    auto [it, inserted] = carried.insert({x, y});
    if (!inserted && it->second != y)
      return fail() << "micro-batch 1 reads one buffer where micro-batch 2 "
                       "reads two";
    return success();
  }
  auto defined = [&](Value value) -> std::string {
    Operation *def = value.getDefiningOp();
    return def ? "op #" + std::to_string(position.lookup(def))
               : std::string("an argument");
  };
  return fail() << "micro-batch 2 reads a value written before micro-batch "
                   "1 that micro-batch 1 does not, at "
                << first->getName() << " (op #" << position.lookup(first)
                << ": micro-batch 1 reads " << defined(x)
                << ", micro-batch 2 " << defined(y) << ")";
}

LogicalResult Reroll::matchOp(Operation *first, Operation *second) {
  auto where = [&] {
    return fail() << "micro-batch 2's op #" << position.lookup(second)
                  << " (" << second->getName() << ") is not micro-batch 1's ("
                  << first->getName() << "): ";
  };
  if (first->getName() != second->getName() ||
      first->getNumOperands() != second->getNumOperands() ||
      first->getNumResults() != second->getNumResults() ||
      first->getNumRegions() != 0 || second->getNumRegions() != 0)
    return where() << "another kind of op";
  if (compiledSlice(first) != -1 || compiledSlice(second) != -1) {
    // The body's and the copy's views of their rows: the same but for the
    // rows, `stride` micro-batches apart.
    if (!isNextSlice(first->getResult(0), second->getResult(0)))
      return where() << "views other rows of the step's inputs";
    slices.insert(first->getResult(0));
    secondOf.map(first->getResult(0), second->getResult(0));
    return success();
  }
  // The loop's runs go by micro-batch 1's labels.
  if (!sameAttributesButLabels(first, second) ||
      first->getResultTypes() != second->getResultTypes())
    return where() << "other attributes or result types";
  for (auto [x, y] : llvm::zip(first->getOperands(), second->getOperands()))
    if (failed(matchOperand(first, x, y)))
      return failure();
  for (auto [x, y] : llvm::zip(first->getResults(), second->getResults()))
    secondOf.map(x, y);
  return success();
}

LogicalResult Reroll::match() {
  for (size_t i = begin[0]; i < begin[1]; ++i)
    if (failed(matchOp(ops[i], ops[i + (begin[1] - begin[0])])))
      return failure();
  // What comes after reads micro-batch 2's values, which become micro-batch
  // 1's (its last run's); never micro-batch 1's own, which a loop cannot
  // keep apart from the runs after it.
  for (size_t i = begin[0]; i < begin[2]; ++i)
    for (Value result : ops[i]->getResults())
      for (Operation *user : result.getUsers()) {
        if (inFirst(user) || inSecond(user))
          continue;
        if (i < begin[1])
          return fail() << "op #" << position.lookup(user) << " ("
                        << user->getName() << ") after the loop reads a "
                        << "value of micro-batch 1 (op #" << i << ")";
        if (!isa<MemRefType>(result.getType()))
          return fail() << "op #" << position.lookup(user) << " ("
                        << user->getName() << ") after the loop waits for "
                        << "what micro-batch 2 started (op #" << i
                        << "): each run must finish what it starts";
      }
  return checkCarried();
}

LogicalResult Reroll::checkCarried() {
  auto accessesOf = [&](Value buffer) {
    SmallVector<size_t> at;
    SmallVector<Value> pending{buffer};
    while (!pending.empty()) {
      Value value = pending.pop_back_val();
      for (Operation *user : value.getUsers()) {
        if (rt::isView(user)) {
          pending.push_back(user->getResult(0));
          continue;
        }
        if (inFirst(user))
          at.push_back(position.lookup(user));
      }
    }
    return at;
  };
  for (auto [x, y] : carried) {
    auto xAlloc = x.getDefiningOp<memref::AllocOp>();
    auto yAlloc = y.getDefiningOp<memref::AllocOp>();
    if (!xAlloc || !yAlloc || x.getType() != y.getType())
      return fail() << "micro-batch 1 hands micro-batch 2 a "
                    << y.getType()
                    << " that is not a whole buffer of the one it read";
    // x's buffer now holds y: the loop's code must be done with x before it
    // writes y, or write y over x element by element.
    SmallVector<size_t> xAt = accessesOf(x), yAt = accessesOf(y);
    if (xAt.empty() || yAt.empty())
      continue;
    size_t lastX = *llvm::max_element(xAt), firstY = *llvm::min_element(yAt);
    if (lastX < firstY ||
        (lastX == firstY && isElementwiseInPlace(ops[lastX]) &&
         ops[lastX]->getOperand(0) == x))
      continue;
    return fail() << "micro-batch 1 writes the " << y.getType()
                  << " it hands on (op #" << firstY
                  << ") before it is done reading the one it was handed (op #"
                  << lastX << ")";
  }
  // What comes after the loop must not read a handed buffer's old value:
  // the loop writes over it.
  for (auto [x, y] : carried) {
    SmallVector<Value> pending{x};
    while (!pending.empty()) {
      Value value = pending.pop_back_val();
      for (Operation *user : value.getUsers()) {
        if (rt::isView(user))
          pending.push_back(user->getResult(0));
        else if (position.lookup(user) >= begin[2])
          return fail() << "op #" << position.lookup(user) << " ("
                        << user->getName() << ") after the loop reads a "
                        << "buffer micro-batch 1 writes over";
      }
    }
  }
  return success();
}

void Reroll::rewrite() {
  // After the loop, micro-batch 2's values are micro-batch 1's (its last
  // run's).
  for (size_t i = begin[1]; i < begin[2]; ++i)
    for (Value result : ops[i]->getResults())
      result.replaceUsesWithIf(
          ops[i - (begin[1] - begin[0])]->getResult(
              cast<OpResult>(result).getResultNumber()),
          [&](OpOperand &use) { return !inSecond(use.getOwner()); });
  for (size_t i = begin[2]; i-- > begin[1];)
    ops[i]->erase();
  // Each handed-on buffer is the one it was handed, written in place.
  for (auto [x, y] : carried) {
    Operation *alloc = y.getDefiningOp();
    y.replaceAllUsesWith(x);
    alloc->erase();
  }
  // The buffers written before the loop that it uses stay live to its end.
  SetVector<Value> live;
  Block &body = function.getBody().front();
  Operation *firstOp = ops[begin[0]];
  Operation *lastOp = ops[begin[1] - 1];
  for (Operation *op = firstOp;; op = op->getNextNode()) {
    for (Value operand : op->getOperands()) {
      if (!isa<MemRefType>(operand.getType()))
        continue;
      Value base = rt::viewedBuffer(operand);
      if (Operation *def = base.getDefiningOp();
          def && isa<memref::AllocOp>(def) && def->getBlock() == &body &&
          def->isBeforeInBlock(firstOp))
        live.insert(base);
    }
    if (op == lastOp)
      break;
  }
  // Refilled in row order: a slice's next rows may be a later slice's
  // (with a pipeline's stride), which must be read before it is refilled.
  SmallVector<Value> refilled = slices.takeVector();
  llvm::stable_sort(refilled, [](Value a, Value b) {
    return a.getDefiningOp<memref::SubViewOp>().getStaticOffsets()[0] <
           b.getDefiningOp<memref::SubViewOp>().getStaticOffsets()[0];
  });
  OpBuilder builder(firstOp);
  auto loopBegin = rt::MicrobatchLoopBeginOp::create(
      builder, firstOp->getLoc(), layout.runs, layout.stride, refilled);
  // The views of the body's rows come first: the loop's begin names them,
  // and views are not instructions.
  for (Value slice : refilled)
    if (slice.getDefiningOp()->getBlock() == &body &&
        loopBegin->isBeforeInBlock(slice.getDefiningOp()))
      slice.getDefiningOp()->moveBefore(loopBegin);
  builder.setInsertionPointAfter(lastOp);
  rt::MicrobatchLoopEndOp::create(builder, lastOp->getLoc(),
                                  live.getArrayRef());
}

LogicalResult Reroll::run() {
  if (layout.stride < 1 || layout.runs < 2 || layout.split < 1 ||
      layout.split > layout.compiled ||
      layout.compiled > layout.microbatches ||
      layout.microbatches !=
          layout.compiled + (layout.runs - 2) * layout.stride)
    return fail() << "its step records a loop of " << layout.runs
                  << " runs of " << layout.stride << " micro-batches with "
                  << layout.compiled << " of " << layout.microbatches
                  << " compiled (tail from " << layout.split
                  << "), which is not one (--xfmr-train-step builds the "
                     "step and records its loop)";
  fillBlocksOfFills(function.getBody().front());
  if (failed(findBlocks()) || failed(match()))
    return failure();
  rewrite();
  return success();
}

struct MicrobatchLoopPass
    : impl::MicrobatchLoopPassBase<MicrobatchLoopPass> {
  void runOnOperation() override {
    SmallVector<std::pair<func::FuncOp, pipeline::LoopLayout>> loops;
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (std::optional<pipeline::LoopLayout> layout = recordedLoop(function);
          layout && !function.isExternal())
        loops.emplace_back(function, std::move(*layout));
    // Each function on its own (a pipeline's stages and their evaluation
    // steps), on the context's threads; diagnostics as from a loop.
    if (failed(failableParallelForEachInOrder(
            &getContext(), loops.size(), [&](size_t index) {
              return Reroll(loops[index].first, loops[index].second).run();
            })))
      signalPassFailure();
  }
};

} // namespace
} // namespace partition
