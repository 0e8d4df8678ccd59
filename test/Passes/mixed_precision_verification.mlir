// RUN: partition-opt %s -split-input-file --xfmr-mixed-precision -verify-diagnostics

// One case per error of --xfmr-mixed-precision (MixedPrecision.cpp).

// expected-error @+1 {{--xfmr-mixed-precision expects exactly one function with xfmr.param arguments (the forward pass, before --xfmr-train-step), found 0}}
module {
  func.func @no_params(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{already computes in bf16; run --xfmr-mixed-precision once}}
func.func @forward(%w: tensor<8x8xf32> {xfmr.param = "w"},
                   %tokens: tensor<2x4xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x4xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %h = xfmr.cast %w : (tensor<8x8xf32>) -> tensor<8x8xbf16>
  %x = xfmr.embedding %tokens, %h : (tensor<2x4xi32>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  %loss = xfmr.softmax_cross_entropy %x, %targets : (tensor<2x4x8xbf16>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{has no f32 activations to compute in bf16}}
func.func @forward(%w: tensor<f32> {xfmr.param = "w"},
                   %tokens: tensor<2x4xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x4xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %loss = xfmr.scale %w {factor = 2.0 : f32} : (tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{returns a tensor that is now bf16; the forward function returns the scalar loss only}}
func.func @forward(%w: tensor<8x8xf32> {xfmr.param = "w"},
                   %tokens: tensor<2x4xi32> {xfmr.input = "tokens"}) -> tensor<2x4x8xf32> {
  %x = xfmr.embedding %tokens, %w : (tensor<2x4xi32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return %x : tensor<2x4x8xf32>
}
