//===- RtEffects.cpp - what an op of the lowered step reads and writes ---===//

#include "lowering/RtEffects.h"

#include "dialects/Rt/RtOps.h"
#include "dialects/Rt/RtViews.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace partition::rteffects {

Value baseBuffer(Value value) { return rt::viewedBuffer(value); }

bool touches(Operation *op, const llvm::SmallPtrSetImpl<Value> &bases) {
  for (Value operand : op->getOperands())
    if (isa<MemRefType>(operand.getType()) &&
        bases.contains(baseBuffer(operand)))
      return true;
  for (Value result : op->getResults())
    if (isa<MemRefType>(result.getType()) && bases.contains(baseBuffer(result)))
      return true;
  return false;
}

bool movableAcross(Operation *op) {
  return isa<rt::KernelOp, rt::AllReduceOp, rt::AllGatherOp, rt::RingShiftOp,
             rt::AllToAllOp,
             rt::ReduceScatterOp, rt::WaitOp, rt::SendOp, rt::RecvOp,
             memref::AllocOp, memref::SubViewOp, memref::CollapseShapeOp,
             arith::ConstantOp>(op);
}

llvm::SmallPtrSet<Value, 8> writtenBases(Operation *op) {
  llvm::SmallPtrSet<Value, 8> bases;
  if (auto kernel = dyn_cast<rt::KernelOp>(op)) {
    for (Value output : kernel.getOutputs())
      bases.insert(baseBuffer(output));
    return bases;
  }
  for (Value operand : op->getOperands())
    if (isa<MemRefType>(operand.getType()))
      bases.insert(baseBuffer(operand));
  return bases;
}

bool conflicts(Operation *a, Operation *b) {
  llvm::SmallPtrSet<Value, 8> writesA = writtenBases(a),
                              writesB = writtenBases(b);
  return touches(b, writesA) || touches(a, writesB);
}

bool writesAny(Operation *op, const llvm::SmallPtrSetImpl<Value> &bases) {
  if (rt::isView(op))
    return false;
  return llvm::any_of(writtenBases(op),
                      [&](Value base) { return bases.contains(base); });
}

bool overwritesWhole(Operation *op, unsigned index) {
  Value operand = op->getOperand(index);
  if (baseBuffer(operand) != operand)
    return false;
  if (auto kernel = dyn_cast<rt::KernelOp>(op))
    return index >= kernel.getInputs().size() &&
           llvm::none_of(kernel.getInputs(), [&](Value input) {
             return baseBuffer(input) == operand;
           });
  return isa<rt::RecvOp>(op);
}

} // namespace partition::rteffects
