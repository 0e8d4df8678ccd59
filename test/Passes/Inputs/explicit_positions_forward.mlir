// The forward function of test/Passes/explicit_positions.mlir, for its
// --xfmr-train-step run.
func.func @forward(%wte: tensor<16x8xf32> {xfmr.param = "wte"},
                   %wpe: tensor<8x8xf32> {xfmr.param = "wpe"},
                   %tokens: tensor<2x8xi32> {xfmr.input = "tokens"},
                   %targets: tensor<2x8xi32> {xfmr.input = "targets"}) -> tensor<f32> {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x8xi32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %h = xfmr.position_embedding %x, %wpe : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %a = xfmr.attention %h, %h, %h {num_heads = 2 : i64, num_kv_heads = 2 : i64, rope_theta = 1.0e+04 : f32}
      : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %l = xfmr.linear %a, %wte : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
  %loss = xfmr.softmax_cross_entropy %l, %targets : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
