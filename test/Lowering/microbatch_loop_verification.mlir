// RUN: partition-opt %s --rt-microbatch-loop -split-input-file -verify-diagnostics

// Every error --rt-microbatch-loop and the loop's ops give: a step whose
// middle micro-batches differ, or whose code the loop cannot keep once.

!rows = memref<16x4xi32>
!mb0 = memref<4x4xi32, strided<[4, 1]>>
!mb1 = memref<4x4xi32, strided<[4, 1], offset: 16>>
!mb2 = memref<4x4xi32, strided<[4, 1], offset: 32>>
!mb3 = memref<4x4xi32, strided<[4, 1], offset: 48>>
!x = memref<4x4x4xf32>
!g = memref<8x4xf32>

// Micro-batch 2 does one more thing than micro-batch 1.
// expected-error @+1 {{the body has 3 ops and its copy 5}}
func.func @longer(%w: !g {rt.role = "param", rt.name = "w"},
                  %tokens: !rows {rt.role = "tokens"})
    attributes {xfmr.train_step = {microbatches = 4 : i64, microbatch_loop = 2 : i64}} {
  %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb0
  %x0 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t0, %w : !mb0, !g) outs(%x0 : !x)
  %t1 = memref.subview %tokens[4, 0] [4, 4] [1, 1] : !rows to !mb1
  %x1 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t1, %w : !mb1, !g) outs(%x1 : !x)
  %t2 = memref.subview %tokens[8, 0] [4, 4] [1, 1] : !rows to !mb2
  %x2 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t2, %w : !mb2, !g) outs(%x2 : !x)
  %y2 = memref.alloc() : !x
  rt.kernel "add" ins(%x2, %x2 : !x, !x) outs(%y2 : !x)
  %t3 = memref.subview %tokens[12, 0] [4, 4] [1, 1] : !rows to !mb3
  %x3 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t3, %w : !mb3, !g) outs(%x3 : !x)
  return
}

// -----

!rows = memref<16x4xi32>
!mb0 = memref<4x4xi32, strided<[4, 1]>>
!mb1 = memref<4x4xi32, strided<[4, 1], offset: 16>>
!mb2 = memref<4x4xi32, strided<[4, 1], offset: 32>>
!mb3 = memref<4x4xi32, strided<[4, 1], offset: 48>>
!x = memref<4x4x4xf32>
!g = memref<8x4xf32>

// The same number of ops, another kernel.
// expected-error @+1 {{micro-batch 2's op #12 (rt.kernel) is not micro-batch 1's (rt.kernel): other attributes or result types}}
func.func @other_kernel(%w: !g {rt.role = "param", rt.name = "w"},
                        %tokens: !rows {rt.role = "tokens"})
    attributes {xfmr.train_step = {microbatches = 4 : i64, microbatch_loop = 2 : i64}} {
  %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb0
  %x0 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t0, %w : !mb0, !g) outs(%x0 : !x)
  %t1 = memref.subview %tokens[4, 0] [4, 4] [1, 1] : !rows to !mb1
  %x1 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t1, %w : !mb1, !g) outs(%x1 : !x)
  %y1 = memref.alloc() : !x
  rt.kernel "add" ins(%x1, %x1 : !x, !x) outs(%y1 : !x)
  %t2 = memref.subview %tokens[8, 0] [4, 4] [1, 1] : !rows to !mb2
  %x2 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t2, %w : !mb2, !g) outs(%x2 : !x)
  %y2 = memref.alloc() : !x
  rt.kernel "linear" ins(%x2, %x2 : !x, !x) outs(%y2 : !x)
  %t3 = memref.subview %tokens[12, 0] [4, 4] [1, 1] : !rows to !mb3
  %x3 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t3, %w : !mb3, !g) outs(%x3 : !x)
  return
}

// -----

!rows = memref<16x4xi32>
!mb0 = memref<4x4xi32, strided<[4, 1]>>
!mb1 = memref<4x4xi32, strided<[4, 1], offset: 16>>
!mb2 = memref<4x4xi32, strided<[4, 1], offset: 32>>
!mb3 = memref<4x4xi32, strided<[4, 1], offset: 48>>
!x = memref<4x4x4xf32>
!g = memref<8x4xf32>

// Micro-batch 1 reads micro-batch 0's activations, micro-batch 2 another
// buffer written before micro-batch 1.
// expected-error @+1 {{micro-batch 2 reads a value written before micro-batch 1 that micro-batch 1 does not, at rt.kernel (op #9: micro-batch 1 reads op #1, micro-batch 2 op #3)}}
func.func @reads_older(%w: !g {rt.role = "param", rt.name = "w"},
                       %tokens: !rows {rt.role = "tokens"})
    attributes {xfmr.train_step = {microbatches = 4 : i64, microbatch_loop = 2 : i64}} {
  %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb0
  %x0 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t0, %w : !mb0, !g) outs(%x0 : !x)
  %z = memref.alloc() : !x
  rt.kernel "add" ins(%x0, %x0 : !x, !x) outs(%z : !x)
  %t1 = memref.subview %tokens[4, 0] [4, 4] [1, 1] : !rows to !mb1
  %x1 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t1, %w : !mb1, !g) outs(%x1 : !x)
  %y1 = memref.alloc() : !x
  rt.kernel "add" ins(%x1, %x0 : !x, !x) outs(%y1 : !x)
  %t2 = memref.subview %tokens[8, 0] [4, 4] [1, 1] : !rows to !mb2
  %x2 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t2, %w : !mb2, !g) outs(%x2 : !x)
  %y2 = memref.alloc() : !x
  rt.kernel "add" ins(%x2, %z : !x, !x) outs(%y2 : !x)
  %t3 = memref.subview %tokens[12, 0] [4, 4] [1, 1] : !rows to !mb3
  %x3 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t3, %w : !mb3, !g) outs(%x3 : !x)
  return
}

// -----

!rows = memref<16x4xi32>
!mb0 = memref<4x4xi32, strided<[4, 1]>>
!mb1 = memref<4x4xi32, strided<[4, 1], offset: 16>>
!mb2 = memref<4x4xi32, strided<[4, 1], offset: 32>>
!mb3 = memref<4x4xi32, strided<[4, 1], offset: 48>>
!x = memref<4x4x4xf32>
!g = memref<8x4xf32>

// Micro-batch 2 reads its result where micro-batch 1 reads its
// activations.
// expected-error @+1 {{micro-batch 2 reads another value than micro-batch 1's counterpart at rt.kernel (op #7)}}
func.func @reads_other(%w: !g {rt.role = "param", rt.name = "w"},
                       %tokens: !rows {rt.role = "tokens"})
    attributes {xfmr.train_step = {microbatches = 4 : i64, microbatch_loop = 2 : i64}} {
  %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb0
  %x0 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t0, %w : !mb0, !g) outs(%x0 : !x)
  %t1 = memref.subview %tokens[4, 0] [4, 4] [1, 1] : !rows to !mb1
  %x1 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t1, %w : !mb1, !g) outs(%x1 : !x)
  %y1 = memref.alloc() : !x
  rt.kernel "add" ins(%x1, %x1 : !x, !x) outs(%y1 : !x)
  %t2 = memref.subview %tokens[8, 0] [4, 4] [1, 1] : !rows to !mb2
  %x2 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t2, %w : !mb2, !g) outs(%x2 : !x)
  %y2 = memref.alloc() : !x
  rt.kernel "add" ins(%x2, %y2 : !x, !x) outs(%y2 : !x)
  %t3 = memref.subview %tokens[12, 0] [4, 4] [1, 1] : !rows to !mb3
  %x3 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t3, %w : !mb3, !g) outs(%x3 : !x)
  return
}

// -----

!rows = memref<16x4xi32>
!mb0 = memref<4x4xi32, strided<[4, 1]>>
!mb1 = memref<4x4xi32, strided<[4, 1], offset: 16>>
!mb3 = memref<4x4xi32, strided<[4, 1], offset: 48>>
!x = memref<4x4x4xf32>
!g = memref<8x4xf32>

// A loop of 1 run over 3 micro-batches: the step would need 4.
// expected-error @+1 {{its step records a loop of 1 runs of 1 micro-batches with 4 of 3 compiled (tail from 3), which is not one}}
func.func @wrong_count(%w: !g {rt.role = "param", rt.name = "w"},
                       %tokens: !rows {rt.role = "tokens"})
    attributes {xfmr.train_step = {microbatches = 3 : i64, microbatch_loop = 1 : i64}} {
  %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb0
  %x0 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t0, %w : !mb0, !g) outs(%x0 : !x)
  %t3 = memref.subview %tokens[12, 0] [4, 4] [1, 1] : !rows to !mb3
  %x3 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t3, %w : !mb3, !g) outs(%x3 : !x)
  return
}

// -----

!rows = memref<16x4xi32>
!mb0 = memref<4x4xi32, strided<[4, 1]>>
!mb1 = memref<4x4xi32, strided<[4, 1], offset: 16>>
!mb3 = memref<4x4xi32, strided<[4, 1], offset: 48>>
!x = memref<4x4x4xf32>
!g = memref<8x4xf32>

// Micro-batch 2 is missing.
// expected-error @+1 {{its loop's copy starts at the first op viewing micro-batch 2's rows, which the function does not hold}}
func.func @missing(%w: !g {rt.role = "param", rt.name = "w"},
                   %tokens: !rows {rt.role = "tokens"})
    attributes {xfmr.train_step = {microbatches = 4 : i64, microbatch_loop = 2 : i64}} {
  %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb0
  %x0 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t0, %w : !mb0, !g) outs(%x0 : !x)
  %t1 = memref.subview %tokens[4, 0] [4, 4] [1, 1] : !rows to !mb1
  %x1 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t1, %w : !mb1, !g) outs(%x1 : !x)
  %t3 = memref.subview %tokens[12, 0] [4, 4] [1, 1] : !rows to !mb3
  %x3 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t3, %w : !mb3, !g) outs(%x3 : !x)
  return
}

// -----

!rows = memref<16x4xi32>
!mb0 = memref<4x4xi32, strided<[4, 1]>>
!mb1 = memref<4x4xi32, strided<[4, 1], offset: 16>>
!mb2 = memref<4x4xi32, strided<[4, 1], offset: 32>>
!mb3 = memref<4x4xi32, strided<[4, 1], offset: 48>>
!x = memref<4x4x4xf32>
!g = memref<8x4xf32>

// After the loop, only its last run's values exist: micro-batch 1's own
// cannot be read there.
// expected-error @+1 {{op #13 (rt.kernel) after the loop reads a value of micro-batch 1 (op #4)}}
func.func @reads_first_run(%w: !g {rt.role = "param", rt.name = "w"},
                           %tokens: !rows {rt.role = "tokens"})
    attributes {xfmr.train_step = {microbatches = 4 : i64, microbatch_loop = 2 : i64}} {
  %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb0
  %x0 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t0, %w : !mb0, !g) outs(%x0 : !x)
  %t1 = memref.subview %tokens[4, 0] [4, 4] [1, 1] : !rows to !mb1
  %x1 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t1, %w : !mb1, !g) outs(%x1 : !x)
  %t2 = memref.subview %tokens[8, 0] [4, 4] [1, 1] : !rows to !mb2
  %x2 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t2, %w : !mb2, !g) outs(%x2 : !x)
  %t3 = memref.subview %tokens[12, 0] [4, 4] [1, 1] : !rows to !mb3
  %x3 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t3, %w : !mb3, !g) outs(%x3 : !x)
  %y = memref.alloc() : !x
  rt.kernel "add" ins(%x1, %x3 : !x, !x) outs(%y : !x)
  return
}

// -----

!rows = memref<16x4xi32>
!mb0 = memref<4x4xi32, strided<[4, 1]>>
!mb1 = memref<4x4xi32, strided<[4, 1], offset: 16>>
!mb2 = memref<4x4xi32, strided<[4, 1], offset: 32>>
!mb3 = memref<4x4xi32, strided<[4, 1], offset: 48>>
!x = memref<4x4x4xf32>
!g = memref<8x4xf32>

// The buffer micro-batch 1 hands on is written (op #9) before it is done
// with the one it was handed (op #11): one buffer cannot hold both.
// expected-error @+1 {{micro-batch 1 writes the 'memref<8x4xf32>' it hands on (op #9) before it is done reading the one it was handed (op #11)}}
func.func @hands_on_early(%w: !g {rt.role = "param", rt.name = "w"},
                          %tokens: !rows {rt.role = "tokens"})
    attributes {xfmr.train_step = {microbatches = 4 : i64, microbatch_loop = 2 : i64}} {
  %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb0
  %x0 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t0, %w : !mb0, !g) outs(%x0 : !x)
  %g0 = memref.alloc() : !g
  rt.kernel "embedding_grad" ins(%x0, %t0 : !x, !mb0) outs(%g0 : !g)
  %t1 = memref.subview %tokens[4, 0] [4, 4] [1, 1] : !rows to !mb1
  %x1 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t1, %g0 : !mb1, !g) outs(%x1 : !x)
  %g1 = memref.alloc() : !g
  rt.kernel "embedding_grad" ins(%x1, %t1 : !x, !mb1) outs(%g1 : !g)
  %d1 = memref.alloc() : !g
  rt.kernel "add" ins(%g1, %g0 : !g, !g) outs(%d1 : !g)
  %t2 = memref.subview %tokens[8, 0] [4, 4] [1, 1] : !rows to !mb2
  %x2 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t2, %g1 : !mb2, !g) outs(%x2 : !x)
  %g2 = memref.alloc() : !g
  rt.kernel "embedding_grad" ins(%x2, %t2 : !x, !mb2) outs(%g2 : !g)
  %d2 = memref.alloc() : !g
  rt.kernel "add" ins(%g2, %g1 : !g, !g) outs(%d2 : !g)
  %t3 = memref.subview %tokens[12, 0] [4, 4] [1, 1] : !rows to !mb3
  %x3 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t3, %g2 : !mb3, !g) outs(%x3 : !x)
  return
}

// -----

!rows = memref<16x4xi32>
!mb0 = memref<4x4xi32, strided<[4, 1]>>
!mb1 = memref<4x4xi32, strided<[4, 1], offset: 16>>
!mb2 = memref<4x4xi32, strided<[4, 1], offset: 32>>
!mb3 = memref<4x4xi32, strided<[4, 1], offset: 48>>
!x = memref<4x4x4xf32>
!g = memref<8x4xf32>

// Each micro-batch waits for the previous one's collective: micro-batch
// 2's is waited for after the loop. Each run must finish what it starts.
module {
  dist.mesh @mesh axes = [dp = 2]
  // expected-error @+1 {{op #17 (rt.wait) after the loop waits for what micro-batch 2 started (op #12): each run must finish what it starts}}
  func.func @starts_across(%w: !g {rt.role = "param", rt.name = "w"},
                           %tokens: !rows {rt.role = "tokens"})
      attributes {xfmr.train_step = {microbatches = 4 : i64, microbatch_loop = 2 : i64}} {
    %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb0
    %x0 = memref.alloc() : !x
    rt.kernel "embedding" ins(%t0, %w : !mb0, !g) outs(%x0 : !x)
    %s0 = rt.all_reduce async %x0 on @mesh axes [dp] reduce = sum label = "x" : !x
    %t1 = memref.subview %tokens[4, 0] [4, 4] [1, 1] : !rows to !mb1
    %x1 = memref.alloc() : !x
    rt.kernel "embedding" ins(%t1, %w : !mb1, !g) outs(%x1 : !x)
    %s1 = rt.all_reduce async %x1 on @mesh axes [dp] reduce = sum label = "x" : !x
    rt.wait %s0, %x0 : !x
    %t2 = memref.subview %tokens[8, 0] [4, 4] [1, 1] : !rows to !mb2
    %x2 = memref.alloc() : !x
    rt.kernel "embedding" ins(%t2, %w : !mb2, !g) outs(%x2 : !x)
    %s2 = rt.all_reduce async %x2 on @mesh axes [dp] reduce = sum label = "x" : !x
    rt.wait %s1, %x1 : !x
    %t3 = memref.subview %tokens[12, 0] [4, 4] [1, 1] : !rows to !mb3
    %x3 = memref.alloc() : !x
    rt.kernel "embedding" ins(%t3, %w : !mb3, !g) outs(%x3 : !x)
    rt.wait %s2, %x2 : !x
    return
  }
}

// -----

// The loop's ops: one begin, then one end, in a block.
func.func @no_end() {
  // expected-error @+1 {{needs an rt.microbatch_loop_end after it in its block}}
  rt.microbatch_loop_begin count = 2
  return
}

// -----

func.func @end_first() {
  // expected-error @+1 {{needs an rt.microbatch_loop_begin before it in its block, after any other rt.microbatch_loop_end}}
  rt.microbatch_loop_end
  rt.microbatch_loop_begin count = 2
  return
}

// -----

func.func @two_loops() {
  rt.microbatch_loop_begin count = 2
  rt.microbatch_loop_end
  // expected-error @+1 {{needs the block's only micro-batch loop, but the block begins one before it}}
  rt.microbatch_loop_begin count = 2
  rt.microbatch_loop_end
  return
}

// -----

func.func @no_runs() {
  // expected-error @+1 {{attribute 'count' failed to satisfy constraint}}
  rt.microbatch_loop_begin count = 0
  rt.microbatch_loop_end
  return
}

// -----

func.func @no_stride() {
  // expected-error @+1 {{attribute 'stride' failed to satisfy constraint}}
  rt.microbatch_loop_begin count = 2 stride = 0
  rt.microbatch_loop_end
  return
}

// -----

!rows = memref<16x4xi32>
!mb0 = memref<4x4xi32, strided<[4, 1]>>
!x = memref<4x4x4xf32>
!g = memref<8x4xf32>

// A pipeline's loop (a stride) needs --dist-pipeline's anchors.
// expected-error @+1 {{a loop of stride 2 needs dist.microbatch_loop_anchors (--dist-pipeline)}}
func.func @stride_without_anchors(%w: !g {rt.role = "param", rt.name = "w"},
                                  %tokens: !rows {rt.role = "tokens"})
    attributes {xfmr.train_step = {microbatches = 10 : i64, microbatch_loop = 3 : i64, microbatch_loop_stride = 2 : i64, microbatch_loop_split = 6 : i64, microbatch_loop_compiled = 8 : i64}} {
  %t0 = memref.subview %tokens[0, 0] [4, 4] [1, 1] : !rows to !mb0
  %x0 = memref.alloc() : !x
  rt.kernel "embedding" ins(%t0, %w : !mb0, !g) outs(%x0 : !x)
  return
}

// -----

!x = memref<4x4x4xf32>

dist.mesh @mesh axes = [pp = 2]

// A stage whose body starts at a receive it does not hold.
// expected-error @+1 {{its loop's body starts at the receive of 'F mb3 activations', which the function does not hold}}
func.func @missing_receive(%targets: memref<40x4xi32> {rt.role = "targets"})
    attributes {dist.microbatch_loop_anchors = ["F mb3 activations", "F mb5 activations", "F mb7 activations"],
                xfmr.train_step = {microbatches = 10 : i64, microbatch_loop = 3 : i64, microbatch_loop_stride = 2 : i64, microbatch_loop_split = 6 : i64, microbatch_loop_compiled = 8 : i64}} {
  %x0 = memref.alloc() : !x
  rt.recv %x0 from @mesh [pp = 0] label = "F mb0 activations stage0->1" : !x
  return
}

// -----

!x = memref<4x4x4xf32>

dist.mesh @mesh axes = [pp = 2]

// Anchors out of order.
// expected-error @+1 {{its loop's body, copy and tail do not start in that order (ops #2, #0, #4)}}
func.func @out_of_order(%targets: memref<40x4xi32> {rt.role = "targets"})
    attributes {dist.microbatch_loop_anchors = ["F mb1 activations", "F mb0 activations", "F mb2 activations"],
                xfmr.train_step = {microbatches = 10 : i64, microbatch_loop = 3 : i64, microbatch_loop_stride = 2 : i64, microbatch_loop_split = 6 : i64, microbatch_loop_compiled = 8 : i64}} {
  %x0 = memref.alloc() : !x
  rt.recv %x0 from @mesh [pp = 0] label = "F mb0 activations stage0->1" : !x
  %x1 = memref.alloc() : !x
  rt.recv %x1 from @mesh [pp = 0] label = "F mb1 activations stage0->1" : !x
  %x2 = memref.alloc() : !x
  rt.recv %x2 from @mesh [pp = 0] label = "F mb2 activations stage0->1" : !x
  return
}
