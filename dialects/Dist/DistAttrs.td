//===- DistAttrs.td - attributes of the dist dialect -------*- tablegen -*-===//
//
// The reduction kinds of the collectives and the sharding attribute, which
// says how a tensor value is laid out over a device mesh.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_DIST_ATTRS
#define PARTITION_DIST_ATTRS

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Reduction kinds
//===----------------------------------------------------------------------===//

def Dist_ReduceKind : I32EnumAttr<"ReduceKind",
    "how the values of a group of devices are combined", [
  I32EnumAttrCase<"Sum", 0, "sum">,
  I32EnumAttrCase<"Avg", 1, "avg">,
  I32EnumAttrCase<"Max", 2, "max">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::partition::dist";
}

// Written `#dist.reduce<sum>` in the generic form and as the bare keyword
// (`reduce = sum`) in the custom form of the ops.
def Dist_ReduceKindAttr : EnumAttr<Dist_Dialect, Dist_ReduceKind, "reduce"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Sharding
//===----------------------------------------------------------------------===//

def Dist_ShardingAttr : AttrDef<Dist_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "how a tensor is split over the axes of a mesh";
  let description = [{
    Names a mesh (or sub-mesh) and, for every dimension of the tensor it
    describes, the list of mesh axes that dimension is split over, major axis
    first: with `[[dp, tp]]` device (dp = i, tp = j) holds block
    `i * size(tp) + j` of dimension 0. Axes of the mesh that no dimension
    uses replicate the value. `partial` lists the axes over which the value
    is a pending partial sum: the logical value is the sum, over the devices
    of each such group, of the local values.

    Example:
    ```mlir
    func.func @f(%x: tensor<8x16x64xf32> {dist.sharding = #dist.sharding<@m, [[dp], [], [tp]]>})
    %y = xfmr.linear ... {dist.sharding = #dist.sharding<@m, [[dp], [], []], partial = [tp]>}
    ```

    Constraints (the attribute's own verifier):
    - every axis is used at most once, across the dimensions and `partial`.

    Constraints (`verifyShardingFor`, given the tensor type and the op that
    uses the attribute):
    - the mesh symbol names a `dist.mesh` or `dist.submesh`;
    - there is one axis list per dimension of the tensor;
    - every axis is an axis of the mesh;
    - every sharded dimension is divisible by the product of the sizes of
      its axes.

    On an op, the discardable attribute `dist.sharding` holds one sharding
    per result (a bare sharding when the op has one result); on a function
    argument or result it holds that value's sharding.
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$mesh,
    // One ArrayAttr of StringAttr axis names per tensor dimension.
    "::mlir::ArrayAttr":$dims,
    // StringAttr axis names.
    "::mlir::ArrayAttr":$partial
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The axes dimension `dim` is split over ({} past the listed dims).
    ::llvm::SmallVector<::llvm::StringRef> getDimAxes(unsigned dim) const;
    /// The axes the value is a partial sum over.
    ::llvm::SmallVector<::llvm::StringRef> getPartialAxes() const;
    /// Builds the attribute from axis names.
    static ShardingAttr get(::mlir::MLIRContext *context,
                            ::llvm::StringRef mesh,
                            ::llvm::ArrayRef<::llvm::SmallVector<::llvm::StringRef>> dims,
                            ::llvm::ArrayRef<::llvm::StringRef> partial = {});
  }];
}

#endif // PARTITION_DIST_ATTRS
