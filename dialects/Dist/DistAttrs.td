//===- DistAttrs.td - attributes of the dist dialect -------*- tablegen -*-===//
//
// The reduction kinds of the collectives, the sharding attribute, which
// says how a tensor value is laid out over a device mesh, and the plan.
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
  let description = [{
    The reduction of `dist.all_reduce`, `dist.reduce_scatter` and their `rt`
    counterparts: `sum`, `avg` (the sum divided by the group's size) or
    `max`, element by element.

    Example (the generic form, and the bare keyword of the ops' custom
    form):
    ```mlir
    %y = "dist.all_reduce"(%x) <{axes = ["tp"], mesh = @m, reduce = #dist.reduce<sum>}>
        : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %z = dist.all_reduce %x on @m axes [tp] reduce = sum : tensor<4x16xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Sharding
//===----------------------------------------------------------------------===//

def Dist_ShardingAttr : AttrDef<Dist_Dialect, "Sharding"> {
  let mnemonic = "sharding";
  let summary = "how a tensor is split over the axes of a mesh";
  let description = [{
    Names a mesh and, for every dimension of the tensor it
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
    - the mesh symbol names a `dist.mesh`;
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

//===----------------------------------------------------------------------===//
// The plan
//===----------------------------------------------------------------------===//

def Dist_AxisRole : I32EnumAttr<"AxisRole",
    "what a mesh axis splits", [
  I32EnumAttrCase<"Data", 0, "data">,
  I32EnumAttrCase<"Tensor", 1, "tensor">,
  I32EnumAttrCase<"Pipeline", 2, "pipeline">,
  I32EnumAttrCase<"Context", 3, "context">,
  I32EnumAttrCase<"Expert", 4, "expert">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::partition::dist";
}

def Dist_RecomputePolicy : I32EnumAttr<"RecomputePolicy",
    "which activations the backward pass recomputes", [
  I32EnumAttrCase<"None", 0, "none">,
  I32EnumAttrCase<"Full", 1, "full">,
  I32EnumAttrCase<"Selective", 2, "selective">,
  I32EnumAttrCase<"Budget", 3, "budget">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::partition::dist";
}

def Dist_PlanAxisAttr : AttrDef<Dist_Dialect, "PlanAxis"> {
  let mnemonic = "axis";
  let summary = "a mesh axis and the role the plan gives it";
  let description = [{
    Written `dp = data` inside a `#dist.plan` (`#dist.axis<"dp", data>`
    alone): the mesh axis `dp` splits the batch. The roles are `data`,
    `tensor` and `pipeline`; passes find an axis by its role
    (`getAxis(AxisRole::Tensor)`), never by its name.

    Example:
    ```mlir
    #dist.plan<mesh = @cluster, axes = [replica = data, stage = pipeline, model = tensor], ...>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the axis name">:$name,
    EnumParameter<Dist_AxisRole>:$role
  );
  let assemblyFormat = "`<` $name `,` $role `>`";
}

// `true` / `false`.
def Dist_BoolParameter : AttrParameter<"bool", "true or false"> {
  let parser = "::partition::dist::parseBoolKeyword($_parser)";
  let printer = "$_printer << ($_self ? \"true\" : \"false\")";
}

def Dist_PlanAttr : AttrDef<Dist_Dialect, "Plan"> {
  let mnemonic = "plan";
  let summary = "how a model is distributed: plan.json, typed";
  let description = [{
    The parallelization plan of a training run, as --dist-apply-plan reads
    it from plan.json (passes/plan/Plan.h) and records it on the module
    (`dist.plan`), every field filled in. Passes read it with
    `dist::getPlan(module)` and its accessors; no pass names a mesh axis:
    `getAxis(AxisRole::Tensor)` says which axis of the mesh splits the
    weights.

    Example:
    ```mlir
    module attributes {dist.plan = #dist.plan<mesh = @mesh,
        axes = [dp = data, pp = pipeline, tp = tensor],
        sequence_parallel = false, schedule = "1f1b", microbatches = 2,
        zero_stage = 0, recompute = none, precision = "fp32">} {
      dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
    }
    ```
    `budget_bytes = N` follows `recompute = budget`, and only it;
    `vocab_multiple = N` (plan.json's tensor_parallel.vocab_multiple,
    Megatron-LM's make-vocab-size-divisible-by) is printed unless it is the
    default 128: with a tensor axis of size tp > 1, --dist-pad-vocab pads
    the vocabulary to a multiple of tp x vocab_multiple.

    A plan with a tensor-parallel degree per part of the model
    (plan.json's tensor_parallel.per_layer and .embedding)
    records `layer_tp = array<i64: ...>`, the degree of each layer, and
    `embedding_tp = N`, that of the embedding, final norm and LM head
    (absent: every part uses all the tensor axes). A part of degree d
    splits its weights over the major tensor axes whose sizes multiply to
    d (docs/nonuniform-tp.md):
    ```mlir
    #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline,
        tp = tensor, tp_sub = tensor], ..., layer_tp = array<i64: 4, 2>,
        embedding_tp = 4>
    ```

    A plan with context parallelism (plan.json's mesh.cp > 1) has an axis
    of role `context` over which every activation is split along the
    sequence, and records `context_chunks = N`, the chunks each sequence is
    cut into and reordered for the layout (`xfmr.sequence_positions`): 2 x
    cp with the zigzag load balance (chunk order 0, 2cp-1, 1, 2cp-2, ...:
    rank r holds chunks r and 2 cp - 1 - r), 1 without (rank r holds the
    r-th block), and `context_method`
    (`"all_gather"`, the default, or `"ring"`), how attention reaches the
    other ranks' keys and values (docs/context-parallel.md):
    ```mlir
    #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline,
        cp = context, tp = tensor], ..., context_chunks = 4>
    ```

    A plan with expert parallelism (plan.json's moe.expert_parallel = EP >
    1) has an axis of role `expert`, of EP ranks, after the data axis (of
    dp / EP ranks): the batch is split over both, the experts of every MoE
    layer over the expert axis, each rank holding E / EP of them, and the
    tokens move to their experts and back by all-to-alls; it records
    `expert_parallel = EP` (docs/moe.md).

    Constraints (the attribute's verifier):
    - axis names are unique and non-empty, and each role has one axis at
      most, but tensor, which may span several (the first major: with
      fewer key-value heads than tp, --dist-apply-plan's tp and
      tp_kv_rep);
    - microbatches >= 1; zero_stage is 0, 1, 2 or 3;
    - schedule is gpipe, 1f1b, interleaved-1f1b or zero-bubble; precision is
      fp32 or bf16;
    - budget_bytes > 0 with recompute = budget, absent (0) otherwise;
    - vocab_multiple >= 1;
    - every layer_tp degree >= 1, embedding_tp >= 0;
    - context_chunks >= 0, positive exactly when an axis has the context
      role, and then 1 or twice its size; context_method is all_gather or
      ring;
    - expert_parallel >= 1, above 1 exactly when an axis has the expert
      role.

    Constraints (on the module that carries it): the mesh symbol names a
    `dist.mesh` of the module, and every plan axis is an axis of it.
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$mesh,
    ArrayRefParameter<"PlanAxisAttr", "the mesh axes and their roles">:$axes,
    Dist_BoolParameter:$sequence_parallel,
    StringRefParameter<"the pipeline schedule">:$schedule,
    "int64_t":$microbatches,
    "int64_t":$zero_stage,
    EnumParameter<Dist_RecomputePolicy>:$recompute,
    DefaultValuedParameter<"int64_t", "0",
                           "with recompute = budget: the byte budget">:$budget_bytes,
    StringRefParameter<"fp32 or bf16">:$precision,
    DefaultValuedParameter<"int64_t", "128",
        "the granule the vocabulary is padded to, times tp">:$vocab_multiple,
    OptionalParameter<"::mlir::DenseI64ArrayAttr",
        "the tensor-parallel degree of each layer">:$layer_tp,
    DefaultValuedParameter<"int64_t", "0",
        "the embedding / LM head's tensor-parallel degree; 0: all tensor "
        "axes">:$embedding_tp,
    DefaultValuedParameter<"int64_t", "0",
        "with a context axis: the chunks each sequence is cut into and "
        "reordered (2 x cp zigzag, 1 natural order); 0 without one">:$context_chunks,
    StringRefParameter<"how attention crosses the context axis",
                       "\"all_gather\"">:$context_method,
    DefaultValuedParameter<"int64_t", "1",
        "the ranks the experts of a MoE layer are split over (over the "
        "data axis)">:$expert_parallel
  );
  let assemblyFormat = [{
    `<` `mesh` `=` $mesh `,` `axes` `=` custom<PlanAxes>($axes) `,`
    struct($sequence_parallel, $schedule, $microbatches, $zero_stage,
           $recompute, $budget_bytes, $precision, $vocab_multiple,
           $layer_tp, $embedding_tp, $context_chunks, $context_method,
           $expert_parallel) `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The mesh axis with that role, if the plan has one.
    std::optional<::llvm::StringRef> getAxis(AxisRole role) const;
  }];
}

#endif // PARTITION_DIST_ATTRS
