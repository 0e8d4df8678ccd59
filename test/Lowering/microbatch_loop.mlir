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
