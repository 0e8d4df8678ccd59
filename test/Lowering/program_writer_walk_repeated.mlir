// RUN: rm -rf %t && mkdir -p %t
// RUN: partition-opt %s --lower-memory-plan | FileCheck %s --check-prefix=PLAN
// RUN: partition-opt %s --lower-memory-plan | partition-translate --rt-to-program -o %t/program.ptp
// RUN: %python %S/../tools/Inputs/ptp-dump.py %S/../.. %t/program.ptp | FileCheck %s

// GPipe's walk written (lowering/StreamWalk.cpp): 4 micro-batches, each in
// a slot of its own. Slot 1 (%act1) repeats twice: the memory plan gives
// %act1 three strides of 64 bytes and the program names slot 1 once, with
// its repeats and the strides of its copy and of the view of it the
// backward reads; the loader adds slots 2 and 3.

// PLAN-LABEL: func.func @train_step
// PLAN:         rt.action_walk_begin {{.*}} slot_repeats = 2 slot_strides = [64]

// CHECK:      schema_version 16
// CHECK:      buffer #[[TOKENS:[0-9]+]] Tokens I32 4x2
// CHECK:      buffer #[[ACT:[0-9]+]] Temporary F32 2x4 @[[ACTAT:[0-9]+]]
// CHECK-NEXT: buffer #[[ACT1:[0-9]+]] Temporary F32 2x4 @[[ACT1AT:[0-9]+]]
// CHECK:      buffer #[[ROW1:[0-9]+]] Temporary F32 1x4 @
// CHECK-NEXT: buffer #[[ROW1COPY:[0-9]+]] Temporary F32 1x4 @
// CHECK-NEXT: function train_step
// CHECK-NEXT:   region #1..#3 "F chunk 0"
// CHECK-NEXT:   region #3..#4 "B chunk 0"
// CHECK-NEXT:   slot 1 [([[ACT]], [[ACT1]]), ([[ROW1]], [[ROW1COPY]])] repeat 2 strides [64, 64]
// CHECK-NEXT:   actions 0.0.0 0.1.1 0.2.2 0.3.3 1.0.0 1.1.1 1.2.2 1.3.3

func.func @train_step(%table: memref<5x4xf32> {rt.role = "param", rt.name = "table"},
                      %tokens: memref<4x2xi32> {rt.role = "tokens"},
                      %sum: memref<1x4xf32> {rt.role = "param", rt.name = "sum"})
    attributes {xfmr.train_step = {microbatches = 4 : i64}} {
  %act = memref.alloc() {rt.held} : memref<2x4xf32>
  %act1 = memref.alloc() {rt.held} : memref<2x4xf32>
  %rows = memref.alloc() : memref<2xi32>
  rt.kernel "fill" outs(%sum : memref<1x4xf32>) floats = [0.0]
  rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 0, 2, 2, 0, 3, 3,
                                  1, 0, 0, 1, 1, 1, 1, 2, 2, 1, 3, 3]
      slot_sizes = [1] region_rows = [1, 0] slot_repeats = 2
      slots(%act : memref<2x4xf32>) copies(%act1 : memref<2x4xf32>)
      rows(%rows : memref<2xi32>) sources(%tokens : memref<4x2xi32>)
  rt.action_region "F chunk 0"
  %t = memref.alloc() : memref<2x4xf32>
  rt.kernel "embedding" ins(%rows, %table : memref<2xi32>, memref<5x4xf32>) outs(%t : memref<2x4xf32>)
  rt.kernel "gelu" ins(%t : memref<2x4xf32>) outs(%act : memref<2x4xf32>)
  rt.action_region "B chunk 0"
  %row1 = memref.subview %act[1, 0] [1, 4] [1, 1] : memref<2x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 4>>
  rt.kernel "add" ins(%sum, %row1 : memref<1x4xf32>, memref<1x4xf32, strided<[4, 1], offset: 4>>) outs(%sum : memref<1x4xf32>)
  rt.action_walk_end live(%act, %act1, %sum : memref<2x4xf32>, memref<2x4xf32>, memref<1x4xf32>)
  return
}
