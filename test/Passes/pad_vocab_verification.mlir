// RUN: echo '{"mesh": {"tp": 2}}' > %t.json
// RUN: partition-opt %s -split-input-file --dist-apply-plan=plan=%t.json --dist-pad-vocab -verify-diagnostics

// An LM head with a bias: its padding logits would not be zero.
func.func @forward(%wte: tensor<250x16xf32> {xfmr.param = "wte"}, %head: tensor<250x16xf32> {xfmr.param = "head"}, %bias: tensor<250xf32> {xfmr.param = "head.bias"}, %tokens: tensor<2x8xi32> {xfmr.input = "tokens"}, %targets: tensor<2x8xi32> {xfmr.input = "targets"}) -> tensor<f32>
    attributes {xfmr.model = {arch = "gpt2", batch = 2 : i64, heads = 2 : i64, kv_heads = 2 : i64, layers = 1 : i64, seq_len = 8 : i64, vocab = 250 : i64}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x8xi32>, tensor<250x16xf32>) -> tensor<2x8x16xf32>
  %logits = xfmr.linear %x, %head, %bias : (tensor<2x8x16xf32>, tensor<250x16xf32>, tensor<250xf32>) -> tensor<2x8x250xf32>
  // expected-error @+1 {{'xfmr.softmax_cross_entropy' op takes logits that are not the only use of a bias-less linear of a parameter; --dist-pad-vocab pads the vocabulary of 250 ids to 256 (a multiple of tp x vocab_multiple = 256) only for embedding tables and a bias-less LM head of parameters}}
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x8x250xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The table used by an op that is neither a lookup nor the LM head.
func.func @forward(%wte: tensor<250x16xf32> {xfmr.param = "wte"}, %tokens: tensor<2x8xi32> {xfmr.input = "tokens"}, %targets: tensor<2x8xi32> {xfmr.input = "targets"}) -> tensor<f32>
    attributes {xfmr.model = {arch = "gpt2", batch = 2 : i64, heads = 2 : i64, kv_heads = 2 : i64, layers = 1 : i64, seq_len = 8 : i64, vocab = 250 : i64}} {
  // expected-error @+1 {{'xfmr.scale' op uses the vocabulary-sized parameter 'wte'; --dist-pad-vocab pads the vocabulary of 250 ids to 256}}
  %w = xfmr.scale %wte {factor = 2.0 : f32} : (tensor<250x16xf32>) -> tensor<250x16xf32>
  %x = xfmr.embedding %tokens, %wte : (tensor<2x8xi32>, tensor<250x16xf32>) -> tensor<2x8x16xf32>
  %logits = xfmr.linear %x, %wte : (tensor<2x8x16xf32>, tensor<250x16xf32>) -> tensor<2x8x250xf32>
  %loss = xfmr.softmax_cross_entropy %logits, %targets : (tensor<2x8x250xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Padded twice.
// expected-error @+1 {{the vocabulary is padded already; run --dist-pad-vocab once, before --xfmr-train-step}}
func.func @forward(%wte: tensor<256x16xf32> {xfmr.param = "wte"}, %tokens: tensor<2x8xi32> {xfmr.input = "tokens"}) -> tensor<2x8x16xf32>
    attributes {xfmr.model = {arch = "gpt2", batch = 2 : i64, heads = 2 : i64, kv_heads = 2 : i64, layers = 1 : i64, seq_len = 8 : i64, vocab = 250 : i64, padded_vocab = 256 : i64, padded_params = ["wte"]}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x8xi32>, tensor<256x16xf32>) -> tensor<2x8x16xf32>
  return %x : tensor<2x8x16xf32>
}
