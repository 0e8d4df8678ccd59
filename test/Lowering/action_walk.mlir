// RUN: partition-opt %s -split-input-file --rt-action-walk | FileCheck %s

// --rt-action-walk on a marked step that records no walk (too few
// micro-batches to walk: fewer than 3): it keeps every micro-batch's code
// and loses the marks. test/e2e/ranks/action-walk.test forms walks from
// compiled pipelines (1F1B, ZB-H1, interleaved) and trains them.

// CHECK-LABEL: func.func @two_microbatches
// CHECK-NOT:     rt.action_mark
// CHECK:         rt.kernel "gelu"
// CHECK-NEXT:    rt.kernel "gelu"
// CHECK-NEXT:    return
module attributes {dist.pipeline = {schedule = "1f1b", stages = 1 : i64, microbatches = 2 : i64, virtual_stages = 1 : i64}} {
  func.func @two_microbatches(%x: memref<4xf32>, %y: memref<4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatches = 2 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
    return
  }
}

// -----

// A value every micro-batch reads alike is computed once above the walk:
// micro-batch 0 scales %w, the others read its scale, and the last
// micro-batch's own scale of %w becomes the one above. The sum starts at a
// zero (a fill, hoisted too) and is written in place.
// CHECK-LABEL: func.func @computed_once
// CHECK:         rt.kernel "fill"
// CHECK:         rt.kernel "scale" ins(%{{.*}}) outs(%[[SCALED:.*]] : memref<1x4xf32>)
// CHECK:         rt.action_walk_begin actions = [0, 0, 0, 0, 0, 1, 0, 0, 2]
// CHECK-NEXT:    rt.action_region "F chunk 0"
// CHECK-NOT:     rt.kernel "scale"
// CHECK:         rt.kernel "gelu" ins(%[[SCALED]] : memref<1x4xf32>)
// CHECK:         rt.action_walk_end
module attributes {dist.pipeline = {schedule = "1f1b", stages = 1 : i64, microbatches = 3 : i64, virtual_stages = 1 : i64}} {
  func.func @computed_once(%in: memref<3x4xf32> {rt.role = "tokens"}, %w: memref<1x4xf32>, %y: memref<1x4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.eval_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 3 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    %z = memref.alloc() : memref<1x4xf32>
    rt.kernel "fill" outs(%z : memref<1x4xf32>) floats = [0.0]
    %s = memref.alloc() : memref<1x4xf32>
    rt.kernel "scale" ins(%w : memref<1x4xf32>) outs(%s : memref<1x4xf32>) floats = [2.0]
    %r0 = memref.subview %in[0, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1]>>
    %g0 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%r0, %s : memref<1x4xf32, strided<[4, 1]>>, memref<1x4xf32>) outs(%g0 : memref<1x4xf32>)
    %p0 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%z, %g0 : memref<1x4xf32>, memref<1x4xf32>) outs(%p0 : memref<1x4xf32>)
    %q0 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%s : memref<1x4xf32>) outs(%q0 : memref<1x4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    %r1 = memref.subview %in[1, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 4>>
    %g1 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%r1, %s : memref<1x4xf32, strided<[4, 1], offset: 4>>, memref<1x4xf32>) outs(%g1 : memref<1x4xf32>)
    %p1 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%p0, %g1 : memref<1x4xf32>, memref<1x4xf32>) outs(%p1 : memref<1x4xf32>)
    %q1 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%s : memref<1x4xf32>) outs(%q1 : memref<1x4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 2
    %s2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "scale" ins(%w : memref<1x4xf32>) outs(%s2 : memref<1x4xf32>) floats = [2.0]
    %r2 = memref.subview %in[2, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 8>>
    %g2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%r2, %s2 : memref<1x4xf32, strided<[4, 1], offset: 8>>, memref<1x4xf32>) outs(%g2 : memref<1x4xf32>)
    %p2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%p1, %g2 : memref<1x4xf32>, memref<1x4xf32>) outs(%p2 : memref<1x4xf32>)
    %q2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%s2 : memref<1x4xf32>) outs(%q2 : memref<1x4xf32>)
    rt.action_mark "update" model_chunk = 0 microbatch = 0
    rt.kernel "copy" ins(%p2 : memref<1x4xf32>) outs(%y : memref<1x4xf32>)
    return
  }
}

// -----

// 1F1B's stage 0 of 2 (F0 F1 B0 F2 B1 B2): two slots. The activation %a
// (F writes it, B reads it) and the backward's own temporary %t are slot
// buffers, rt.held, with a copy each for slot 1: the memory plan may put
// each slot's %t on its own %a once B has read it
// (test/Lowering/memory_plan_walk.mlir).
// CHECK-LABEL: func.func @backward_temporary
// CHECK:         %[[A:.*]] = memref.alloc() {rt.held} : memref<1x4xf32>
// CHECK-NEXT:    %[[T:.*]] = memref.alloc() {rt.held} : memref<1x4xf32>
// CHECK-NEXT:    %[[A1:.*]] = memref.alloc() {rt.held} : memref<1x4xf32>
// CHECK-NEXT:    %[[T1:.*]] = memref.alloc() {rt.held} : memref<1x4xf32>
// CHECK-NEXT:    rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 2, 1, 1, 1, 1, 0, 2] slot_sizes = [2] region_rows = [1, 0] slots(%[[A]], %[[T]] : memref<1x4xf32>, memref<1x4xf32>) copies(%[[A1]], %[[T1]] : memref<1x4xf32>, memref<1x4xf32>)
// CHECK:         rt.action_region "B chunk 0"
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[A]] : memref<1x4xf32>) outs(%[[T]] : memref<1x4xf32>)
module attributes {dist.pipeline = {schedule = "1f1b", stages = 2 : i64, microbatches = 3 : i64, virtual_stages = 1 : i64}} {
  func.func @backward_temporary(%in: memref<3x4xf32> {rt.role = "tokens"}, %x: memref<1x4xf32>, %y: memref<1x4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 3 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    %r0 = memref.subview %in[0, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1]>>
    %a0 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%r0, %x : memref<1x4xf32, strided<[4, 1]>>, memref<1x4xf32>) outs(%a0 : memref<1x4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    %r1 = memref.subview %in[1, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 4>>
    %a1 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%r1, %x : memref<1x4xf32, strided<[4, 1], offset: 4>>, memref<1x4xf32>) outs(%a1 : memref<1x4xf32>)
    rt.action_mark "B" model_chunk = 0 microbatch = 0
    %z = memref.alloc() : memref<1x4xf32>
    rt.kernel "fill" outs(%z : memref<1x4xf32>) floats = [0.0]
    %t0 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%a0 : memref<1x4xf32>) outs(%t0 : memref<1x4xf32>)
    %p0 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%z, %t0 : memref<1x4xf32>, memref<1x4xf32>) outs(%p0 : memref<1x4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 2
    %r2 = memref.subview %in[2, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 8>>
    %a2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%r2, %x : memref<1x4xf32, strided<[4, 1], offset: 8>>, memref<1x4xf32>) outs(%a2 : memref<1x4xf32>)
    rt.action_mark "B" model_chunk = 0 microbatch = 1
    %t1 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%a1 : memref<1x4xf32>) outs(%t1 : memref<1x4xf32>)
    %p1 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%p0, %t1 : memref<1x4xf32>, memref<1x4xf32>) outs(%p1 : memref<1x4xf32>)
    rt.action_mark "B" model_chunk = 0 microbatch = 2
    %t2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%a2 : memref<1x4xf32>) outs(%t2 : memref<1x4xf32>)
    %p2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%p1, %t2 : memref<1x4xf32>, memref<1x4xf32>) outs(%p2 : memref<1x4xf32>)
    rt.action_mark "update" model_chunk = 0 microbatch = 0
    rt.kernel "copy" ins(%p2 : memref<1x4xf32>) outs(%y : memref<1x4xf32>)
    return
  }
}

// -----

// GPipe's stage 0 of 2 (F0 F1 F2 B0 B1 B2): every micro-batch in flight, a
// slot each. The activation %a has one copy (%a1, slot 1), which slot 2
// repeats at a stride (slot_repeats = 1; the memory plan sets the stride),
// so that the walk stays two slots' size however many micro-batches run.
// The first backward (micro-batch 0's) is a region of its own, which the
// walk's first B action runs: the sum %s starts there, its buffer and
// fill just before its first use, as in the unrolled step, so that the
// memory plan counts it from there; the other backwards share the second
// B region, which adds into it.
// CHECK-LABEL: func.func @gpipe_repeated_slot
// CHECK:         %[[A:.*]] = memref.alloc() {rt.held} : memref<1x4xf32>
// CHECK-NEXT:    %[[A1:.*]] = memref.alloc() {rt.held} : memref<1x4xf32>
// CHECK-NEXT:    rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 0, 2, 2, 1, 0, 0, 2, 1, 1, 2, 2, 2] slot_sizes = [1] region_rows = [1, 0, 0] slot_repeats = 1 slots(%[[A]] : memref<1x4xf32>) copies(%[[A1]] : memref<1x4xf32>)
// CHECK:         rt.action_region "B chunk 0"
// CHECK-NEXT:    %[[T0:.*]] = memref.alloc() : memref<1x4xf32>
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[A]] : memref<1x4xf32>) outs(%[[T0]] : memref<1x4xf32>)
// CHECK-NEXT:    %[[S:.*]] = memref.alloc() : memref<1x4xf32>
// CHECK-NEXT:    rt.kernel "fill" outs(%[[S]] : memref<1x4xf32>)
// CHECK-NEXT:    rt.kernel "add" ins(%[[S]], %[[T0]] : memref<1x4xf32>, memref<1x4xf32>) outs(%[[S]] : memref<1x4xf32>)
// CHECK-NEXT:    rt.action_region "B chunk 0"
// CHECK-NEXT:    %[[T:.*]] = memref.alloc() : memref<1x4xf32>
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[A]] : memref<1x4xf32>) outs(%[[T]] : memref<1x4xf32>)
// CHECK-NEXT:    rt.kernel "add" ins(%[[S]], %[[T]] : memref<1x4xf32>, memref<1x4xf32>) outs(%[[S]] : memref<1x4xf32>)
// CHECK-NEXT:    rt.action_walk_end
module attributes {dist.pipeline = {schedule = "gpipe", stages = 2 : i64, microbatches = 3 : i64, virtual_stages = 1 : i64}} {
  func.func @gpipe_repeated_slot(%in: memref<3x4xf32> {rt.role = "tokens"}, %x: memref<1x4xf32>, %y: memref<1x4xf32>) attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatch_loop = 2 : i64, microbatch_loop_compiled = 3 : i64, microbatch_loop_settle = 0 : i64, microbatch_loop_split = 2 : i64, microbatch_loop_stride = 1 : i64, microbatches = 3 : i64}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    %r0 = memref.subview %in[0, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1]>>
    %a0 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%r0, %x : memref<1x4xf32, strided<[4, 1]>>, memref<1x4xf32>) outs(%a0 : memref<1x4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    %r1 = memref.subview %in[1, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 4>>
    %a1 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%r1, %x : memref<1x4xf32, strided<[4, 1], offset: 4>>, memref<1x4xf32>) outs(%a1 : memref<1x4xf32>)
    rt.action_mark "F" model_chunk = 0 microbatch = 2
    %r2 = memref.subview %in[2, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 8>>
    %a2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%r2, %x : memref<1x4xf32, strided<[4, 1], offset: 8>>, memref<1x4xf32>) outs(%a2 : memref<1x4xf32>)
    rt.action_mark "B" model_chunk = 0 microbatch = 0
    %z = memref.alloc() : memref<1x4xf32>
    rt.kernel "fill" outs(%z : memref<1x4xf32>) floats = [0.0]
    %t0 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%a0 : memref<1x4xf32>) outs(%t0 : memref<1x4xf32>)
    %p0 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%z, %t0 : memref<1x4xf32>, memref<1x4xf32>) outs(%p0 : memref<1x4xf32>)
    rt.action_mark "B" model_chunk = 0 microbatch = 1
    %t1 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%a1 : memref<1x4xf32>) outs(%t1 : memref<1x4xf32>)
    %p1 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%p0, %t1 : memref<1x4xf32>, memref<1x4xf32>) outs(%p1 : memref<1x4xf32>)
    rt.action_mark "B" model_chunk = 0 microbatch = 2
    %t2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "gelu" ins(%a2 : memref<1x4xf32>) outs(%t2 : memref<1x4xf32>)
    %p2 = memref.alloc() : memref<1x4xf32>
    rt.kernel "add" ins(%p1, %t2 : memref<1x4xf32>, memref<1x4xf32>) outs(%p2 : memref<1x4xf32>)
    rt.action_mark "update" model_chunk = 0 microbatch = 0
    rt.kernel "copy" ins(%p2 : memref<1x4xf32>) outs(%y : memref<1x4xf32>)
    return
  }
}
