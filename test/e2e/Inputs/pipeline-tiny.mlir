// A tiny GPT with a tied embedding: embedding, one MLP layer, the final
// layernorm and the LM head on the embedding table. The single-device
// reference of pipeline-tiny-pp2.mlir (the same model cut by hand into two
// pipeline stages).
func.func @forward(%wte: tensor<64x16xf32> {xfmr.param = "wte"},
                   %w: tensor<16x16xf32> {xfmr.param = "h.0.mlp.c_fc.weight", xfmr.layer = 0 : i64},
                   %b: tensor<16xf32> {xfmr.param = "h.0.mlp.c_fc.bias", xfmr.layer = 0 : i64},
                   %lnw: tensor<16xf32> {xfmr.param = "ln_f.weight"},
                   %lnb: tensor<16xf32> {xfmr.param = "ln_f.bias"},
                   %tokens: tensor<4x8xi32> {xfmr.input = "tokens"},
                   %targets: tensor<4x8xi32> {xfmr.input = "targets"}) -> tensor<f32>
    attributes {xfmr.model = {arch = "gpt2", batch = 4 : i64, ffn = 16 : i64, heads = 1 : i64, hidden = 16 : i64, kv_heads = 1 : i64, layers = 1 : i64, positions = 8 : i64, seq_len = 8 : i64, tied_embedding = true, vocab = 64 : i64}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<4x8xi32>, tensor<64x16xf32>) -> tensor<4x8x16xf32>
  %h = xfmr.linear %x, %w, %b : (tensor<4x8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %g = xfmr.gelu %h : (tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = xfmr.layernorm %g, %lnw, %lnb {epsilon = 1.0e-05 : f32} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %logits = xfmr.linear %y, %wte : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<4x8x64xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
