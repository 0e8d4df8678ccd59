// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error the xfmr verifiers (XfmrOps.cpp, XfmrAttention.cpp), the ODS constraints
// that matter and the dialect's attribute checks (XfmrDialect.cpp) produce.
// Activations are [B, T, C] = [2, 4, 8] unless a case says otherwise.

//===----------------------------------------------------------------------===//
// Static shapes (shared by every op)
//===----------------------------------------------------------------------===//

func.func @static_shape_operand(%tokens: tensor<?x4xi32>, %wte: tensor<16x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.embedding' op operand #0 must have a static shape, but is 'tensor<?x4xi32>'}}
  %x = xfmr.embedding %tokens, %wte : (tensor<?x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

func.func @static_shape_result(%dx: tensor<2x4x8xf32>, %tokens: tensor<2x4xi32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'xfmr.embedding_grad' op result #0 must have a static shape, but is 'tensor<?x8xf32>'}}
  %d = xfmr.embedding_grad %dx, %tokens : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<?x8xf32>
  return %d : tensor<?x8xf32>
}

// -----

func.func @static_shape_gelu(%x: tensor<2x?x8xf32>) -> tensor<2x?x8xf32> {
  // expected-error @+1 {{'xfmr.gelu' op operand #0 must have a static shape, but is 'tensor<2x?x8xf32>'}}
  %y = xfmr.gelu %x : (tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
  return %y : tensor<2x?x8xf32>
}

// -----

func.func @static_shape_add(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'xfmr.add' op operand #0 must have a static shape, but is 'tensor<?x8xf32>'}}
  %r = xfmr.add %a, %b : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

func.func @static_shape_attention(%q: tensor<2x?x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op operand #0 must have a static shape, but is 'tensor<2x?x8xf32>'}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x?x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @static_shape_adamw(%p: tensor<?x8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op operand #0 must have a static shape, but is 'tensor<?x8xf32>'}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %p, %p, %t, %lr : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>)
  return %p1 : tensor<?x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.embedding
//===----------------------------------------------------------------------===//

func.func @embedding_tokens_not_i32(%tokens: tensor<2x4xi64>, %wte: tensor<16x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.embedding' op operand #0 must be 2D tensor of 32-bit signless integer values, but got 'tensor<2x4xi64>'}}
  %x = xfmr.embedding %tokens, %wte : (tensor<2x4xi64>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

func.func @embedding_tokens_not_2d(%tokens: tensor<8xi32>, %wte: tensor<16x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.embedding' op operand #0 must be 2D tensor of 32-bit signless integer values, but got 'tensor<8xi32>'}}
  %x = xfmr.embedding %tokens, %wte : (tensor<8xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

func.func @embedding_table_not_float(%tokens: tensor<2x4xi32>, %wte: tensor<16x8xi32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.embedding' op operand #1 must be ranked tensor of floating-point values, but got 'tensor<16x8xi32>'}}
  %x = xfmr.embedding %tokens, %wte : (tensor<2x4xi32>, tensor<16x8xi32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

func.func @embedding_table_rank(%tokens: tensor<2x4xi32>, %wte: tensor<16x8x1xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.embedding' op table must have rank 2 ([vocab, hidden]), but has rank 3}}
  %x = xfmr.embedding %tokens, %wte : (tensor<2x4xi32>, tensor<16x8x1xf32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

func.func @embedding_result_hidden(%tokens: tensor<2x4xi32>, %wte: tensor<16x8xf32>) -> tensor<2x4x6xf32> {
  // expected-error @+1 {{'xfmr.embedding' op result must be 'tensor<2x4x8xf32>' ([B, T] of the tokens, C of the table), but is 'tensor<2x4x6xf32>'}}
  %x = xfmr.embedding %tokens, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x6xf32>
  return %x : tensor<2x4x6xf32>
}

// -----

func.func @embedding_result_batch(%tokens: tensor<2x4xi32>, %wte: tensor<16x8xf32>) -> tensor<4x2x8xf32> {
  // expected-error @+1 {{'xfmr.embedding' op result must be 'tensor<2x4x8xf32>' ([B, T] of the tokens, C of the table), but is 'tensor<4x2x8xf32>'}}
  %x = xfmr.embedding %tokens, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<4x2x8xf32>
  return %x : tensor<4x2x8xf32>
}

// -----

func.func @embedding_result_element_type(%tokens: tensor<2x4xi32>, %wte: tensor<16x8xbf16>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.embedding' op result must be 'tensor<2x4x8xbf16>' ([B, T] of the tokens, C of the table), but is 'tensor<2x4x8xf32>'}}
  %x = xfmr.embedding %tokens, %wte : (tensor<2x4xi32>, tensor<16x8xbf16>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.embedding_grad
//===----------------------------------------------------------------------===//

func.func @embedding_grad_rank(%dx: tensor<8x8xf32>, %tokens: tensor<2x4xi32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'xfmr.embedding_grad' op grad must have rank 3 ([batch, seq, hidden]), but has rank 2}}
  %d = xfmr.embedding_grad %dx, %tokens : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
  return %d : tensor<16x8xf32>
}

// -----

func.func @embedding_grad_tokens(%dx: tensor<2x4x8xf32>, %tokens: tensor<2x5xi32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'xfmr.embedding_grad' op tokens must be 'tensor<2x4xi32>' ([B, T] of the gradient), but is 'tensor<2x5xi32>'}}
  %d = xfmr.embedding_grad %dx, %tokens : (tensor<2x4x8xf32>, tensor<2x5xi32>) -> tensor<16x8xf32>
  return %d : tensor<16x8xf32>
}

// -----

func.func @embedding_grad_result_rank(%dx: tensor<2x4x8xf32>, %tokens: tensor<2x4xi32>) -> tensor<16x8x1xf32> {
  // expected-error @+1 {{'xfmr.embedding_grad' op result must have rank 2 ([vocab, hidden]), but has rank 3}}
  %d = xfmr.embedding_grad %dx, %tokens : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8x1xf32>
  return %d : tensor<16x8x1xf32>
}

// -----

func.func @embedding_grad_result_hidden(%dx: tensor<2x4x8xf32>, %tokens: tensor<2x4xi32>) -> tensor<16x6xf32> {
  // expected-error @+1 {{'xfmr.embedding_grad' op result must be 'tensor<16x8xf32>' (C of the gradient), but is 'tensor<16x6xf32>'}}
  %d = xfmr.embedding_grad %dx, %tokens : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x6xf32>
  return %d : tensor<16x6xf32>
}

// -----

func.func @embedding_grad_result_element_type(%dx: tensor<2x4x8xf32>, %tokens: tensor<2x4xi32>) -> tensor<16x8xf16> {
  // expected-error @+1 {{'xfmr.embedding_grad' op result must be 'tensor<16x8xf32>' (C of the gradient), but is 'tensor<16x8xf16>'}}
  %d = xfmr.embedding_grad %dx, %tokens : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf16>
  return %d : tensor<16x8xf16>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.position_embedding
//===----------------------------------------------------------------------===//

func.func @position_embedding_input_rank(%x: tensor<8x8xf32>, %wpe: tensor<6x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'xfmr.position_embedding' op input must have rank 3 ([batch, seq, hidden]), but has rank 2}}
  %h = xfmr.position_embedding %x, %wpe : (tensor<8x8xf32>, tensor<6x8xf32>) -> tensor<8x8xf32>
  return %h : tensor<8x8xf32>
}

// -----

func.func @position_embedding_result(%x: tensor<2x4x8xf32>, %wpe: tensor<6x8xf32>) -> tensor<2x4x8xbf16> {
  // expected-error @+1 {{'xfmr.position_embedding' op result must have the type of the input, 'tensor<2x4x8xf32>', but is 'tensor<2x4x8xbf16>'}}
  %h = xfmr.position_embedding %x, %wpe : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x8xbf16>
  return %h : tensor<2x4x8xbf16>
}

// -----

func.func @position_embedding_table_rank(%x: tensor<2x4x8xf32>, %wpe: tensor<48xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.position_embedding' op table must have rank 2 ([positions, hidden]), but has rank 1}}
  %h = xfmr.position_embedding %x, %wpe : (tensor<2x4x8xf32>, tensor<48xf32>) -> tensor<2x4x8xf32>
  return %h : tensor<2x4x8xf32>
}

// -----

func.func @position_embedding_table_hidden(%x: tensor<2x4x8xf32>, %wpe: tensor<6x9xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.position_embedding' op table must be 'tensor<6x8xf32>' (C and element type of the activation), but is 'tensor<6x9xf32>'}}
  %h = xfmr.position_embedding %x, %wpe : (tensor<2x4x8xf32>, tensor<6x9xf32>) -> tensor<2x4x8xf32>
  return %h : tensor<2x4x8xf32>
}

// -----

func.func @position_embedding_table_element_type(%x: tensor<2x4x8xf32>, %wpe: tensor<6x8xbf16>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.position_embedding' op table must be 'tensor<6x8xf32>' (C and element type of the activation), but is 'tensor<6x8xbf16>'}}
  %h = xfmr.position_embedding %x, %wpe : (tensor<2x4x8xf32>, tensor<6x8xbf16>) -> tensor<2x4x8xf32>
  return %h : tensor<2x4x8xf32>
}

// -----

func.func @position_embedding_table_too_short(%x: tensor<2x4x8xf32>, %wpe: tensor<3x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.position_embedding' op table has 3 positions but the sequence has 4 tokens}}
  %h = xfmr.position_embedding %x, %wpe : (tensor<2x4x8xf32>, tensor<3x8xf32>) -> tensor<2x4x8xf32>
  return %h : tensor<2x4x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.position_embedding_grad
//===----------------------------------------------------------------------===//

func.func @position_embedding_grad_rank(%dh: tensor<8x8xf32>) -> tensor<6x8xf32> {
  // expected-error @+1 {{'xfmr.position_embedding_grad' op grad must have rank 3 ([batch, seq, hidden]), but has rank 2}}
  %d = xfmr.position_embedding_grad %dh : (tensor<8x8xf32>) -> tensor<6x8xf32>
  return %d : tensor<6x8xf32>
}

// -----

func.func @position_embedding_grad_result_rank(%dh: tensor<2x4x8xf32>) -> tensor<6x8x1xf32> {
  // expected-error @+1 {{'xfmr.position_embedding_grad' op result must have rank 2 ([positions, hidden]), but has rank 3}}
  %d = xfmr.position_embedding_grad %dh : (tensor<2x4x8xf32>) -> tensor<6x8x1xf32>
  return %d : tensor<6x8x1xf32>
}

// -----

func.func @position_embedding_grad_result_hidden(%dh: tensor<2x4x8xf32>) -> tensor<6x4xf32> {
  // expected-error @+1 {{'xfmr.position_embedding_grad' op result must be 'tensor<6x8xf32>' (C and element type of the activation), but is 'tensor<6x4xf32>'}}
  %d = xfmr.position_embedding_grad %dh : (tensor<2x4x8xf32>) -> tensor<6x4xf32>
  return %d : tensor<6x4xf32>
}

// -----

func.func @position_embedding_grad_too_short(%dh: tensor<2x4x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'xfmr.position_embedding_grad' op result has 2 positions but the sequence has 4 tokens}}
  %d = xfmr.position_embedding_grad %dh : (tensor<2x4x8xf32>) -> tensor<2x8xf32>
  return %d : tensor<2x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.layernorm, xfmr.layernorm_grad
//===----------------------------------------------------------------------===//

func.func @layernorm_rank0(%x: tensor<f32>, %g: tensor<1xf32>, %b: tensor<1xf32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.layernorm' op input must have at least one dimension, but is 'tensor<f32>'}}
  %y = xfmr.layernorm %x, %g, %b : (tensor<f32>, tensor<1xf32>, tensor<1xf32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @layernorm_gamma(%x: tensor<2x4x8xf32>, %g: tensor<4xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.layernorm' op gamma must be 'tensor<8xf32>' ([C], C the input's last dimension), but is 'tensor<4xf32>'}}
  %y = xfmr.layernorm %x, %g, %b : (tensor<2x4x8xf32>, tensor<4xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @layernorm_gamma_element_type(%x: tensor<2x4x8xf32>, %g: tensor<8xbf16>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.layernorm' op gamma must be 'tensor<8xf32>' ([C], C the input's last dimension), but is 'tensor<8xbf16>'}}
  %y = xfmr.layernorm %x, %g, %b : (tensor<2x4x8xf32>, tensor<8xbf16>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @layernorm_beta(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<1x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.layernorm' op beta must be 'tensor<8xf32>' ([C], C the input's last dimension), but is 'tensor<1x8xf32>'}}
  %y = xfmr.layernorm %x, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<1x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @layernorm_result(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'xfmr.layernorm' op result must have the type of the input, 'tensor<2x4x8xf32>', but is 'tensor<8x8xf32>'}}
  %y = xfmr.layernorm %x, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

func.func @layernorm_epsilon_zero(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.layernorm' op epsilon must be positive and finite, but is 0.000000e+00}}
  %y = xfmr.layernorm %x, %g, %b {epsilon = 0.0 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @layernorm_epsilon_infinite(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.layernorm' op epsilon must be positive and finite, but is INF}}
  %y = xfmr.layernorm %x, %g, %b {epsilon = 0x7F800000 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @layernorm_epsilon_type(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.layernorm' op attribute 'epsilon' failed to satisfy constraint: 32-bit float attribute}}
  %y = xfmr.layernorm %x, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @layernorm_grad_rank0(%dy: tensor<f32>, %x: tensor<f32>, %g: tensor<1xf32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.layernorm_grad' op input must have at least one dimension, but is 'tensor<f32>'}}
  %dx, %dg, %db = xfmr.layernorm_grad %dy, %x, %g : (tensor<f32>, tensor<f32>, tensor<1xf32>) -> (tensor<f32>, tensor<1xf32>, tensor<1xf32>)
  return %dx : tensor<f32>
}

// -----

func.func @layernorm_grad_grad(%dy: tensor<2x4x6xf32>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.layernorm_grad' op grad must have the type of the input, 'tensor<2x4x8xf32>', but is 'tensor<2x4x6xf32>'}}
  %dx, %dg, %db = xfmr.layernorm_grad %dy, %x, %g : (tensor<2x4x6xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %dx : tensor<2x4x8xf32>
}

// -----

func.func @layernorm_grad_gamma(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<6xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.layernorm_grad' op gamma must be 'tensor<8xf32>' ([C], C the input's last dimension), but is 'tensor<6xf32>'}}
  %dx, %dg, %db = xfmr.layernorm_grad %dy, %x, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<6xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %dx : tensor<2x4x8xf32>
}

// -----

func.func @layernorm_grad_input_grad(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> tensor<2x4x8xbf16> {
  // expected-error @+1 {{'xfmr.layernorm_grad' op input_grad must have the type of the input, 'tensor<2x4x8xf32>', but is 'tensor<2x4x8xbf16>'}}
  %dx, %dg, %db = xfmr.layernorm_grad %dy, %x, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
  return %dx : tensor<2x4x8xbf16>
}

// -----

func.func @layernorm_grad_gamma_grad(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.layernorm_grad' op gamma_grad must be 'tensor<8xf32>' ([C], C the input's last dimension), but is 'tensor<4xf32>'}}
  %dx, %dg, %db = xfmr.layernorm_grad %dy, %x, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<4xf32>, tensor<8xf32>)
  return %dx : tensor<2x4x8xf32>
}

// -----

func.func @layernorm_grad_beta_grad(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.layernorm_grad' op beta_grad must be 'tensor<8xf32>' ([C], C the input's last dimension), but is 'tensor<8xf16>'}}
  %dx, %dg, %db = xfmr.layernorm_grad %dy, %x, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf16>)
  return %dx : tensor<2x4x8xf32>
}

// -----

func.func @layernorm_grad_epsilon(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.layernorm_grad' op epsilon must be positive and finite, but is -1.000000e-05}}
  %dx, %dg, %db = xfmr.layernorm_grad %dy, %x, %g {epsilon = -1.0e-5 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %dx : tensor<2x4x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.rmsnorm, xfmr.rmsnorm_grad
//===----------------------------------------------------------------------===//

func.func @rmsnorm_rank0(%x: tensor<f32>, %g: tensor<1xf32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.rmsnorm' op input must have at least one dimension, but is 'tensor<f32>'}}
  %y = xfmr.rmsnorm %x, %g : (tensor<f32>, tensor<1xf32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @rmsnorm_gamma(%x: tensor<2x4x8xf32>, %g: tensor<4xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.rmsnorm' op gamma must be 'tensor<8xf32>' ([C], C the input's last dimension), but is 'tensor<4xf32>'}}
  %y = xfmr.rmsnorm %x, %g : (tensor<2x4x8xf32>, tensor<4xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @rmsnorm_result(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> tensor<2x4x8xf16> {
  // expected-error @+1 {{'xfmr.rmsnorm' op result must have the type of the input, 'tensor<2x4x8xf32>', but is 'tensor<2x4x8xf16>'}}
  %y = xfmr.rmsnorm %x, %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf16>
  return %y : tensor<2x4x8xf16>
}

// -----

func.func @rmsnorm_epsilon(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.rmsnorm' op epsilon must be positive and finite, but is 0.000000e+00}}
  %y = xfmr.rmsnorm %x, %g {epsilon = 0.0 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @rmsnorm_grad_rank0(%dy: tensor<f32>, %x: tensor<f32>, %g: tensor<1xf32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.rmsnorm_grad' op input must have at least one dimension, but is 'tensor<f32>'}}
  %dx, %dg = xfmr.rmsnorm_grad %dy, %x, %g : (tensor<f32>, tensor<f32>, tensor<1xf32>) -> (tensor<f32>, tensor<1xf32>)
  return %dx : tensor<f32>
}

// -----

func.func @rmsnorm_grad_grad(%dy: tensor<2x4x8xbf16>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.rmsnorm_grad' op grad must have the type of the input, 'tensor<2x4x8xf32>', but is 'tensor<2x4x8xbf16>'}}
  %dx, %dg = xfmr.rmsnorm_grad %dy, %x, %g : (tensor<2x4x8xbf16>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  return %dx : tensor<2x4x8xf32>
}

// -----

func.func @rmsnorm_grad_gamma(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<16xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.rmsnorm_grad' op gamma must be 'tensor<8xf32>' ([C], C the input's last dimension), but is 'tensor<16xf32>'}}
  %dx, %dg = xfmr.rmsnorm_grad %dy, %x, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<16xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  return %dx : tensor<2x4x8xf32>
}

// -----

func.func @rmsnorm_grad_input_grad(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> tensor<2x8x4xf32> {
  // expected-error @+1 {{'xfmr.rmsnorm_grad' op input_grad must have the type of the input, 'tensor<2x4x8xf32>', but is 'tensor<2x8x4xf32>'}}
  %dx, %dg = xfmr.rmsnorm_grad %dy, %x, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x8x4xf32>, tensor<8xf32>)
  return %dx : tensor<2x8x4xf32>
}

// -----

func.func @rmsnorm_grad_gamma_grad(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.rmsnorm_grad' op gamma_grad must be 'tensor<8xf32>' ([C], C the input's last dimension), but is 'tensor<2x4x8xf32>'}}
  %dx, %dg = xfmr.rmsnorm_grad %dy, %x, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  return %dx : tensor<2x4x8xf32>
}

// -----

func.func @rmsnorm_grad_epsilon(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.rmsnorm_grad' op epsilon must be positive and finite, but is nan}}
  %dx, %dg = xfmr.rmsnorm_grad %dy, %x, %g {epsilon = 0x7FC00000 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  return %dx : tensor<2x4x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.linear
//===----------------------------------------------------------------------===//

func.func @linear_input_rank0(%x: tensor<f32>, %w: tensor<12x1xf32>) -> tensor<12xf32> {
  // expected-error @+1 {{'xfmr.linear' op input must have at least one dimension, but is 'tensor<f32>'}}
  %y = xfmr.linear %x, %w : (tensor<f32>, tensor<12x1xf32>) -> tensor<12xf32>
  return %y : tensor<12xf32>
}

// -----

func.func @linear_weight_rank(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.linear' op weight must have rank 2 ([out_features, in_features]), but has rank 1}}
  %y = xfmr.linear %x, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// The weight is [out_features, in_features]: a transposed weight is an error.

func.func @linear_in_features(%x: tensor<2x4x8xf32>, %w: tensor<8x12xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'xfmr.linear' op weight has in_features 12 but the input's last dimension is 8}}
  %y = xfmr.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x12xf32>) -> tensor<2x4x12xf32>
  return %y : tensor<2x4x12xf32>
}

// -----

func.func @linear_weight_element_type(%x: tensor<2x4x8xf32>, %w: tensor<12x8xbf16>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'xfmr.linear' op weight element type 'bf16' differs from the input's 'f32'}}
  %y = xfmr.linear %x, %w : (tensor<2x4x8xf32>, tensor<12x8xbf16>) -> tensor<2x4x12xf32>
  return %y : tensor<2x4x12xf32>
}

// -----

func.func @linear_bias(%x: tensor<2x4x8xf32>, %w: tensor<12x8xf32>, %b: tensor<8xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'xfmr.linear' op bias must be 'tensor<12xf32>' ([N], N the weight's out_features), but is 'tensor<8xf32>'}}
  %y = xfmr.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<12x8xf32>, tensor<8xf32>) -> tensor<2x4x12xf32>
  return %y : tensor<2x4x12xf32>
}

// -----

func.func @linear_result(%x: tensor<2x4x8xf32>, %w: tensor<12x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.linear' op result must be 'tensor<2x4x12xf32>' (the input's leading dimensions, N the weight's out_features), but is 'tensor<2x4x8xf32>'}}
  %y = xfmr.linear %x, %w : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @linear_result_leading(%x: tensor<2x4x8xf32>, %w: tensor<12x8xf32>) -> tensor<8x12xf32> {
  // expected-error @+1 {{'xfmr.linear' op result must be 'tensor<2x4x12xf32>' (the input's leading dimensions, N the weight's out_features), but is 'tensor<8x12xf32>'}}
  %y = xfmr.linear %x, %w : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<8x12xf32>
  return %y : tensor<8x12xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.linear_grad_input
//===----------------------------------------------------------------------===//

func.func @linear_grad_input_rank0(%dy: tensor<f32>, %w: tensor<1x8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'xfmr.linear_grad_input' op grad must have at least one dimension, but is 'tensor<f32>'}}
  %dx = xfmr.linear_grad_input %dy, %w : (tensor<f32>, tensor<1x8xf32>) -> tensor<8xf32>
  return %dx : tensor<8xf32>
}

// -----

func.func @linear_grad_input_weight_rank(%dy: tensor<2x4x12xf32>, %w: tensor<12x8x1xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.linear_grad_input' op weight must have rank 2 ([out_features, in_features]), but has rank 3}}
  %dx = xfmr.linear_grad_input %dy, %w : (tensor<2x4x12xf32>, tensor<12x8x1xf32>) -> tensor<2x4x8xf32>
  return %dx : tensor<2x4x8xf32>
}

// -----

func.func @linear_grad_input_out_features(%dy: tensor<2x4x12xf32>, %w: tensor<8x12xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.linear_grad_input' op weight has out_features 8 but the gradient's last dimension is 12}}
  %dx = xfmr.linear_grad_input %dy, %w : (tensor<2x4x12xf32>, tensor<8x12xf32>) -> tensor<2x4x8xf32>
  return %dx : tensor<2x4x8xf32>
}

// -----

func.func @linear_grad_input_weight_element_type(%dy: tensor<2x4x12xf32>, %w: tensor<12x8xbf16>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.linear_grad_input' op weight element type 'bf16' differs from the gradient's 'f32'}}
  %dx = xfmr.linear_grad_input %dy, %w : (tensor<2x4x12xf32>, tensor<12x8xbf16>) -> tensor<2x4x8xf32>
  return %dx : tensor<2x4x8xf32>
}

// -----

func.func @linear_grad_input_result(%dy: tensor<2x4x12xf32>, %w: tensor<12x8xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'xfmr.linear_grad_input' op result must be 'tensor<2x4x8xf32>' (the gradient's leading dimensions, K the weight's in_features), but is 'tensor<2x4x12xf32>'}}
  %dx = xfmr.linear_grad_input %dy, %w : (tensor<2x4x12xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  return %dx : tensor<2x4x12xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.linear_grad_weight
//===----------------------------------------------------------------------===//

func.func @linear_grad_weight_grad_rank0(%dy: tensor<f32>, %x: tensor<8xf32>) -> tensor<1x8xf32> {
  // expected-error @+1 {{'xfmr.linear_grad_weight' op grad must have at least one dimension, but is 'tensor<f32>'}}
  %dw = xfmr.linear_grad_weight %dy, %x : (tensor<f32>, tensor<8xf32>) -> tensor<1x8xf32>
  return %dw : tensor<1x8xf32>
}

// -----

func.func @linear_grad_weight_input_rank0(%dy: tensor<12xf32>, %x: tensor<f32>) -> tensor<12x1xf32> {
  // expected-error @+1 {{'xfmr.linear_grad_weight' op input must have at least one dimension, but is 'tensor<f32>'}}
  %dw = xfmr.linear_grad_weight %dy, %x : (tensor<12xf32>, tensor<f32>) -> tensor<12x1xf32>
  return %dw : tensor<12x1xf32>
}

// -----

func.func @linear_grad_weight_leading(%dy: tensor<2x4x12xf32>, %x: tensor<8x8xf32>) -> tensor<12x8xf32> {
  // expected-error @+1 {{'xfmr.linear_grad_weight' op grad 'tensor<2x4x12xf32>' and input 'tensor<8x8xf32>' must have the same leading dimensions}}
  %dw = xfmr.linear_grad_weight %dy, %x : (tensor<2x4x12xf32>, tensor<8x8xf32>) -> tensor<12x8xf32>
  return %dw : tensor<12x8xf32>
}

// -----

func.func @linear_grad_weight_element_type(%dy: tensor<2x4x12xbf16>, %x: tensor<2x4x8xf32>) -> tensor<12x8xbf16> {
  // expected-error @+1 {{'xfmr.linear_grad_weight' op grad element type 'bf16' differs from the input's 'f32'}}
  %dw = xfmr.linear_grad_weight %dy, %x : (tensor<2x4x12xbf16>, tensor<2x4x8xf32>) -> tensor<12x8xbf16>
  return %dw : tensor<12x8xbf16>
}

// -----

func.func @linear_grad_weight_weight_grad(%dy: tensor<2x4x12xf32>, %x: tensor<2x4x8xf32>) -> tensor<8x12xf32> {
  // expected-error @+1 {{'xfmr.linear_grad_weight' op weight_grad must be 'tensor<12x8xf32>' ([N, K]: N of the gradient, K of the input), but is 'tensor<8x12xf32>'}}
  %dw = xfmr.linear_grad_weight %dy, %x : (tensor<2x4x12xf32>, tensor<2x4x8xf32>) -> tensor<8x12xf32>
  return %dw : tensor<8x12xf32>
}

// -----

func.func @linear_grad_weight_bias_grad(%dy: tensor<2x4x12xf32>, %x: tensor<2x4x8xf32>) -> tensor<12x8xf32> {
  // expected-error @+1 {{'xfmr.linear_grad_weight' op bias_grad must be 'tensor<12xf32>' ([N], N of the gradient), but is 'tensor<8xf32>'}}
  %dw, %db = xfmr.linear_grad_weight %dy, %x : (tensor<2x4x12xf32>, tensor<2x4x8xf32>) -> (tensor<12x8xf32>, tensor<8xf32>)
  return %dw : tensor<12x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.gelu, xfmr.gelu_grad, xfmr.swiglu, xfmr.swiglu_grad, xfmr.add
//===----------------------------------------------------------------------===//

func.func @gelu_result(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xbf16> {
  // expected-error @+1 {{'xfmr.gelu' op result must have the type of the input, 'tensor<2x4x8xf32>', but is 'tensor<2x4x8xbf16>'}}
  %y = xfmr.gelu %x : (tensor<2x4x8xf32>) -> tensor<2x4x8xbf16>
  return %y : tensor<2x4x8xbf16>
}

// -----

func.func @gelu_not_float(%x: tensor<2x4x8xi32>) -> tensor<2x4x8xi32> {
  // expected-error @+1 {{'xfmr.gelu' op operand #0 must be ranked tensor of floating-point values, but got 'tensor<2x4x8xi32>'}}
  %y = xfmr.gelu %x : (tensor<2x4x8xi32>) -> tensor<2x4x8xi32>
  return %y : tensor<2x4x8xi32>
}

// -----

func.func @gelu_unranked(%x: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{'xfmr.gelu' op operand #0 must be ranked tensor of floating-point values, but got 'tensor<*xf32>'}}
  %y = xfmr.gelu %x : (tensor<*xf32>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}

// -----

func.func @gelu_grad_grad(%dy: tensor<2x4x6xf32>, %x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.gelu_grad' op grad must have the type of the input, 'tensor<2x4x8xf32>', but is 'tensor<2x4x6xf32>'}}
  %dx = xfmr.gelu_grad %dy, %x : (tensor<2x4x6xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %dx : tensor<2x4x8xf32>
}

// -----

func.func @gelu_grad_result(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>) -> tensor<2x4x6xf32> {
  // expected-error @+1 {{'xfmr.gelu_grad' op result must have the type of the input, 'tensor<2x4x8xf32>', but is 'tensor<2x4x6xf32>'}}
  %dx = xfmr.gelu_grad %dy, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x6xf32>
  return %dx : tensor<2x4x6xf32>
}

// -----

func.func @swiglu_up(%g: tensor<2x4x12xf32>, %u: tensor<2x4x8xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'xfmr.swiglu' op up must have the type of the gate, 'tensor<2x4x12xf32>', but is 'tensor<2x4x8xf32>'}}
  %h = xfmr.swiglu %g, %u : (tensor<2x4x12xf32>, tensor<2x4x8xf32>) -> tensor<2x4x12xf32>
  return %h : tensor<2x4x12xf32>
}

// -----

func.func @swiglu_result(%g: tensor<2x4x12xf32>, %u: tensor<2x4x12xf32>) -> tensor<2x4x24xf32> {
  // expected-error @+1 {{'xfmr.swiglu' op result must have the type of the gate, 'tensor<2x4x12xf32>', but is 'tensor<2x4x24xf32>'}}
  %h = xfmr.swiglu %g, %u : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x24xf32>
  return %h : tensor<2x4x24xf32>
}

// -----

func.func @swiglu_grad_grad(%dh: tensor<2x4x8xf32>, %g: tensor<2x4x12xf32>, %u: tensor<2x4x12xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'xfmr.swiglu_grad' op grad must have the type of the gate, 'tensor<2x4x12xf32>', but is 'tensor<2x4x8xf32>'}}
  %dg, %du = xfmr.swiglu_grad %dh, %g, %u : (tensor<2x4x8xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> (tensor<2x4x12xf32>, tensor<2x4x12xf32>)
  return %dg : tensor<2x4x12xf32>
}

// -----

func.func @swiglu_grad_up(%dh: tensor<2x4x12xf32>, %g: tensor<2x4x12xf32>, %u: tensor<2x4x12xbf16>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'xfmr.swiglu_grad' op up must have the type of the gate, 'tensor<2x4x12xf32>', but is 'tensor<2x4x12xbf16>'}}
  %dg, %du = xfmr.swiglu_grad %dh, %g, %u : (tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xbf16>) -> (tensor<2x4x12xf32>, tensor<2x4x12xf32>)
  return %dg : tensor<2x4x12xf32>
}

// -----

func.func @swiglu_grad_gate_grad(%dh: tensor<2x4x12xf32>, %g: tensor<2x4x12xf32>, %u: tensor<2x4x12xf32>) -> tensor<2x4x6xf32> {
  // expected-error @+1 {{'xfmr.swiglu_grad' op gate_grad must have the type of the gate, 'tensor<2x4x12xf32>', but is 'tensor<2x4x6xf32>'}}
  %dg, %du = xfmr.swiglu_grad %dh, %g, %u : (tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> (tensor<2x4x6xf32>, tensor<2x4x12xf32>)
  return %dg : tensor<2x4x6xf32>
}

// -----

func.func @swiglu_grad_up_grad(%dh: tensor<2x4x12xf32>, %g: tensor<2x4x12xf32>, %u: tensor<2x4x12xf32>) -> tensor<2x4x6xf32> {
  // expected-error @+1 {{'xfmr.swiglu_grad' op up_grad must have the type of the gate, 'tensor<2x4x12xf32>', but is 'tensor<2x4x6xf32>'}}
  %dg, %du = xfmr.swiglu_grad %dh, %g, %u : (tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> (tensor<2x4x12xf32>, tensor<2x4x6xf32>)
  return %du : tensor<2x4x6xf32>
}

// -----

func.func @add_rhs(%a: tensor<2x4x8xf32>, %b: tensor<2x4x1xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.add' op rhs must have the type of lhs, 'tensor<2x4x8xf32>', but is 'tensor<2x4x1xf32>'}}
  %r = xfmr.add %a, %b : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}

// -----

func.func @add_result(%a: tensor<2x4x8xf32>, %b: tensor<2x4x8xf32>) -> tensor<2x4x8xf16> {
  // expected-error @+1 {{'xfmr.add' op result must have the type of lhs, 'tensor<2x4x8xf32>', but is 'tensor<2x4x8xf16>'}}
  %r = xfmr.add %a, %b : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf16>
  return %r : tensor<2x4x8xf16>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.scale
//===----------------------------------------------------------------------===//

func.func @scale_factor_infinite(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.scale' op factor must be finite, but is -INF}}
  %y = xfmr.scale %x {factor = 0xFF800000 : f32} : (tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @scale_factor_nan(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.scale' op factor must be finite, but is nan}}
  %y = xfmr.scale %x {factor = 0x7FC00000 : f32} : (tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @scale_factor_missing(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.scale' op requires attribute 'factor'}}
  %y = xfmr.scale %x : (tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @scale_result(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xbf16> {
  // expected-error @+1 {{'xfmr.scale' op result must have the type of the input, 'tensor<2x4x8xf32>', but is 'tensor<2x4x8xbf16>'}}
  %y = xfmr.scale %x {factor = 0.5 : f32} : (tensor<2x4x8xf32>) -> tensor<2x4x8xbf16>
  return %y : tensor<2x4x8xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.attention
//===----------------------------------------------------------------------===//

func.func @attention_heads_zero(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op num_heads (0) and num_kv_heads (2) must be positive}}
  %o = xfmr.attention %q, %k, %v {num_heads = 0 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_kv_heads_negative(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op num_heads (2) and num_kv_heads (-2) must be positive}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = -2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_kv_heads_divide(%q: tensor<2x4x8xf32>, %k: tensor<2x4x6xf32>, %v: tensor<2x4x6xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op num_kv_heads 3 must divide num_heads 4}}
  %o = xfmr.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 3 : i64} : (tensor<2x4x8xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_query_rank(%q: tensor<8x8xf32>, %k: tensor<8x8xf32>, %v: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op query must have rank 3 ([batch, seq, heads*head_dim]), but has rank 2}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %o : tensor<8x8xf32>
}

// -----

func.func @attention_query_heads(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op query features 8 are not divisible by num_heads 3}}
  %o = xfmr.attention %q, %k, %v {num_heads = 3 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// GQA: 4 query heads of dimension 2 and 2 key/value heads need a key of
// 2 * 2 = 4 features; a key with all 8 (the MHA size) is an error.

func.func @attention_key_features(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op key must be 'tensor<2x4x4xf32>' ([B, T] of the query, num_kv_heads * head_dim 2), but is 'tensor<2x4x8xf32>'}}
  %o = xfmr.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_key_seq(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op key must be 'tensor<2x4x8xf32>' ([B, T] of the query, num_kv_heads * head_dim 4), but is 'tensor<2x6x8xf32>'}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_key_element_type(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xbf16>, %v: tensor<2x4x8xbf16>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op key must be 'tensor<2x4x8xf32>' ([B, T] of the query, num_kv_heads * head_dim 4), but is 'tensor<2x4x8xbf16>'}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_value(%q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op value must have the type of the key, 'tensor<2x4x4xf32>', but is 'tensor<2x4x8xf32>'}}
  %o = xfmr.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_rope_theta_zero(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op rope_theta must be positive and finite, but is 0.000000e+00}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = 0.0 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_rope_theta_negative(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op rope_theta must be positive and finite, but is -1.000000e+04}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = -1.0e+04 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_rope_scaling_without_factors(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op rope_scaling and rope_scaling_factors must be given together}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32, rope_scaling = "linear"} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_rope_scaling_without_theta(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op rope_scaling needs rope_theta}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_scaling = "linear", rope_scaling_factors = array<f64: 4.0>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_rope_scaling_unknown(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op rope_scaling "dynamic" is not one of linear, llama3, yarn}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32, rope_scaling = "dynamic", rope_scaling_factors = array<f64: 4.0>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_rope_scaling_count(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op rope_scaling "llama3" takes 4 rope_scaling_factors, got 1}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32, rope_scaling = "llama3", rope_scaling_factors = array<f64: 4.0>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_rope_scaling_factor(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op rope scaling factor must be positive, got 0}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32, rope_scaling = "linear", rope_scaling_factors = array<f64: 0.0>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_rope_scaling_llama3_bands(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor and a positive integer original_context, got [8.000000e+00, 4.000000e+00, 1.000000e+00, 8.192000e+03]}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32, rope_scaling = "llama3", rope_scaling_factors = array<f64: 8.0, 4.0, 1.0, 8192.0>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_rope_scaling_yarn_betas(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op yarn rope scaling needs factor >= 1, 0 < beta_slow < beta_fast, a positive integer original_context and rope_theta > 1, got [4.000000e+00, 1.000000e+00, 3.200000e+01, 3.200000e+01]}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32, rope_scaling = "yarn", rope_scaling_factors = array<f64: 4.0, 1.0, 32.0, 32.0>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_rope_scaling_yarn_theta(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op yarn rope scaling needs factor >= 1, 0 < beta_slow < beta_fast, a positive integer original_context and rope_theta > 1, got [4.000000e+00, 3.200000e+01, 1.000000e+00, 3.200000e+01]}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0 : f32, rope_scaling = "yarn", rope_scaling_factors = array<f64: 4.0, 32.0, 1.0, 32.0>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_grad_rope_scaling_count(%do: tensor<2x4x8xf32>, %q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention_grad' op rope_scaling "linear" takes 1 rope_scaling_factors, got 2}}
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32, rope_scaling = "linear", rope_scaling_factors = array<f64: 4.0, 1.0>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  return %dq : tensor<2x4x8xf32>
}

// -----

func.func @attention_sliding_window_zero(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op sliding_window must be positive, got 0}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, sliding_window = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_sliding_window_negative(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op sliding_window must be positive, got -3}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, sliding_window = -3 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_sliding_window_not_causal(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op sliding_window needs causal attention (causal = true)}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = false, sliding_window = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_grad_sliding_window_not_causal(%do: tensor<2x4x8xf32>, %q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention_grad' op sliding_window needs causal attention (causal = true)}}
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, causal = false, sliding_window = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  return %dq : tensor<2x4x8xf32>
}

// -----

// Two heads of dimension 3: rotary embedding pairs feature i with i + D/2.

func.func @attention_rope_odd_head_dim(%q: tensor<2x4x6xf32>, %k: tensor<2x4x6xf32>, %v: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> {
  // expected-error @+1 {{'xfmr.attention' op rotary embedding needs an even head_dim, but head_dim is 3}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32} : (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  return %o : tensor<2x4x6xf32>
}

// -----

func.func @attention_result(%q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>, %v: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  // expected-error @+1 {{'xfmr.attention' op result must have the type of the query, 'tensor<2x4x8xf32>', but is 'tensor<2x4x4xf32>'}}
  %o = xfmr.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %o : tensor<2x4x4xf32>
}

// -----

func.func @attention_missing_heads(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op requires attribute 'num_kv_heads'}}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.attention_grad
//===----------------------------------------------------------------------===//

// The checks shared with xfmr.attention run on the gradient too.

func.func @attention_grad_kv_heads_divide(%do: tensor<2x4x8xf32>, %q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention_grad' op num_kv_heads 4 must divide num_heads 2}}
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 4 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  return %dq : tensor<2x4x8xf32>
}

// -----

func.func @attention_grad_rope_odd_head_dim(%do: tensor<2x4x6xf32>, %q: tensor<2x4x6xf32>, %k: tensor<2x4x6xf32>, %v: tensor<2x4x6xf32>) -> tensor<2x4x6xf32> {
  // expected-error @+1 {{'xfmr.attention_grad' op rotary embedding needs an even head_dim, but head_dim is 3}}
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32} : (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>)
  return %dq : tensor<2x4x6xf32>
}

// -----

func.func @attention_grad_grad(%do: tensor<2x4x4xf32>, %q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>, %v: tensor<2x4x4xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention_grad' op grad must have the type of the query, 'tensor<2x4x8xf32>', but is 'tensor<2x4x4xf32>'}}
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  return %dq : tensor<2x4x8xf32>
}

// -----

func.func @attention_grad_query_grad(%do: tensor<2x4x8xf32>, %q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>, %v: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  // expected-error @+1 {{'xfmr.attention_grad' op query_grad must have the type of the query, 'tensor<2x4x8xf32>', but is 'tensor<2x4x4xf32>'}}
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  return %dq : tensor<2x4x4xf32>
}

// -----

func.func @attention_grad_key_grad(%do: tensor<2x4x8xf32>, %q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>, %v: tensor<2x4x4xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention_grad' op key_grad must have the type of the key, 'tensor<2x4x4xf32>', but is 'tensor<2x4x8xf32>'}}
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>)
  return %dk : tensor<2x4x8xf32>
}

// -----

func.func @attention_grad_value_grad(%do: tensor<2x4x8xf32>, %q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>, %v: tensor<2x4x4xf32>) -> tensor<2x4x4xbf16> {
  // expected-error @+1 {{'xfmr.attention_grad' op value_grad must have the type of the value, 'tensor<2x4x4xf32>', but is 'tensor<2x4x4xbf16>'}}
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xbf16>)
  return %dv : tensor<2x4x4xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.softmax_cross_entropy, xfmr.softmax_cross_entropy_grad
//===----------------------------------------------------------------------===//

func.func @softmax_cross_entropy_logits_rank(%logits: tensor<8x16xf32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.softmax_cross_entropy' op logits must have rank 3 ([batch, seq, vocab]), but has rank 2}}
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<8x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @softmax_cross_entropy_targets(%logits: tensor<2x4x16xf32>, %targets: tensor<4x2xi32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.softmax_cross_entropy' op targets must be 'tensor<2x4xi32>' ([B, T] of the logits), but is 'tensor<4x2xi32>'}}
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<4x2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @softmax_cross_entropy_targets_dynamic(%logits: tensor<2x4x16xf32>, %targets: tensor<2x?xi32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.softmax_cross_entropy' op operand #1 must have a static shape, but is 'tensor<2x?xi32>'}}
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x?xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @softmax_cross_entropy_targets_not_i32(%logits: tensor<2x4x16xf32>, %targets: tensor<2x4xf32>) -> tensor<f32> {
  // expected-error @+1 {{'xfmr.softmax_cross_entropy' op operand #1 must be 2D tensor of 32-bit signless integer values, but got 'tensor<2x4xf32>'}}
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @softmax_cross_entropy_loss_not_scalar(%logits: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>) -> tensor<1xf32> {
  // expected-error @+1 {{'xfmr.softmax_cross_entropy' op result #0 must be 0D tensor of 32-bit float values, but got 'tensor<1xf32>'}}
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<1xf32>
  return %loss : tensor<1xf32>
}

// -----

func.func @softmax_cross_entropy_loss_not_f32(%logits: tensor<2x4x16xbf16>, %targets: tensor<2x4xi32>) -> tensor<bf16> {
  // expected-error @+1 {{'xfmr.softmax_cross_entropy' op result #0 must be 0D tensor of 32-bit float values, but got 'tensor<bf16>'}}
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<bf16>
  return %loss : tensor<bf16>
}

// -----

func.func @softmax_cross_entropy_grad_loss_grad(%dloss: tensor<1xf32>, %logits: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{'xfmr.softmax_cross_entropy_grad' op operand #0 must be 0D tensor of 32-bit float values, but got 'tensor<1xf32>'}}
  %d = xfmr.softmax_cross_entropy_grad %dloss, %logits, %targets : (tensor<1xf32>, tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<2x4x16xf32>
  return %d : tensor<2x4x16xf32>
}

// -----

func.func @softmax_cross_entropy_grad_logits_rank(%dloss: tensor<f32>, %logits: tensor<2x4x4x4xf32>, %targets: tensor<2x4xi32>) -> tensor<2x4x4x4xf32> {
  // expected-error @+1 {{'xfmr.softmax_cross_entropy_grad' op logits must have rank 3 ([batch, seq, vocab]), but has rank 4}}
  %d = xfmr.softmax_cross_entropy_grad %dloss, %logits, %targets : (tensor<f32>, tensor<2x4x4x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4x4xf32>
  return %d : tensor<2x4x4x4xf32>
}

// -----

func.func @softmax_cross_entropy_grad_targets(%dloss: tensor<f32>, %logits: tensor<2x4x16xf32>, %targets: tensor<2x3xi32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{'xfmr.softmax_cross_entropy_grad' op targets must be 'tensor<2x4xi32>' ([B, T] of the logits), but is 'tensor<2x3xi32>'}}
  %d = xfmr.softmax_cross_entropy_grad %dloss, %logits, %targets : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x3xi32>) -> tensor<2x4x16xf32>
  return %d : tensor<2x4x16xf32>
}

// -----

func.func @softmax_cross_entropy_grad_result(%dloss: tensor<f32>, %logits: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.softmax_cross_entropy_grad' op result must have the type of the logits, 'tensor<2x4x16xf32>', but is 'tensor<2x4x8xf32>'}}
  %d = xfmr.softmax_cross_entropy_grad %dloss, %logits, %targets : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  return %d : tensor<2x4x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// xfmr.adamw
//===----------------------------------------------------------------------===//

func.func @adamw_shapes(%p: tensor<12x8xf32>, %g: tensor<8x12xf32>, %m: tensor<12x8xf32>, %v: tensor<12x8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<12x8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op grad has shape [8, 12] but the parameter has shape [12, 8]}}
  %p1, %m1, %v1 = xfmr.adamw %p, %g, %m, %v, %t, %lr : (tensor<12x8xf32>, tensor<8x12xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>)
  return %p1 : tensor<12x8xf32>
}

// -----

func.func @adamw_result_shape(%p: tensor<12x8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<12x8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op new_moment2 has shape [96] but the parameter has shape [12, 8]}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %p, %p, %t, %lr : (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<12x8xf32>, tensor<12x8xf32>, tensor<96xf32>)
  return %p1 : tensor<12x8xf32>
}

// -----

func.func @adamw_grad_type(%p: tensor<12x8xf32>, %g: tensor<12x8xbf16>, %m: tensor<12x8xf32>, %v: tensor<12x8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<12x8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op grad must have the type of the parameter, 'tensor<12x8xf32>', but is 'tensor<12x8xbf16>'}}
  %p1, %m1, %v1 = xfmr.adamw %p, %g, %m, %v, %t, %lr : (tensor<12x8xf32>, tensor<12x8xbf16>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>)
  return %p1 : tensor<12x8xf32>
}

// -----

func.func @adamw_new_param_type(%p: tensor<12x8xbf16>, %g: tensor<12x8xbf16>, %m: tensor<12x8xf32>, %v: tensor<12x8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<12x8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op new_param must have the type of the parameter, 'tensor<12x8xbf16>', but is 'tensor<12x8xf32>'}}
  %p1, %m1, %v1 = xfmr.adamw %p, %g, %m, %v, %t, %lr : (tensor<12x8xbf16>, tensor<12x8xbf16>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>)
  return %p1 : tensor<12x8xf32>
}

// -----

func.func @adamw_moment1_not_f32(%p: tensor<12x8xbf16>, %m: tensor<12x8xbf16>, %v: tensor<12x8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<12x8xbf16> {
  // expected-error @+1 {{'xfmr.adamw' op moment1 must hold f32 (optimizer state is fp32), but holds 'bf16'}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %m, %v, %t, %lr : (tensor<12x8xbf16>, tensor<12x8xbf16>, tensor<12x8xbf16>, tensor<12x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<12x8xbf16>, tensor<12x8xf32>, tensor<12x8xf32>)
  return %p1 : tensor<12x8xbf16>
}

// -----

func.func @adamw_moment2_not_f32(%p: tensor<12x8xf32>, %v: tensor<12x8xf16>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<12x8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op moment2 must hold f32 (optimizer state is fp32), but holds 'f16'}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %p, %v, %t, %lr : (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf16>, tensor<i32>, tensor<f32>) -> (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>)
  return %p1 : tensor<12x8xf32>
}

// -----

func.func @adamw_new_moment1_not_f32(%p: tensor<12x8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<12x8xbf16> {
  // expected-error @+1 {{'xfmr.adamw' op new_moment1 must hold f32 (optimizer state is fp32), but holds 'bf16'}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %p, %p, %t, %lr : (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<12x8xf32>, tensor<12x8xbf16>, tensor<12x8xf32>)
  return %m1 : tensor<12x8xbf16>
}

// -----

func.func @adamw_new_moment2_not_f32(%p: tensor<12x8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<12x8xf64> {
  // expected-error @+1 {{'xfmr.adamw' op new_moment2 must hold f32 (optimizer state is fp32), but holds 'f64'}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %p, %p, %t, %lr : (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf64>)
  return %v1 : tensor<12x8xf64>
}

// -----

func.func @adamw_beta1_one(%p: tensor<8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op beta1 must be in [0, 1), but is 1.000000e+00}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %p, %p, %t, %lr {beta1 = 1.0 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %p1 : tensor<8xf32>
}

// -----

func.func @adamw_beta2_negative(%p: tensor<8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op beta2 must be in [0, 1), but is -5.000000e-01}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %p, %p, %t, %lr {beta2 = -0.5 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %p1 : tensor<8xf32>
}

// -----

func.func @adamw_beta2_nan(%p: tensor<8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op beta2 must be in [0, 1), but is nan}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %p, %p, %t, %lr {beta2 = 0x7FC00000 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %p1 : tensor<8xf32>
}

// -----

func.func @adamw_epsilon(%p: tensor<8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op epsilon must be positive and finite, but is 0.000000e+00}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %p, %p, %t, %lr {epsilon = 0.0 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %p1 : tensor<8xf32>
}

// -----

func.func @adamw_weight_decay_negative(%p: tensor<8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op weight_decay must be non-negative, but is -1.000000e-01}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %p, %p, %t, %lr {weight_decay = -0.1 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %p1 : tensor<8xf32>
}

// -----

func.func @adamw_weight_decay_infinite(%p: tensor<8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op weight_decay must be non-negative, but is INF}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %p, %p, %t, %lr {weight_decay = 0x7F800000 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %p1 : tensor<8xf32>
}

// -----

func.func @adamw_step_not_i32(%p: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op operand #4 must be 0D tensor of 32-bit signless integer values, but got 'tensor<i64>'}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %p, %p, %t, %lr : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %p1 : tensor<8xf32>
}

// -----

func.func @adamw_lr_not_scalar(%p: tensor<8xf32>, %t: tensor<i32>, %lr: tensor<1xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'xfmr.adamw' op operand #5 must be 0D tensor of 32-bit float values, but got 'tensor<1xf32>'}}
  %p1, %m1, %v1 = xfmr.adamw %p, %p, %p, %p, %t, %lr : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i32>, tensor<1xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %p1 : tensor<8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Discardable xfmr attributes (XfmrDialect.cpp)
//===----------------------------------------------------------------------===//

// expected-error @+1 {{unknown attribute 'xfmr.weight' on argument #1}}
func.func @arg_unknown_attribute(%x: tensor<8xf32>, %w: tensor<8xf32> {xfmr.weight = "w"}) {
  return
}

// -----

// An unknown name is reported as unknown whatever its value.

// expected-error @+1 {{unknown attribute 'xfmr.foo' on argument #0}}
func.func @arg_unknown_attribute_not_string(%x: tensor<8xf32> {xfmr.foo = 1 : i64}) {
  return
}

// -----

// xfmr.output belongs on results.

// expected-error @+1 {{unknown attribute 'xfmr.output' on argument #0}}
func.func @arg_output(%x: tensor<f32> {xfmr.output = "loss"}) {
  return
}

// -----

// xfmr.input belongs on arguments.

// expected-error @+1 {{unknown attribute 'xfmr.input' on result #0}}
func.func @result_input(%x: tensor<2x4xi32>) -> (tensor<2x4xi32> {xfmr.input = "tokens"}) {
  return %x : tensor<2x4xi32>
}

// -----

// expected-error @+1 {{'xfmr.param' on argument #0 must be a non-empty string}}
func.func @param_not_string(%w: tensor<8xf32> {xfmr.param = 3 : i64}) {
  return
}

// -----

// expected-error @+1 {{'xfmr.layer' on argument #0 must be a non-negative integer, but is -1 : i64}}
func.func @layer_negative(%w: tensor<8xf32> {xfmr.layer = -1 : i64, xfmr.param = "h.0.w"}) {
  return
}

// -----

// expected-error @+1 {{'xfmr.layer' on argument #0 must be a non-negative integer, but is "0"}}
func.func @layer_not_integer(%w: tensor<8xf32> {xfmr.layer = "0", xfmr.param = "h.0.w"}) {
  return
}

// -----

// expected-error @+1 {{'xfmr.moment1' on result #0 must be a non-empty string}}
func.func @moment1_empty(%m: tensor<8xf32>) -> (tensor<8xf32> {xfmr.moment1 = ""}) {
  return %m : tensor<8xf32>
}

// -----

// expected-error @+1 {{'xfmr.input' on argument #0 must be a non-empty string}}
func.func @input_not_string(%t: tensor<2x4xi32> {xfmr.input = ["tokens"]}) {
  return
}

// -----

// expected-error @+1 {{'xfmr.param' on argument #0 needs a float tensor, but the argument is 'tensor<8xi32>'}}
func.func @param_not_float(%w: tensor<8xi32> {xfmr.param = "w"}) {
  return
}

// -----

// expected-error @+1 {{'xfmr.moment2' on argument #0 needs a float tensor, but the argument is 'f32'}}
func.func @moment2_not_tensor(%v: f32 {xfmr.moment2 = "w"}) {
  return
}

// -----

// expected-error @+1 {{'xfmr.param' on result #1 needs a float tensor, but the result is 'tensor<8xi32>'}}
func.func @result_param_not_float(%x: tensor<f32>, %w: tensor<8xi32>) -> (tensor<f32>, tensor<8xi32> {xfmr.param = "w"}) {
  return %x, %w : tensor<f32>, tensor<8xi32>
}

// -----

// The check holds on a declaration too, where there is no body to read the
// argument type from.

// expected-error @+1 {{'xfmr.moment1' on argument #0 needs a float tensor, but the argument is 'tensor<8xi64>'}}
func.func private @declaration_moment1_not_float(tensor<8xi64> {xfmr.moment1 = "w"})

// -----

// expected-error @+1 {{'xfmr.input' on argument #2 is "labels"; expected tokens, targets, step or lr}}
func.func @input_unknown_role(%a: tensor<2x4xi32> {xfmr.input = "tokens"}, %b: tensor<i32> {xfmr.input = "step"}, %c: tensor<2x4xi32> {xfmr.input = "labels"}) {
  return
}

// -----

// expected-error @+1 {{'xfmr.output' on result #0 is "probs"; expected loss, step or logits}}
func.func @output_unknown_role(%x: tensor<f32>) -> (tensor<f32> {xfmr.output = "probs"}) {
  return %x : tensor<f32>
}

// -----

// expected-error @+1 {{unknown attribute 'xfmr.config'}}
func.func @op_unknown_attribute() attributes {xfmr.config = {layers = 2 : i64}} {
  return
}

// -----

// The per-value attributes are not function attributes.

// expected-error @+1 {{unknown attribute 'xfmr.param'}}
func.func @op_param_attribute() attributes {xfmr.param = "w"} {
  return
}

// -----

// expected-error @+1 {{'xfmr.model' must be a dictionary}}
func.func @model_not_dictionary() attributes {xfmr.model = "gpt2"} {
  return
}

// -----

// expected-error @+1 {{'xfmr.train_step' must be a dictionary}}
func.func @train_step_not_dictionary() attributes {xfmr.train_step = [0.9 : f32, 0.95 : f32]} {
  return
}

// -----

// xfmr.cast

func.func @cast_shape(%w: tensor<16x8xf32>) -> tensor<8x16xbf16> {
  // expected-error @+1 {{'xfmr.cast' op result must be 'tensor<16x8xbf16>' (the input's shape), but is 'tensor<8x16xbf16>'}}
  %h = xfmr.cast %w : (tensor<16x8xf32>) -> tensor<8x16xbf16>
  return %h : tensor<8x16xbf16>
}

// -----

func.func @cast_same_type(%w: tensor<16x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'xfmr.cast' op casts 'f32' to itself; remove it}}
  %h = xfmr.cast %w : (tensor<16x8xf32>) -> tensor<16x8xf32>
  return %h : tensor<16x8xf32>
}

// -----

func.func @cast_integer(%t: tensor<16x8xi32>) -> tensor<16x8xbf16> {
  // expected-error @+1 {{'xfmr.cast' op operand #0 must be ranked tensor of floating-point values}}
  %h = xfmr.cast %t : (tensor<16x8xi32>) -> tensor<16x8xbf16>
  return %h : tensor<16x8xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// Explicit positions: xfmr.sequence_positions and the positions operands
//===----------------------------------------------------------------------===//

func.func @sequence_positions_length() -> tensor<0xi32> {
  // expected-error @+1 {{'xfmr.sequence_positions' op length must be positive, got 0}}
  %p = xfmr.sequence_positions {length = 0 : i64, chunks = 1 : i64} : () -> tensor<0xi32>
  return %p : tensor<0xi32>
}

// -----

func.func @sequence_positions_chunks() -> tensor<8xi32> {
  // expected-error @+1 {{'xfmr.sequence_positions' op chunks must be at least 1, got 0}}
  %p = xfmr.sequence_positions {length = 8 : i64, chunks = 0 : i64} : () -> tensor<8xi32>
  return %p : tensor<8xi32>
}

// -----

func.func @sequence_positions_odd_chunks() -> tensor<9xi32> {
  // expected-error @+1 {{'xfmr.sequence_positions' op chunks must be 1 or even (two per context-parallel rank), got 3}}
  %p = xfmr.sequence_positions {length = 9 : i64, chunks = 3 : i64} : () -> tensor<9xi32>
  return %p : tensor<9xi32>
}

// -----

func.func @sequence_positions_divide() -> tensor<6xi32> {
  // expected-error @+1 {{'xfmr.sequence_positions' op chunks 4 does not divide the length 6}}
  %p = xfmr.sequence_positions {length = 6 : i64, chunks = 4 : i64} : () -> tensor<6xi32>
  return %p : tensor<6xi32>
}

// -----

func.func @sequence_positions_result() -> tensor<4xi32> {
  // expected-error @+1 {{'xfmr.sequence_positions' op result has 4 elements but length is 8}}
  %p = xfmr.sequence_positions {length = 8 : i64, chunks = 2 : i64} : () -> tensor<4xi32>
  return %p : tensor<4xi32>
}

// -----

func.func @position_embedding_positions_length(%x: tensor<2x4x8xf32>, %wpe: tensor<6x8xf32>, %pos: tensor<3xi32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.position_embedding' op positions has 3 elements but the sequence has 4}}
  %h = xfmr.position_embedding %x, %wpe positions %pos : (tensor<2x4x8xf32>, tensor<6x8xf32>, tensor<3xi32>) -> tensor<2x4x8xf32>
  return %h : tensor<2x4x8xf32>
}

// -----

func.func @position_embedding_grad_positions_length(%dh: tensor<2x4x8xf32>, %pos: tensor<5xi32>) -> tensor<6x8xf32> {
  // expected-error @+1 {{'xfmr.position_embedding_grad' op positions has 5 elements but the sequence has 4}}
  %d = xfmr.position_embedding_grad %dh positions %pos : (tensor<2x4x8xf32>, tensor<5xi32>) -> tensor<6x8xf32>
  return %d : tensor<6x8xf32>
}

// -----

func.func @position_embedding_positions_type(%x: tensor<2x4x8xf32>, %wpe: tensor<6x8xf32>, %pos: tensor<4xi64>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.position_embedding' op operand #2 must be 1D tensor of 32-bit signless integer values}}
  %h = xfmr.position_embedding %x, %wpe positions %pos : (tensor<2x4x8xf32>, tensor<6x8xf32>, tensor<4xi64>) -> tensor<2x4x8xf32>
  return %h : tensor<2x4x8xf32>
}

// -----

func.func @attention_query_positions_length(%q: tensor<2x4x8xf32>, %k: tensor<2x8x8xf32>, %v: tensor<2x8x8xf32>, %qp: tensor<3xi32>, %kp: tensor<8xi32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op query_positions has 3 positions but the query sequence has 4}}
  %o = xfmr.attention %q, %k, %v positions %qp, %kp {num_heads = 2 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<3xi32>, tensor<8xi32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_key_positions_length(%q: tensor<2x4x8xf32>, %k: tensor<2x8x8xf32>, %v: tensor<2x8x8xf32>, %qp: tensor<4xi32>, %kp: tensor<4xi32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op key_positions has 4 positions but the key sequence has 8}}
  %o = xfmr.attention %q, %k, %v positions %qp, %kp {num_heads = 2 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_positions_together(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>, %qp: tensor<4xi32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.attention' op query_positions and key_positions must be given together}}
  %o = "xfmr.attention"(%q, %k, %v, %qp) {num_heads = 2 : i64, num_kv_heads = 2 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}
      : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4xi32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @attention_grad_key_positions_length(%do: tensor<2x4x8xf32>, %q: tensor<2x4x8xf32>, %k: tensor<2x8x8xf32>, %v: tensor<2x8x8xf32>, %qp: tensor<4xi32>, %kp: tensor<6xi32>)
    -> (tensor<2x4x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) {
  // expected-error @+1 {{'xfmr.attention_grad' op key_positions has 6 positions but the key sequence has 8}}
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v positions %qp, %kp {num_heads = 2 : i64, num_kv_heads = 2 : i64}
      : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<4xi32>, tensor<6xi32>)
      -> (tensor<2x4x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>)
  return %dq, %dk, %dv : tensor<2x4x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>
}

// -----

func.func @sequence_chunks_attribute(%tokens: tensor<2x4xi32> {xfmr.input = "tokens", xfmr.sequence_chunks = 0 : i64}) {
  // expected-error @-1 {{'xfmr.sequence_chunks' on argument #0 must be a positive integer, but is 0 : i64}}
  return
}

// -----

// expected-error @+1 {{'xfmr.routing_bias' on argument #0 must be a finite, non-negative float (the update rate), but is -1.000000e+00 : f32}}
func.func @routing_bias_rate(%b: tensor<4xf32> {xfmr.param = "h.0.moe.router.expert_bias", xfmr.routing_bias = -1.0 : f32}) {
  return
}

// -----

// expected-error @+1 {{'xfmr.routing_bias' on argument #0 needs an [experts] f32 tensor, but the argument is 'tensor<4x2xf32>'}}
func.func @routing_bias_type(%b: tensor<4x2xf32> {xfmr.param = "h.0.moe.router.expert_bias", xfmr.routing_bias = 1.0e-03 : f32}) {
  return
}
