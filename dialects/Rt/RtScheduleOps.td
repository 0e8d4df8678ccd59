//===- RtScheduleOps.td - code the runtime repeats ---------*- tablegen -*-===//
//
// Included by RtOps.td: the ops that tell the runtime to run a function's
// code other than once in order. The micro-batch loop repeats a step's
// steady state `count` times; the action walk runs a pipeline stage's
// schedule as data, one region of code per kind of action.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RT_SCHEDULE_OPS
#define PARTITION_RT_SCHEDULE_OPS

//===----------------------------------------------------------------------===//
// The micro-batch loop
//===----------------------------------------------------------------------===//

def Rt_MicrobatchLoopBeginOp : Op<Rt_Dialect, "microbatch_loop_begin"> {
  let summary = "starts the code that runs once per middle micro-batch";
  let description = [{
    The ops from here to the block's `rt.microbatch_loop_end` are one
    period of the step's steady state: without a pipeline one micro-batch's
    forward and backward pass (micro-batch 1's, as `--rt-microbatch-loop`
    keeps it), with one a stage's `stride` micro-batches' forwards and
    backwards in its schedule's order. The runtime runs them `count` times
    in a row. `slices` are the rows of the step's inputs (tokens, targets)
    the period reads: before run i > 0 the runtime copies into each slice,
    in order, the bytes i x `stride` times its size past it (the rows of
    the micro-batch i x `stride` later), so that the code reads each
    micro-batch in turn. Between the two ops nothing else changes from run
    to run: what a run reads of an earlier one (the accumulated gradients,
    the running loss, the activations of a micro-batch still in flight) it
    reads where the earlier run wrote it.

    Example:
    ```mlir
    rt.microbatch_loop_begin count = 6 slices(%tokens1, %targets1
        : memref<4x64xi32, strided<[64, 1], offset: 256>>,
          memref<4x64xi32, strided<[64, 1], offset: 256>>)
    rt.kernel "embedding" ins(%tokens1, %wte : ...) outs(%x : ...)
    ...
    rt.microbatch_loop_end live(%grad_wte, %loss : memref<256x64xf32>,
                                memref<f32>)
    ```

    With a pipeline (stage 1 of 2, 1F1B, a period of 2 micro-batches):
    ```mlir
    rt.microbatch_loop_begin count = 5 stride = 2 slices(%targets2, %targets3
        : ...)
    ```

    Constraints:
    - `count` and `stride` are at least 1;
    - the block holds no other `rt.microbatch_loop_begin`, and an
      `rt.microbatch_loop_end` follows it.
  }];
  let arguments = (ins
    ConfinedAttr<I64Attr, [IntMinValue<1>]>:$count,
    DefaultValuedAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>, "1">:$stride,
    Arg<Variadic<AnyMemRef>, "the period's input rows", [MemWrite]>:
        $slices);
  let assemblyFormat = [{
    `count` `=` $count (`stride` `=` $stride^)?
    (`slices` `(` $slices^ `:` type($slices) `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

def Rt_MicrobatchLoopEndOp : Op<Rt_Dialect, "microbatch_loop_end"> {
  let summary = "ends the code that runs once per middle micro-batch";
  let description = [{
    Closes the block's `rt.microbatch_loop_begin`. `live` are the buffers
    the loop's code uses that were written before it (the accumulated
    gradients, the running loss, parameters' copies): the next run reads
    them again, so they stay live to here, and the memory plan places no
    buffer of the loop over them.

    Example:
    ```mlir
    rt.microbatch_loop_end live(%grad : memref<64xf32>)
    ```

    Constraints: an `rt.microbatch_loop_begin` comes before it in its block,
    with no other `rt.microbatch_loop_end` between them.
  }];
  let arguments = (ins
    Arg<Variadic<AnyMemRef>, "the buffers the next run reads again",
        [MemRead]>:$live);
  let assemblyFormat = [{
    (`live` `(` $live^ `:` type($live) `)`)? attr-dict
  }];
  let hasVerifier = 1;
}


//===----------------------------------------------------------------------===//
// The action walk
//===----------------------------------------------------------------------===//

def Rt_ActionWalkBeginOp : Op<Rt_Dialect, "action_walk_begin",
                              [AttrSizedOperandSegments]> {
  let summary = "starts a pipeline stage's schedule run as data";
  let description = [{
    The ops from here to the block's `rt.action_walk_end` are regions, each
    begun by an `rt.action_region`: the code of one kind of action (a
    chunk's forward, input gradient or weight gradient of one micro-batch),
    kept once. The runtime runs no region in place: it runs `actions`, a
    flat list of (region, slot, micro-batch) triples, in order, each its
    region's code with its slot's buffers (docs/compiler.md, "The schedule
    as data").

    A slot is one micro-batch's activations in flight: slot 0 is the
    regions' own buffers, slot s > 0 puts `copies` for `templates` (the
    s-th group of `slot_sizes` of each). Before an action, the runtime
    copies into each of its region's `rows` (`region_rows` of them per
    region, in order) the rows of the action's micro-batch of the step
    input `rows_sources` names at the same index.

    A walk that holds every micro-batch at once (GPipe) would need a copy
    of each buffer per micro-batch: instead, `slot_repeats` = R makes its
    last slot stand for R + 1, the j-th after it holding each copy
    `slot_strides` bytes times j past that copy. The memory plan reserves
    those bytes (each copy then takes R + 1 times its size, aligned) and
    sets the strides, so the program's size stays that of two slots.

    Example (two regions, two micro-batches in flight, 1F1B over 4):
    ```mlir
    rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 2,
                                    1, 1, 1, 0, 1, 3, 1, 0, 2, 1, 1, 3]
        slot_sizes = [1] region_rows = [1, 0]
        slots(%act : memref<2x3xf32>) copies(%act1 : memref<2x3xf32>)
        rows(%rows : memref<2xi32>) sources(%tokens : memref<4x2xi32>)
    rt.action_region "F chunk 0"
    rt.kernel "embedding" ins(%rows, %table : ...) outs(%act : ...)
    rt.action_region "B chunk 0"
    rt.kernel "add" ins(%sum, %act : ...) outs(%sum : ...)
    rt.action_walk_end live(%act, %act1, %sum : ...)
    ```

    Constraints:
    - `actions` holds triples, each naming one of the walk's regions and
      slots (`slot_sizes` has one entry per slot after slot 0, and
      `slot_repeats` more follow the last);
    - `slot_repeats` needs a slot after slot 0 to repeat, and
      `slot_strides`, when set, one positive stride per copy of that slot;
    - `templates` and `copies` pair buffers of one type, `rows` and
      `rows_sources` step inputs' rows of one element type;
    - the block's only walk and no micro-batch loop; the next op is its
      first `rt.action_region`, and an `rt.action_walk_end` follows.
  }];
  let arguments = (ins
    DenseI32ArrayAttr:$actions,
    DenseI32ArrayAttr:$slot_sizes,
    DenseI32ArrayAttr:$region_rows,
    DefaultValuedAttr<I32Attr, "0">:$slot_repeats,
    OptionalAttr<DenseI64ArrayAttr>:$slot_strides,
    Arg<Variadic<AnyMemRef>, "slot 0's buffers", [MemRead]>:$templates,
    Arg<Variadic<AnyMemRef>, "other slots' buffers", [MemWrite]>:$copies,
    Arg<Variadic<AnyMemRef>, "where actions' rows go", [MemWrite]>:$rows,
    Arg<Variadic<AnyMemRef>, "the inputs rows come from", [MemRead]>:
        $rows_sources);
  let assemblyFormat = [{
    `actions` `=` $actions `slot_sizes` `=` $slot_sizes
    `region_rows` `=` $region_rows
    (`slot_repeats` `=` $slot_repeats^)?
    (`slot_strides` `=` $slot_strides^)?
    (`slots` `(` $templates^ `:` type($templates) `)`)?
    (`copies` `(` $copies^ `:` type($copies) `)`)?
    (`rows` `(` $rows^ `:` type($rows) `)`)?
    (`sources` `(` $rows_sources^ `:` type($rows_sources) `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

def Rt_ActionRegionOp : Op<Rt_Dialect, "action_region"> {
  let summary = "starts one kind of action's code in an action walk";
  let description = [{
    The ops from here to the next `rt.action_region` or the walk's end are
    one region of the enclosing `rt.action_walk_begin` (the n-th marker is
    region n). `name` names it in traces ("F chunk 0, micro-batch 5").

    Example:
    ```mlir
    rt.action_region "B chunk 1"
    ```

    Constraints: between an `rt.action_walk_begin` and its end.
  }];
  let arguments = (ins StrAttr:$name);
  let assemblyFormat = "$name attr-dict";
  let hasVerifier = 1;
}

def Rt_ActionWalkEndOp : Op<Rt_Dialect, "action_walk_end"> {
  let summary = "ends a pipeline stage's schedule run as data";
  let description = [{
    Closes the block's `rt.action_walk_begin`. `live` are the buffers the
    regions use that the walk keeps across actions (every slot's buffers,
    the accumulated gradients, parameters' copies): the memory plan keeps
    them to here and places no region's buffer over them.

    Example:
    ```mlir
    rt.action_walk_end live(%act, %act1, %sum : memref<2x3xf32>,
                            memref<2x3xf32>, memref<2x3xf32>)
    ```

    Constraints: an `rt.action_walk_begin` comes before it in its block,
    with no other `rt.action_walk_end` between them.
  }];
  let arguments = (ins
    Arg<Variadic<AnyMemRef>, "the buffers the walk keeps across actions",
        [MemRead]>:$live);
  let assemblyFormat = [{
    (`live` `(` $live^ `:` type($live) `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

def Rt_ActionMarkOp : Op<Rt_Dialect, "action_mark"> {
  let summary = "marks where a pipeline action's code starts";
  let description = [{
    In a pipeline stage's step before its walk is formed: the ops from here
    to the next mark are one action of the stage's schedule, `phase` ("F",
    "B" or "W") of micro-batch `microbatch` on model chunk `model_chunk`;
    the ops after an "update" mark (`model_chunk` and `microbatch` 0) are
    those after every action: the gradients' last collectives and the
    optimizer. `--dist-pipeline=mark-actions=true` places them before each
    action's first op (its receives included), `--lower-to-rt` keeps them,
    and the pass that forms the walk reads and removes them: where an
    action starts cannot be read off the code alone (the last stage's
    backward follows its forward with no receive between).

    Example:
    ```mlir
    rt.action_mark "B" model_chunk = 1 microbatch = 3
    ```

    Constraints: `phase` is F, B, W or update; the numbers are not
    negative (0 for update).
  }];
  let arguments = (ins
    StrAttr:$phase,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$model_chunk,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$microbatch);
  let assemblyFormat = [{
    $phase `model_chunk` `=` $model_chunk `microbatch` `=` $microbatch
    attr-dict
  }];
  let hasVerifier = 1;
}

#endif // PARTITION_RT_SCHEDULE_OPS
