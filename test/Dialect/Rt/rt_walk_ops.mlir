// RUN: partition-opt %s | partition-opt | FileCheck %s
// RUN: partition-opt %s --mlir-print-op-generic | partition-opt | FileCheck %s

// Round trip of the action walk (RtScheduleOps.td): a stage's two kinds of
// action kept once, two micro-batches in flight (slot 1 substitutes %act1
// for %act), the forward's rows copied from the tokens, and 1F1B's order
// over 4 micro-batches as (region, slot, micro-batch) triples. The slot
// buffers are rt.held: each holds a micro-batch's values only between
// its first and last action.

// CHECK-LABEL: func.func @walk
// CHECK:         memref.alloc() {rt.held} : memref<2x3xf32>
// CHECK-NEXT:    memref.alloc() {rt.held} : memref<2x3xf32>
// CHECK:         rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 2, 1, 1, 1, 0, 1, 3, 1, 0, 2, 1, 1, 3] slot_sizes = [1] region_rows = [1, 0] slots(%[[ACT:.*]] : memref<2x3xf32>) copies(%[[ACT1:.*]] : memref<2x3xf32>) rows(%[[ROWS:.*]] : memref<2xi32>) sources(%[[TOKENS:.*]] : memref<4x2xi32>)
// CHECK-NEXT:    rt.action_region "F chunk 0"
// CHECK-NEXT:    rt.kernel "embedding" ins(%[[ROWS]], %{{.*}} : memref<2xi32>, memref<5x3xf32>) outs(%[[ACT]] : memref<2x3xf32>)
// CHECK-NEXT:    rt.action_region "B chunk 0"
// CHECK-NEXT:    rt.kernel "add"
// CHECK-NEXT:    rt.action_walk_end live(%[[ACT]], %[[ACT1]], %{{.*}} : memref<2x3xf32>, memref<2x3xf32>, memref<2x3xf32>)
func.func @walk(%table: memref<5x3xf32>, %tokens: memref<4x2xi32>) {
  %act = memref.alloc() {rt.held} : memref<2x3xf32>
  %act1 = memref.alloc() {rt.held} : memref<2x3xf32>
  %rows = memref.alloc() : memref<2xi32>
  %sum = memref.alloc() : memref<2x3xf32>
  rt.kernel "fill" outs(%sum : memref<2x3xf32>) floats = [0.0]
  rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 2,
                                  1, 1, 1, 0, 1, 3, 1, 0, 2, 1, 1, 3]
      slot_sizes = [1] region_rows = [1, 0]
      slots(%act : memref<2x3xf32>) copies(%act1 : memref<2x3xf32>)
      rows(%rows : memref<2xi32>) sources(%tokens : memref<4x2xi32>)
  rt.action_region "F chunk 0"
  rt.kernel "embedding" ins(%rows, %table : memref<2xi32>, memref<5x3xf32>) outs(%act : memref<2x3xf32>)
  rt.action_region "B chunk 0"
  rt.kernel "add" ins(%sum, %act : memref<2x3xf32>, memref<2x3xf32>) outs(%sum : memref<2x3xf32>)
  rt.action_walk_end live(%act, %act1, %sum : memref<2x3xf32>, memref<2x3xf32>, memref<2x3xf32>)
  return
}

// GPipe's walk over 4 micro-batches: slot 1 repeats twice, at the stride
// the memory plan sets.
// CHECK-LABEL: func.func @repeated_slot
// CHECK:         rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 0, 2, 2, 0, 3, 3, 1, 0, 0, 1, 1, 1, 1, 2, 2, 1, 3, 3] slot_sizes = [1] region_rows = [0, 0] slot_repeats = 2 slot_strides = [64] slots(%{{.*}} : memref<16xf32>) copies(%{{.*}} : memref<16xf32>)
func.func @repeated_slot(%x: memref<16xf32>, %s: memref<16xf32>) {
  %a = memref.alloc() {rt.held} : memref<16xf32>
  %a1 = memref.alloc() {rt.held} : memref<16xf32>
  rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 0, 2, 2, 0, 3, 3,
                                  1, 0, 0, 1, 1, 1, 1, 2, 2, 1, 3, 3]
      slot_sizes = [1] region_rows = [0, 0] slot_repeats = 2
      slot_strides = [64]
      slots(%a : memref<16xf32>) copies(%a1 : memref<16xf32>)
  rt.action_region "F chunk 0"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  rt.action_region "B chunk 0"
  rt.kernel "add" ins(%s, %a : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_walk_end live(%a, %a1 : memref<16xf32>, memref<16xf32>)
  return
}

// One slot, no rows: the simplest walk.
// CHECK-LABEL: func.func @one_slot
// CHECK:         rt.action_walk_begin actions = [0, 0, 0, 0, 0, 1] slot_sizes = [] region_rows = [0]{{$}}
// CHECK-NEXT:    rt.action_region "F chunk 0"
// CHECK:         rt.action_walk_end{{$}}
func.func @one_slot(%x: memref<4xf32>, %y: memref<4xf32>) {
  rt.action_walk_begin actions = [0, 0, 0, 0, 0, 1] slot_sizes = [] region_rows = [0]
  rt.action_region "F chunk 0"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  return
}

// The marks a pipeline stage's step carries before its walk is formed.
// CHECK-LABEL: func.func @marks
// CHECK:         rt.action_mark "F" model_chunk = 0 microbatch = 3{{$}}
// CHECK-NEXT:    rt.kernel "gelu"
// CHECK-NEXT:    rt.action_mark "B" model_chunk = 2 microbatch = 0{{$}}
// CHECK-NEXT:    rt.action_mark "W" model_chunk = 2 microbatch = 0{{$}}
// CHECK-NEXT:    rt.action_mark "update" model_chunk = 0 microbatch = 0{{$}}
func.func @marks(%x: memref<4xf32>, %y: memref<4xf32>) {
  rt.action_mark "F" model_chunk = 0 microbatch = 3
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_mark "B" model_chunk = 2 microbatch = 0
  rt.action_mark "W" model_chunk = 2 microbatch = 0
  rt.action_mark "update" model_chunk = 0 microbatch = 0
  return
}
