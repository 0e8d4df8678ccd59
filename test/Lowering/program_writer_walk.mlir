// RUN: rm -rf %t && mkdir -p %t
// RUN: partition-opt %s --lower-memory-plan | FileCheck %s --check-prefix=PLAN
// RUN: partition-opt %s --lower-memory-plan | partition-translate --rt-to-program -o %t/program.ptp
// RUN: %python %S/../tools/Inputs/ptp-dump.py %S/../.. %t/program.ptp | FileCheck %s

// An action walk planned and written (RtScheduleOps.td, lowering/
// StreamWalk.cpp): two regions over 4 micro-batches, two in flight. The
// memory plan keeps the walk's slots (%act, %act1) and the sum apart for
// the whole walk, since each action may run in any order with the others;
// a region's own temporary (%t, the forward's scratch) lives in its region
// only. The program's slot 1 substitutes %act1 for %act and, for the
// view of %act the backward reads, a view of %act1 at the same distance.

// PLAN-LABEL: func.func @train_step
// PLAN:         %[[ACT:.*]] = memref.view %{{.*}}[%c256][] : memref<512xi8> to memref<2x4xf32>
// PLAN:         %[[ACT1:.*]] = memref.view %{{.*}}[%c320][] : memref<512xi8> to memref<2x4xf32>
// PLAN:         rt.action_walk_begin
// PLAN:         rt.action_walk_end live(%[[ACT]], %[[ACT1]],

// CHECK:      schema_version 16
// CHECK:      buffer #[[TOKENS:[0-9]+]] Tokens I32 4x2
// CHECK:      buffer #[[ACT:[0-9]+]] Temporary F32 2x4 @256
// CHECK-NEXT: buffer #[[ACT1:[0-9]+]] Temporary F32 2x4 @320
// CHECK-NEXT: buffer #[[ROWS:[0-9]+]] Temporary I32 2 @
// CHECK-NEXT: buffer #{{[0-9]+}} Temporary F32 2x4 @
// The view the backward reads (a row of %act), then its copy in slot 1:
// a row of %act1, after every buffer the function names.
// CHECK-NEXT: buffer #[[ROW1:[0-9]+]] Temporary F32 1x4 @272
// CHECK-NEXT: buffer #[[ROW1COPY:[0-9]+]] Temporary F32 1x4 @336
// CHECK-NEXT: function train_step
// CHECK-NEXT:   region #1..#3 "F chunk 0" rows [[[ROWS]]] from [[[TOKENS]]]
// CHECK-NEXT:   region #3..#4 "B chunk 0" rows [] from []
// CHECK-NEXT:   slot 1 [([[ACT]], [[ACT1]]), ([[ROW1]], [[ROW1COPY]])]
// CHECK-NEXT:   actions 0.0.0 0.1.1 1.0.0 0.0.2 1.1.1 0.1.3 1.0.2 1.1.3
// CHECK-NEXT:   fill
// CHECK-NEXT:   embedding [[[ROWS]], 0,
// CHECK-NEXT:   gelu [{{[0-9]+}}, [[ACT]]]
// CHECK-NEXT:   add [{{[0-9]+}}, [[ROW1]], {{[0-9]+}}]

func.func @train_step(%table: memref<5x4xf32> {rt.role = "param", rt.name = "table"},
                      %tokens: memref<4x2xi32> {rt.role = "tokens"},
                      %sum: memref<1x4xf32> {rt.role = "param", rt.name = "sum"})
    attributes {xfmr.train_step = {microbatches = 4 : i64}} {
  %act = memref.alloc() : memref<2x4xf32>
  %act1 = memref.alloc() : memref<2x4xf32>
  %rows = memref.alloc() : memref<2xi32>
  rt.kernel "fill" outs(%sum : memref<1x4xf32>) floats = [0.0]
  rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 2,
                                  1, 1, 1, 0, 1, 3, 1, 0, 2, 1, 1, 3]
      slot_sizes = [1] region_rows = [1, 0]
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
