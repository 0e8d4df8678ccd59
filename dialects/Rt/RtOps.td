//===- RtOps.td - what the runtime executes ----------------*- tablegen -*-===//
//
// The runtime level: buffers are memrefs (views of one arena once the memory
// plan has run) and every computation is an `rt.kernel`, a call of one entry
// of the runtime's kernel table (runtime/Kernels.def).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RT_OPS
#define PARTITION_RT_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Rt_Dialect : Dialect {
  let name = "rt";
  let summary = "Runtime level: kernel calls on arena buffers";
  let description = [{
    The last IR level before a `.ptp` program. A training step is a function
    over memrefs whose ops are kernel calls; after `--lower-memory-plan`
    every buffer is a `memref.view` of one arena at a fixed offset.
  }];
  let cppNamespace = "::partition::rt";
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
  let extraClassDeclaration = [{
    /// On a buffer (a function argument or a memref.view): what it holds,
    /// one of param, moment1, moment2, step, lr, tokens, targets, loss,
    /// gradient.
    static constexpr ::llvm::StringLiteral kRoleAttrName = "rt.role";
    /// On a state buffer: the parameter it belongs to.
    static constexpr ::llvm::StringLiteral kNameAttrName = "rt.name";
    /// On a planned function: the arena's size in bytes.
    static constexpr ::llvm::StringLiteral kArenaBytesAttrName = "rt.arena_bytes";
  }];
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

def Rt_KernelOp : Op<Rt_Dialect, "kernel", [AttrSizedOperandSegments]> {
  let summary = "calls one kernel of the runtime";
  let description = [{
    Reads `inputs` and writes `outputs` with the kernel named `kernel` (an
    entry of runtime/Kernels.def), passing it the integer and float
    parameters `ints` and `floats`. An output may be one of the inputs only
    for kernels that run in place (the table's inPlace column: add, scale,
    adamw, add_i32, embedding_grad_add).

    Example:
    ```mlir
    rt.kernel "layernorm" ins(%x, %g, %b : memref<4x64x64xf32>, memref<64xf32>, memref<64xf32>)
        outs(%y : memref<4x64x64xf32>) floats = array<f32: 1.0e-05>
    ```

    Constraints:
    - `kernel` names an entry of the kernel table;
    - the numbers of inputs, outputs, ints and floats are the entry's;
    - every operand has a static shape and a contiguous row-major layout;
    - an output is not an input, except for kernels that run in place;
    - no two outputs are the same buffer.
  }];
  let arguments = (ins StrAttr:$kernel,
                       Variadic<AnyMemRef>:$inputs,
                       Variadic<AnyMemRef>:$outputs,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$ints,
                       DefaultValuedAttr<DenseF32ArrayAttr, "{}">:$floats);
  let assemblyFormat = [{
    $kernel (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)`
    (`ints` `=` $ints^)? (`floats` `=` $floats^)? attr-dict
  }];
  let hasVerifier = 1;
}

#endif // PARTITION_RT_OPS
