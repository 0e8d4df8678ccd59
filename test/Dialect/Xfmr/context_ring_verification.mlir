// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error of the xfmr.context_ring mark (XfmrDialect.cpp).

func.func @not_attention(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.context_ring' is a unit attribute of xfmr.attention and xfmr.attention_grad}}
  %y = xfmr.gelu %x {xfmr.context_ring} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @not_unit(%q: tensor<2x4x8xf32>, %p: tensor<4xi32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.context_ring' is a unit attribute of xfmr.attention and xfmr.attention_grad}}
  %o = xfmr.attention %q, %q, %q positions %p, %p {num_heads = 2 : i64, num_kv_heads = 2 : i64, xfmr.context_ring = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<4xi32>, tensor<4xi32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

func.func @no_positions(%q: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'xfmr.context_ring' needs explicit positions: the ring passes key blocks whose positions it must know (run --xfmr-explicit-positions)}}
  %o = xfmr.attention %q, %q, %q {num_heads = 2 : i64, num_kv_heads = 2 : i64, xfmr.context_ring} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}
