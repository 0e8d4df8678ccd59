//===- DistOps.td - the distribution dialect ---------------*- tablegen -*-===//
//
// Distribution: named device meshes, the sharding attribute of values,
// collectives over mesh axes and point-to-point transfers.
//
// Every op that names a mesh checks it once the mesh is known
// (SymbolUserOpInterface), so the error names the mesh axes and their sizes.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_DIST_OPS
#define PARTITION_DIST_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let summary = "Distribution: device meshes, shardings and collectives";
  let description = [{
    The distribution level of the partition compiler: a named device mesh
    with named axes (`dist.mesh`), the `#dist.sharding` attribute that says
    how a tensor is split over mesh axes, collectives over mesh axes and
    point-to-point send/recv. Results of collectives are local (per-device)
    tensors. Every op that names a mesh checks its sizes once the mesh is
    known, so errors name the axes and their sizes (`dimension 2 of size 6 is not divisible by 4,
    the size of axes [tp, dp]`).

    Discardable attributes:
    - `dist.sharding`: on an op, the `#dist.sharding` of its result (an
      array, one per result, when it has several); on a function argument
      or result, that value's. A user may annotate a forward argument to
      fix a weight's layout; the rest propagates.
    - `dist.operand_shardings`: on an op, recorded by `--dist-propagate`:
      the layout it consumes each operand in.
    - `dist.local_sharding`: on a function argument or result whose type is
      local (after `--dist-partition`): the value is this device's block of
      a logical tensor split that way (checked against the logical shape);
      the runtime uses it to initialise, save and restore whole tensors.
    - `dist.label`: on a collective, a string naming it in the runtime's
      errors ("gradient bucket 3").
    - `dist.recomputed`: on an op `--dist-recompute` cloned into the
      backward pass.
    - `dist.plan`: on the module, the `#dist.plan` `--dist-apply-plan`
      recorded.

    Example (a module after `--dist-apply-plan` with plan.json
    `{"mesh": {"dp": 2, "tp": 2}}`, abridged; `--dist-seed-layouts` then
    splits the tokens over the data axis):
    ```mlir
    module attributes {dist.plan = #dist.plan<mesh = @mesh,
        axes = [dp = data, pp = pipeline, tp = tensor], ...>} {
      dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
      func.func @train_step(...,
          %tokens: tensor<8x64xi32> {dist.sharding = #dist.sharding<@mesh, [[dp], []]>, xfmr.input = "tokens"}, ...)
    }
    ```
  }];
  let cppNamespace = "::partition::dist";
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    /// On an op: the sharding of its result(s), a #dist.sharding (one
    /// result) or an array of them (one per result); on a function argument
    /// or result: the sharding of that value.
    static constexpr ::llvm::StringLiteral kShardingAttrName = "dist.sharding";
    /// On an op, recorded by --dist-propagate: the layout it consumes each
    /// operand in, an array of #dist.sharding (one per operand).
    static constexpr ::llvm::StringLiteral kOperandShardingsAttrName =
        "dist.operand_shardings";
    /// On a function argument or result whose type is LOCAL (after SPMD
    /// partitioning): the sharding of the logical tensor this value is the
    /// device's block of. The runtime gathers such state to logical tensors.
    static constexpr ::llvm::StringLiteral kLocalShardingAttrName =
        "dist.local_sharding";
    /// On a collective: a string that names it in the runtime's error
    /// messages ("gradient bucket 3").
    static constexpr ::llvm::StringLiteral kLabelAttrName = "dist.label";
    /// On an op --dist-recompute cloned into the backward pass (a unit
    /// attribute): analyses count what it reads as kept for the backward.
    static constexpr ::llvm::StringLiteral kRecomputedAttrName =
        "dist.recomputed";
    /// On the module: the plan (#dist.plan), recorded by --dist-apply-plan.
    static constexpr ::llvm::StringLiteral kPlanAttrName = "dist.plan";
    /// On a state argument or result (ZeRO): the value is one rank's flat
    /// shard of a tensor. A dictionary: `flat`, the #dist.sharding of the
    /// flattened, zero-padded tensor (one dimension, the axes that hold the
    /// shards); `shape`, the tensor's shape before flattening; optional
    /// `block_of`, the #dist.sharding of the logical tensor that `shape`
    /// is the device block of (tensor parallelism).
    static constexpr ::llvm::StringLiteral kFlatShardAttrName =
        "dist.flat_shard";
    /// On a step function after --dist-pipeline: its pipeline stage (i64).
    static constexpr ::llvm::StringLiteral kPipelineStageAttrName =
        "dist.pipeline_stage";
    /// On the module after --dist-pipeline: the split and the schedule, a
    /// dictionary (passes/pipeline/PipelineInfo.h) for the reports.
    static constexpr ::llvm::StringLiteral kPipelineAttrName =
        "dist.pipeline";
  }];
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

include "dialects/Dist/DistAttrs.td"

//===----------------------------------------------------------------------===//
// Meshes
//===----------------------------------------------------------------------===//

def Dist_MeshOp : Op<Dist_Dialect, "mesh", [
    Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "a named device mesh";
  let description = [{
    Declares a mesh of devices with named axes; the number of devices is the
    product of the axis sizes, and a device is identified by its coordinate
    on every axis (the first axis is the major one when devices are
    numbered).

    Example:
    ```mlir
    dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
    ```

    Constraints:
    - at least one axis;
    - every size is positive;
    - axis names are unique.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$axis_sizes);
  let assemblyFormat = [{
    $sym_name `axes` `=` custom<AxisValues>($axis_names, $axis_sizes) attr-dict
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

def Dist_StaticTensor : StaticShapeTensorOf<[AnyType]>;

// A collective over the devices that share all coordinates except those on
// `axes`; the group has the product of the axes' sizes devices. Operands and
// results are local tensors.
class Dist_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, !listconcat(traits, [
        Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  let hasVerifier = 1;
}

def Dist_AllReduceOp : Dist_CollectiveOp<"all_reduce",
    [AllTypesMatch<["inputs", "results"]>]> {
  let summary = "reduces a bucket of tensors over a group of devices";
  let description = [{
    Every device of the group gets the reduction (`sum`, `avg` or `max`) of
    the group's inputs, element by element, for each input. Several inputs
    form one bucket: they are reduced together, as one message, the way
    data-parallel training all-reduces gradients (PyTorch DDP's buckets), so
    that many small tensors do not each pay a collective's latency.
    Example:
    ```mlir
    %y = dist.all_reduce %x on @m axes [tp] reduce = sum : tensor<4x16xf32>
    %gw, %gb = dist.all_reduce %w, %b on @m axes [dp] reduce = avg
        {dist.label = "gradient bucket 0"} : tensor<16x16xf32>, tensor<16xf32>
    ```
    Constraints:
    - the mesh exists, and `axes` are distinct axes of it (at least one);
    - at least one input; result i has the type of input i.
  }];
  let arguments = (ins Variadic<Dist_StaticTensor>:$inputs,
                       FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, Dist_ReduceKindAttr:$reduce);
  let results = (outs Variadic<Dist_StaticTensor>:$results);
  let assemblyFormat = [{
    $inputs `on` $mesh `axes` custom<AxisNames>($axes)
    `reduce` `=` custom<ReduceKind>($reduce) attr-dict `:` type($inputs)
  }];
}

def Dist_AllGatherOp : Dist_CollectiveOp<"all_gather"> {
  let summary = "concatenates the group's tensors along one dimension";
  let description = [{
    Every device gets the concatenation along `dim` of the inputs of the
    group, in the order of the devices in the group (first axis major).

    Example:
    ```mlir
    %y = dist.all_gather %x on @m axes [tp] dim = 1
        : tensor<4x8xf32> -> tensor<4x16xf32>
    ```

    Constraints:
    - the mesh exists, and `axes` are distinct axes of it (at least one);
    - `dim` is a dimension of the input;
    - the result is the input with dimension `dim` multiplied by the
      product of the sizes of `axes`.
  }];
  let arguments = (ins Dist_StaticTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$dim);
  let results = (outs Dist_StaticTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` custom<AxisNames>($axes) `dim` `=` $dim
    attr-dict `:` type($input) `->` type($result)
  }];
}

def Dist_ReduceScatterOp : Dist_CollectiveOp<"reduce_scatter"> {
  let summary = "reduces over a group and leaves each device one block";
  let description = [{
    Reduces the group's inputs and splits the reduction along `dim` into as
    many blocks as the group has devices; device i of the group gets block i.

    Example:
    ```mlir
    %y = dist.reduce_scatter %x on @m axes [tp] dim = 1 reduce = sum
        : tensor<4x16xf32> -> tensor<4x8xf32>
    ```

    Constraints:
    - the mesh exists, and `axes` are distinct axes of it (at least one);
    - `dim` is a dimension of the input, divisible by the product of the
      sizes of `axes`;
    - the result is the input with dimension `dim` divided by that product.
  }];
  let arguments = (ins Dist_StaticTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$dim,
                       Dist_ReduceKindAttr:$reduce);
  let results = (outs Dist_StaticTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` custom<AxisNames>($axes) `dim` `=` $dim
    `reduce` `=` custom<ReduceKind>($reduce)
    attr-dict `:` type($input) `->` type($result)
  }];
}

def Dist_RingShiftOp : Dist_CollectiveOp<"ring_shift",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "passes each device's tensor to the next device of a ring";
  let description = [{
    The devices of the group, in group order (first axis major), form a
    ring: device i sends its input to device i + 1 (the last to the first)
    and its result is the input of device i - 1. Ring attention passes the
    key and value blocks of context parallelism around the ring so, one
    step per device of the group (docs/context-parallel.md).

    Example:
    ```mlir
    %next = dist.ring_shift %k on @m axes [cp] : tensor<2x32x64xf32>
    ```

    Constraints:
    - the mesh exists, and `axes` are distinct axes of it (at least one);
    - the result has the input's type.
  }];
  let arguments = (ins Dist_StaticTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes);
  let results = (outs Dist_StaticTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` custom<AxisNames>($axes) attr-dict `:`
    type($input)
  }];
}

def Dist_AllToAllOp : Dist_CollectiveOp<"all_to_all"> {
  let summary = "moves a split from one dimension to another across a group";
  let description = [{
    Each device cuts its input along `split_dim` into as many blocks as the
    group has devices and sends block j to the group's device j; its result
    is the blocks it receives, concatenated along `concat_dim` in group
    order. What an all_gather along `concat_dim` followed by taking this
    device's block along `split_dim` computes, with 1 / N of the traffic:
    expert parallelism moves tokens from their data-parallel ranks to their
    experts' ranks and back so (docs/moe.md).

    Example:
    ```mlir
    %y = dist.all_to_all %x on @m axes [dp] split_dim = 1 concat_dim = 0
        : tensor<2x4x8x16xf32> -> tensor<4x2x8x16xf32>
    ```

    Constraints:
    - the mesh exists, and `axes` are distinct axes of it (at least one);
    - `split_dim` and `concat_dim` are distinct dimensions of the input;
      `split_dim` is divisible by the product of the sizes of `axes`;
    - the result is the input with `split_dim` divided by that product and
      `concat_dim` multiplied by it.
  }];
  let arguments = (ins Dist_StaticTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$split_dim,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$concat_dim);
  let results = (outs Dist_StaticTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` custom<AxisNames>($axes) `split_dim` `=`
    $split_dim `concat_dim` `=` $concat_dim attr-dict `:` type($input) `->`
    type($result)
  }];
}

def Dist_AxisIndexOp : Op<Dist_Dialect, "axis_index", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "this device's index in the group spanned by mesh axes";
  let description = [{
    The index of this device among the devices that share its coordinates
    on every axis except `axes`, the first listed axis major: on axes
    [dp, tp], index = dp coordinate * size(tp) + tp coordinate. The only
    rank-dependent value of a partitioned program (tensor parallelism uses it
    to pick a device's block of a tensor). No communication.

    Example:
    ```mlir
    %i = dist.axis_index on @m axes [tp] : tensor<i32>
    ```

    Constraints:
    - the mesh exists, and `axes` are distinct axes of it (at least one);
    - the result is `tensor<i32>`.
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let results = (outs 0DTensorOf<[I32]>:$result);
  let assemblyFormat = [{
    `on` $mesh `axes` custom<AxisNames>($axes) attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_AllSliceOp : Op<Dist_Dialect, "all_slice", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "keeps this device's block of a tensor along one dimension";
  let description = [{
    The inverse of `dist.all_gather`, without communication: the input,
    the same on every device of the group, is split along `dim` into as
    many blocks as the group has devices, and each device keeps block i,
    its index in the group (as `dist.axis_index` on the same axes: the first
    listed axis major).

    Example:
    ```mlir
    %y = dist.all_slice %x on @m axes [tp] dim = 0
        : tensor<256x64xf32> -> tensor<128x64xf32>
    ```

    Constraints:
    - the mesh exists, and `axes` are distinct axes of it (at least one);
    - `dim` is a dimension of the input, divisible by the product of the
      sizes of `axes`;
    - the result is the input with dimension `dim` divided by that product.
  }];
  let arguments = (ins Dist_StaticTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$dim);
  let results = (outs Dist_StaticTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` custom<AxisNames>($axes) `dim` `=` $dim
    attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Flat buckets (ZeRO)
//===----------------------------------------------------------------------===//

def Dist_FlatPackOp : Op<Dist_Dialect, "flat_pack", [Pure]> {
  let summary = "lays tensors out as the rows of a padded flat bucket";
  let description = [{
    The bucket layout of sharded optimizer state (ZeRO, Megatron's
    distributed optimizer), for any tensor size: each input of n elements is
    flattened, zero-padded to R * c elements with c = ceil(n / R), and cut
    into R chunks of c; row r of the result is chunk r of every input, in
    order. With R the size of a data-parallel group, a reduce-scatter of the
    result along dimension 0 leaves rank r exactly its chunk of every
    tensor (its shard), and an all-gather of the rows rebuilds the bucket;
    with R = 1 the result is the inputs concatenated (a rank's shards, to
    gather). No communication.

    Example:
    ```mlir
    %b = dist.flat_pack %w, %bias : tensor<3x5xf32>, tensor<5xf32>
        -> tensor<2x11xf32>
    ```

    Constraints:
    - at least one input; every input and the result share one element
      type (f32 or bf16);
    - the result is [R, sum of ceil(n_i / R)] for R >= 1 its first
      dimension.
  }];
  let arguments = (ins Variadic<Dist_StaticTensor>:$inputs);
  let results = (outs 2DTensorOf<[F32, BF16]>:$result);
  let assemblyFormat = [{
    $inputs attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_FlatUnpackOp : Op<Dist_Dialect, "flat_unpack", [Pure]> {
  let summary = "takes tensors back out of a padded flat bucket";
  let description = [{
    The inverse of `dist.flat_pack`: result i, of n_i elements, is read from
    its columns of every row of the bucket [R, C] (chunk r from row r), the
    padding left out. With R = 1 each result is one rank's flat shard of a
    tensor (a 1-D tensor of c_i elements, padding included); with R the
    group size, after an all-gather, each result is the whole tensor again,
    in its own shape.

    Example:
    ```mlir
    %w, %bias = dist.flat_unpack %b : tensor<2x11xf32>
        -> tensor<3x5xf32>, tensor<5xf32>
    ```

    Constraints:
    - at least one result; the bucket and every result share one element
      type;
    - the bucket is [R, sum of ceil(n_i / R)].
  }];
  let arguments = (ins 2DTensorOf<[F32, BF16]>:$input);
  let results = (outs Variadic<Dist_StaticTensor>:$results);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Point to point
//===----------------------------------------------------------------------===//

def Dist_SendOp : Op<Dist_Dialect, "send", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "sends a tensor to another device of the mesh";
  let description = [{
    Sends `input` to the peer device. The peer is given by absolute
    coordinates on some axes of the mesh; on every axis that is not listed
    the peer has the sender's own coordinate. So `[pp = 1]` is "the device
    of pipeline stage 1 with my dp and tp coordinates". The peer must run a
    matching `dist.recv`.

    `label`, when present, names the transfer in traces and in the
    runtime's error messages ("F mb1 activations stage0->1"): a receive
    that times out says which one waited.

    Example:
    ```mlir
    dist.send %x to @m [pp = 1] : tensor<4x16xf32>
    dist.send %x to @m [pp = 1] label "F mb0 stage0->1" : tensor<4x16xf32>
    ```

    Constraints:
    - at least one coordinate; coordinates are non-negative and no axis is
      listed twice;
    - the mesh exists, every listed axis is one of its axes and every
      coordinate is less than that axis' size.
  }];
  let arguments = (ins Dist_StaticTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$peer_axes,
                       DenseI64ArrayAttr:$peer_coords,
                       OptionalAttr<StrAttr>:$label);
  let assemblyFormat = [{
    $input `to` $mesh custom<AxisValues>($peer_axes, $peer_coords)
    (`label` $label^)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Dist_RecvOp : Op<Dist_Dialect, "recv", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "receives a tensor from another device of the mesh";
  let description = [{
    Receives the tensor the peer device sends with a matching `dist.send`.
    The peer is given as for `dist.send`: absolute coordinates on the listed
    axes, the receiver's own coordinates on the others.

    `label` names the transfer, as for `dist.send`.

    Example:
    ```mlir
    %y = dist.recv from @m [pp = 0] : tensor<4x16xf32>
    %z = dist.recv from @m [pp = 0] label "F mb0 stage0->1" : tensor<4x16xf32>
    ```

    Constraints:
    - at least one coordinate; coordinates are non-negative and no axis is
      listed twice;
    - the mesh exists, every listed axis is one of its axes and every
      coordinate is less than that axis' size.
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$peer_axes,
                       DenseI64ArrayAttr:$peer_coords,
                       OptionalAttr<StrAttr>:$label);
  let results = (outs Dist_StaticTensor:$result);
  let assemblyFormat = [{
    `from` $mesh custom<AxisValues>($peer_axes, $peer_coords)
    (`label` $label^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

#endif // PARTITION_DIST_OPS
