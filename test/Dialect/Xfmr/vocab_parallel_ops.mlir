// RUN: partition-opt %s -split-input-file | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | partition-opt -split-input-file | FileCheck %s

// Round trip of the vocabulary-parallel ops, in the custom and in the
// generic form: [B, T, C] = [2, 4, 8], a local vocabulary of Vl = 16 rows.

// CHECK-LABEL: func.func @vocab_parallel_embedding
// CHECK-SAME:    (%[[TOK:.*]]: tensor<2x4xi32>, %[[WTE:.*]]: tensor<16x8xf32>, %[[S:.*]]: tensor<i32>)
func.func @vocab_parallel_embedding(%tokens: tensor<2x4xi32>, %wte: tensor<16x8xf32>, %shard: tensor<i32>) -> tensor<2x4x8xf32> {
  // CHECK: %[[X:.*]] = xfmr.vocab_parallel_embedding %[[TOK]], %[[WTE]], %[[S]] : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<i32>) -> tensor<2x4x8xf32>
  %x = xfmr.vocab_parallel_embedding %tokens, %wte, %shard : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<i32>) -> tensor<2x4x8xf32>
  // CHECK: return %[[X]]
  return %x : tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @vocab_parallel_embedding_bf16
func.func @vocab_parallel_embedding_bf16(%tokens: tensor<2x4xi32>, %wte: tensor<16x8xbf16>, %shard: tensor<i32>) -> tensor<2x4x8xbf16> {
  // CHECK: xfmr.vocab_parallel_embedding %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4xi32>, tensor<16x8xbf16>, tensor<i32>) -> tensor<2x4x8xbf16>
  %x = xfmr.vocab_parallel_embedding %tokens, %wte, %shard : (tensor<2x4xi32>, tensor<16x8xbf16>, tensor<i32>) -> tensor<2x4x8xbf16>
  return %x : tensor<2x4x8xbf16>
}

// -----

// CHECK-LABEL: func.func @vocab_parallel_embedding_grad
// CHECK-SAME:    (%[[DX:.*]]: tensor<2x4x8xf32>, %[[TOK:.*]]: tensor<2x4xi32>, %[[S:.*]]: tensor<i32>)
func.func @vocab_parallel_embedding_grad(%dx: tensor<2x4x8xf32>, %tokens: tensor<2x4xi32>, %shard: tensor<i32>) -> tensor<16x8xf32> {
  // CHECK: %[[D:.*]] = xfmr.vocab_parallel_embedding_grad %[[DX]], %[[TOK]], %[[S]] : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<16x8xf32>
  %d = xfmr.vocab_parallel_embedding_grad %dx, %tokens, %shard : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<16x8xf32>
  // CHECK: return %[[D]]
  return %d : tensor<16x8xf32>
}

// -----

// CHECK-LABEL: func.func @vocab_parallel_max
// CHECK-SAME:    (%[[L:.*]]: tensor<2x4x16xf32>)
func.func @vocab_parallel_max(%logits: tensor<2x4x16xf32>) -> tensor<2x4xf32> {
  // CHECK: %[[M:.*]] = xfmr.vocab_parallel_max %[[L]] : (tensor<2x4x16xf32>) -> tensor<2x4xf32>
  %max = xfmr.vocab_parallel_max %logits : (tensor<2x4x16xf32>) -> tensor<2x4xf32>
  // CHECK: return %[[M]]
  return %max : tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @vocab_parallel_target_logit
// CHECK-SAME:    (%[[L:.*]]: tensor<2x4x16xf32>, %[[TGT:.*]]: tensor<2x4xi32>, %[[S:.*]]: tensor<i32>)
func.func @vocab_parallel_target_logit(%logits: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>, %shard: tensor<i32>) -> tensor<2x4xf32> {
  // CHECK: %[[T:.*]] = xfmr.vocab_parallel_target_logit %[[L]], %[[TGT]], %[[S]] : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xf32>
  %target = xfmr.vocab_parallel_target_logit %logits, %targets, %shard : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xf32>
  // CHECK: return %[[T]]
  return %target : tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @vocab_parallel_sum_exp
// CHECK-SAME:    (%[[L:.*]]: tensor<2x4x16xf32>, %[[M:.*]]: tensor<2x4xf32>)
func.func @vocab_parallel_sum_exp(%logits: tensor<2x4x16xf32>, %max: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK: %[[S:.*]] = xfmr.vocab_parallel_sum_exp %[[L]], %[[M]] : (tensor<2x4x16xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %sum_exp = xfmr.vocab_parallel_sum_exp %logits, %max : (tensor<2x4x16xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  // CHECK: return %[[S]]
  return %sum_exp : tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @vocab_parallel_loss
// CHECK-SAME:    (%[[M:.*]]: tensor<2x4xf32>, %[[S:.*]]: tensor<2x4xf32>, %[[T:.*]]: tensor<2x4xf32>)
func.func @vocab_parallel_loss(%max: tensor<2x4xf32>, %sum_exp: tensor<2x4xf32>, %target: tensor<2x4xf32>) -> tensor<f32> {
  // CHECK: %[[LOSS:.*]] = xfmr.vocab_parallel_loss %[[M]], %[[S]], %[[T]] : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  %loss = xfmr.vocab_parallel_loss %max, %sum_exp, %target : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  // CHECK: return %[[LOSS]]
  return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @vocab_parallel_cross_entropy_grad
// CHECK-SAME:    (%[[DL:.*]]: tensor<f32>, %[[L:.*]]: tensor<2x4x16xf32>, %[[TGT:.*]]: tensor<2x4xi32>, %[[SH:.*]]: tensor<i32>, %[[M:.*]]: tensor<2x4xf32>, %[[S:.*]]: tensor<2x4xf32>)
func.func @vocab_parallel_cross_entropy_grad(%dloss: tensor<f32>, %logits: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>, %shard: tensor<i32>, %max: tensor<2x4xf32>, %sum_exp: tensor<2x4xf32>) -> tensor<2x4x16xf32> {
  // CHECK: %[[G:.*]] = xfmr.vocab_parallel_cross_entropy_grad %[[DL]], %[[L]], %[[TGT]], %[[SH]], %[[M]], %[[S]] : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4x16xf32>
  %g = xfmr.vocab_parallel_cross_entropy_grad %dloss, %logits, %targets, %shard, %max, %sum_exp : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4x16xf32>
  // CHECK: return %[[G]]
  return %g : tensor<2x4x16xf32>
}

// -----

// The whole vocabulary-parallel loss as the tensor-parallel pass emits it
// (without the all-reduces between the ops, which are dist's).
// CHECK-LABEL: func.func @vocab_parallel_chain
// CHECK:      xfmr.vocab_parallel_max
// CHECK-NEXT: xfmr.vocab_parallel_target_logit
// CHECK-NEXT: xfmr.vocab_parallel_sum_exp
// CHECK-NEXT: xfmr.vocab_parallel_loss
// CHECK-NEXT: xfmr.vocab_parallel_cross_entropy_grad
func.func @vocab_parallel_chain(%logits: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>, %shard: tensor<i32>, %dloss: tensor<f32>) -> (tensor<f32>, tensor<2x4x16xf32>) {
  %max = xfmr.vocab_parallel_max %logits : (tensor<2x4x16xf32>) -> tensor<2x4xf32>
  %target = xfmr.vocab_parallel_target_logit %logits, %targets, %shard : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xf32>
  %sum_exp = xfmr.vocab_parallel_sum_exp %logits, %max : (tensor<2x4x16xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %loss = xfmr.vocab_parallel_loss %max, %sum_exp, %target : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  %g = xfmr.vocab_parallel_cross_entropy_grad %dloss, %logits, %targets, %shard, %max, %sum_exp : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4x16xf32>
  return %loss, %g : tensor<f32>, tensor<2x4x16xf32>
}

// -----

// A padded vocabulary of 20 ids: max, sum_exp and the gradient take the
// shard and the logical vocabulary.
// CHECK-LABEL: func.func @vocab_parallel_masked
// CHECK-SAME:    (%[[DL:.*]]: tensor<f32>, %[[L:.*]]: tensor<2x4x16xf32>, %[[T:.*]]: tensor<2x4xi32>, %[[S:.*]]: tensor<i32>)
func.func @vocab_parallel_masked(%dloss: tensor<f32>, %logits: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>, %shard: tensor<i32>) -> tensor<2x4x16xf32> {
  // CHECK: %[[M:.*]] = xfmr.vocab_parallel_max %[[L]], %[[S]] {vocab = 20 : i64} : (tensor<2x4x16xf32>, tensor<i32>) -> tensor<2x4xf32>
  %max = xfmr.vocab_parallel_max %logits, %shard {vocab = 20 : i64} : (tensor<2x4x16xf32>, tensor<i32>) -> tensor<2x4xf32>
  // CHECK: %[[E:.*]] = xfmr.vocab_parallel_sum_exp %[[L]], %[[M]], %[[S]] {vocab = 20 : i64} : (tensor<2x4x16xf32>, tensor<2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
  %sum = xfmr.vocab_parallel_sum_exp %logits, %max, %shard {vocab = 20 : i64} : (tensor<2x4x16xf32>, tensor<2x4xf32>, tensor<i32>) -> tensor<2x4xf32>
  // CHECK: xfmr.vocab_parallel_cross_entropy_grad %[[DL]], %[[L]], %[[T]], %[[S]], %[[M]], %[[E]] {vocab = 20 : i64}
  %g = xfmr.vocab_parallel_cross_entropy_grad %dloss, %logits, %targets, %shard, %max, %sum {vocab = 20 : i64} : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4x16xf32>
  return %g : tensor<2x4x16xf32>
}
