// RUN: partition-opt %s --split-input-file --lower-memory-plan | FileCheck %s
// RUN: partition-opt %s --split-input-file --lower-memory-plan=report=true -o /dev/null | FileCheck %s --check-prefix=REPORT
// The output verifies and is stable under a round trip.
// RUN: partition-opt %s --split-input-file --lower-memory-plan | partition-opt --split-input-file --verify-roundtrip > /dev/null

// --lower-memory-plan on steps with rt.all_gather, rt.reduce_scatter and an
// axis_index argument: the axis index is state (laid out with the
// parameters, counted as an input), the input and output of a collective
// are live at it, and the report counts what each rank sends in a ring:
// (N - 1) / N of an all-gather's output and of a reduce-scatter's input.

// The all-gather's input a must not share memory with its output g, nor the
// reduce-scatter's output s with its input g; the axis index sits after x.
// CHECK-LABEL: func.func @block_collectives
// CHECK-SAME:    (%[[ARENA:.*]]: memref<{{[0-9]+}}xi8>)
// CHECK:         %[[X:.*]] = memref.view %[[ARENA]][%c0{{(_[0-9]+)?}}][] {rt.name = "x", rt.role = "param"} : memref<{{[0-9]+}}xi8> to memref<4x8xf32>
// CHECK:         %[[I:.*]] = memref.view %[[ARENA]][%c128{{(_[0-9]+)?}}][] {rt.name = "tp", rt.role = "axis_index"} : memref<{{[0-9]+}}xi8> to memref<i32>
// CHECK:         %[[A:.*]] = memref.view %[[ARENA]][%[[OA:.*]]][] : memref<{{[0-9]+}}xi8> to memref<4x8xf32>
// CHECK:         %[[G:.*]] = memref.view %[[ARENA]][%[[OG:.*]]][] : memref<{{[0-9]+}}xi8> to memref<4x16xf32>
// CHECK-NEXT:    rt.all_gather %[[A]], %[[G]] on @mesh axes [tp] dim = 1 label = "g"
// CHECK:         %[[S:.*]] = memref.view %[[ARENA]][%[[OS:.*]]][] : memref<{{[0-9]+}}xi8> to memref<2x16xf32>
// CHECK-NEXT:    rt.reduce_scatter %[[G]], %[[S]] on @mesh axes [tp] dim = 0 reduce = sum label = "s"
// CHECK-NOT:     memref.alloc
// REPORT:        memory: parameters 128{{$}}
// REPORT-NEXT:   memory: optimizer_state 0{{$}}
// REPORT-NEXT:   memory: inputs 4{{$}}
// An all-gather of 256 bytes over 2 ranks sends 128; a reduce-scatter of
// 256 bytes 128; an all-reduce of 128 bytes 128.
// REPORT:        communication: block_collectives sends 384 bytes per rank per step (1 all-reduce bucket, 128 bytes reduced over tp=2; 1 all-gather, 256 bytes gathered over tp=2; 1 reduce-scatter, 256 bytes scattered over tp=2){{$}}
dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @block_collectives(%x: memref<4x8xf32> {rt.role = "param", rt.name = "x"}, %i: memref<i32> {rt.role = "axis_index", rt.name = "tp"}) {
  %a = memref.alloc() : memref<4x8xf32>
  rt.kernel "gelu" ins(%x : memref<4x8xf32>) outs(%a : memref<4x8xf32>)
  %g = memref.alloc() : memref<4x16xf32>
  rt.all_gather %a, %g on @mesh axes [tp] dim = 1 label = "g" : memref<4x8xf32>, memref<4x16xf32>
  %s = memref.alloc() : memref<2x16xf32>
  rt.reduce_scatter %g, %s on @mesh axes [tp] dim = 0 reduce = sum label = "s" : memref<4x16xf32>, memref<2x16xf32>
  %y = memref.alloc() : memref<4x8xf32>
  rt.kernel "slice_block" ins(%g, %i : memref<4x16xf32>, memref<i32>) outs(%y : memref<4x8xf32>) ints = [1, 2]
  rt.all_reduce %y on @mesh axes [tp] reduce = sum label = "y" : memref<4x8xf32>
  rt.kernel "copy" ins(%y : memref<4x8xf32>) outs(%x : memref<4x8xf32>)
  return
}

// -----

// Over dp x tp = 4 ranks: 3/4 of 2 x 512 bytes gathered, 3/4 of 512
// scattered.
// Functions of collectives alone are planned too.
// REPORT: communication: only_collectives sends 1152 bytes per rank per step (2 all-gathers, 1024 bytes gathered over dp=2,tp=2; 1 reduce-scatter, 512 bytes scattered over dp=2,tp=2){{$}}
dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @only_collectives(%x: memref<2x16xf32> {rt.role = "param", rt.name = "x"}, %y: memref<8x16xf32> {rt.role = "param", rt.name = "y"}) {
  %g = memref.alloc() : memref<8x16xf32>
  rt.all_gather %x, %g on @mesh axes [dp, tp] dim = 0 label = "g" : memref<2x16xf32>, memref<8x16xf32>
  rt.all_gather %x, %y on @mesh axes [dp, tp] dim = 0 label = "h" : memref<2x16xf32>, memref<8x16xf32>
  rt.reduce_scatter %g, %x on @mesh axes [dp, tp] dim = 0 reduce = sum label = "s" : memref<8x16xf32>, memref<2x16xf32>
  return
}

// -----

// A weight gradient reduce-scattered (as ZeRO-2 will) is still a gradient:
// 128 bytes computed, 64 bytes kept.
// REPORT:      memory: gradients 192{{$}}
// REPORT-NEXT: memory: activations 0{{$}}
dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @scattered_gradient(%dy: memref<2x4x8xf32> {rt.role = "param", rt.name = "dy"}, %x: memref<2x4x4xf32> {rt.role = "param", rt.name = "x"}) {
  %dw = memref.alloc() : memref<8x4xf32>
  rt.kernel "linear_grad_weight" ins(%dy, %x : memref<2x4x8xf32>, memref<2x4x4xf32>) outs(%dw : memref<8x4xf32>)
  %s = memref.alloc() : memref<4x4xf32>
  rt.reduce_scatter %dw, %s on @mesh axes [tp] dim = 0 reduce = sum label = "zero" : memref<8x4xf32>, memref<4x4xf32>
  return
}
