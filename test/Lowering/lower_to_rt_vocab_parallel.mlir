// RUN: partition-opt %s --lower-to-rt | FileCheck %s
// The output verifies and is stable under a round trip.
// RUN: partition-opt %s --lower-to-rt | partition-opt --verify-roundtrip > /dev/null

// --lower-to-rt on the vocabulary-parallel ops: each becomes the kernel of
// its name (runtime/program/Kernels.def), operands as inputs in order, and %shard
// (dist.axis_index on [tp]) the axis-index buffer the runtime fills. The
// step is the vocabulary-parallel forward and backward of a tied embedding
// and LM head, as the tensor-parallel pass emits it (tp = 2, V = 16, Vl = 8).

// CHECK-LABEL: func.func @vocab_parallel
// CHECK-SAME:    (%[[WTE:.*]]: memref<8x4xf32> {rt.name = "wte", rt.role = "param"}, %[[TOK:.*]]: memref<2x3xi32> {rt.role = "tokens"}, %[[TGT:.*]]: memref<2x3xi32> {rt.role = "targets"}, %[[LOSS:.*]]: memref<f32> {rt.role = "loss"}, %[[DWTE:.*]]: memref<8x4xf32> {rt.name = "wte", rt.role = "gradient"}, %[[S:.*]]: memref<i32> {rt.name = "tp", rt.role = "axis_index"})
// CHECK:         %[[X:.*]] = memref.alloc() : memref<2x3x4xf32>
// CHECK-NEXT:    rt.kernel "vocab_parallel_embedding" ins(%[[TOK]], %[[WTE]], %[[S]] : memref<2x3xi32>, memref<8x4xf32>, memref<i32>) outs(%[[X]] : memref<2x3x4xf32>){{$}}
// CHECK-NEXT:    rt.all_reduce %[[X]] on @mesh axes [tp] reduce = sum label = "embedding"
// CHECK-NEXT:    %[[L:.*]] = memref.alloc() : memref<2x3x8xf32>
// CHECK-NEXT:    rt.kernel "linear" ins(%[[X]], %[[WTE]] : memref<2x3x4xf32>, memref<8x4xf32>) outs(%[[L]] : memref<2x3x8xf32>)
// CHECK-NEXT:    %[[M:.*]] = memref.alloc() : memref<2x3xf32>
// CHECK-NEXT:    rt.kernel "vocab_parallel_max" ins(%[[L]] : memref<2x3x8xf32>) outs(%[[M]] : memref<2x3xf32>){{$}}
// CHECK-NEXT:    rt.all_reduce %[[M]] on @mesh axes [tp] reduce = max label = "max"
// CHECK-NEXT:    %[[T:.*]] = memref.alloc() : memref<2x3xf32>
// CHECK-NEXT:    rt.kernel "vocab_parallel_target_logit" ins(%[[L]], %[[TGT]], %[[S]] : memref<2x3x8xf32>, memref<2x3xi32>, memref<i32>) outs(%[[T]] : memref<2x3xf32>){{$}}
// CHECK-NEXT:    %[[SE:.*]] = memref.alloc() : memref<2x3xf32>
// CHECK-NEXT:    rt.kernel "vocab_parallel_sum_exp" ins(%[[L]], %[[M]] : memref<2x3x8xf32>, memref<2x3xf32>) outs(%[[SE]] : memref<2x3xf32>){{$}}
// CHECK-NEXT:    rt.all_reduce %[[T]], %[[SE]] on @mesh axes [tp] reduce = sum label = "softmax"
// CHECK-NEXT:    rt.kernel "vocab_parallel_loss" ins(%[[M]], %[[SE]], %[[T]] : memref<2x3xf32>, memref<2x3xf32>, memref<2x3xf32>) outs(%[[LOSS]] : memref<f32>){{$}}
// CHECK-NEXT:    %[[ONE:.*]] = memref.alloc() : memref<f32>
// CHECK-NEXT:    rt.kernel "fill" outs(%[[ONE]] : memref<f32>)
// CHECK-NEXT:    %[[DL:.*]] = memref.alloc() : memref<2x3x8xf32>
// CHECK-NEXT:    rt.kernel "vocab_parallel_cross_entropy_grad" ins(%[[ONE]], %[[L]], %[[TGT]], %[[S]], %[[M]], %[[SE]] : memref<f32>, memref<2x3x8xf32>, memref<2x3xi32>, memref<i32>, memref<2x3xf32>, memref<2x3xf32>) outs(%[[DL]] : memref<2x3x8xf32>){{$}}
// CHECK-NEXT:    %[[DX:.*]] = memref.alloc() : memref<2x3x4xf32>
// CHECK-NEXT:    rt.kernel "linear_grad_input" ins(%[[DL]], %[[WTE]] : memref<2x3x8xf32>, memref<8x4xf32>) outs(%[[DX]] : memref<2x3x4xf32>)
// CHECK-NEXT:    rt.all_reduce %[[DX]] on @mesh axes [tp] reduce = sum label = "dx"
// CHECK-NEXT:    rt.kernel "vocab_parallel_embedding_grad" ins(%[[DX]], %[[TOK]], %[[S]] : memref<2x3x4xf32>, memref<2x3xi32>, memref<i32>) outs(%[[DWTE]] : memref<8x4xf32>){{$}}
// CHECK-NEXT:    return
dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
func.func @vocab_parallel(%wte: tensor<8x4xf32> {xfmr.param = "wte"}, %tokens: tensor<2x3xi32> {xfmr.input = "tokens"}, %targets: tensor<2x3xi32> {xfmr.input = "targets"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<8x4xf32> {xfmr.gradient = "wte"})
    attributes {xfmr.train_step = {optimizer = "none"}} {
  %s = dist.axis_index on @mesh axes [tp] : tensor<i32>
  %xp = xfmr.vocab_parallel_embedding %tokens, %wte, %s : (tensor<2x3xi32>, tensor<8x4xf32>, tensor<i32>) -> tensor<2x3x4xf32>
  %x = dist.all_reduce %xp on @mesh axes [tp] reduce = sum {dist.label = "embedding"} : tensor<2x3x4xf32>
  %logits = xfmr.linear %x, %wte : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %lmax = xfmr.vocab_parallel_max %logits : (tensor<2x3x8xf32>) -> tensor<2x3xf32>
  %max = dist.all_reduce %lmax on @mesh axes [tp] reduce = max {dist.label = "max"} : tensor<2x3xf32>
  %ltarget = xfmr.vocab_parallel_target_logit %logits, %targets, %s : (tensor<2x3x8xf32>, tensor<2x3xi32>, tensor<i32>) -> tensor<2x3xf32>
  %lsum = xfmr.vocab_parallel_sum_exp %logits, %max : (tensor<2x3x8xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %target, %sum_exp = dist.all_reduce %ltarget, %lsum on @mesh axes [tp] reduce = sum {dist.label = "softmax"} : tensor<2x3xf32>, tensor<2x3xf32>
  %loss = xfmr.vocab_parallel_loss %max, %sum_exp, %target : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %dlogits = xfmr.vocab_parallel_cross_entropy_grad %one, %logits, %targets, %s, %max, %sum_exp : (tensor<f32>, tensor<2x3x8xf32>, tensor<2x3xi32>, tensor<i32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3x8xf32>
  %dxp = xfmr.linear_grad_input %dlogits, %wte : (tensor<2x3x8xf32>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
  %dx = dist.all_reduce %dxp on @mesh axes [tp] reduce = sum {dist.label = "dx"} : tensor<2x3x4xf32>
  %dw = xfmr.vocab_parallel_embedding_grad %dx, %tokens, %s : (tensor<2x3x4xf32>, tensor<2x3xi32>, tensor<i32>) -> tensor<8x4xf32>
  return %loss, %dw : tensor<f32>, tensor<8x4xf32>
}
