// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error of the vocabulary-parallel ops' verifiers (XfmrOps.cpp)
// and of the ODS constraints that matter (rank-0 i32 shard, rank-0 f32 loss).
// [B, T, C] = [2, 4, 8] and a local vocabulary of Vl = 16 unless a case says
// otherwise.

//===----------------------------------------------------------------------===//
// xfmr.vocab_parallel_embedding
//===----------------------------------------------------------------------===//

func.func @vpe_static_shape(%tokens: tensor<?x4xi32>, %wte: tensor<16x8xf32>, %s: tensor<i32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding' op operand #0 must have a static shape, but is 'tensor<?x4xi32>'}}
  %x = xfmr.vocab_parallel_embedding %tokens, %wte, %s : (tensor<?x4xi32>, tensor<16x8xf32>, tensor<i32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

func.func @vpe_tokens_rank(%tokens: tensor<8xi32>, %wte: tensor<16x8xf32>, %s: tensor<i32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding' op operand #0 must be 2D tensor of 32-bit signless integer values, but got 'tensor<8xi32>'}}
  %x = xfmr.vocab_parallel_embedding %tokens, %wte, %s : (tensor<8xi32>, tensor<16x8xf32>, tensor<i32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

func.func @vpe_shard_not_scalar(%tokens: tensor<2x4xi32>, %wte: tensor<16x8xf32>, %s: tensor<1xi32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding' op operand #2 must be 0D tensor of 32-bit signless integer values, but got 'tensor<1xi32>'}}
  %x = xfmr.vocab_parallel_embedding %tokens, %wte, %s : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<1xi32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

func.func @vpe_shard_not_i32(%tokens: tensor<2x4xi32>, %wte: tensor<16x8xf32>, %s: tensor<i64>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding' op operand #2 must be 0D tensor of 32-bit signless integer values, but got 'tensor<i64>'}}
  %x = xfmr.vocab_parallel_embedding %tokens, %wte, %s : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<i64>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

func.func @vpe_table_rank(%tokens: tensor<2x4xi32>, %wte: tensor<16x8x1xf32>, %s: tensor<i32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding' op table must have rank 2 ([local vocab, hidden]), but has rank 3}}
  %x = xfmr.vocab_parallel_embedding %tokens, %wte, %s : (tensor<2x4xi32>, tensor<16x8x1xf32>, tensor<i32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

func.func @vpe_result_channels(%tokens: tensor<2x4xi32>, %wte: tensor<16x8xf32>, %s: tensor<i32>) -> tensor<2x4x6xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding' op result must be 'tensor<2x4x8xf32>' ([B, T] of the tokens, C of the table), but is 'tensor<2x4x6xf32>'}}
  %x = xfmr.vocab_parallel_embedding %tokens, %wte, %s : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<i32>) -> tensor<2x4x6xf32>
  return %x : tensor<2x4x6xf32>
}

// -----

func.func @vpe_result_positions(%tokens: tensor<2x4xi32>, %wte: tensor<16x8xf32>, %s: tensor<i32>) -> tensor<4x2x8xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding' op result must be 'tensor<2x4x8xf32>' ([B, T] of the tokens, C of the table), but is 'tensor<4x2x8xf32>'}}
  %x = xfmr.vocab_parallel_embedding %tokens, %wte, %s : (tensor<2x4xi32>, tensor<16x8xf32>, tensor<i32>) -> tensor<4x2x8xf32>
  return %x : tensor<4x2x8xf32>
}

// -----

func.func @vpe_result_element(%tokens: tensor<2x4xi32>, %wte: tensor<16x8xbf16>, %s: tensor<i32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding' op result must be 'tensor<2x4x8xbf16>' ([B, T] of the tokens, C of the table), but is 'tensor<2x4x8xf32>'}}
  %x = xfmr.vocab_parallel_embedding %tokens, %wte, %s : (tensor<2x4xi32>, tensor<16x8xbf16>, tensor<i32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.vocab_parallel_embedding_grad
//===----------------------------------------------------------------------===//

func.func @vpeg_grad_rank(%dx: tensor<8x8xf32>, %tokens: tensor<2x4xi32>, %s: tensor<i32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding_grad' op grad must have rank 3 ([batch, seq, hidden]), but has rank 2}}
  %d = xfmr.vocab_parallel_embedding_grad %dx, %tokens, %s : (tensor<8x8xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<16x8xf32>
  return %d : tensor<16x8xf32>
}

// -----

func.func @vpeg_tokens(%dx: tensor<2x4x8xf32>, %tokens: tensor<2x5xi32>, %s: tensor<i32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding_grad' op tokens must be 'tensor<2x4xi32>' ([B, T] of the gradient), but is 'tensor<2x5xi32>'}}
  %d = xfmr.vocab_parallel_embedding_grad %dx, %tokens, %s : (tensor<2x4x8xf32>, tensor<2x5xi32>, tensor<i32>) -> tensor<16x8xf32>
  return %d : tensor<16x8xf32>
}

// -----

func.func @vpeg_shard(%dx: tensor<2x4x8xf32>, %tokens: tensor<2x4xi32>, %s: tensor<f32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding_grad' op operand #2 must be 0D tensor of 32-bit signless integer values, but got 'tensor<f32>'}}
  %d = xfmr.vocab_parallel_embedding_grad %dx, %tokens, %s : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<16x8xf32>
  return %d : tensor<16x8xf32>
}

// -----

func.func @vpeg_result_rank(%dx: tensor<2x4x8xf32>, %tokens: tensor<2x4xi32>, %s: tensor<i32>) -> tensor<16x8x1xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding_grad' op result must have rank 2 ([local vocab, hidden]), but has rank 3}}
  %d = xfmr.vocab_parallel_embedding_grad %dx, %tokens, %s : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<16x8x1xf32>
  return %d : tensor<16x8x1xf32>
}

// -----

func.func @vpeg_result_channels(%dx: tensor<2x4x8xf32>, %tokens: tensor<2x4xi32>, %s: tensor<i32>) -> tensor<16x6xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding_grad' op result must be 'tensor<16x8xf32>' (C of the gradient), but is 'tensor<16x6xf32>'}}
  %d = xfmr.vocab_parallel_embedding_grad %dx, %tokens, %s : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<16x6xf32>
  return %d : tensor<16x6xf32>
}

// -----

func.func @vpeg_result_element(%dx: tensor<2x4x8xf32>, %tokens: tensor<2x4xi32>, %s: tensor<i32>) -> tensor<16x8xf16> {
  // expected-error @+1 {{'xfmr.vocab_parallel_embedding_grad' op result must be 'tensor<16x8xf32>' (C of the gradient), but is 'tensor<16x8xf16>'}}
  %d = xfmr.vocab_parallel_embedding_grad %dx, %tokens, %s : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<16x8xf16>
  return %d : tensor<16x8xf16>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.vocab_parallel_max
//===----------------------------------------------------------------------===//

func.func @vpm_static_shape(%l: tensor<2x4x?xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_max' op operand #0 must have a static shape, but is 'tensor<2x4x?xf32>'}}
  %m = xfmr.vocab_parallel_max %l : (tensor<2x4x?xf32>) -> tensor<2x4xf32>
  return %m : tensor<2x4xf32>
}

// -----

func.func @vpm_logits_rank(%l: tensor<8x16xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_max' op logits must have rank 3 ([batch, seq, local vocab]), but has rank 2}}
  %m = xfmr.vocab_parallel_max %l : (tensor<8x16xf32>) -> tensor<2x4xf32>
  return %m : tensor<2x4xf32>
}

// -----

func.func @vpm_result_shape(%l: tensor<2x4x16xf32>) -> tensor<2x4x1xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_max' op result must be 'tensor<2x4xf32>' ([B, T] of the logits, f32), but is 'tensor<2x4x1xf32>'}}
  %m = xfmr.vocab_parallel_max %l : (tensor<2x4x16xf32>) -> tensor<2x4x1xf32>
  return %m : tensor<2x4x1xf32>
}

// -----

func.func @vpm_result_element(%l: tensor<2x4x16xf32>) -> tensor<2x4xbf16> {
  // expected-error @+1 {{'xfmr.vocab_parallel_max' op result must be 'tensor<2x4xf32>' ([B, T] of the logits, f32), but is 'tensor<2x4xbf16>'}}
  %m = xfmr.vocab_parallel_max %l : (tensor<2x4x16xf32>) -> tensor<2x4xbf16>
  return %m : tensor<2x4xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.vocab_parallel_target_logit
//===----------------------------------------------------------------------===//

func.func @vpt_logits_rank(%l: tensor<8x16xf32>, %t: tensor<2x4xi32>, %s: tensor<i32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_target_logit' op logits must have rank 3 ([batch, seq, vocab]), but has rank 2}}
  %r = xfmr.vocab_parallel_target_logit %l, %t, %s : (tensor<8x16xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

func.func @vpt_targets(%l: tensor<2x4x16xf32>, %t: tensor<4x2xi32>, %s: tensor<i32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_target_logit' op targets must be 'tensor<2x4xi32>' ([B, T] of the logits), but is 'tensor<4x2xi32>'}}
  %r = xfmr.vocab_parallel_target_logit %l, %t, %s : (tensor<2x4x16xf32>, tensor<4x2xi32>, tensor<i32>) -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

func.func @vpt_shard(%l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %s: tensor<2xi32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_target_logit' op operand #2 must be 0D tensor of 32-bit signless integer values, but got 'tensor<2xi32>'}}
  %r = xfmr.vocab_parallel_target_logit %l, %t, %s : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2xi32>) -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

func.func @vpt_result(%l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %s: tensor<i32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_target_logit' op result must be 'tensor<2x4xf32>' ([B, T] of the logits, f32), but is 'tensor<2x5xf32>'}}
  %r = xfmr.vocab_parallel_target_logit %l, %t, %s : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>) -> tensor<2x5xf32>
  return %r : tensor<2x5xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.vocab_parallel_sum_exp
//===----------------------------------------------------------------------===//

func.func @vps_logits_rank(%l: tensor<2x4xf32>, %m: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_sum_exp' op logits must have rank 3 ([batch, seq, local vocab]), but has rank 2}}
  %r = xfmr.vocab_parallel_sum_exp %l, %m : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

func.func @vps_max(%l: tensor<2x4x16xf32>, %m: tensor<2x3xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_sum_exp' op max must be 'tensor<2x4xf32>' ([B, T] of the logits, f32), but is 'tensor<2x3xf32>'}}
  %r = xfmr.vocab_parallel_sum_exp %l, %m : (tensor<2x4x16xf32>, tensor<2x3xf32>) -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

func.func @vps_result(%l: tensor<2x4x16xf32>, %m: tensor<2x4xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_sum_exp' op result must be 'tensor<2x4xf32>' ([B, T] of the logits, f32), but is 'tensor<2x4x16xf32>'}}
  %r = xfmr.vocab_parallel_sum_exp %l, %m : (tensor<2x4x16xf32>, tensor<2x4xf32>) -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.vocab_parallel_loss
//===----------------------------------------------------------------------===//

func.func @vpl_static_shape(%m: tensor<?x4xf32>, %s: tensor<?x4xf32>, %t: tensor<?x4xf32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_loss' op operand #0 must have a static shape, but is 'tensor<?x4xf32>'}}
  %r = xfmr.vocab_parallel_loss %m, %s, %t : (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<f32>
  return %r : tensor<f32>
}

// -----

func.func @vpl_max_rank(%m: tensor<2x4x1xf32>, %s: tensor<2x4xf32>, %t: tensor<2x4xf32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_loss' op max must have rank 2 ([batch, seq]), but has rank 3}}
  %r = xfmr.vocab_parallel_loss %m, %s, %t : (tensor<2x4x1xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  return %r : tensor<f32>
}

// -----

func.func @vpl_sum_exp(%m: tensor<2x4xf32>, %s: tensor<2x5xf32>, %t: tensor<2x4xf32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_loss' op sum_exp must have the type of max, 'tensor<2x4xf32>', but is 'tensor<2x5xf32>'}}
  %r = xfmr.vocab_parallel_loss %m, %s, %t : (tensor<2x4xf32>, tensor<2x5xf32>, tensor<2x4xf32>) -> tensor<f32>
  return %r : tensor<f32>
}

// -----

func.func @vpl_target_logit(%m: tensor<2x4xf32>, %s: tensor<2x4xf32>, %t: tensor<2x4xbf16>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_loss' op target_logit must have the type of max, 'tensor<2x4xf32>', but is 'tensor<2x4xbf16>'}}
  %r = xfmr.vocab_parallel_loss %m, %s, %t : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xbf16>) -> tensor<f32>
  return %r : tensor<f32>
}

// -----

func.func @vpl_result(%m: tensor<2x4xf32>, %s: tensor<2x4xf32>, %t: tensor<2x4xf32>) -> tensor<1xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_loss' op result #0 must be 0D tensor of 32-bit float values, but got 'tensor<1xf32>'}}
  %r = xfmr.vocab_parallel_loss %m, %s, %t : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<1xf32>
  return %r : tensor<1xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.vocab_parallel_cross_entropy_grad
//===----------------------------------------------------------------------===//

func.func @vpceg_loss_grad(%dl: tensor<1xf32>, %l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %sh: tensor<i32>, %m: tensor<2x4xf32>, %s: tensor<2x4xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_cross_entropy_grad' op operand #0 must be 0D tensor of 32-bit float values, but got 'tensor<1xf32>'}}
  %g = xfmr.vocab_parallel_cross_entropy_grad %dl, %l, %t, %sh, %m, %s : (tensor<1xf32>, tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4x16xf32>
  return %g : tensor<2x4x16xf32>
}

// -----

func.func @vpceg_logits_rank(%dl: tensor<f32>, %l: tensor<8x16xf32>, %t: tensor<2x4xi32>, %sh: tensor<i32>, %m: tensor<2x4xf32>, %s: tensor<2x4xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_cross_entropy_grad' op logits must have rank 3 ([batch, seq, vocab]), but has rank 2}}
  %g = xfmr.vocab_parallel_cross_entropy_grad %dl, %l, %t, %sh, %m, %s : (tensor<f32>, tensor<8x16xf32>, tensor<2x4xi32>, tensor<i32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<8x16xf32>
  return %g : tensor<8x16xf32>
}

// -----

func.func @vpceg_targets(%dl: tensor<f32>, %l: tensor<2x4x16xf32>, %t: tensor<2x5xi32>, %sh: tensor<i32>, %m: tensor<2x4xf32>, %s: tensor<2x4xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_cross_entropy_grad' op targets must be 'tensor<2x4xi32>' ([B, T] of the logits), but is 'tensor<2x5xi32>'}}
  %g = xfmr.vocab_parallel_cross_entropy_grad %dl, %l, %t, %sh, %m, %s : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x5xi32>, tensor<i32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4x16xf32>
  return %g : tensor<2x4x16xf32>
}

// -----

func.func @vpceg_shard(%dl: tensor<f32>, %l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %sh: tensor<1xi32>, %m: tensor<2x4xf32>, %s: tensor<2x4xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_cross_entropy_grad' op operand #3 must be 0D tensor of 32-bit signless integer values, but got 'tensor<1xi32>'}}
  %g = xfmr.vocab_parallel_cross_entropy_grad %dl, %l, %t, %sh, %m, %s : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<1xi32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4x16xf32>
  return %g : tensor<2x4x16xf32>
}

// -----

func.func @vpceg_max(%dl: tensor<f32>, %l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %sh: tensor<i32>, %m: tensor<4x2xf32>, %s: tensor<2x4xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_cross_entropy_grad' op max must be 'tensor<2x4xf32>' ([B, T] of the logits, f32), but is 'tensor<4x2xf32>'}}
  %g = xfmr.vocab_parallel_cross_entropy_grad %dl, %l, %t, %sh, %m, %s : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>, tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<2x4x16xf32>
  return %g : tensor<2x4x16xf32>
}

// -----

func.func @vpceg_sum_exp(%dl: tensor<f32>, %l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %sh: tensor<i32>, %m: tensor<2x4xf32>, %s: tensor<2x4xf16>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_cross_entropy_grad' op sum_exp must be 'tensor<2x4xf32>' ([B, T] of the logits, f32), but is 'tensor<2x4xf16>'}}
  %g = xfmr.vocab_parallel_cross_entropy_grad %dl, %l, %t, %sh, %m, %s : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>, tensor<2x4xf32>, tensor<2x4xf16>) -> tensor<2x4x16xf32>
  return %g : tensor<2x4x16xf32>
}

// -----

func.func @vpceg_result(%dl: tensor<f32>, %l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %sh: tensor<i32>, %m: tensor<2x4xf32>, %s: tensor<2x4xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_cross_entropy_grad' op result must have the type of the logits, 'tensor<2x4x16xf32>', but is 'tensor<2x4x8xf32>'}}
  %g = xfmr.vocab_parallel_cross_entropy_grad %dl, %l, %t, %sh, %m, %s : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4x8xf32>
  return %g : tensor<2x4x8xf32>
}

// -----

// A padded vocabulary: the shard and the vocabulary go together.
func.func @vpmax_shard_alone(%l: tensor<2x4x16xf32>, %sh: tensor<i32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_max' op takes a shard and a vocab together (a padded vocabulary) or neither, but has only the shard}}
  %m = xfmr.vocab_parallel_max %l, %sh : (tensor<2x4x16xf32>, tensor<i32>) -> tensor<2x4xf32>
  return %m : tensor<2x4xf32>
}

// -----

func.func @vpsumexp_vocab_alone(%l: tensor<2x4x16xf32>, %m: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_sum_exp' op takes a shard and a vocab together (a padded vocabulary) or neither, but has only the vocab}}
  %r = xfmr.vocab_parallel_sum_exp %l, %m {vocab = 20 : i64} : (tensor<2x4x16xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

func.func @vpmax_vocab_zero(%l: tensor<2x4x16xf32>, %sh: tensor<i32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_max' op vocab 0 must be at least 1 (the logical vocabulary)}}
  %m = xfmr.vocab_parallel_max %l, %sh {vocab = 0 : i64} : (tensor<2x4x16xf32>, tensor<i32>) -> tensor<2x4xf32>
  return %m : tensor<2x4xf32>
}

// -----

func.func @vpceg_vocab_huge(%dl: tensor<f32>, %l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>, %sh: tensor<i32>, %m: tensor<2x4xf32>, %s: tensor<2x4xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{'xfmr.vocab_parallel_cross_entropy_grad' op vocab 4294967296 must be in [1, 2^31] (i32 token ids)}}
  %g = xfmr.vocab_parallel_cross_entropy_grad %dl, %l, %t, %sh, %m, %s {vocab = 4294967296 : i64} : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<i32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4x16xf32>
  return %g : tensor<2x4x16xf32>
}

// -----

func.func @sce_vocab_beyond_logits(%l: tensor<2x4x16xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.softmax_cross_entropy' op vocab 17 must be in [1, 16] (the logical vocabulary within the padded logits)}}
  %loss = xfmr.softmax_cross_entropy %l, %t {vocab = 17 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
