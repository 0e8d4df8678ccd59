// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error of the ring attention ops' verifiers
// (XfmrAttention.cpp) and of the ODS constraint that matters (i32
// positions). B = 2, H = 4 and Hkv = 2 heads of D = 8, Tq = 8 queries and
// Tk = 4 keys unless a case says otherwise. The attribute checks shared
// with xfmr.attention (heads, RoPE, its scaling, the window) are
// xfmr_verification.mlir's; one of them is repeated here.

//===----------------------------------------------------------------------===//
// xfmr.attention_block
//===----------------------------------------------------------------------===//

func.func @block_heads(%q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<8xi32>, %kp: tensor<4xi32>) {
  // expected-error @+1 {{'xfmr.attention_block' op num_kv_heads 3 must divide num_heads 4}}
  %o, %l = xfmr.attention_block %q, %k, %v, %qp, %kp {num_heads = 4 : i64, num_kv_heads = 3 : i64}
      : (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @block_key_rank(%q: tensor<2x8x32xf32>, %k: tensor<8x16xf32>, %v: tensor<8x16xf32>, %qp: tensor<8xi32>, %kp: tensor<4xi32>) {
  // expected-error @+1 {{'xfmr.attention_block' op key must have rank 3 ([batch, seq, kv_heads*head_dim]), but has rank 2}}
  %o, %l = xfmr.attention_block %q, %k, %v, %qp, %kp {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @block_key_features(%q: tensor<2x8x32xf32>, %k: tensor<2x4x32xf32>, %v: tensor<2x4x32xf32>, %qp: tensor<8xi32>, %kp: tensor<4xi32>) {
  // expected-error @+1 {{'xfmr.attention_block' op key must be 'tensor<2x4x16xf32>' ([B] of the query, num_kv_heads * head_dim 8), but is 'tensor<2x4x32xf32>'}}
  %o, %l = xfmr.attention_block %q, %k, %v, %qp, %kp {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<2x4x32xf32>, tensor<2x4x32xf32>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @block_value(%q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x5x16xf32>, %qp: tensor<8xi32>, %kp: tensor<4xi32>) {
  // expected-error @+1 {{'xfmr.attention_block' op value must have the type of the key, 'tensor<2x4x16xf32>', but is 'tensor<2x5x16xf32>'}}
  %o, %l = xfmr.attention_block %q, %k, %v, %qp, %kp {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x5x16xf32>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @block_out(%q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<8xi32>, %kp: tensor<4xi32>) {
  // expected-error @+1 {{'xfmr.attention_block' op out must have the type of the query, 'tensor<2x8x32xf32>', but is 'tensor<2x8x32xbf16>'}}
  %o, %l = xfmr.attention_block %q, %k, %v, %qp, %kp {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x32xbf16>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @block_query_positions(%q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<4xi32>, %kp: tensor<4xi32>) {
  // expected-error @+1 {{'xfmr.attention_block' op query_positions must be 'tensor<8xi32>' ([Tq] of the query), but is 'tensor<4xi32>'}}
  %o, %l = xfmr.attention_block %q, %k, %v, %qp, %kp {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<4xi32>, tensor<4xi32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @block_key_positions(%q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<8xi32>, %kp: tensor<8xi32>) {
  // expected-error @+1 {{'xfmr.attention_block' op key_positions must be 'tensor<4xi32>' ([Tk] of the key), but is 'tensor<8xi32>'}}
  %o, %l = xfmr.attention_block %q, %k, %v, %qp, %kp {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<8xi32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @block_positions_i64(%q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<8xi64>, %kp: tensor<4xi32>) {
  // expected-error @+1 {{'xfmr.attention_block' op operand #3 must be 1D tensor of 32-bit signless integer values, but got 'tensor<8xi64>'}}
  %o, %l = xfmr.attention_block %q, %k, %v, %qp, %kp {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi64>, tensor<4xi32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @block_lse_shape(%q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<8xi32>, %kp: tensor<4xi32>) {
  // expected-error @+1 {{'xfmr.attention_block' op lse must be 'tensor<2x4x8xf32>' ([B, num_heads, Tq] of the query), but is 'tensor<2x8x4xf32>'}}
  %o, %l = xfmr.attention_block %q, %k, %v, %qp, %kp {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x32xf32>, tensor<2x8x4xf32>)
  return
}

// -----

func.func @block_lse_bf16(%q: tensor<2x8x32xbf16>, %k: tensor<2x4x16xbf16>, %v: tensor<2x4x16xbf16>, %qp: tensor<8xi32>, %kp: tensor<4xi32>) {
  // expected-error @+1 {{'xfmr.attention_block' op lse must be 'tensor<2x4x8xf32>' ([B, num_heads, Tq] of the query), but is 'tensor<2x4x8xbf16>'}}
  %o, %l = xfmr.attention_block %q, %k, %v, %qp, %kp {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xbf16>, tensor<2x4x16xbf16>, tensor<2x4x16xbf16>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x32xbf16>, tensor<2x4x8xbf16>)
  return
}

// -----

func.func @block_window_not_causal(%q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<8xi32>, %kp: tensor<4xi32>) {
  // expected-error @+1 {{'xfmr.attention_block' op sliding_window needs causal attention (causal = true)}}
  %o, %l = xfmr.attention_block %q, %k, %v, %qp, %kp {num_heads = 4 : i64, num_kv_heads = 2 : i64, causal = false, sliding_window = 4 : i64}
      : (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  return
}

//===----------------------------------------------------------------------===//
// xfmr.attention_merge
//===----------------------------------------------------------------------===//

// -----

func.func @merge_out_b(%oa: tensor<2x8x32xf32>, %la: tensor<2x4x8xf32>, %ob: tensor<2x8x16xf32>, %lb: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_merge' op out_b must have the type of out_a, 'tensor<2x8x32xf32>', but is 'tensor<2x8x16xf32>'}}
  %o, %l = xfmr.attention_merge %oa, %la, %ob, %lb
      : (tensor<2x8x32xf32>, tensor<2x4x8xf32>, tensor<2x8x16xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @merge_out(%oa: tensor<2x8x32xf32>, %la: tensor<2x4x8xf32>, %ob: tensor<2x8x32xf32>, %lb: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_merge' op out must have the type of out_a, 'tensor<2x8x32xf32>', but is 'tensor<2x8x32xbf16>'}}
  %o, %l = xfmr.attention_merge %oa, %la, %ob, %lb
      : (tensor<2x8x32xf32>, tensor<2x4x8xf32>, tensor<2x8x32xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x32xbf16>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @merge_out_rank(%oa: tensor<16x32xf32>, %la: tensor<2x4x8xf32>, %ob: tensor<16x32xf32>, %lb: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_merge' op out_a must have rank 3 ([batch, seq, features]), but has rank 2}}
  %o, %l = xfmr.attention_merge %oa, %la, %ob, %lb
      : (tensor<16x32xf32>, tensor<2x4x8xf32>, tensor<16x32xf32>, tensor<2x4x8xf32>) -> (tensor<16x32xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @merge_lse_rank(%oa: tensor<2x8x32xf32>, %la: tensor<2x8xf32>, %ob: tensor<2x8x32xf32>, %lb: tensor<2x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_merge' op lse_a must have rank 3 ([batch, heads, seq]), but has rank 2}}
  %o, %l = xfmr.attention_merge %oa, %la, %ob, %lb
      : (tensor<2x8x32xf32>, tensor<2x8xf32>, tensor<2x8x32xf32>, tensor<2x8xf32>) -> (tensor<2x8x32xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @merge_heads(%oa: tensor<2x8x32xf32>, %la: tensor<2x3x8xf32>, %ob: tensor<2x8x32xf32>, %lb: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_merge' op lse_a has 3 heads, which do not divide the 32 features of out_a}}
  %o, %l = xfmr.attention_merge %oa, %la, %ob, %lb
      : (tensor<2x8x32xf32>, tensor<2x3x8xf32>, tensor<2x8x32xf32>, tensor<2x3x8xf32>) -> (tensor<2x8x32xf32>, tensor<2x3x8xf32>)
  return
}

// -----

func.func @merge_lse_a(%oa: tensor<2x8x32xf32>, %la: tensor<2x4x4xf32>, %ob: tensor<2x8x32xf32>, %lb: tensor<2x4x4xf32>) {
  // expected-error @+1 {{'xfmr.attention_merge' op lse_a must be 'tensor<2x4x8xf32>' ([B, heads, T] of out_a), but is 'tensor<2x4x4xf32>'}}
  %o, %l = xfmr.attention_merge %oa, %la, %ob, %lb
      : (tensor<2x8x32xf32>, tensor<2x4x4xf32>, tensor<2x8x32xf32>, tensor<2x4x4xf32>) -> (tensor<2x8x32xf32>, tensor<2x4x4xf32>)
  return
}

// -----

func.func @merge_lse_b(%oa: tensor<2x8x32xf32>, %la: tensor<2x4x8xf32>, %ob: tensor<2x8x32xf32>, %lb: tensor<2x2x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_merge' op lse_b must have the type of lse_a, 'tensor<2x4x8xf32>', but is 'tensor<2x2x8xf32>'}}
  %o, %l = xfmr.attention_merge %oa, %la, %ob, %lb
      : (tensor<2x8x32xf32>, tensor<2x4x8xf32>, tensor<2x8x32xf32>, tensor<2x2x8xf32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @merge_lse(%oa: tensor<2x8x32xf32>, %la: tensor<2x4x8xf32>, %ob: tensor<2x8x32xf32>, %lb: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_merge' op lse must have the type of lse_a, 'tensor<2x4x8xf32>', but is 'tensor<2x4x8xbf16>'}}
  %o, %l = xfmr.attention_merge %oa, %la, %ob, %lb
      : (tensor<2x8x32xf32>, tensor<2x4x8xf32>, tensor<2x8x32xf32>, tensor<2x4x8xf32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xbf16>)
  return
}

//===----------------------------------------------------------------------===//
// xfmr.attention_block_grad
//===----------------------------------------------------------------------===//

// -----

func.func @grad_grad(%do: tensor<2x4x32xf32>, %q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<8xi32>, %kp: tensor<4xi32>, %o: tensor<2x8x32xf32>, %l: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_block_grad' op grad must have the type of the query, 'tensor<2x8x32xf32>', but is 'tensor<2x4x32xf32>'}}
  %dq, %dk, %dv = xfmr.attention_block_grad %do, %q, %k, %v, %qp, %kp, %o, %l {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x4x32xf32>, tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>, tensor<2x8x32xf32>, tensor<2x4x8xf32>)
      -> (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  return
}

// -----

func.func @grad_out(%do: tensor<2x8x32xf32>, %q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<8xi32>, %kp: tensor<4xi32>, %o: tensor<2x4x16xf32>, %l: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_block_grad' op out must have the type of the query, 'tensor<2x8x32xf32>', but is 'tensor<2x4x16xf32>'}}
  %dq, %dk, %dv = xfmr.attention_block_grad %do, %q, %k, %v, %qp, %kp, %o, %l {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>, tensor<2x4x16xf32>, tensor<2x4x8xf32>)
      -> (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  return
}

// -----

func.func @grad_lse(%do: tensor<2x8x32xf32>, %q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<8xi32>, %kp: tensor<4xi32>, %o: tensor<2x8x32xf32>, %l: tensor<2x2x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_block_grad' op lse must be 'tensor<2x4x8xf32>' ([B, num_heads, Tq] of the query), but is 'tensor<2x2x8xf32>'}}
  %dq, %dk, %dv = xfmr.attention_block_grad %do, %q, %k, %v, %qp, %kp, %o, %l {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>, tensor<2x8x32xf32>, tensor<2x2x8xf32>)
      -> (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  return
}

// -----

func.func @grad_key_positions(%do: tensor<2x8x32xf32>, %q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<8xi32>, %kp: tensor<2xi32>, %o: tensor<2x8x32xf32>, %l: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_block_grad' op key_positions must be 'tensor<4xi32>' ([Tk] of the key), but is 'tensor<2xi32>'}}
  %dq, %dk, %dv = xfmr.attention_block_grad %do, %q, %k, %v, %qp, %kp, %o, %l {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<2xi32>, tensor<2x8x32xf32>, tensor<2x4x8xf32>)
      -> (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  return
}

// -----

func.func @grad_query_grad(%do: tensor<2x8x32xf32>, %q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<8xi32>, %kp: tensor<4xi32>, %o: tensor<2x8x32xf32>, %l: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_block_grad' op query_grad must have the type of the query, 'tensor<2x8x32xf32>', but is 'tensor<2x4x16xf32>'}}
  %dq, %dk, %dv = xfmr.attention_block_grad %do, %q, %k, %v, %qp, %kp, %o, %l {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>, tensor<2x8x32xf32>, tensor<2x4x8xf32>)
      -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  return
}

// -----

func.func @grad_key_grad(%do: tensor<2x8x32xf32>, %q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<8xi32>, %kp: tensor<4xi32>, %o: tensor<2x8x32xf32>, %l: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_block_grad' op key_grad must have the type of the key, 'tensor<2x4x16xf32>', but is 'tensor<2x8x32xf32>'}}
  %dq, %dk, %dv = xfmr.attention_block_grad %do, %q, %k, %v, %qp, %kp, %o, %l {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>, tensor<2x8x32xf32>, tensor<2x4x8xf32>)
      -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x4x16xf32>)
  return
}

// -----

func.func @grad_value_grad(%do: tensor<2x8x32xf32>, %q: tensor<2x8x32xf32>, %k: tensor<2x4x16xf32>, %v: tensor<2x4x16xf32>, %qp: tensor<8xi32>, %kp: tensor<4xi32>, %o: tensor<2x8x32xf32>, %l: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_block_grad' op value_grad must have the type of the value, 'tensor<2x4x16xf32>', but is 'tensor<2x4x16xbf16>'}}
  %dq, %dk, %dv = xfmr.attention_block_grad %do, %q, %k, %v, %qp, %kp, %o, %l {num_heads = 4 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8xi32>, tensor<4xi32>, tensor<2x8x32xf32>, tensor<2x4x8xf32>)
      -> (tensor<2x8x32xf32>, tensor<2x4x16xf32>, tensor<2x4x16xbf16>)
  return
}
