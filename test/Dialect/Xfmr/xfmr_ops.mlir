// RUN: partition-opt %s -split-input-file | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | partition-opt -split-input-file | FileCheck %s

// Round trip of every xfmr op, in the custom and in the generic form, and of
// the discardable xfmr attributes on functions, their arguments and results.

// CHECK-LABEL: func.func @embedding
// CHECK-SAME:    (%[[TOK:.*]]: tensor<2x4xi32>, %[[WTE:.*]]: tensor<16x8xf32>)
func.func @embedding(%tokens: tensor<2x4xi32>, %wte: tensor<16x8xf32>) -> tensor<2x4x8xf32> {
  // CHECK: %[[X:.*]] = xfmr.embedding %[[TOK]], %[[WTE]] : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %x = xfmr.embedding %tokens, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: return %[[X]]
  return %x : tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @embedding_bf16
func.func @embedding_bf16(%tokens: tensor<2x4xi32>, %wte: tensor<16x8xbf16>) -> tensor<2x4x8xbf16> {
  // CHECK: xfmr.embedding %{{.*}}, %{{.*}} : (tensor<2x4xi32>, tensor<16x8xbf16>) -> tensor<2x4x8xbf16>
  %x = xfmr.embedding %tokens, %wte : (tensor<2x4xi32>, tensor<16x8xbf16>) -> tensor<2x4x8xbf16>
  return %x : tensor<2x4x8xbf16>
}

// -----

// CHECK-LABEL: func.func @embedding_grad
// CHECK-SAME:    (%[[DX:.*]]: tensor<2x4x8xf32>, %[[TOK:.*]]: tensor<2x4xi32>)
func.func @embedding_grad(%dx: tensor<2x4x8xf32>, %tokens: tensor<2x4xi32>) -> tensor<16x8xf32> {
  // CHECK: %[[D:.*]] = xfmr.embedding_grad %[[DX]], %[[TOK]] : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
  %dwte = xfmr.embedding_grad %dx, %tokens : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
  // CHECK: return %[[D]]
  return %dwte : tensor<16x8xf32>
}

// -----

// CHECK-LABEL: func.func @position_embedding
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xf32>, %[[WPE:.*]]: tensor<6x8xf32>)
func.func @position_embedding(%x: tensor<2x4x8xf32>, %wpe: tensor<6x8xf32>) -> tensor<2x4x8xf32> {
  // CHECK: %[[H:.*]] = xfmr.position_embedding %[[X]], %[[WPE]] : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x8xf32>
  %h = xfmr.position_embedding %x, %wpe : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: return %[[H]]
  return %h : tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @position_embedding_grad
// CHECK-SAME:    (%[[DH:.*]]: tensor<2x4x8xf32>)
func.func @position_embedding_grad(%dh: tensor<2x4x8xf32>) -> tensor<6x8xf32> {
  // CHECK: %[[D:.*]] = xfmr.position_embedding_grad %[[DH]] : (tensor<2x4x8xf32>) -> tensor<6x8xf32>
  %dwpe = xfmr.position_embedding_grad %dh : (tensor<2x4x8xf32>) -> tensor<6x8xf32>
  // CHECK: return %[[D]]
  return %dwpe : tensor<6x8xf32>
}

// -----

// The default epsilon (1e-5) is elided; any other value is printed.

// CHECK-LABEL: func.func @layernorm
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
func.func @layernorm(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  // CHECK: %[[Y0:.*]] = xfmr.layernorm %[[X]], %[[G]], %[[B]] : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %y0 = xfmr.layernorm %x, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // CHECK: %[[Y1:.*]] = xfmr.layernorm %[[X]], %[[G]], %[[B]] {epsilon = 9.99999997E-7 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %y1 = xfmr.layernorm %x, %g, %b {epsilon = 1.0e-6 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // CHECK: return %[[Y0]], %[[Y1]]
  return %y0, %y1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// A 2-D input: layernorm normalises the last dimension of any rank >= 1.

// CHECK-LABEL: func.func @layernorm_rank2
func.func @layernorm_rank2(%x: tensor<3x8xf16>, %g: tensor<8xf16>, %b: tensor<8xf16>) -> tensor<3x8xf16> {
  // CHECK: xfmr.layernorm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<3x8xf16>, tensor<8xf16>, tensor<8xf16>) -> tensor<3x8xf16>
  %y = xfmr.layernorm %x, %g, %b : (tensor<3x8xf16>, tensor<8xf16>, tensor<8xf16>) -> tensor<3x8xf16>
  return %y : tensor<3x8xf16>
}

// -----

// CHECK-LABEL: func.func @layernorm_grad
// CHECK-SAME:    (%[[DY:.*]]: tensor<2x4x8xf32>, %[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<8xf32>)
func.func @layernorm_grad(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) {
  // CHECK: %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = xfmr.layernorm_grad %[[DY]], %[[X]], %[[G]] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %dx, %dg, %db = xfmr.layernorm_grad %dy, %x, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: %[[DX2:.*]], %{{.*}}, %{{.*}} = xfmr.layernorm_grad %[[DY]], %[[X]], %[[G]] {epsilon = 1.000000e-03 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %dx2, %dg2, %db2 = xfmr.layernorm_grad %dy, %x, %g {epsilon = 1.0e-3 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: return %[[DX]], %[[DG]], %[[DB]], %[[DX2]]
  return %dx, %dg, %db, %dx2 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @rmsnorm
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<8xf32>)
func.func @rmsnorm(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  // CHECK: %[[Y0:.*]] = xfmr.rmsnorm %[[X]], %[[G]] : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %y0 = xfmr.rmsnorm %x, %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // CHECK: %[[Y1:.*]] = xfmr.rmsnorm %[[X]], %[[G]] {epsilon = 9.99999997E-7 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %y1 = xfmr.rmsnorm %x, %g {epsilon = 1.0e-6 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // CHECK: return %[[Y0]], %[[Y1]]
  return %y0, %y1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @rmsnorm_grad
// CHECK-SAME:    (%[[DY:.*]]: tensor<2x4x8xf32>, %[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<8xf32>)
func.func @rmsnorm_grad(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) {
  // CHECK: %[[DX:.*]], %[[DG:.*]] = xfmr.rmsnorm_grad %[[DY]], %[[X]], %[[G]] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %dx, %dg = xfmr.rmsnorm_grad %dy, %x, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  // CHECK: %[[DX2:.*]], %{{.*}} = xfmr.rmsnorm_grad %[[DY]], %[[X]], %[[G]] {epsilon = 1.000000e-03 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %dx2, %dg2 = xfmr.rmsnorm_grad %dy, %x, %g {epsilon = 1.0e-3 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  // CHECK: return %[[DX]], %[[DG]], %[[DX2]]
  return %dx, %dg, %dx2 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @linear
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<12x8xf32>, %[[B:.*]]: tensor<12xf32>)
func.func @linear(%x: tensor<2x4x8xf32>, %w: tensor<12x8xf32>, %b: tensor<12xf32>) -> (tensor<2x4x12xf32>, tensor<2x4x12xf32>) {
  // CHECK: %[[Y0:.*]] = xfmr.linear %[[X]], %[[W]] : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %y0 = xfmr.linear %x, %w : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  // CHECK: %[[Y1:.*]] = xfmr.linear %[[X]], %[[W]], %[[B]] : (tensor<2x4x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<2x4x12xf32>
  %y1 = xfmr.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<2x4x12xf32>
  // CHECK: return %[[Y0]], %[[Y1]]
  return %y0, %y1 : tensor<2x4x12xf32>, tensor<2x4x12xf32>
}

// -----

// A 2-D input [tokens, K]: linear keeps any leading dimensions.

// CHECK-LABEL: func.func @linear_rank2
func.func @linear_rank2(%x: tensor<8x8xbf16>, %w: tensor<12x8xbf16>) -> tensor<8x12xbf16> {
  // CHECK: xfmr.linear %{{.*}}, %{{.*}} : (tensor<8x8xbf16>, tensor<12x8xbf16>) -> tensor<8x12xbf16>
  %y = xfmr.linear %x, %w : (tensor<8x8xbf16>, tensor<12x8xbf16>) -> tensor<8x12xbf16>
  return %y : tensor<8x12xbf16>
}

// -----

// CHECK-LABEL: func.func @linear_grad_input
// CHECK-SAME:    (%[[DY:.*]]: tensor<2x4x12xf32>, %[[W:.*]]: tensor<12x8xf32>)
func.func @linear_grad_input(%dy: tensor<2x4x12xf32>, %w: tensor<12x8xf32>) -> tensor<2x4x8xf32> {
  // CHECK: %[[DX:.*]] = xfmr.linear_grad_input %[[DY]], %[[W]] : (tensor<2x4x12xf32>, tensor<12x8xf32>) -> tensor<2x4x8xf32>
  %dx = xfmr.linear_grad_input %dy, %w : (tensor<2x4x12xf32>, tensor<12x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: return %[[DX]]
  return %dx : tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @linear_grad_weight
// CHECK-SAME:    (%[[DY:.*]]: tensor<2x4x12xf32>, %[[X:.*]]: tensor<2x4x8xf32>)
func.func @linear_grad_weight(%dy: tensor<2x4x12xf32>, %x: tensor<2x4x8xf32>) -> (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12xf32>) {
  // CHECK: %[[DW:.*]] = xfmr.linear_grad_weight %[[DY]], %[[X]] : (tensor<2x4x12xf32>, tensor<2x4x8xf32>) -> tensor<12x8xf32>
  %dw = xfmr.linear_grad_weight %dy, %x : (tensor<2x4x12xf32>, tensor<2x4x8xf32>) -> tensor<12x8xf32>
  // CHECK: %[[DW2:.*]], %[[DB2:.*]] = xfmr.linear_grad_weight %[[DY]], %[[X]] : (tensor<2x4x12xf32>, tensor<2x4x8xf32>) -> (tensor<12x8xf32>, tensor<12xf32>)
  %dw2, %db2 = xfmr.linear_grad_weight %dy, %x : (tensor<2x4x12xf32>, tensor<2x4x8xf32>) -> (tensor<12x8xf32>, tensor<12xf32>)
  // CHECK: return %[[DW]], %[[DW2]], %[[DB2]]
  return %dw, %dw2, %db2 : tensor<12x8xf32>, tensor<12x8xf32>, tensor<12xf32>
}

// -----

// CHECK-LABEL: func.func @gelu
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x12xf32>)
func.func @gelu(%x: tensor<2x4x12xf32>) -> tensor<2x4x12xf32> {
  // CHECK: %[[Y:.*]] = xfmr.gelu %[[X]] : (tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %y = xfmr.gelu %x : (tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  // CHECK: return %[[Y]]
  return %y : tensor<2x4x12xf32>
}

// -----

// CHECK-LABEL: func.func @gelu_grad
// CHECK-SAME:    (%[[DY:.*]]: tensor<2x4x12xf32>, %[[X:.*]]: tensor<2x4x12xf32>)
func.func @gelu_grad(%dy: tensor<2x4x12xf32>, %x: tensor<2x4x12xf32>) -> tensor<2x4x12xf32> {
  // CHECK: %[[DX:.*]] = xfmr.gelu_grad %[[DY]], %[[X]] : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %dx = xfmr.gelu_grad %dy, %x : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  // CHECK: return %[[DX]]
  return %dx : tensor<2x4x12xf32>
}

// -----

// CHECK-LABEL: func.func @swiglu
// CHECK-SAME:    (%[[G:.*]]: tensor<2x4x12xf32>, %[[U:.*]]: tensor<2x4x12xf32>)
func.func @swiglu(%g: tensor<2x4x12xf32>, %u: tensor<2x4x12xf32>) -> tensor<2x4x12xf32> {
  // CHECK: %[[H:.*]] = xfmr.swiglu %[[G]], %[[U]] : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %h = xfmr.swiglu %g, %u : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  // CHECK: return %[[H]]
  return %h : tensor<2x4x12xf32>
}

// -----

// CHECK-LABEL: func.func @swiglu_grad
// CHECK-SAME:    (%[[DH:.*]]: tensor<2x4x12xf32>, %[[G:.*]]: tensor<2x4x12xf32>, %[[U:.*]]: tensor<2x4x12xf32>)
func.func @swiglu_grad(%dh: tensor<2x4x12xf32>, %g: tensor<2x4x12xf32>, %u: tensor<2x4x12xf32>) -> (tensor<2x4x12xf32>, tensor<2x4x12xf32>) {
  // CHECK: %[[DG:.*]], %[[DU:.*]] = xfmr.swiglu_grad %[[DH]], %[[G]], %[[U]] : (tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> (tensor<2x4x12xf32>, tensor<2x4x12xf32>)
  %dg, %du = xfmr.swiglu_grad %dh, %g, %u : (tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> (tensor<2x4x12xf32>, tensor<2x4x12xf32>)
  // CHECK: return %[[DG]], %[[DU]]
  return %dg, %du : tensor<2x4x12xf32>, tensor<2x4x12xf32>
}

// -----

// CHECK-LABEL: func.func @cast
// CHECK-SAME:    (%[[W:.*]]: tensor<16x8xf32>)
func.func @cast(%w: tensor<16x8xf32>) -> tensor<16x8xf32> {
  // CHECK: %[[H:.*]] = xfmr.cast %[[W]] : (tensor<16x8xf32>) -> tensor<16x8xbf16>
  %h = xfmr.cast %w : (tensor<16x8xf32>) -> tensor<16x8xbf16>
  // CHECK: %[[F:.*]] = xfmr.cast %[[H]] : (tensor<16x8xbf16>) -> tensor<16x8xf32>
  %f = xfmr.cast %h : (tensor<16x8xbf16>) -> tensor<16x8xf32>
  // CHECK: return %[[F]]
  return %f : tensor<16x8xf32>
}

// -----

// CHECK-LABEL: func.func @add
// CHECK-SAME:    (%[[A:.*]]: tensor<2x4x8xf32>, %[[B:.*]]: tensor<2x4x8xf32>)
func.func @add(%a: tensor<2x4x8xf32>, %b: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // CHECK: %[[R:.*]] = xfmr.add %[[A]], %[[B]] : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %r = xfmr.add %a, %b : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: return %[[R]]
  return %r : tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @scale
// CHECK-SAME:    (%[[S:.*]]: tensor<f32>, %[[X:.*]]: tensor<2x4x8xf32>)
func.func @scale(%sum: tensor<f32>, %x: tensor<2x4x8xf32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  // CHECK: %[[M:.*]] = xfmr.scale %[[S]] {factor = 2.500000e-01 : f32} : (tensor<f32>) -> tensor<f32>
  %m = xfmr.scale %sum {factor = 0.25 : f32} : (tensor<f32>) -> tensor<f32>
  // CHECK: %[[N:.*]] = xfmr.scale %[[X]] {factor = -2.000000e+00 : f32} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %n = xfmr.scale %x {factor = -2.0 : f32} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: return %[[M]], %[[N]]
  return %m, %n : tensor<f32>, tensor<2x4x8xf32>
}

// -----

// Multi-head attention: 2 heads of dimension 4, causal by default (elided).

// CHECK-LABEL: func.func @attention_mha
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x8xf32>, %[[K:.*]]: tensor<2x4x8xf32>, %[[V:.*]]: tensor<2x4x8xf32>)
func.func @attention_mha(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // CHECK: %[[O:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: return %[[O]]
  return %o : tensor<2x4x8xf32>
}

// -----

// Grouped-query attention: 4 query heads share 2 key/value heads of dimension 2.

// CHECK-LABEL: func.func @attention_gqa
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x8xf32>, %[[K:.*]]: tensor<2x4x4xf32>, %[[V:.*]]: tensor<2x4x4xf32>)
func.func @attention_gqa(%q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>, %v: tensor<2x4x4xf32>) -> tensor<2x4x8xf32> {
  // CHECK: %[[O:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  %o = xfmr.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  // CHECK: return %[[O]]
  return %o : tensor<2x4x8xf32>
}

// -----

// Multi-query attention (one key/value head) with rotary embedding.

// CHECK-LABEL: func.func @attention_rope
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x8xf32>, %[[K:.*]]: tensor<2x4x4xf32>, %[[V:.*]]: tensor<2x4x4xf32>)
func.func @attention_rope(%q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>, %v: tensor<2x4x4xf32>) -> tensor<2x4x8xf32> {
  // CHECK: %[[O:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.000000e+04 : f32} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.0e+04 : f32} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  // CHECK: return %[[O]]
  return %o : tensor<2x4x8xf32>
}

// -----

// RoPE scaling: Llama 3.1's llama3 rule (factor, low and high frequency
// factors, original context) and linear (one factor), on attention and its
// gradient.

// CHECK-LABEL: func.func @attention_rope_scaling
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x8xf32>, %[[K:.*]]: tensor<2x4x4xf32>, %[[V:.*]]: tensor<2x4x4xf32>)
func.func @attention_rope_scaling(%q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>, %v: tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  // CHECK: %[[O:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_scaling = "llama3", rope_scaling_factors = array<f64: 3.200000e+01, 1.000000e+00, 4.000000e+00, 8.192000e+03>, rope_theta = 5.000000e+05 : f32}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 5.0e+05 : f32, rope_scaling = "llama3", rope_scaling_factors = array<f64: 32.0, 1.0, 4.0, 8192.0>} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  // CHECK: %[[L:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_scaling = "linear", rope_scaling_factors = array<f64: 4.000000e+00>, rope_theta = 1.000000e+04 : f32}
  %l = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.0e+04 : f32, rope_scaling = "linear", rope_scaling_factors = array<f64: 4.0>} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  // CHECK: %[[DQ:.*]], %{{.*}}, %{{.*}} = xfmr.attention_grad %[[O]], %[[Q]], %[[K]], %[[V]] {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_scaling = "llama3", rope_scaling_factors = array<f64: 3.200000e+01, 1.000000e+00, 4.000000e+00, 8.192000e+03>, rope_theta = 5.000000e+05 : f32}
  %dq, %dk, %dv = xfmr.attention_grad %o, %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 5.0e+05 : f32, rope_scaling = "llama3", rope_scaling_factors = array<f64: 32.0, 1.0, 4.0, 8192.0>} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  // CHECK: return %[[O]], %[[L]], %[[DQ]]
  return %o, %l, %dq : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// A sliding window (Mistral), alone and with RoPE scaling, on attention and
// its gradient.

// CHECK-LABEL: func.func @attention_sliding_window
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x8xf32>, %[[K:.*]]: tensor<2x4x4xf32>, %[[V:.*]]: tensor<2x4x4xf32>)
func.func @attention_sliding_window(%q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>, %v: tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  // CHECK: %[[O:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.000000e+04 : f32, sliding_window = 2 : i64}
  %o = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.0e+04 : f32, sliding_window = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  // CHECK: %[[L:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_scaling = "linear", rope_scaling_factors = array<f64: 4.000000e+00>, rope_theta = 1.000000e+04 : f32, sliding_window = 1 : i64}
  %l = xfmr.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.0e+04 : f32, rope_scaling = "linear", rope_scaling_factors = array<f64: 4.0>, sliding_window = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
  // CHECK: %[[DQ:.*]], %{{.*}}, %{{.*}} = xfmr.attention_grad %[[O]], %[[Q]], %[[K]], %[[V]] {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.000000e+04 : f32, sliding_window = 2 : i64}
  %dq, %dk, %dv = xfmr.attention_grad %o, %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.0e+04 : f32, sliding_window = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  // CHECK: return %[[O]], %[[L]], %[[DQ]]
  return %o, %l, %dq : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Non-causal attention prints `causal = false`; an explicit `causal = true`
// is the default and is elided.

// CHECK-LABEL: func.func @attention_non_causal
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x8xf32>, %[[K:.*]]: tensor<2x4x8xf32>, %[[V:.*]]: tensor<2x4x8xf32>)
func.func @attention_non_causal(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  // CHECK: %[[O0:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] {causal = false, num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %o0 = xfmr.attention %q, %k, %v {causal = false, num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: %[[O1:.*]] = xfmr.attention %[[Q]], %[[K]], %[[V]] {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %o1 = xfmr.attention %q, %k, %v {causal = true, num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: return %[[O0]], %[[O1]]
  return %o0, %o1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @attention_grad
// CHECK-SAME:    (%[[DO:.*]]: tensor<2x4x8xf32>, %[[Q:.*]]: tensor<2x4x8xf32>, %[[K:.*]]: tensor<2x4x4xf32>, %[[V:.*]]: tensor<2x4x4xf32>)
func.func @attention_grad(%do: tensor<2x4x8xf32>, %q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>, %v: tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x8xf32>) {
  // CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = xfmr.attention_grad %[[DO]], %[[Q]], %[[K]], %[[V]] {num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_theta = 5.000000e+05 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64, rope_theta = 5.0e+05 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  // CHECK: %[[DQ2:.*]], %{{.*}}, %{{.*}} = xfmr.attention_grad %[[DO]], %[[Q]], %[[K]], %[[V]] {causal = false, num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  %dq2, %dk2, %dv2 = xfmr.attention_grad %do, %q, %k, %v {causal = false, num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  // CHECK: return %[[DQ]], %[[DK]], %[[DV]], %[[DQ2]]
  return %dq, %dk, %dv, %dq2 : tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @softmax_cross_entropy
// CHECK-SAME:    (%[[L:.*]]: tensor<2x4x16xf32>, %[[T:.*]]: tensor<2x4xi32>)
func.func @softmax_cross_entropy(%logits: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  // CHECK: %[[LOSS:.*]] = xfmr.softmax_cross_entropy %[[L]], %[[T]] : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  // CHECK: return %[[LOSS]]
  return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @softmax_cross_entropy_grad
// CHECK-SAME:    (%[[DL:.*]]: tensor<f32>, %[[L:.*]]: tensor<2x4x16xf32>, %[[T:.*]]: tensor<2x4xi32>)
func.func @softmax_cross_entropy_grad(%dloss: tensor<f32>, %logits: tensor<2x4x16xf32>, %targets: tensor<2x4xi32>) -> tensor<2x4x16xf32> {
  // CHECK: %[[D:.*]] = xfmr.softmax_cross_entropy_grad %[[DL]], %[[L]], %[[T]] : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<2x4x16xf32>
  %dlogits = xfmr.softmax_cross_entropy_grad %dloss, %logits, %targets : (tensor<f32>, tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<2x4x16xf32>
  // CHECK: return %[[D]]
  return %dlogits : tensor<2x4x16xf32>
}

// -----

// AdamW with the default hyper-parameters (all elided) and with explicit
// ones; a bf16 parameter keeps fp32 moments.

// CHECK-LABEL: func.func @adamw
// CHECK-SAME:    (%[[P:.*]]: tensor<12x8xf32>, %[[G:.*]]: tensor<12x8xf32>, %[[M:.*]]: tensor<12x8xf32>, %[[V:.*]]: tensor<12x8xf32>, %[[T:.*]]: tensor<i32>, %[[LR:.*]]: tensor<f32>)
func.func @adamw(%p: tensor<12x8xf32>, %g: tensor<12x8xf32>, %m: tensor<12x8xf32>, %v: tensor<12x8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>) {
  // CHECK: %[[P1:.*]], %[[M1:.*]], %[[V1:.*]] = xfmr.adamw %[[P]], %[[G]], %[[M]], %[[V]], %[[T]], %[[LR]] : (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>)
  %p1, %m1, %v1 = xfmr.adamw %p, %g, %m, %v, %t, %lr : (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>)
  // CHECK: %[[P2:.*]], %{{.*}}, %{{.*}} = xfmr.adamw %[[P]], %[[G]], %[[M]], %[[V]], %[[T]], %[[LR]] {beta1 = 8.000000e-01 : f32, beta2 = 0.949999988 : f32, epsilon = 9.99999997E-7 : f32, weight_decay = 1.000000e-01 : f32} : (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>)
  %p2, %m2, %v2 = xfmr.adamw %p, %g, %m, %v, %t, %lr {beta1 = 0.8 : f32, beta2 = 0.95 : f32, epsilon = 1.0e-6 : f32, weight_decay = 0.1 : f32} : (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<i32>, tensor<f32>) -> (tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>)
  // CHECK: return %[[P1]], %[[M1]], %[[V1]], %[[P2]]
  return %p1, %m1, %v1, %p2 : tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>
}

// -----

// CHECK-LABEL: func.func @adamw_bf16
// CHECK-SAME:    (%[[P:.*]]: tensor<8xbf16>, %[[G:.*]]: tensor<8xbf16>, %[[M:.*]]: tensor<8xf32>, %[[V:.*]]: tensor<8xf32>, %[[T:.*]]: tensor<i32>, %[[LR:.*]]: tensor<f32>)
func.func @adamw_bf16(%p: tensor<8xbf16>, %g: tensor<8xbf16>, %m: tensor<8xf32>, %v: tensor<8xf32>, %t: tensor<i32>, %lr: tensor<f32>) -> (tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>) {
  // An explicit default (weight_decay = 0) is elided too.
  // CHECK: xfmr.adamw %[[P]], %[[G]], %[[M]], %[[V]], %[[T]], %[[LR]] : (tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<i32>, tensor<f32>) -> (tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>)
  %p1, %m1, %v1 = xfmr.adamw %p, %g, %m, %v, %t, %lr {weight_decay = 0.0 : f32} : (tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<i32>, tensor<f32>) -> (tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>)
  return %p1, %m1, %v1 : tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>
}

// -----

// The discardable xfmr attributes: roles of arguments and results, and the
// model and training-step dictionaries on the function.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME:    (%{{.*}}: tensor<16x8xf32> {xfmr.param = "wte.weight"},
// CHECK-SAME:     %{{.*}}: tensor<16x8xf32> {xfmr.moment1 = "wte.weight"},
// CHECK-SAME:     %{{.*}}: tensor<16x8xf32> {xfmr.moment2 = "wte.weight"},
// CHECK-SAME:     %{{.*}}: tensor<2x4xi32> {xfmr.input = "tokens"},
// CHECK-SAME:     %{{.*}}: tensor<2x4xi32> {xfmr.input = "targets"},
// CHECK-SAME:     %{{.*}}: tensor<i32> {xfmr.input = "step"},
// CHECK-SAME:     %{{.*}}: tensor<f32> {xfmr.input = "lr"})
// CHECK-SAME:    -> (tensor<f32> {xfmr.output = "loss"},
// CHECK-SAME:        tensor<16x8xf32> {xfmr.param = "wte.weight"},
// CHECK-SAME:        tensor<16x8xf32> {xfmr.moment1 = "wte.weight"},
// CHECK-SAME:        tensor<16x8xf32> {xfmr.moment2 = "wte.weight"},
// CHECK-SAME:        tensor<i32> {xfmr.output = "step"})
// CHECK-SAME:    attributes {xfmr.model = {arch = "gpt2", hidden = 8 : i64, vocab = 16 : i64}, xfmr.train_step = {beta1 = 0.899999976 : f32, microbatches = 1 : i64}}
func.func @train_step(%w: tensor<16x8xf32> {xfmr.param = "wte.weight"},
                      %m: tensor<16x8xf32> {xfmr.moment1 = "wte.weight"},
                      %v: tensor<16x8xf32> {xfmr.moment2 = "wte.weight"},
                      %tokens: tensor<2x4xi32> {xfmr.input = "tokens"},
                      %targets: tensor<2x4xi32> {xfmr.input = "targets"},
                      %step: tensor<i32> {xfmr.input = "step"},
                      %lr: tensor<f32> {xfmr.input = "lr"})
    -> (tensor<f32> {xfmr.output = "loss"},
        tensor<16x8xf32> {xfmr.param = "wte.weight"},
        tensor<16x8xf32> {xfmr.moment1 = "wte.weight"},
        tensor<16x8xf32> {xfmr.moment2 = "wte.weight"},
        tensor<i32> {xfmr.output = "step"})
    attributes {xfmr.model = {arch = "gpt2", hidden = 8 : i64, vocab = 16 : i64},
                xfmr.train_step = {beta1 = 0.9 : f32, microbatches = 1 : i64}} {
  %x = xfmr.embedding %tokens, %w : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %logits = xfmr.linear %x, %w : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %w, %m, %v, %step : tensor<f32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<i32>
}

// -----

// An external declaration (a parameter-only function without a body) and a
// bf16 parameter carry the attributes too.

// CHECK-LABEL: func.func private @external
// CHECK-SAME:    (tensor<8xbf16> {xfmr.param = "ln_f.weight"}) -> (tensor<8xbf16> {xfmr.param = "ln_f.weight"})
func.func private @external(tensor<8xbf16> {xfmr.param = "ln_f.weight"}) -> (tensor<8xbf16> {xfmr.param = "ln_f.weight"})

// -----

// Explicit positions (context parallelism): the zigzag order of 4 chunks.

// CHECK-LABEL: func.func @sequence_positions
func.func @sequence_positions() -> tensor<8xi32> {
  // CHECK: xfmr.sequence_positions {chunks = 4 : i64, length = 8 : i64} : () -> tensor<8xi32>
  %p = xfmr.sequence_positions {length = 8 : i64, chunks = 4 : i64} : () -> tensor<8xi32>
  return %p : tensor<8xi32>
}

// -----

// CHECK-LABEL: func.func @position_embedding_positions
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4x8xf32>, %[[WPE:.*]]: tensor<6x8xf32>, %[[P:.*]]: tensor<4xi32>)
func.func @position_embedding_positions(%x: tensor<2x4x8xf32>, %wpe: tensor<6x8xf32>, %pos: tensor<4xi32>) -> (tensor<2x4x8xf32>, tensor<6x8xf32>) {
  // CHECK: xfmr.position_embedding %[[X]], %[[WPE]] positions %[[P]] : (tensor<2x4x8xf32>, tensor<6x8xf32>, tensor<4xi32>) -> tensor<2x4x8xf32>
  %h = xfmr.position_embedding %x, %wpe positions %pos : (tensor<2x4x8xf32>, tensor<6x8xf32>, tensor<4xi32>) -> tensor<2x4x8xf32>
  // CHECK: xfmr.position_embedding_grad %[[X]] positions %[[P]] : (tensor<2x4x8xf32>, tensor<4xi32>) -> tensor<6x8xf32>
  %d = xfmr.position_embedding_grad %x positions %pos : (tensor<2x4x8xf32>, tensor<4xi32>) -> tensor<6x8xf32>
  return %h, %d : tensor<2x4x8xf32>, tensor<6x8xf32>
}

// -----

// Local queries (Tq = 4) against gathered keys (Tk = 8).

// CHECK-LABEL: func.func @attention_positions
// CHECK-SAME:    (%[[Q:.*]]: tensor<2x4x8xf32>, %[[K:.*]]: tensor<2x8x4xf32>, %[[V:.*]]: tensor<2x8x4xf32>, %[[QP:.*]]: tensor<4xi32>, %[[KP:.*]]: tensor<8xi32>
func.func @attention_positions(%q: tensor<2x4x8xf32>, %k: tensor<2x8x4xf32>, %v: tensor<2x8x4xf32>, %qp: tensor<4xi32>, %kp: tensor<8xi32>, %do: tensor<2x4x8xf32>)
    -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) {
  // CHECK: xfmr.attention %[[Q]], %[[K]], %[[V]] positions %[[QP]], %[[KP]] {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.000000e+04 : f32, sliding_window = 3 : i64}
  // CHECK-SAME: : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<4xi32>, tensor<8xi32>) -> tensor<2x4x8xf32>
  %o = xfmr.attention %q, %k, %v positions %qp, %kp {num_heads = 2 : i64, num_kv_heads = 1 : i64, rope_theta = 1.0e+04 : f32, sliding_window = 3 : i64}
      : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<4xi32>, tensor<8xi32>) -> tensor<2x4x8xf32>
  // CHECK: xfmr.attention_grad %{{.*}}, %[[Q]], %[[K]], %[[V]] positions %[[QP]], %[[KP]] {num_heads = 2 : i64, num_kv_heads = 1 : i64}
  // CHECK-SAME: -> (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>)
  %dq, %dk, %dv = xfmr.attention_grad %do, %q, %k, %v positions %qp, %kp {num_heads = 2 : i64, num_kv_heads = 1 : i64}
      : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<4xi32>, tensor<8xi32>)
      -> (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>)
  return %o, %dq, %dk, %dv : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
}
