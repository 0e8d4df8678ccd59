//===- RtOps.td - what the runtime executes ----------------*- tablegen -*-===//
//
// The runtime level: buffers are memrefs (views of one arena once the memory
// plan has run), every computation is an `rt.kernel`, a call of one entry of
// the runtime's kernel table (runtime/program/Kernels.def), and every communication
// a collective (`rt.all_reduce`, `rt.all_gather`, `rt.reduce_scatter`) over
// the axes of the module's `dist.mesh`, or a transfer between pipeline
// stages (`rt.send`, `rt.recv`).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RT_OPS
#define PARTITION_RT_OPS

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Rt_Dialect : Dialect {
  let name = "rt";
  let summary = "Runtime level: kernel calls and collectives on arena buffers";
  let description = [{
    The last IR level before a `.ptp` program. A training step is a function
    over memrefs whose ops are kernel calls and collectives over the axes of
    the module's `dist.mesh`; after `--lower-memory-plan` every buffer is a
    `memref.view` of one arena at a fixed offset.

    Kernels are named by the runtime's kernel table (`runtime/program/Kernels.def`,
    which the compiler, the program writer, the loader and the backends all
    expand), and `rt.kernel` checks its operand count against it.
    `partition-translate --rt-to-program` writes such a function as a
    `.ptp` program.

    Discardable attributes:
    - `rt.role` (a buffer: a function argument or a `memref.view`): what
      it holds, one of `param`, `moment1`, `moment2`, `step`, `lr`,
      `tokens`, `targets`, `loss`, `gradient`, `axis_index` (an i32
      scalar: this rank's index in the group of the mesh axes `rt.name`
      lists, comma-separated);
    - `rt.name` (a state buffer): the parameter it belongs to;
    - `rt.tier` (a state buffer, or a planned function's tier argument):
      `host` or `nvme`, the buffer lives in that tier of its own, outside
      the arena (`--rt-offload-optimizer`): kernels and collectives never
      touch it, `rt.tier_read` / `rt.tier_write` move it through a staging
      buffer of the arena;
    - `rt.arena_bytes` (a planned function): the arena's size in bytes;
    - `rt.held` (a `memref.alloc` before planning, unit): an action walk's
      slot buffer, holding a micro-batch's values only from its first
      action touching it to its last; the memory plan lets two that no
      action holds together share bytes;
    - `rt.offload_path` (the module): the directory of the NVMe tier's
      files (the plan's `offload.path`).

    Example (a planned step, abridged):
    ```mlir
    func.func @train_step(%arena: memref<4267200xi8>) attributes {rt.arena_bytes = 4267200 : i64, ...} {
      %wte = memref.view %arena[%c0][] {rt.name = "wte", rt.role = "param"}
          : memref<4267200xi8> to memref<256x64xf32>
      ...
      rt.kernel "linear" ins(%x, %wte : memref<4x64x64xf32>, memref<256x64xf32>)
          outs(%logits : memref<4x64x256xf32>)
      ...
    }
    ```
  }];
  let cppNamespace = "::partition::rt";
  // Collectives name a dist.mesh and carry a #dist.reduce kind.
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::partition::dist::DistDialect"];
  let extraClassDeclaration = [{
    /// On a buffer (a function argument or a memref.view): what it holds,
    /// one of param, moment1, moment2, step, lr, tokens, targets, loss,
    /// gradient, axis_index (an i32 scalar: this rank's index in the group
    /// of the mesh axes that rt.name lists, comma-separated).
    static constexpr ::llvm::StringLiteral kRoleAttrName = "rt.role";
    /// On a state buffer: the parameter it belongs to.
    static constexpr ::llvm::StringLiteral kNameAttrName = "rt.name";
    /// On a planned function: the arena's size in bytes.
    static constexpr ::llvm::StringLiteral kArenaBytesAttrName = "rt.arena_bytes";
    /// On a state buffer, or a planned function's tier argument: host or
    /// nvme, the tier it lives in, outside the arena.
    static constexpr ::llvm::StringLiteral kTierAttrName = "rt.tier";
    /// On a memref.alloc: an action walk's slot buffer (a template, a copy,
    /// or one that every slot shares), which holds one micro-batch's values
    /// from that micro-batch's first action touching it to its last and
    /// nothing in between: the memory plan lets two such buffers never
    /// held at one same action share bytes.
    static constexpr ::llvm::StringLiteral kHeldAttrName = "rt.held";
    /// On the module: the NVMe tier's directory (plan.json offload.path).
    static constexpr ::llvm::StringLiteral kOffloadPathAttrName =
        "rt.offload_path";
  }];
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let useDefaultTypePrinterParser = 1;
}

def Rt_TokenType : TypeDef<Rt_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "a started collective or tier transfer, until an rt.wait completes it";
  let description = [{
    The result of a collective or tier transfer marked `async`
    (`rt.all_reduce`, `rt.all_gather`, `rt.reduce_scatter`,
    `rt.ring_shift`, `rt.all_to_all`, `rt.tier_read`, `rt.tier_write`): it
    has started and runs in the background (the CPU runtime's communication
    thread or I/O engine, the CUDA runtime's communication stream) until
    the one `rt.wait` that consumes the token. Its buffers belong to it in
    between.

    Example:
    ```mlir
    %t = rt.all_reduce async %g on @mesh axes [dp] reduce = avg
        label = "gradient bucket 0" : memref<64xf32>
    rt.wait %t, %g : memref<64xf32>
    ```
  }];
}

def Rt_KernelOp : Op<Rt_Dialect, "kernel", [AttrSizedOperandSegments]> {
  let summary = "calls one kernel of the runtime";
  let description = [{
    Reads `inputs` and writes `outputs` with the kernel named `kernel` (an
    entry of runtime/program/Kernels.def), passing it the integer and float
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
                       Arg<Variadic<AnyMemRef>, "what it reads",
                           [MemRead]>:$inputs,
                       Arg<Variadic<AnyMemRef>, "what it writes",
                           [MemWrite]>:$outputs,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$ints,
                       DefaultValuedAttr<DenseF32ArrayAttr, "{}">:$floats);
  let assemblyFormat = [{
    $kernel (`ins` `(` $inputs^ `:` type($inputs) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)`
    (`ints` `=` $ints^)? (`floats` `=` $floats^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The kernel's row of the runtime's table
    /// (runtime/program/Kernels.def); the verifier rejects unknown names.
    const ::partition::runtime::KernelInfo &getInfo();
  }];
}

// The dist dialect's reduction kind, used as is: the reduction a collective
// performs does not change when it is lowered. Declared by its C++ class so
// that this file does not pull in (and generate) the dist ops.
def Rt_ReduceKindAttr : Attr<
    CPred<"::llvm::isa<::partition::dist::ReduceKindAttr>($_self)">,
    "reduction kind (#dist.reduce)"> {
  let storageType = "::partition::dist::ReduceKindAttr";
  let returnType = "::partition::dist::ReduceKind";
  let convertFromStorage = "$_self.getValue()";
  let constBuilderCall =
      "::partition::dist::ReduceKindAttr::get($_builder.getContext(), $0)";
}

def Rt_AllReduceOp : Op<Rt_Dialect, "all_reduce", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reduces a bucket of buffers in place over a group of ranks";
  let description = [{
    Replaces every element of every buffer with its reduction (`sum`, `avg`
    or `max`) over the ranks that share this rank's coordinates on every
    axis of `mesh` except `axes`. The buffers form one bucket: the runtime
    reduces them as one message, so that many small gradients pay one
    collective's latency. `label` names the collective in the runtime's
    error messages (a timeout says which collective hung).

    Every rank of a group must execute the same all-reduces, on buffers of
    the same shapes, in the same order.

    With `async` the all-reduce only starts here and returns a token
    (`!rt.token`): it runs in the background until the `rt.wait` of that
    token, which names the same buffers so that liveness and the memory
    plan keep them until then; no op in between may read or write them
    (`--rt-overlap-collectives` makes such pairs).

    Example:
    ```mlir
    dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
    ...
    rt.all_reduce %gw, %gb on @mesh axes [dp] reduce = avg
        label = "gradient bucket 0" : memref<64x64xf32>, memref<64xf32>
    // started, and completed later:
    %t = rt.all_reduce async %gw, %gb on @mesh axes [dp] reduce = avg
        label = "gradient bucket 0" : memref<64x64xf32>, memref<64xf32>
    rt.kernel "gelu_grad" ins(%a, %b : ...) outs(%c : ...)
    rt.wait %t, %gw, %gb : memref<64x64xf32>, memref<64xf32>
    ```

    Constraints:
    - at least one buffer, and no buffer twice;
    - every buffer is f32 with a static shape and the identity layout (the
      runtime reduces whole arena buffers, not strided views);
    - `label` is not empty;
    - `axes` are distinct (at least one);
    - `mesh` names a `dist.mesh`, and every axis is one of
      its axes;
    - `async`: the token is used once, by an `rt.wait` (checked there: in
      the same block, on the same buffers, none of them touched between).
  }];
  let arguments = (ins
    Arg<Variadic<AnyMemRef>, "the bucket, reduced in place",
        [MemRead, MemWrite]>:$buffers,
    FlatSymbolRefAttr:$mesh,
    StrArrayAttr:$axes,
    Rt_ReduceKindAttr:$reduce,
    StrAttr:$label);
  let results = (outs Optional<Rt_TokenType>:$token);
  let assemblyFormat = [{
    custom<AsyncToken>(type($token)) ``
    $buffers `on` $mesh `axes` custom<AxisNames>($axes)
    `reduce` `=` custom<ReduceKind>($reduce) `label` `=` $label
    attr-dict `:` type($buffers)
  }];
  let hasVerifier = 1;
}

// An out-of-place collective over blocks along `dim`: args are the input
// and the output buffer.
class Rt_BlockCollectiveOp<string mnemonic>
    : Op<Rt_Dialect, mnemonic, [
        DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let hasVerifier = 1;
}

def Rt_AllGatherOp : Rt_BlockCollectiveOp<"all_gather"> {
  let summary = "concatenates the group's buffers along one dimension";
  let description = [{
    Writes into `output` the concatenation along `dim` of the `input`
    buffers of the ranks that share this rank's coordinates on every axis of
    `mesh` except `axes`, in group order: the first listed axis major, as
    `dist.all_gather`. `label` names it in the runtime's error messages.
    Every rank of a group must execute the same collectives in the same
    order.

    Example:
    ```mlir
    rt.all_gather %x, %y on @mesh axes [tp] dim = 1 label = "gather h"
        : memref<4x8xf32>, memref<4x16xf32>
    ```

    Constraints:
    - both buffers are f32 with static shapes and the identity layout, and
      the output is not the input;
    - `dim` is a dimension of the input; `label` is not empty;
    - `axes` are distinct (at least one), axes of `mesh`, listed in the
      mesh's order (the runtime orders a group by mesh coordinates);
    - the output is the input with `dim` multiplied by the product of the
      sizes of `axes`;
    - `async` (a token, as for `rt.all_reduce`): waited for once.

    `bucket` (optional, not empty): the ZeRO bucket this collective moves
    one tensor of (lowering/FlatBuckets.h); `--rt-overlap-collectives`
    counts a bucket's collectives as one against its max-in-flight.
  }];
  let arguments = (ins
    Arg<AnyMemRef, "the local block", [MemRead]>:$input,
    Arg<AnyMemRef, "the gathered buffer", [MemWrite]>:$output,
    FlatSymbolRefAttr:$mesh,
    StrArrayAttr:$axes,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$dim,
    StrAttr:$label,
    OptionalAttr<StrAttr>:$bucket);
  let results = (outs Optional<Rt_TokenType>:$token);
  let assemblyFormat = [{
    custom<AsyncToken>(type($token)) ``
    $input `,` $output `on` $mesh `axes` custom<AxisNames>($axes)
    `dim` `=` $dim `label` `=` $label (`bucket` `=` $bucket^)? attr-dict
    `:` type($input) `,` type($output)
  }];
}

def Rt_AllToAllOp : Rt_BlockCollectiveOp<"all_to_all"> {
  let summary = "moves a split between dimensions across a group";
  let description = [{
    Cuts `input` along `split_dim` into as many blocks as the group (the
    ranks that share this rank's coordinates on every axis of `mesh` except
    `axes`) has ranks, sends block j to the group's rank j, and writes the
    blocks it receives into `output`, concatenated along `concat_dim` in
    group order (the first listed axis major), as `dist.all_to_all`.
    `label` names it in the runtime's error messages.

    Example:
    ```mlir
    rt.all_to_all %x, %y on @mesh axes [dp] split_dim = 1 concat_dim = 0
        label = "dispatch" : memref<2x4x8xf32>, memref<4x2x8xf32>
    ```

    With `counts(%send, %recv) rows_dim = r` only the filled rows move
    (mixture-of-experts buffers, `[B, E, C, H]` with `r = 2`): the buffers'
    dimensions before `r` are cells of `shape[r]` rows each, `%send` (the
    input's cells) and `%recv` (the output's) say how many leading rows of
    each cell hold data; those rows are exchanged and the output's other
    rows are zero. The result is the full exchange's wherever the input's
    rows past the counts are zero, which the MoE ops guarantee.

    Example:
    ```mlir
    rt.all_to_all %x, %y on @mesh axes [ep] split_dim = 1 concat_dim = 0
        label = "dispatch" counts(%c, %d) rows_dim = 2
        : memref<1x4x8x16xf32>, memref<2x2x8x16xf32>,
          memref<1x4xi32>, memref<2x2xi32>
    ```

    Constraints:
    - both buffers are f32, bf16 or i32, of one element type, with static
      shapes and the identity layout, and the output is not the input;
    - `split_dim` and `concat_dim` are distinct dimensions of the input;
      `label` is not empty;
    - `axes` are distinct (at least one), axes of `mesh`, listed in the
      mesh's order;
    - the output is the input with `split_dim` divided and `concat_dim`
      multiplied by the product of the sizes of `axes`;
    - `counts`: two i32 buffers with static shapes and the identity layout,
      the input's and the output's dimensions before `rows_dim`, which
      comes after `split_dim` and `concat_dim` and before the last
      dimension (none without `counts`);
    - `async` (a token, as for `rt.all_reduce`): waited for once.
  }];
  let arguments = (ins
    Arg<AnyMemRef, "the local buffer", [MemRead]>:$input,
    Arg<AnyMemRef, "the received blocks", [MemWrite]>:$output,
    Arg<Variadic<AnyMemRef>, "the filled rows of the input's and the "
        "output's cells", [MemRead]>:$counts,
    FlatSymbolRefAttr:$mesh,
    StrArrayAttr:$axes,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$split_dim,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$concat_dim,
    StrAttr:$label,
    OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$rows_dim);
  let results = (outs Optional<Rt_TokenType>:$token);
  let assemblyFormat = [{
    custom<AsyncToken>(type($token)) ``
    $input `,` $output `on` $mesh `axes` custom<AxisNames>($axes)
    `split_dim` `=` $split_dim `concat_dim` `=` $concat_dim
    `label` `=` $label
    (`counts` `(` $counts^ `)` `rows_dim` `=` $rows_dim)?
    attr-dict `:` type($input) `,` type($output) (`,` type($counts)^)?
  }];
}

def Rt_ReduceScatterOp : Rt_BlockCollectiveOp<"reduce_scatter"> {
  let summary = "reduces over a group and keeps this rank's block";
  let description = [{
    Reduces (`sum`, `avg` or `max`) the `input` buffers of the ranks that
    share this rank's coordinates on every axis of `mesh` except `axes`,
    splits the reduction along `dim` into as many blocks as the group has
    ranks and writes block i, this rank's index in the group (the first
    listed axis major), into `output`, as `dist.reduce_scatter`.

    Example:
    ```mlir
    rt.reduce_scatter %x, %y on @mesh axes [tp] dim = 0 reduce = sum
        label = "scatter h" : memref<8x16xf32>, memref<4x16xf32>
    ```

    Constraints:
    - both buffers are f32 with static shapes and the identity layout, and
      the output is not the input;
    - `dim` is a dimension of the input; `label` is not empty;
    - `axes` are distinct (at least one), axes of `mesh`, listed in the
      mesh's order;
    - `dim` is divisible by the product of the sizes of `axes`, and the
      output is the input with `dim` divided by it;
    - `async` (a token, as for `rt.all_reduce`): waited for once.

    `bucket` (optional, not empty): as for `rt.all_gather`.

    Example, one tensor of a ZeRO bucket:
    ```mlir
    rt.reduce_scatter %g, %c on @mesh axes [dp] dim = 0 reduce = avg
        label = "gradient bucket 0 #1" bucket = "gradient bucket 0"
        : memref<16xf32>, memref<8xf32>
    ```
  }];
  let arguments = (ins
    Arg<AnyMemRef, "the buffer to reduce", [MemRead]>:$input,
    Arg<AnyMemRef, "this rank's block of the reduction", [MemWrite]>:$output,
    FlatSymbolRefAttr:$mesh,
    StrArrayAttr:$axes,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$dim,
    Rt_ReduceKindAttr:$reduce,
    StrAttr:$label,
    OptionalAttr<StrAttr>:$bucket);
  let results = (outs Optional<Rt_TokenType>:$token);
  let assemblyFormat = [{
    custom<AsyncToken>(type($token)) ``
    $input `,` $output `on` $mesh `axes` custom<AxisNames>($axes)
    `dim` `=` $dim `reduce` `=` custom<ReduceKind>($reduce)
    `label` `=` $label (`bucket` `=` $bucket^)? attr-dict
    `:` type($input) `,` type($output)
  }];
}

def Rt_RingShiftOp : Op<Rt_Dialect, "ring_shift", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "sends a buffer to the next rank of a ring";
  let description = [{
    The ranks that share this rank's coordinates on every axis of `mesh`
    except `axes`, in group order (the first listed axis major), form a
    ring: this rank sends `input` to the next one (the last to the first)
    and receives the previous one's into `output`, as `dist.ring_shift`.
    `label` names it in traces and error messages.

    Example:
    ```mlir
    rt.ring_shift %k, %next on @mesh axes [cp] label = "ring k 1"
        : memref<2x32x64xf32>, memref<2x32x64xf32>
    ```

    Constraints:
    - both buffers are f32, bf16 or i32, of one type, with a static shape
      and the identity layout, and the output is not the input;
    - `label` is not empty;
    - `axes` are distinct (at least one), axes of `mesh`, listed in the
      mesh's order;
    - `async` (a token, as for `rt.all_reduce`): waited for once.
  }];
  let arguments = (ins
    Arg<AnyMemRef, "this rank's block", [MemRead]>:$input,
    Arg<AnyMemRef, "the previous rank's block", [MemWrite]>:$output,
    FlatSymbolRefAttr:$mesh,
    StrArrayAttr:$axes,
    StrAttr:$label);
  let results = (outs Optional<Rt_TokenType>:$token);
  let assemblyFormat = [{
    custom<AsyncToken>(type($token)) ``
    $input `,` $output `on` $mesh `axes` custom<AxisNames>($axes)
    `label` `=` $label attr-dict `:` type($input) `,` type($output)
  }];
  let hasVerifier = 1;
}

def Rt_WaitOp : Op<Rt_Dialect, "wait"> {
  let summary = "completes a started collective or tier transfer";
  let description = [{
    Blocks until the collective or tier transfer that returned `token` (an
    `async` `rt.all_reduce`, `rt.all_gather`, `rt.reduce_scatter`,
    `rt.ring_shift`, `rt.all_to_all`, `rt.tier_read` or `rt.tier_write`) is
    done on this rank; from here on its buffers hold its result and may be
    read and written again. `buffers` are the started op's own, in its
    order: the wait reads and writes them, so that liveness, the memory
    plan and any pass that moves ops see the buffers in use until here.

    Example:
    ```mlir
    %t = rt.all_reduce async %g on @mesh axes [dp] reduce = avg
        label = "gradient bucket 0" : memref<64xf32>
    ...
    rt.wait %t, %g : memref<64xf32>
    ```

    Constraints:
    - `token` is the result of an rt collective or tier transfer in the
      same block (so the wait follows its start);
    - `buffers` are its buffers, in order;
    - no op between the start and the wait reads or writes bytes of one
      of them (by value, or through a view of it; views of disjoint parts
      of one buffer, as a tier transfer's slices, do not conflict).
  }];
  let arguments = (ins
    Rt_TokenType:$token,
    Arg<Variadic<AnyMemRef>, "the collective's buffers",
        [MemRead, MemWrite]>:$buffers);
  let assemblyFormat = [{
    $token `,` $buffers attr-dict `:` type($buffers)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tier transfers (offload)
//===----------------------------------------------------------------------===//

// A copy between a buffer of a tier (host or NVMe, rt.tier) and a staging
// buffer of the arena.
class Rt_TierTransferOp<string mnemonic> : Op<Rt_Dialect, mnemonic> {
  let results = (outs Optional<Rt_TokenType>:$token);
  let assemblyFormat = [{
    custom<AsyncToken>(type($token)) ``
    $source `,` $destination `label` `=` $label attr-dict
    `:` type($source) `,` type($destination)
  }];
  let hasVerifier = 1;
}

def Rt_TierReadOp : Rt_TierTransferOp<"tier_read"> {
  let summary = "copies a tier's buffer into a staging buffer of the arena";
  let description = [{
    Reads `source`, a buffer of a tier outside the arena (a state buffer
    marked `rt.tier`, or a slice of one: a view at a static offset), into
    `destination`, a buffer of the arena of the same element type and
    count (`--rt-offload-optimizer` stages AdamW's moments so). `label`
    names the transfer in traces and in the runtime's error messages (an
    I/O error names it and the file). With `async` the read only starts
    here and returns a token (`!rt.token`) that one `rt.wait` completes;
    no op in between may touch its buffers.

    Example:
    ```mlir
    %t = rt.tier_read async %m1, %staging label = "moment1 wte [0, 4096)"
        : memref<4096xf32, strided<[1]>>, memref<4096xf32>
    rt.kernel "gelu_grad" ins(...) outs(...)
    rt.wait %t, %m1, %staging : memref<4096xf32, strided<[1]>>, memref<4096xf32>
    ```

    Constraints:
    - `source` is in a tier (its buffer, through views, is marked
      `rt.tier`), `destination` is not;
    - both have static shapes, contiguous row-major layouts, one element
      type (f32, bf16 or i32) and as many elements;
    - `label` is not empty;
    - `async`: the token is waited for by exactly one `rt.wait`.
  }];
  let arguments = (ins
    Arg<AnyMemRef, "the tier's buffer", [MemRead]>:$source,
    Arg<AnyMemRef, "the staging buffer", [MemWrite]>:$destination,
    StrAttr:$label);
}

def Rt_TierWriteOp : Rt_TierTransferOp<"tier_write"> {
  let summary = "copies a staging buffer of the arena into a tier's buffer";
  let description = [{
    Writes `source`, a buffer of the arena, into `destination`, a buffer
    of a tier (a state buffer marked `rt.tier`, or a slice of one) of the
    same element type and count: the write-back of a staged update. As
    `rt.tier_read` otherwise (`label`, `async`).

    Example:
    ```mlir
    %t = rt.tier_write async %staging, %m1 label = "moment1 wte [0, 4096)"
        : memref<4096xf32>, memref<4096xf32, strided<[1]>>
    ...
    rt.wait %t, %staging, %m1 : memref<4096xf32>, memref<4096xf32, strided<[1]>>
    ```

    Constraints: as for `rt.tier_read`, with the tier on the destination's
    side.
  }];
  let arguments = (ins
    Arg<AnyMemRef, "the staging buffer", [MemRead]>:$source,
    Arg<AnyMemRef, "the tier's buffer", [MemWrite]>:$destination,
    StrAttr:$label);
}

//===----------------------------------------------------------------------===//
// Point to point
//===----------------------------------------------------------------------===//

def Rt_SendOp : Op<Rt_Dialect, "send", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "sends a buffer to the rank of another pipeline stage";
  let description = [{
    Sends the contents of `input` to the peer rank: the one with the
    coordinate given on the one listed axis of `mesh` (the pipeline axis)
    and this rank's own coordinates on every other axis, as `dist.send`.
    The send is eager: it never waits for the receiver, and the buffer may
    be overwritten as soon as the instruction is done (the runtime owns a
    copy or a request it completes before the bytes are reused). The peer
    runs the matching `rt.recv`; sends and receives between one pair of
    ranks match in program order. `label` names the transfer in traces and
    error messages.

    Example:
    ```mlir
    rt.send %x to @mesh [pp = 1] label = "F mb0 stage0->1"
        : memref<2x8x16xf32>
    ```

    Constraints:
    - the buffer is f32, bf16 or i32 with a static shape and the identity
      layout (the runtime sends whole arena buffers);
    - exactly one peer coordinate, non-negative; `label` is not empty;
    - `mesh` names a `dist.mesh`; the axis is one of its
      axes and the coordinate is less than its size.
  }];
  let arguments = (ins
    Arg<AnyMemRef, "the buffer sent", [MemRead]>:$input,
    FlatSymbolRefAttr:$mesh,
    StrArrayAttr:$peer_axes,
    DenseI64ArrayAttr:$peer_coords,
    StrAttr:$label);
  let assemblyFormat = [{
    $input `to` $mesh custom<AxisValues>($peer_axes, $peer_coords)
    `label` `=` $label attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Rt_RecvOp : Op<Rt_Dialect, "recv", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "receives a buffer from the rank of another pipeline stage";
  let description = [{
    Waits until the matching `rt.send` of the peer rank (given as for
    `rt.send`) has arrived and writes it into `output`, which the receive
    defines: nothing before it is read from the buffer. A receive that waits
    longer than the runtime's communication timeout ends the job with one
    line naming the stage, the peer and `label`.

    Example:
    ```mlir
    rt.recv %y from @mesh [pp = 0] label = "F mb0 stage0->1"
        : memref<2x8x16xf32>
    ```

    Constraints: as for `rt.send`.
  }];
  let arguments = (ins
    Arg<AnyMemRef, "the buffer received into", [MemWrite]>:$output,
    FlatSymbolRefAttr:$mesh,
    StrArrayAttr:$peer_axes,
    DenseI64ArrayAttr:$peer_coords,
    StrAttr:$label);
  let assemblyFormat = [{
    $output `from` $mesh custom<AxisValues>($peer_axes, $peer_coords)
    `label` `=` $label attr-dict `:` type($output)
  }];
  let hasVerifier = 1;
}

include "dialects/Rt/RtScheduleOps.td"

#endif // PARTITION_RT_OPS
