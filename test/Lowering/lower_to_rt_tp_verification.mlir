// RUN: partition-opt %s --split-input-file --lower-to-rt -verify-diagnostics

// One case per error of --lower-to-rt on dist.all_gather,
// dist.reduce_scatter and dist.all_slice (LowerToRt.cpp).

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @gather_f16(%x: tensor<4x8xf16> {xfmr.param = "x"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {optimizer = "none"}} {
  // expected-error @+1 {{'dist.all_gather' op moves 'tensor<4x8xf16>', but the runtime's all_gather moves f32, bf16 and i32 buffers only}}
  %g = dist.all_gather %x on @mesh axes [tp] dim = 1 : tensor<4x8xf16> -> tensor<4x16xf16>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @scatter_axes_order(%x: tensor<8x8xf32> {xfmr.param = "x"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {optimizer = "none"}} {
  // expected-error @+1 {{'dist.reduce_scatter' op runs over axes ["tp", "dp"], which are not in the order of the axes of @mesh: the runtime orders a group by mesh coordinates}}
  %s = dist.reduce_scatter %x on @mesh axes [tp, dp] dim = 0 reduce = sum : tensor<8x8xf32> -> tensor<2x8xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @slice_f16(%t: tensor<4x8xf16> {xfmr.input = "tokens"})
    -> (tensor<f32> {xfmr.output = "loss"}) attributes {xfmr.train_step = {optimizer = "none"}} {
  // expected-error @+1 {{'dist.all_slice' op slices 'tensor<4x8xf16>', but the runtime's slice_block slices f32, bf16 and i32 buffers only}}
  %s = dist.all_slice %t on @mesh axes [tp] dim = 0 : tensor<4x8xf16> -> tensor<2x8xf16>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss : tensor<f32>
}
