//===- Passes.td - lowering of a training step to the runtime --*- tablegen -*-===//

#ifndef PARTITION_LOWERING_PASSES
#define PARTITION_LOWERING_PASSES

include "mlir/Pass/PassBase.td"

def LowerToRtPass : Pass<"lower-to-rt", "::mlir::ModuleOp"> {
  let summary = "Bufferize a training step into rt.kernel calls on memrefs";
  let description = [{
    Gives every tensor value of a training step (the function built by
    `--xfmr-train-step`) a buffer and every op a kernel call: tensors become
    memrefs, each xfmr op an `rt.kernel` of the runtime's kernel table that
    writes a fresh `memref.alloc`, token slices `memref.subview`s (views, not
    copies), splat constants `fill` kernels.

    A `dist.all_reduce` becomes one `rt.all_reduce` of the same bucket,
    which the runtime runs in place: on each input's own buffer when nothing
    else reads the input and the buffer is a fresh allocation, else on a
    `copy` of it. Its `dist.label` (default "all_reduce") becomes the label;
    the module's `dist.mesh` stays as it is.

    Results become in-place updates: the new parameters, moments and step are
    written into the buffers of the old ones (directly when the old value is
    dead by then, else through a `copy`), and the loss into a new argument
    with `rt.role = "loss"`. The function returns nothing.

    Input:
    ```mlir
    func.func @train_step(%w: tensor<8x8xf32> {xfmr.param = "w"}, ...)
        -> (tensor<f32> {xfmr.output = "loss"}, tensor<8x8xf32> {xfmr.param = "w"}, ...)
    ```
    Output:
    ```mlir
    func.func @train_step(%w: memref<8x8xf32> {rt.role = "param", rt.name = "w"}, ...,
                          %loss: memref<f32> {rt.role = "loss"}) {
      %0 = memref.alloc() : memref<2x8x8xf32>
      rt.kernel "linear" ins(%x, %w : ...) outs(%0 : memref<2x8x8xf32>)
      ...
      rt.kernel "adamw" ins(%w, %g, %m, %v, %t, %lr : ...) outs(%w, %m, %v : ...) floats = array<f32: ...>
      return
    }
    ```
  }];
  let dependentDialects = ["::partition::rt::RtDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"gatherShardsPerTensor", "gather-shards-per-tensor", "bool",
           /*default=*/"true",
           "ZeRO-3: all-gather each parameter from its shard argument with "
           "a collective of its own (no flat_pack / flat_unpack) where "
           "every tensor of the bucket splits into whole chunks. Off, the "
           "shards are packed into the bucket and gathered as one: "
           "--rt-offload-optimizer parameters=... stages the shards' tier "
           "reads through that pack">
  ];
}

def ActionWalkPass : Pass<"rt-action-walk", "::mlir::ModuleOp"> {
  let summary = "Keep one copy of each kind of a pipeline stage's actions "
                "and walk its schedule as data";
  let description = [{
    On each function whose actions carry `rt.action_mark`
    (`--dist-pipeline=mark-actions=true`, then `--lower-to-rt`): checks,
    micro-batch by micro-batch, that every action of one kind (phase,
    model chunk) is the same code as the previous micro-batch's (its own
    values, the same invariant buffers, the next rows of the inputs, sums
    continued from the previous micro-batch), moves the sums' zero starts
    and what every micro-batch reads alike above the actions, keeps
    micro-batch 1's action of each kind as a region, and brackets the
    regions with `rt.action_walk_begin` / `rt.action_walk_end`: the
    runtime runs the plan's schedule on the stage as (region, slot,
    micro-batch) actions. A value one action makes and another reads is a
    slot buffer, copied once per micro-batch in flight; each view of the
    input rows becomes a buffer filled with the action's micro-batch's
    rows; sums are written in place in their start. docs/action-walk.md.

    Example (stage 1 of 2, 1F1B: its forward, backward and weight
    gradient, in short):
    ```mlir
    rt.action_walk_begin actions = [0, 0, 0, 1, 0, 0, 2, 0, 0, ...]
        slot_sizes = [] region_rows = [1, 1, 0] ...
    rt.action_region "F chunk 1"
    rt.recv %x from @mesh [pp = 0] label = "F mb1 activations stage0->1" ...
    ...
    rt.action_region "B chunk 1"
    ...
    rt.action_walk_end live(...)
    ```

    A step whose actions of one kind differ, or whose code after the
    actions reads a value of one micro-batch, is an error naming the op.
  }];
  let dependentDialects = ["::partition::rt::RtDialect",
                           "::mlir::memref::MemRefDialect"];
}

def MicrobatchLoopPass : Pass<"rt-microbatch-loop", "::mlir::ModuleOp"> {
  let summary = "Keep one copy of the code of a step's middle micro-batches";
  let description = [{
    A step built with `--xfmr-train-step="microbatch-loop=true"` and k > 4
    micro-batches holds the code of micro-batches 0, 1, 2 and k-1, and
    records `microbatch_loop = k-2` in its `xfmr.train_step` (or
    `xfmr.eval_step`). On each such function this pass checks that
    micro-batch 2's code is micro-batch 1's: the same ops with the same
    attributes, reading the same buffers, except micro-batch 1's results
    where micro-batch 1 read those written before it, and its own rows of
    the inputs. It then deletes micro-batch 2's code, makes each buffer
    handed from one micro-batch to the next (the accumulated gradients,
    the running loss) the buffer it replaces, written in place, and
    brackets micro-batch 1's code with `rt.microbatch_loop_begin` (count
    k-2, micro-batch 1's rows of the inputs) and `rt.microbatch_loop_end`
    (the buffers written before the loop that it uses): the runtime runs it
    for micro-batches 1 to k-2. Program size and compile time no longer
    grow with the micro-batches.

    A step whose middle micro-batches differ, whose code after the loop
    reads a value of micro-batch 1 alone, waits for a collective a
    micro-batch started, or hands a buffer on before it is done reading the
    one it was handed is an error naming the op (compile it without the
    loop: `partition-compile --unroll-microbatches`).

    Input (micro-batches 1 and 2 of an 8-micro-batch step, in short):
    ```mlir
    %t1 = memref.subview %tokens[4, 0] [4, 64] [1, 1] : ...
    rt.kernel "embedding" ins(%t1, %wte : ...) outs(%x1 : ...)
    ...
    rt.kernel "add" ins(%g0, %d1 : ...) outs(%g1 : ...)
    %t2 = memref.subview %tokens[8, 0] [4, 64] [1, 1] : ...
    rt.kernel "embedding" ins(%t2, %wte : ...) outs(%x2 : ...)
    ...
    rt.kernel "add" ins(%g1, %d2 : ...) outs(%g2 : ...)
    ```
    Output:
    ```mlir
    %t1 = memref.subview %tokens[4, 0] [4, 64] [1, 1] : ...
    rt.microbatch_loop_begin count = 6 slices(%t1 : ...)
    rt.kernel "embedding" ins(%t1, %wte : ...) outs(%x1 : ...)
    ...
    rt.kernel "add" ins(%g0, %d1 : ...) outs(%g0 : ...)
    rt.microbatch_loop_end live(%g0 : ...)
    ```
  }];
  let dependentDialects = ["::partition::rt::RtDialect",
                           "::mlir::memref::MemRefDialect"];
}

def OverlapCollectivesPass : Pass<"rt-overlap-collectives", "::mlir::ModuleOp"> {
  let summary = "Start data-parallel collectives early and wait for them late";
  let description = [{
    Splits each data-parallel collective (an `rt.all_reduce`,
    `rt.reduce_scatter` or `rt.all_gather` whose axes are exactly the axis
    whose role in `#dist.plan` is data: a gradient bucket's all-reduce,
    ZeRO's reduce-scatter of a bucket and all-gather of the updated
    parameters, ZeRO-3's gathers of a layer's parameters) into a start (the
    same op, `async`, returning a `!rt.token`) and an `rt.wait`, so that the
    runtime moves the bucket in the background while the rank computes:

    - the start moves up to just after the last op that reads, writes or
      defines one of its buffers (for a gradient bucket: the kernel that
      writes its last gradient), never above an earlier start, so that
      collectives start in program order on every rank;
    - the wait goes just before the first later op that reads or writes one
      of its buffers (AdamW of the bucket's first parameter), or at the end
      of the function;
    - at most `max-in-flight` collectives and `max-bytes-in-flight` bytes
      of buffers are in flight at once (0: no bound): a start that would
      exceed them first waits for the oldest ones, just before it.
    - then each wait, with the kernels right after it that read the
      collective's buffers (AdamW of the bucket's parameters), sinks below
      the ops that commute with them (no buffer written by one and touched
      by the other), up to the wait of a later-started collective, a start
      or the end (waits sink last-started first): buckets are then updated
      in the order they complete, the tied embedding's, complete last, is
      updated last, and each of ZeRO's all-gathers of updated parameters
      (with the copies out of its bucket) is waited for after the next
      bucket's AdamW, just before the next all-gather starts (the last at
      the end of the step).

    With `tensor-parallel` (off by default; partition-compile sets it from
    the plan's `overlap.tensor_parallel`), each collective over exactly
    the tensor axis is split the same way where a kernel runs between its
    start and its wait (in the backward of a column-parallel linear, the
    input gradient's sum runs under the weight gradient's GEMM); one read
    right after it stays blocking, and its wait stays where its value is
    first read. `data-parallel=false` leaves the data axis alone.

    Runs after `--lower-to-rt` and before `--lower-memory-plan`, which then
    keeps the buffers of a started collective live (and untouched) until
    its wait. Kernels keep their order, so results are bit-identical.
    Without a plan (or without the axes asked for) the module is left as
    it is.

    Input:
    ```mlir
    rt.kernel "linear_grad_weight" ins(...) outs(%gw : memref<64x64xf32>)
    rt.kernel "gelu_grad" ins(...) outs(%d : memref<4x64x256xf32>)
    rt.all_reduce %gw on @mesh axes [dp] reduce = avg label = "gradient bucket 0" : memref<64x64xf32>
    rt.kernel "adamw" ins(%w, %gw, ...) outs(...)
    ```
    Output:
    ```mlir
    rt.kernel "linear_grad_weight" ins(...) outs(%gw : memref<64x64xf32>)
    %t = rt.all_reduce async %gw on @mesh axes [dp] reduce = avg label = "gradient bucket 0" : memref<64x64xf32>
    rt.kernel "gelu_grad" ins(...) outs(%d : memref<4x64x256xf32>)
    rt.wait %t, %gw : memref<64x64xf32>
    rt.kernel "adamw" ins(%w, %gw, ...) outs(...)
    ```
  }];
  let dependentDialects = ["::partition::rt::RtDialect"];
  let options = [
    Option<"maxInFlight", "max-in-flight", "int64_t", "0",
           "At most this many started collectives at once, a bucket's "
           "per-tensor collectives (the same `bucket`) counting as one "
           "(0: no bound)">,
    Option<"maxBytesInFlight", "max-bytes-in-flight", "int64_t", "0",
           "At most this many bytes of buffers in started collectives at "
           "once (0: no bound)">,
    Option<"dataParallel", "data-parallel", "bool", "true",
           "Start the collectives over the data axis">,
    Option<"tensorParallel", "tensor-parallel", "bool", "false",
           "Start the collectives over the tensor axis that have a kernel "
           "to overlap (a weight gradient's GEMM after the input "
           "gradient's)">,
  ];
}

def FoldSlicedUpdatesPass : Pass<"rt-fold-sliced-updates", "::mlir::ModuleOp"> {
  let summary = "AdamW reads this rank's chunk of a parameter where it lies, not a sliced copy";
  let description = [{
    ZeRO-1 and ZeRO-2 slice each rank's chunk of a parameter (seen flat)
    into a row of the step's own (`slice_block`, `lowering/FlatBuckets.h`)
    for AdamW to read. Where an `adamw` kernel is the only reader of such a
    chunk, and neither the parameter nor the index changes between the
    slice and the update, this pass replaces both by one `adamw_block`
    that reads block `index` of the parameter itself: no copy, and no row
    (the unused views and allocation go too). The same arithmetic on the
    same values: results are bit-identical.

    Chunks of padded buckets (AdamW reads part of a sliced row), a slice
    read by anything else, and a slice and update on either side of the
    micro-batch loop's edge stay as they are.

    Input:
    ```mlir
    %flat = memref.collapse_shape %w [[0, 1]] : memref<4x5xf32> into memref<20xf32>
    %row = memref.alloc() : memref<1x10xf32>
    %slot = memref.subview %row[0, 0] [1, 10] [1, 1] : ...
    rt.kernel "slice_block" ins(%flat, %dp : memref<20xf32>, memref<i32>) outs(%slot : ...) ints = [0, 2]
    rt.kernel "adamw" ins(%slot, %g, %m, %v, %t, %lr : ...) outs(%new, %m, %v : ...) floats = ...
    ```
    Output:
    ```mlir
    %flat = memref.collapse_shape %w [[0, 1]] : memref<4x5xf32> into memref<20xf32>
    rt.kernel "adamw_block" ins(%flat, %dp, %g, %m, %v, %t, %lr : ...) outs(%new, %m, %v : ...) ints = [2] floats = ...
    ```
  }];
  let dependentDialects = ["::partition::rt::RtDialect",
                           "::mlir::memref::MemRefDialect"];
}

def OffloadOptimizerPass : Pass<"rt-offload-optimizer", "::mlir::ModuleOp"> {
  let summary = "Keep AdamW's moments in a host or NVMe tier, staged slice by slice";
  let description = [{
    ZeRO-Offload / ZeRO-Infinity's optimizer-state offload, planned by the
    compiler (plan.json `"offload": {"optimizer": "host" | "nvme", "path":
    DIR, "buffer_bytes": N}`; docs/offload.md). Every moment argument
    (`rt.role` `moment1` / `moment2`) is marked `rt.tier = "<tier>"`: the
    memory plan then lays it out in that tier's own space, not in the
    arena. Each `adamw` kernel that updates tiered moments instead updates
    them through staging buffers of the arena:

    - each update first moves up to just below the last op it depends on
      (the kernel completing its gradient, its bucket's wait, the last read
      of its parameter; the step counter's increment moves up before
      them), crossing only ops that touch none of its buffers, so that its
      transfers run under the rest of the backward pass;
    - the moments (and with them the parameter and gradient, AdamW being
      elementwise) are cut into slices of `buffer-bytes / 12` bytes per
      moment, rounded down to whole 4096-byte I/O blocks (at least one;
      one slice when the tensor fits);
    - each slice's moments are read by an `async` `rt.tier_read` into
      fresh staging buffers, started as many slices ahead as half of
      `buffer-bytes` holds (at least before the previous slice's update;
      the first before the kernel that precedes the first update), and
      waited for just before the slice's `adamw`, which updates the
      staging buffers in place;
    - each slice is written back by an `async` `rt.tier_write` right after
      its update; its wait goes as late as the budget allows: just before
      a later read whose staging would exceed `buffer-bytes` (the oldest
      write-backs first), else at the end of the function.

    Updates keep their arithmetic (a slice of an elementwise update is the
    update of that slice) and cross only kernels they commute with:
    results are bit-identical.
    With `parameters=host|nvme` (ZeRO-Infinity's parameter offload, under
    ZeRO-3) every parameter argument with a `dist.flat_shard` goes to that
    tier as well: each adamw stages its parameter slice with the moments
    (slices of `buffer-bytes / 18` bytes per operand, or `/ 6` when only
    the parameter is tiered), and each `flat_pack` of a shard into its
    all-gather's one-row bucket becomes, per slice, a read into a staging
    buffer and a `flat_pack` of it at the slice's columns; these reads
    are scheduled with the updates' in one program-order sequence under
    the same budget, so they start as far ahead of their pack (and so of
    the all-gather, which ZeRO-3 already prefetches one layer ahead) as
    half of `buffer-bytes` holds. `tier=none` leaves the moments in the
    arena.

    Runs after `--lower-to-rt` (and `--rt-overlap-collectives`), before
    `--lower-memory-plan`. With `tier=nvme` the module gets
    `rt.offload_path = "<path>"`, which the program carries to the
    runtime.

    Input:
    ```mlir
    func.func @train_step(%w: memref<4096xf32> {rt.role = "param", rt.name = "w"},
                          %m: memref<4096xf32> {rt.role = "moment1", rt.name = "w"},
                          %v: memref<4096xf32> {rt.role = "moment2", rt.name = "w"}, ...) {
      ...
      rt.kernel "adamw" ins(%w, %g, %m, %v, %t, %lr : ...) outs(%w, %m, %v : ...) floats = ...
      return
    }
    ```
    Output (`tier=nvme path=/scratch buffer-bytes=24576`: slices of 1024
    elements; the moment2 ops, alike, left out):
    ```mlir
    module attributes {rt.offload_path = "/scratch"} {
      func.func @train_step(..., %m: memref<4096xf32> {rt.name = "w", rt.role = "moment1", rt.tier = "nvme"}, ...) {
        ...
        %m_0 = memref.subview %m[0] [1024] [1] : memref<4096xf32> to memref<1024xf32, strided<[1]>>
        %s_0 = memref.alloc() : memref<1024xf32>
        %r_0 = rt.tier_read async %m_0, %s_0 label = "moment1 w [0, 1024)" : ...
        rt.kernel "embedding_grad" ...     // the last weight gradient: the first read runs under it
        ...                                // slice 1's reads start here
        rt.wait %r_0, %m_0, %s_0 : ...
        rt.kernel "adamw" ins(%w_0, %g_0, %s_0, %v_0, %t, %lr : ...) outs(%w_0, %s_0, %v_0 : ...) floats = ...
        %t_0 = rt.tier_write async %s_0, %m_0 label = "moment1 w [0, 1024)" : ...
        ...                                // slice 1's update; slice 2's reads
        ...                                // slice 3's reads would exceed the buffer: slice 0 first completes
        rt.wait %t_0, %s_0, %m_0 : ...
        ...
        return
      }
    }
    ```
  }];
  let dependentDialects = ["::partition::rt::RtDialect",
                           "::mlir::memref::MemRefDialect"];
  let options = [
    Option<"tier", "tier", "std::string", "\"nvme\"",
           "The moments' tier: host (host memory beside the arena), nvme "
           "(a file per rank under `path`) or none (moments in the arena)">,
    Option<"parameters", "parameters", "std::string", "\"none\"",
           "The tier of ZeRO-3's parameter shards (none, host or nvme): "
           "each flat_pack of a shard for its all-gather and each adamw "
           "update of it staged like the moments">,
    Option<"bufferBytes", "buffer-bytes", "int64_t", "64 << 20",
           "The most bytes of staging buffers in the arena at once (at "
           "least 24576: three 4096-byte slices of both moments)">,
    Option<"path", "path", "std::string", "",
           "tier=nvme: the directory of the offload files (recorded on the "
           "module as rt.offload_path)">,
  ];
}

def MemoryPlanPass : Pass<"lower-memory-plan", "::mlir::ModuleOp"> {
  let summary = "Place every buffer at an offset in one arena, reusing dead space";
  let description = [{
    Computes the live range of every `memref.alloc` in straight-line code
    (from its definition to its last use, views included) and assigns
    offsets greedily, largest buffer first, each at the lowest 64-byte
    aligned offset that overlaps no buffer live at the same time (the
    greedy-by-size planner of TensorFlow Lite's arena). State buffers (the
    function's arguments) are laid out first and live for the whole step.

    The function then takes a single `memref<Nxi8>` arena; every buffer is a
    `memref.view` of it carrying its `rt.role` / `rt.name`, and the function
    carries `rt.arena_bytes = N`. With `report`, prints the bytes of each
    category (parameters, optimizer state, gradients, activations, inputs)
    and the arena's peak: the state once, and the temporaries of the
    function that has the most (the functions never run at the same time);
    then, per function, the bytes each rank sends per step: 2 (N - 1) / N * S
    for a ring all-reduce of S bytes over N ranks:
    `communication: train_step sends 16644 bytes per rank per step (2
    all-reduce buckets, 16644 bytes reduced over dp=2)`.

    The buffers of an `rt.all_reduce` are live at it: it reads and writes
    them in place. The buffers of a started (`async`) collective stay live
    until its `rt.wait`, which names them: nothing else is placed on their
    bytes while the collective runs in the background.

    An action walk's slot buffers (`rt.held` allocations, and the copies
    `rt.action_walk_begin` puts in for them) are live across the whole
    walk in the program's order, but hold a micro-batch's values only from
    its first action touching them to its last: two that no action of the
    walk's list holds together may share bytes, and the report counts the
    most bytes of them held at one action (docs/action-walk.md, "Memory").
    A walk whose last slot repeats (`slot_repeats` = R, GPipe's) gives each
    of that slot's copies R + 1 times its aligned size and sets
    `slot_strides`: the repeats lie one stride apart.

    State marked `rt.tier` (`--rt-offload-optimizer`'s moments) is laid out
    in its tier's own space, not in the arena, each buffer at a whole
    4096-byte block; the function takes one more `memref<Nxi8>` argument
    per tier (`{rt.tier = "nvme"}`), the tiered state being views of it.
    The staging buffers of `rt.tier_read` / `rt.tier_write` are placed at
    whole blocks of the arena (the temporaries then start at one), their
    sizes rounded up to blocks: what O_DIRECT moves. The report adds the
    staging at the peak (`offload_staging`), each tier's state and size,
    and `tiers per rank: arena A, host H, nvme N bytes`.

    Input:
    ```mlir
    func.func @train_step(%w: memref<8x8xf32> {rt.role = "param", rt.name = "w"}, ...) {
      %0 = memref.alloc() : memref<2x8x8xf32>
    ```
    Output:
    ```mlir
    func.func @train_step(%arena: memref<4096xi8>) attributes {rt.arena_bytes = 4096 : i64} {
      %w = memref.view %arena[%c0][] {rt.role = "param", rt.name = "w"} : memref<4096xi8> to memref<8x8xf32>
      %0 = memref.view %arena[%c1024][] : memref<4096xi8> to memref<2x8x8xf32>
    ```
  }];
  let dependentDialects = ["::partition::rt::RtDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"report", "report", "bool", "false",
           "Print the bytes of each buffer category, the arena peak and the "
           "bytes each rank sends per step">,
  ];
}

#endif // PARTITION_LOWERING_PASSES
