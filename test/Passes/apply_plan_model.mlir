// --dist-apply-plan checks the plan against the model (`xfmr.model` of the
// forward function or training step); each error names the values. This
// model: a batch of 6 sequences of 15 tokens, 6 heads (3 key/value heads),
// 3 layers, the GPT-2 vocabulary of 50257.

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_dp4.json 2>&1 | FileCheck %s --check-prefix=CHECK-DP
// CHECK-DP: error: {{.*}}plan_dp4.json: the batch of 6 sequences is not divisible by mesh.dp = 4

// Every problem is reported.
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_tp4.json 2>&1 | FileCheck %s --check-prefix=CHECK-TP4
// CHECK-TP4:      error: {{.*}}plan_tp4.json: heads 6 is not divisible by mesh.tp = 4
// CHECK-TP4:      error: {{.*}}plan_tp4.json: kv_heads 3 is not divisible by mesh.tp = 4
// CHECK-TP4-NOT:  error: {{.*}}vocab

// The vocabulary is split by tensor parallelism (the embedding and the loss);
// --dist-pad-vocab pads it, so an odd vocabulary is no error.
// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_tp2.json 2>&1 | FileCheck %s --check-prefix=CHECK-TP2
// CHECK-TP2-NOT:  error: {{.*}}plan_tp2.json: heads
// CHECK-TP2:      error: {{.*}}plan_tp2.json: kv_heads 3 is not divisible by mesh.tp = 2
// CHECK-TP2-NOT:  error: {{.*}}vocab

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_pp4.json 2>&1 | FileCheck %s --check-prefix=CHECK-PP
// CHECK-PP: error: {{.*}}plan_pp4.json: layers 3 is fewer than mesh.pp = 4 pipeline stages

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_pp2_mb1.json 2>&1 | FileCheck %s --check-prefix=CHECK-MB
// CHECK-MB: error: {{.*}}plan_pp2_mb1.json: pipeline.microbatches = 1 is fewer than mesh.pp = 2 (a pipeline needs at least one micro-batch per stage)

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_sp_tp1.json 2>&1 | FileCheck %s --check-prefix=CHECK-SP-TP1
// CHECK-SP-TP1: error: {{.*}}plan_sp_tp1.json: tensor_parallel.sequence_parallel needs mesh.tp > 1, got mesh.tp = 1

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_sp_seq.json 2>&1 | FileCheck %s --check-prefix=CHECK-SP-SEQ
// CHECK-SP-SEQ: error: {{.*}}plan_sp_seq.json: tensor_parallel.sequence_parallel: seq_len 15 is not divisible by mesh.tp = 2

// A plan that only changes what the model does not constrain is accepted.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_mb2.json | FileCheck %s --check-prefix=CHECK-FITS
// CHECK-FITS: dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 1]

func.func @forward(%tokens: tensor<6x15xi32> {xfmr.input = "tokens"}) -> tensor<6x15xi32>
    attributes {xfmr.model = {arch = "gpt2", batch = 6 : i64, heads = 6 : i64, kv_heads = 3 : i64, layers = 3 : i64, vocab = 50257 : i64, seq_len = 15 : i64}} {
  return %tokens : tensor<6x15xi32>
}
