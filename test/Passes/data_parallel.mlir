// --dist-data-parallel: the training and evaluation steps' batch is split
// over the mesh's dp axis; sums over the batch are all-reduced where they are
// first needed in full, in buckets, in backward order.

// RUN: partition-opt %s -split-input-file --dist-data-parallel | FileCheck %s
// RUN: partition-opt %s -split-input-file --dist-data-parallel="bucket-bytes=512" | FileCheck %s --check-prefix=SMALL

// One step: the tokens and every activation take the local rows; the
// weight gradient sums over the batch and is all-reduced before AdamW; the
// loss (a mean) is scaled by 1/dp into a share of a sum and all-reduced on
// its own; so is the seed of the cross-entropy gradient.

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[TOKENS:[^:]*]]: tensor<2x8xi32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, xfmr.input = "tokens"}
// CHECK-SAME: %[[TARGETS:[^:]*]]: tensor<2x8xi32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, xfmr.input = "targets"}
// CHECK: %[[X:.*]] = xfmr.embedding %[[TOKENS]], %{{.*}} : (tensor<2x8xi32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
// CHECK: %[[LOGITS:.*]] = xfmr.linear %[[X]], %{{.*}} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
// CHECK: %[[MEAN:.*]] = xfmr.softmax_cross_entropy %[[LOGITS]], %[[TARGETS]] : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
// CHECK: %[[SHARE:.*]] = xfmr.scale %[[MEAN]] {factor = 5.000000e-01 : f32}
// CHECK-NEXT: %[[LOSS:.*]] = dist.all_reduce %[[SHARE]] on @mesh axes [dp] reduce = sum {dist.label = "loss"} : tensor<f32>
// CHECK: %[[SEED:.*]] = arith.constant
// CHECK: %[[SEED_SHARE:.*]] = xfmr.scale %[[SEED]] {factor = 5.000000e-01 : f32}
// CHECK: %[[DLOGITS:.*]] = xfmr.softmax_cross_entropy_grad %[[SEED_SHARE]], %[[LOGITS]], %[[TARGETS]] : (tensor<f32>, tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
// CHECK: %[[DW:.*]] = xfmr.linear_grad_weight %[[DLOGITS]], %[[X]] : (tensor<2x8x16xf32>, tensor<2x8x8xf32>) -> tensor<16x8xf32>
// CHECK: %[[SUM:.*]] = dist.all_reduce %[[DW]] on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 0"} : tensor<16x8xf32>
// CHECK: xfmr.adamw %{{.*}}, %[[SUM]],
// CHECK: return %[[LOSS]],
// CHECK-SAME: : tensor<f32>, tensor<16x8xf32>
func.func @train_step(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                      %w: tensor<16x8xf32> {xfmr.param = "w"},
                      %m: tensor<16x8xf32> {xfmr.moment1 = "w"},
                      %v: tensor<16x8xf32> {xfmr.moment2 = "w"},
                      %step: tensor<i32> {xfmr.input = "step"},
                      %lr: tensor<f32> {xfmr.input = "lr"},
                      %tokens: tensor<4x8xi32> {xfmr.input = "tokens"},
                      %targets: tensor<4x8xi32> {xfmr.input = "targets"})
    -> (tensor<f32> {xfmr.output = "loss"}, tensor<16x8xf32> {xfmr.param = "w"})
    attributes {xfmr.train_step = {}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<4x8xi32>, tensor<16x8xf32>) -> tensor<4x8x8xf32>
  %logits = xfmr.linear %x, %w : (tensor<4x8x8xf32>, tensor<16x8xf32>) -> tensor<4x8x16xf32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<4x8x16xf32>, tensor<4x8xi32>) -> tensor<f32>
  %seed = arith.constant dense<1.0> : tensor<f32>
  %dlogits = xfmr.softmax_cross_entropy_grad %seed, %logits, %targets : (tensor<f32>, tensor<4x8x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %dw = xfmr.linear_grad_weight %dlogits, %x : (tensor<4x8x16xf32>, tensor<4x8x8xf32>) -> tensor<16x8xf32>
  %p, %m2, %v2 = xfmr.adamw %w, %dw, %m, %v, %step, %lr : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
  return %loss, %p : tensor<f32>, tensor<16x8xf32>
}
}

// -----

// Micro-batches: each slice takes the same share of the local rows, and the
// gradients accumulated over them (partial sums, added) are reduced once,
// after the last micro-batch, together in one bucket.

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[TOKENS:[^:]*]]: tensor<4x8xi32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, xfmr.input = "tokens"}
// CHECK: tensor.extract_slice %[[TOKENS]][0, 0] [2, 8] [1, 1] : tensor<4x8xi32> to tensor<2x8xi32>
// CHECK: tensor.extract_slice %[[TOKENS]][2, 0] [2, 8] [1, 1] : tensor<4x8xi32> to tensor<2x8xi32>
// CHECK-NOT: dist.all_reduce
// CHECK: %[[ACC_B:.*]] = xfmr.add
// CHECK: %[[ACC_A:.*]] = xfmr.add
// CHECK-NEXT: %[[SUMS:.*]]:2 = dist.all_reduce %[[ACC_B]], %[[ACC_A]] on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 0"} : tensor<16x8xf32>, tensor<16x8xf32>
// CHECK-NOT: dist.all_reduce
// CHECK: return %[[SUMS]]#1, %[[SUMS]]#0

// A small bucket size splits the gradients into two buckets, the first
// finished first.
// SMALL-LABEL: func.func @train_step
// SMALL: %[[ACC_B:.*]] = xfmr.add
// SMALL-NEXT: dist.all_reduce %[[ACC_B]] on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 0"}
// SMALL-NEXT: xfmr.embedding_grad
// SMALL-NEXT: %[[ACC_A:.*]] = xfmr.add
// SMALL-NEXT: dist.all_reduce %[[ACC_A]] on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 1"}
func.func @train_step(%a: tensor<16x8xf32> {xfmr.param = "a"},
                      %b: tensor<16x8xf32> {xfmr.param = "b"},
                      %tokens: tensor<8x8xi32> {xfmr.input = "tokens"})
    -> (tensor<16x8xf32> {xfmr.gradient = "a"}, tensor<16x8xf32> {xfmr.gradient = "b"})
    attributes {xfmr.train_step = {}} {
  %t0 = tensor.extract_slice %tokens[0, 0] [4, 8] [1, 1] : tensor<8x8xi32> to tensor<4x8xi32>
  %x0 = xfmr.embedding %t0, %a : (tensor<4x8xi32>, tensor<16x8xf32>) -> tensor<4x8x8xf32>
  %ga0 = xfmr.embedding_grad %x0, %t0 : (tensor<4x8x8xf32>, tensor<4x8xi32>) -> tensor<16x8xf32>
  %gb0 = xfmr.embedding_grad %x0, %t0 : (tensor<4x8x8xf32>, tensor<4x8xi32>) -> tensor<16x8xf32>
  %t1 = tensor.extract_slice %tokens[4, 0] [4, 8] [1, 1] : tensor<8x8xi32> to tensor<4x8xi32>
  %x1 = xfmr.embedding %t1, %a : (tensor<4x8xi32>, tensor<16x8xf32>) -> tensor<4x8x8xf32>
  %gb1 = xfmr.embedding_grad %x1, %t1 : (tensor<4x8x8xf32>, tensor<4x8xi32>) -> tensor<16x8xf32>
  %gb = xfmr.add %gb0, %gb1 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %ga1 = xfmr.embedding_grad %x1, %t1 : (tensor<4x8x8xf32>, tensor<4x8xi32>) -> tensor<16x8xf32>
  %ga = xfmr.add %ga0, %ga1 : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  return %ga, %gb : tensor<16x8xf32>, tensor<16x8xf32>
}
}

// -----

// The evaluation step: only the loss is reduced.

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 4, pp = 1, tp = 1]
// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: tensor<1x8xi32> {dist.local_sharding = #dist.sharding<@mesh, {{\[\[}}dp], []]>, xfmr.input = "tokens"}
// CHECK: %[[SHARE:.*]] = xfmr.scale %{{.*}} {factor = 2.500000e-01 : f32}
// CHECK-NEXT: %[[LOSS:.*]] = dist.all_reduce %[[SHARE]] on @mesh axes [dp] reduce = sum {dist.label = "loss"} : tensor<f32>
// CHECK-NEXT: return %[[LOSS]]
func.func @eval_step(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                     %tokens: tensor<4x8xi32> {xfmr.input = "tokens"},
                     %targets: tensor<4x8xi32> {xfmr.input = "targets"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.eval_step = {}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<4x8xi32>, tensor<16x8xf32>) -> tensor<4x8x8xf32>
  %logits = xfmr.linear %x, %wte : (tensor<4x8x8xf32>, tensor<16x8xf32>) -> tensor<4x8x16xf32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<4x8x16xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}

// -----

// dp = 1: nothing changes.

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]
// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: tensor<4x8xi32> {xfmr.input = "tokens"}
// CHECK-NOT: dist.all_reduce
// CHECK-NOT: xfmr.scale
func.func @eval_step(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                     %tokens: tensor<4x8xi32> {xfmr.input = "tokens"},
                     %targets: tensor<4x8xi32> {xfmr.input = "targets"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.eval_step = {}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<4x8xi32>, tensor<16x8xf32>) -> tensor<4x8x8xf32>
  %logits = xfmr.linear %x, %wte : (tensor<4x8x8xf32>, tensor<16x8xf32>) -> tensor<4x8x16xf32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<4x8x16xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}
