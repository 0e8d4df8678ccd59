// RUN: echo '{"replicas": [{"tp": 1}, {"tp": 1}]}' > %t.json
// RUN: partition-opt %s -split-input-file --dist-replica-batch="plan=%t.json replica=1" -verify-diagnostics

// An input whose first dimension is not the model's batch.
// expected-error @+1 {{--dist-replica-batch: input #1 is not [4, ...] (the model's batch)}}
func.func @forward(%wte: tensor<16x8xf32> {xfmr.param = "wte"}, %tokens: tensor<2x8xi32> {xfmr.input = "tokens"}) -> tensor<2x8x8xf32>
    attributes {xfmr.model = {arch = "gpt2", batch = 4 : i64, heads = 2 : i64, kv_heads = 2 : i64, layers = 1 : i64, seq_len = 8 : i64, vocab = 16 : i64}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<2x8xi32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  return %x : tensor<2x8x8xf32>
}

// -----

// No model configuration to read the batch from.
// expected-error @+1 {{--dist-replica-batch: the forward function has no xfmr.model batch}}
func.func @forward(%wte: tensor<16x8xf32> {xfmr.param = "wte"}, %tokens: tensor<4x8xi32> {xfmr.input = "tokens"}) -> tensor<4x8x8xf32> {
  %x = xfmr.embedding %tokens, %wte : (tensor<4x8xi32>, tensor<16x8xf32>) -> tensor<4x8x8xf32>
  return %x : tensor<4x8x8xf32>
}

// -----

// Two rows of four for replica 1: the rewritten function verifies.
func.func @forward(%wte: tensor<16x8xf32> {xfmr.param = "wte"}, %tokens: tensor<4x8xi32> {xfmr.input = "tokens"}) -> tensor<4x8x8xf32>
    attributes {xfmr.model = {arch = "gpt2", batch = 4 : i64, heads = 2 : i64, kv_heads = 2 : i64, layers = 1 : i64, seq_len = 8 : i64, vocab = 16 : i64}} {
  %x = xfmr.embedding %tokens, %wte : (tensor<4x8xi32>, tensor<16x8xf32>) -> tensor<4x8x8xf32>
  return %x : tensor<4x8x8xf32>
}
