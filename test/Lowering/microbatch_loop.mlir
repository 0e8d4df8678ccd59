// RUN: partition-opt %s --rt-microbatch-loop | FileCheck %s
// RUN: partition-opt %s --rt-microbatch-loop | partition-opt | FileCheck %s

// --rt-microbatch-loop: a step of k = 4 micro-batches built as micro-
// batches 0, 1, 2 and k-1 (microbatch_loop = 2 in xfmr.train_step) keeps
// micro-batch 1's code once, bracketed by rt.microbatch_loop_begin (count
// 2, micro-batch 1's rows) and rt.microbatch_loop_end (the buffers written
// before it that it uses). The gradient micro-batch 1 hands on is the one
// it was handed, added to in place; what came after micro-batch 2 reads
// micro-batch 1's values.

!rows = memref<16x4xi32>
!mb0 = memref<4x4xi32, strided<[4, 1]>>
!mb1 = memref<4x4xi32, strided<[4, 1], offset: 16>>
!mb2 = memref<4x4xi32, strided<[4, 1], offset: 32>>
!mb3 = memref<4x4xi32, strided<[4, 1], offset: 48>>
!x = memref<4x4x4xf32>
!g = memref<8x4xf32>

// CHECK-LABEL: func.func @train_step
// CHECK:       %[[T1:.*]] = memref.subview %{{.*}}[4, 0] [4, 4] [1, 1]
// CHECK-NEXT:  rt.microbatch_loop_begin count = 2 slices(%[[T1]] : memref<4x4xi32, strided<[4, 1], offset: 16>>)
// CHECK:       rt.kernel "embedding" ins(%[[T1]]
// CHECK:       rt.kernel "add" ins(%[[G0:[^,]+]], %{{[^ ]+}} : {{.*}}) outs(%[[G0]] : memref<8x4xf32>)
// CHECK-NEXT:  rt.microbatch_loop_end live(%[[G0]] : memref<8x4xf32>)
// CHECK-NOT:   offset: 32
// CHECK:       memref.subview %{{.*}}[12, 0] [4, 4] [1, 1]
// CHECK:       rt.kernel "add" ins(%[[G0]], %{{[^ ]+}} : {{.*}}) outs(%[[G3:[^ ]+]] : memref<8x4xf32>)
// CHECK:       rt.kernel "add" ins(%[[G3]], %[[G3]]
func.func @train_step(%w: !g {rt.role = "param", rt.name = "w"},
                      %tokens: !rows {rt.role = "tokens"})
    attributes {xfmr.train_step = {microbatches = 4 : i64, microbatch_loop = 2 : i64}} {
  %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb0
  %x0 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t0, %w : !mb0, !g) outs(%x0 : !x)
  %g0 = memref.alloc() : !g
  rt.kernel "embedding_grad" ins(%x0, %t0 : !x, !mb0) outs(%g0 : !g)

  %t1 = memref.subview %tokens[4, 0] [4, 4] [1, 1] : !rows to !mb1
  %x1 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t1, %w : !mb1, !g) outs(%x1 : !x)
  %d1 = memref.alloc() : !g
  rt.kernel "embedding_grad" ins(%x1, %t1 : !x, !mb1) outs(%d1 : !g)
  %g1 = memref.alloc() : !g
  rt.kernel "add" ins(%g0, %d1 : !g, !g) outs(%g1 : !g)

  %t2 = memref.subview %tokens[8, 0] [4, 4] [1, 1] : !rows to !mb2
  %x2 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t2, %w : !mb2, !g) outs(%x2 : !x)
  %d2 = memref.alloc() : !g
  rt.kernel "embedding_grad" ins(%x2, %t2 : !x, !mb2) outs(%d2 : !g)
  %g2 = memref.alloc() : !g
  rt.kernel "add" ins(%g1, %d2 : !g, !g) outs(%g2 : !g)

  %t3 = memref.subview %tokens[12, 0] [4, 4] [1, 1] : !rows to !mb3
  %x3 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t3, %w : !mb3, !g) outs(%x3 : !x)
  %d3 = memref.alloc() : !g
  rt.kernel "embedding_grad" ins(%x3, %t3 : !x, !mb3) outs(%d3 : !g)
  %g3 = memref.alloc() : !g
  rt.kernel "add" ins(%g2, %d3 : !g, !g) outs(%g3 : !g)
  rt.kernel "add" ins(%g3, %g3 : !g, !g) outs(%w : !g)
  return
}

// A sum that starts at a zero built at a parameter's full shape and sliced
// to the rank's block (a tensor-parallel gradient): the block is filled
// itself, and the full-shape zeros, which nothing else reads, go. Each
// micro-batch scales the weight for itself alone (as a bf16 plan casts
// it): that stays in the loop, not moved above it to live through it, and
// micro-batch 0's and 3's scales stay apart (the first is read no more
// when the second is made).
// CHECK-LABEL: func.func @zero_block
// CHECK-NOT:   memref<16x4xf32>
// CHECK:       %[[Z:.*]] = memref.alloc() : memref<8x4xf32>
// CHECK-NEXT:  rt.kernel "fill" outs(%[[Z]] : memref<8x4xf32>) floats = [0.000000e+00]
// CHECK-NOT:   slice_block
// CHECK-COUNT-1: rt.kernel "scale" ins(%arg0
// CHECK-NOT:   rt.kernel "scale"
// CHECK:       rt.microbatch_loop_begin count = 2
// CHECK:       rt.kernel "scale" ins(%arg0
// CHECK:       rt.microbatch_loop_end
// CHECK-NOT:   memref<16x4xf32>
// CHECK:       rt.kernel "scale" ins(%arg0
// CHECK:       return
func.func @zero_block(%w: !g {rt.role = "param", rt.name = "w"},
                      %tokens: !rows {rt.role = "tokens"},
                      %tp: memref<i32> {rt.role = "axis_index", rt.name = "tp"})
    attributes {xfmr.train_step = {microbatches = 4 : i64, microbatch_loop = 2 : i64}} {
  %full = memref.alloc() : memref<16x4xf32>
  rt.kernel "fill" outs(%full : memref<16x4xf32>) floats = [0.000000e+00]
  %zero = memref.alloc() : !g
  rt.kernel "slice_block" ins(%full, %tp : memref<16x4xf32>, memref<i32>) outs(%zero : !g) ints = [0, 2]
  %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb0
  %w0 = memref.alloc() : !g
  rt.kernel "scale" ins(%w : !g) outs(%w0 : !g) floats = [2.000000e+00]
  %x0 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t0, %w0 : !mb0, !g) outs(%x0 : !x)
  %d0 = memref.alloc() : !g
  rt.kernel "embedding_grad" ins(%x0, %t0 : !x, !mb0) outs(%d0 : !g)
  %g0 = memref.alloc() : !g
  rt.kernel "add" ins(%zero, %d0 : !g, !g) outs(%g0 : !g)

  %t1 = memref.subview %tokens[4, 0] [4, 4] [1, 1] : !rows to !mb1
  %w1 = memref.alloc() : !g
  rt.kernel "scale" ins(%w : !g) outs(%w1 : !g) floats = [2.000000e+00]
  %x1 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t1, %w1 : !mb1, !g) outs(%x1 : !x)
  %d1 = memref.alloc() : !g
  rt.kernel "embedding_grad" ins(%x1, %t1 : !x, !mb1) outs(%d1 : !g)
  %g1 = memref.alloc() : !g
  rt.kernel "add" ins(%g0, %d1 : !g, !g) outs(%g1 : !g)

  %t2 = memref.subview %tokens[8, 0] [4, 4] [1, 1] : !rows to !mb2
  %w2 = memref.alloc() : !g
  rt.kernel "scale" ins(%w : !g) outs(%w2 : !g) floats = [2.000000e+00]
  %x2 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t2, %w2 : !mb2, !g) outs(%x2 : !x)
  %d2 = memref.alloc() : !g
  rt.kernel "embedding_grad" ins(%x2, %t2 : !x, !mb2) outs(%d2 : !g)
  %g2 = memref.alloc() : !g
  rt.kernel "add" ins(%g1, %d2 : !g, !g) outs(%g2 : !g)

  %t3 = memref.subview %tokens[12, 0] [4, 4] [1, 1] : !rows to !mb3
  %w3 = memref.alloc() : !g
  rt.kernel "scale" ins(%w : !g) outs(%w3 : !g) floats = [2.000000e+00]
  %x3 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t3, %w3 : !mb3, !g) outs(%x3 : !x)
  %d3 = memref.alloc() : !g
  rt.kernel "embedding_grad" ins(%x3, %t3 : !x, !mb3) outs(%d3 : !g)
  %g3 = memref.alloc() : !g
  rt.kernel "add" ins(%g2, %d3 : !g, !g) outs(%g3 : !g)
  rt.kernel "add" ins(%g3, %g3 : !g, !g) outs(%w : !g)
  return
}

// A function without microbatch_loop is left as it is.
// CHECK-LABEL: func.func @eval_step
// CHECK-NOT:   rt.microbatch_loop_begin
// CHECK:       return
func.func @eval_step(%w: !g {rt.role = "param", rt.name = "w"},
                     %tokens: !rows {rt.role = "tokens"})
    attributes {xfmr.eval_step = {microbatches = 1 : i64}} {
  %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb0
  %x0 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t0, %w : !mb0, !g) outs(%x0 : !x)
  return
}


// A pipeline stage (stage 0 of 2, 1F1B, 10 micro-batches built as 8, the
// compiled 6 and 7 reading rows 8 and 9): its body is the period F3 B2 F4
// B3, its copy F5 B4 F6 B5, its tail F7 B6 B7, named by the rows their
// forwards read (dist.microbatch_loop_anchors). The loop runs 3 times, 2
// micro-batches a run, and refills, in row order, the rows of micro-batch
// 2 (which B2 reads, F2 having viewed them before the body) with the
// body's own. The weights scaled up front once per micro-batch are one
// value: the first scale stays and every micro-batch, the body's on every
// run, reads it (as a bf16 plan's casts of a weight). F2's activations
// and the accumulated gradient are handed on in place; the tail's B6 reads
// the slot F4 wrote on the last run, and F4's refilled rows.
// CHECK-LABEL: func.func @stage
// CHECK:      %[[S3:.*]] = memref.alloc() : memref<8x4xf32>
// CHECK-NEXT: rt.kernel "scale" ins(%arg0 : {{.*}}) outs(%[[S3]] : {{.*}}) floats = [5.000000e-01]
// CHECK-NOT:  floats = [5.000000e-01]
// CHECK:      %[[T2:.*]] = memref.subview %{{.*}}[2, 0] [1, 4]
// CHECK-NEXT: %[[X2:.*]] = memref.alloc() : memref<1x4x4xf32>
// CHECK:      rt.kernel "add" ins(%{{.*}}, %{{.*}} : {{.*}}) outs(%[[ACC:.*]] : memref<8x4xf32>)
// CHECK-NEXT: %[[T3:.*]] = memref.subview %{{.*}}[3, 0] [1, 4]
// CHECK-NEXT: %[[T4:.*]] = memref.subview %{{.*}}[4, 0] [1, 4]
// CHECK-NEXT: rt.microbatch_loop_begin count = 3 stride = 2 slices(%[[T2]], %[[T3]], %[[T4]] :
// CHECK-NEXT: %[[X3:.*]] = memref.alloc() : memref<1x4x4xf32>
// CHECK-NEXT: rt.kernel "embedding" ins(%[[T3]], %[[S3]] : {{.*}}) outs(%[[X3]] :
// CHECK:      rt.kernel "embedding_grad" ins(%[[X2]], %[[T2]] :
// CHECK:      rt.kernel "embedding" ins(%[[T4]], %{{.*}} : {{.*}}) outs(%[[X2]] :
// CHECK:      rt.kernel "add" ins(%{{.*}}, %{{.*}} : {{.*}}) outs(%[[ACC]] :
// CHECK-NEXT: rt.microbatch_loop_end live(
// CHECK-NOT:  memref.subview %{{.*}}[5, 0]
// CHECK:      memref.subview %{{.*}}[9, 0] [1, 4]
// CHECK:      rt.kernel "embedding" ins(%{{.*}}, %[[S3]] :
// CHECK:      rt.kernel "embedding_grad" ins(%[[X2]], %[[T4]] :
// CHECK:      rt.kernel "add" ins(%[[ACC]], %{{.*}} :
// CHECK-NOT:  floats = [5.000000e-01]
// CHECK:      rt.kernel "add" ins(%arg0, %{{.*}}) outs(%arg0 :
// CHECK-NEXT: %[[AFTER:.*]] = memref.alloc()
// CHECK-NEXT: rt.kernel "scale" ins(%arg0 : {{.*}}) outs(%[[AFTER]] : {{.*}}) floats = [5.000000e-01]
// CHECK-NEXT: rt.kernel "embedding" ins(%{{.*}}, %[[AFTER]] :

func.func @stage(%w: memref<8x4xf32> {rt.role = "param", rt.name = "w"},
                 %tokens: memref<10x4xi32> {rt.role = "tokens"})
    attributes {dist.microbatch_loop_anchors = ["rows 3", "rows 5", "rows 7"],
                xfmr.train_step = {microbatches = 10 : i64, microbatch_loop = 3 : i64, microbatch_loop_stride = 2 : i64, microbatch_loop_split = 6 : i64, microbatch_loop_compiled = 8 : i64}} {
  %s0 = memref.alloc() : memref<8x4xf32>
  rt.kernel "scale" ins(%w : memref<8x4xf32>) outs(%s0 : memref<8x4xf32>) floats = [5.000000e-01]
  %s1 = memref.alloc() : memref<8x4xf32>
  rt.kernel "scale" ins(%w : memref<8x4xf32>) outs(%s1 : memref<8x4xf32>) floats = [5.000000e-01]
  %s2 = memref.alloc() : memref<8x4xf32>
  rt.kernel "scale" ins(%w : memref<8x4xf32>) outs(%s2 : memref<8x4xf32>) floats = [5.000000e-01]
  %s3 = memref.alloc() : memref<8x4xf32>
  rt.kernel "scale" ins(%w : memref<8x4xf32>) outs(%s3 : memref<8x4xf32>) floats = [5.000000e-01]
  %s4 = memref.alloc() : memref<8x4xf32>
  rt.kernel "scale" ins(%w : memref<8x4xf32>) outs(%s4 : memref<8x4xf32>) floats = [5.000000e-01]
  %s5 = memref.alloc() : memref<8x4xf32>
  rt.kernel "scale" ins(%w : memref<8x4xf32>) outs(%s5 : memref<8x4xf32>) floats = [5.000000e-01]
  %s6 = memref.alloc() : memref<8x4xf32>
  rt.kernel "scale" ins(%w : memref<8x4xf32>) outs(%s6 : memref<8x4xf32>) floats = [5.000000e-01]
  %s7 = memref.alloc() : memref<8x4xf32>
  rt.kernel "scale" ins(%w : memref<8x4xf32>) outs(%s7 : memref<8x4xf32>) floats = [5.000000e-01]
  %t0 = memref.subview %tokens[0, 0] [1, 4] [1, 1] : memref<10x4xi32> to memref<1x4xi32, strided<[4, 1]>>
  %x0 = memref.alloc() : memref<1x4x4xf32>
  rt.kernel "embedding" ins(%t0, %s0 : memref<1x4xi32, strided<[4, 1]>>, memref<8x4xf32>) outs(%x0 : memref<1x4x4xf32>)
  %t1 = memref.subview %tokens[1, 0] [1, 4] [1, 1] : memref<10x4xi32> to memref<1x4xi32, strided<[4, 1], offset: 4>>
  %x1 = memref.alloc() : memref<1x4x4xf32>
  rt.kernel "embedding" ins(%t1, %s1 : memref<1x4xi32, strided<[4, 1], offset: 4>>, memref<8x4xf32>) outs(%x1 : memref<1x4x4xf32>)
  %g0 = memref.alloc() : memref<8x4xf32>
  rt.kernel "embedding_grad" ins(%x0, %t0 : memref<1x4x4xf32>, memref<1x4xi32, strided<[4, 1]>>) outs(%g0 : memref<8x4xf32>)
  %t2 = memref.subview %tokens[2, 0] [1, 4] [1, 1] : memref<10x4xi32> to memref<1x4xi32, strided<[4, 1], offset: 8>>
  %x2 = memref.alloc() : memref<1x4x4xf32>
  rt.kernel "embedding" ins(%t2, %s2 : memref<1x4xi32, strided<[4, 1], offset: 8>>, memref<8x4xf32>) outs(%x2 : memref<1x4x4xf32>)
  %g1 = memref.alloc() : memref<8x4xf32>
  rt.kernel "embedding_grad" ins(%x1, %t1 : memref<1x4x4xf32>, memref<1x4xi32, strided<[4, 1], offset: 4>>) outs(%g1 : memref<8x4xf32>)
  %a1 = memref.alloc() : memref<8x4xf32>
  rt.kernel "add" ins(%g0, %g1 : memref<8x4xf32>, memref<8x4xf32>) outs(%a1 : memref<8x4xf32>)
  %t3 = memref.subview %tokens[3, 0] [1, 4] [1, 1] : memref<10x4xi32> to memref<1x4xi32, strided<[4, 1], offset: 12>>
  %x3 = memref.alloc() : memref<1x4x4xf32>
  rt.kernel "embedding" ins(%t3, %s3 : memref<1x4xi32, strided<[4, 1], offset: 12>>, memref<8x4xf32>) outs(%x3 : memref<1x4x4xf32>)
  %g2 = memref.alloc() : memref<8x4xf32>
  rt.kernel "embedding_grad" ins(%x2, %t2 : memref<1x4x4xf32>, memref<1x4xi32, strided<[4, 1], offset: 8>>) outs(%g2 : memref<8x4xf32>)
  %a2 = memref.alloc() : memref<8x4xf32>
  rt.kernel "add" ins(%a1, %g2 : memref<8x4xf32>, memref<8x4xf32>) outs(%a2 : memref<8x4xf32>)
  %t4 = memref.subview %tokens[4, 0] [1, 4] [1, 1] : memref<10x4xi32> to memref<1x4xi32, strided<[4, 1], offset: 16>>
  %x4 = memref.alloc() : memref<1x4x4xf32>
  rt.kernel "embedding" ins(%t4, %s4 : memref<1x4xi32, strided<[4, 1], offset: 16>>, memref<8x4xf32>) outs(%x4 : memref<1x4x4xf32>)
  %g3 = memref.alloc() : memref<8x4xf32>
  rt.kernel "embedding_grad" ins(%x3, %t3 : memref<1x4x4xf32>, memref<1x4xi32, strided<[4, 1], offset: 12>>) outs(%g3 : memref<8x4xf32>)
  %a3 = memref.alloc() : memref<8x4xf32>
  rt.kernel "add" ins(%a2, %g3 : memref<8x4xf32>, memref<8x4xf32>) outs(%a3 : memref<8x4xf32>)
  %t5 = memref.subview %tokens[5, 0] [1, 4] [1, 1] : memref<10x4xi32> to memref<1x4xi32, strided<[4, 1], offset: 20>>
  %x5 = memref.alloc() : memref<1x4x4xf32>
  rt.kernel "embedding" ins(%t5, %s5 : memref<1x4xi32, strided<[4, 1], offset: 20>>, memref<8x4xf32>) outs(%x5 : memref<1x4x4xf32>)
  %g4 = memref.alloc() : memref<8x4xf32>
  rt.kernel "embedding_grad" ins(%x4, %t4 : memref<1x4x4xf32>, memref<1x4xi32, strided<[4, 1], offset: 16>>) outs(%g4 : memref<8x4xf32>)
  %a4 = memref.alloc() : memref<8x4xf32>
  rt.kernel "add" ins(%a3, %g4 : memref<8x4xf32>, memref<8x4xf32>) outs(%a4 : memref<8x4xf32>)
  %t6 = memref.subview %tokens[8, 0] [1, 4] [1, 1] : memref<10x4xi32> to memref<1x4xi32, strided<[4, 1], offset: 32>>
  %x6 = memref.alloc() : memref<1x4x4xf32>
  rt.kernel "embedding" ins(%t6, %s6 : memref<1x4xi32, strided<[4, 1], offset: 32>>, memref<8x4xf32>) outs(%x6 : memref<1x4x4xf32>)
  %g5 = memref.alloc() : memref<8x4xf32>
  rt.kernel "embedding_grad" ins(%x5, %t5 : memref<1x4x4xf32>, memref<1x4xi32, strided<[4, 1], offset: 20>>) outs(%g5 : memref<8x4xf32>)
  %a5 = memref.alloc() : memref<8x4xf32>
  rt.kernel "add" ins(%a4, %g5 : memref<8x4xf32>, memref<8x4xf32>) outs(%a5 : memref<8x4xf32>)
  %t7 = memref.subview %tokens[9, 0] [1, 4] [1, 1] : memref<10x4xi32> to memref<1x4xi32, strided<[4, 1], offset: 36>>
  %x7 = memref.alloc() : memref<1x4x4xf32>
  rt.kernel "embedding" ins(%t7, %s7 : memref<1x4xi32, strided<[4, 1], offset: 36>>, memref<8x4xf32>) outs(%x7 : memref<1x4x4xf32>)
  %g6 = memref.alloc() : memref<8x4xf32>
  rt.kernel "embedding_grad" ins(%x6, %t6 : memref<1x4x4xf32>, memref<1x4xi32, strided<[4, 1], offset: 32>>) outs(%g6 : memref<8x4xf32>)
  %a6 = memref.alloc() : memref<8x4xf32>
  rt.kernel "add" ins(%a5, %g6 : memref<8x4xf32>, memref<8x4xf32>) outs(%a6 : memref<8x4xf32>)
  %g7 = memref.alloc() : memref<8x4xf32>
  rt.kernel "embedding_grad" ins(%x7, %t7 : memref<1x4x4xf32>, memref<1x4xi32, strided<[4, 1], offset: 36>>) outs(%g7 : memref<8x4xf32>)
  %a7 = memref.alloc() : memref<8x4xf32>
  rt.kernel "add" ins(%a6, %g7 : memref<8x4xf32>, memref<8x4xf32>) outs(%a7 : memref<8x4xf32>)
  %out = memref.alloc() : memref<8x4xf32>
  rt.kernel "scale" ins(%a7 : memref<8x4xf32>) outs(%out : memref<8x4xf32>) floats = [1.000000e-01]
  // After an update of w, its scale is another value: not merged.
  rt.kernel "add" ins(%w, %out : memref<8x4xf32>, memref<8x4xf32>) outs(%w : memref<8x4xf32>)
  %after = memref.alloc() : memref<8x4xf32>
  rt.kernel "scale" ins(%w : memref<8x4xf32>) outs(%after : memref<8x4xf32>) floats = [5.000000e-01]
  rt.kernel "embedding" ins(%t7, %after : memref<1x4xi32, strided<[4, 1], offset: 36>>, memref<8x4xf32>) outs(%x7 : memref<1x4x4xf32>)
  return
}
