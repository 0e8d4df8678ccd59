//===- XfmrInterfaces.td - interfaces of the xfmr dialect --*- tablegen -*-===//
//
// Four interfaces let passes treat xfmr ops generically:
//  * AutodiffOpInterface: each op builds its own backward, so reverse-mode
//    autodiff never walks a hard-coded model.
//  * MatmulFlopsOpInterface: each op reports the matmul FLOPs it performs,
//    so statistics and the cost model never switch on op names.
//  * ShardingRuleOpInterface: each op states how it splits over its
//    iteration space, so the partitioning passes never switch on op names.
//  * RuntimeKernelOpInterface: each op names the runtime kernel it lowers
//    to, so lower-to-rt never switches on op classes.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_XFMR_INTERFACES
#define PARTITION_XFMR_INTERFACES

include "mlir/IR/OpBase.td"

def AutodiffOpInterface : OpInterface<"AutodiffOpInterface"> {
  let description = [{
    An op that can build its vector-Jacobian product. Given the gradients of
    its results (a null Value stands for a zero gradient), the op emits the
    backward ops at the builder's insertion point and returns one gradient per
    operand: a null Value for operands that are not differentiable or whose
    gradient was not requested.
  }];
  let cppNamespace = "::partition::xfmr";

  let methods = [
    InterfaceMethod<[{
        Emits the backward of this op. `resultGrads` has one entry per result;
        `needOperandGrad` has one entry per operand and is false where no
        gradient is wanted (so no dead backward ops are built). Fails with a
        diagnostic when the backward cannot be formed.
      }],
      "::llvm::FailureOr<::llvm::SmallVector<::mlir::Value>>", "buildBackward",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::ArrayRef<bool>":$needOperandGrad)>
  ];
}

def MatmulFlopsOpInterface : OpInterface<"MatmulFlopsOpInterface"> {
  let description = [{
    Reports the floating-point operations the op spends in matrix products,
    counting a product of an MxK and a KxN matrix as 2*M*N*K (the convention
    of the Megatron-LM and PaLM papers). Attention is counted at full TxT
    even when causal. Elementwise and normalisation work is not counted.
  }];
  let cppNamespace = "::partition::xfmr";

  let methods = [
    InterfaceMethod<"Returns the matmul FLOPs of one execution of the op, "
      "or nullopt when the count overflows 64 bits.",
      "std::optional<int64_t>", "getMatmulFlops", (ins)>
  ];
}

def ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let description = [{
    An op that can run on shards of its operands: it maps every dimension of
    its operands and results to a factor of its iteration space
    (dialects/Xfmr/ShardingRule.h). The partitioning passes shard factors and
    derive local shapes, partial results and the collectives to insert from
    the rule alone.
  }];
  let cppNamespace = "::partition::xfmr";

  let methods = [
    InterfaceMethod<"Returns the op's sharding rule for its current types.",
      "::partition::xfmr::ShardingRule", "getShardingRule", (ins)>,
    InterfaceMethod<[{
        Makes the op compute its local part, once its operands are local
        values and its results have local types, given how its factors are
        sharded: adjusts attributes that count along a sharded factor (the
        heads of an attention), or rewrites the op (a vocabulary-parallel
        embedding or cross-entropy, with collectives of its own). The
        default keeps the op as it is, which is right for every op whose
        computation is the same on each block.
      }],
      "::mlir::LogicalResult", "partitionLocally",
      (ins "::partition::xfmr::LocalPartition &":$partition), [{}],
      [{ return ::mlir::success(); }]>
  ];
}

def RuntimeKernelOpInterface : OpInterface<"RuntimeKernelOpInterface"> {
  let description = [{
    The runtime kernel an op lowers to (a row of runtime/program/Kernels.def)
    with its integer and float parameters. Operands become the kernel's
    inputs and results its outputs, in order, so the call is all lower-to-rt
    needs to know. The implementations sit in dialects/Xfmr/XfmrKernels.cpp,
    one short method per op.
  }];
  let cppNamespace = "::partition::xfmr";

  let methods = [
    InterfaceMethod<"Returns the op's kernel call, or emits an error and "
      "fails when no kernel computes the op as it is typed.",
      "::mlir::FailureOr<::partition::xfmr::KernelCall>", "getKernelCall",
      (ins)>
  ];
}

#endif // PARTITION_XFMR_INTERFACES
