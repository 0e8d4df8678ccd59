// Nonuniform tensor parallelism (NTP): plan.json's "replicas" lists one
// data-parallel replica per entry with its own tp degree and share of the
// batch; --dist-apply-plan reads and checks it, and records replica N's
// uniform plan with replica=N (docs/nonuniform-tp.md). This model: a batch
// of 6 sequences of 12 tokens, 6 heads (3 key/value heads).

// RUN: rm -rf %t && mkdir -p %t

// Replica N's step is the uniform step of its degree: mesh {tp: degree}.
// RUN: echo '{"replicas": [{"tp": 3}, {"tp": 1}], "tensor_parallel": {"sequence_parallel": true}}' > %t/r31.json
// RUN: partition-opt %s --dist-apply-plan="plan=%t/r31.json replica=0" | FileCheck %s --check-prefix=CHECK-R0
// CHECK-R0-LABEL: module attributes
// CHECK-R0-SAME: sequence_parallel = true
// CHECK-R0: dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 3]
// A replica at tp = 1 runs without sequence parallelism (nothing to split).
// RUN: partition-opt %s --dist-apply-plan="plan=%t/r31.json replica=1" | FileCheck %s --check-prefix=CHECK-R1
// CHECK-R1-LABEL: module attributes
// CHECK-R1-SAME: sequence_parallel = false
// CHECK-R1: dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 1]

// mesh.dp and mesh.tp may be given when they agree: the replicas and the
// largest degree.
// RUN: echo '{"mesh": {"dp": 2, "tp": 3}, "replicas": [{"tp": 3}, {"tp": 1}]}' > %t/agree.json
// RUN: partition-opt %s --dist-apply-plan="plan=%t/agree.json replica=1" | FileCheck %s --check-prefix=CHECK-R1

// Each replica is compiled on its own.
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/r31.json 2>&1 | FileCheck %s --check-prefix=CHECK-WHOLE
// CHECK-WHOLE: error: {{.*}}r31.json: the plan has 2 replicas, each compiled on its own: use partition-compile, or --dist-apply-plan="plan={{.*}}r31.json replica=N" for replica N's step
// RUN: not partition-opt %s --dist-apply-plan="plan=%t/r31.json replica=2" 2>&1 | FileCheck %s --check-prefix=CHECK-RANGE
// CHECK-RANGE: error: {{.*}}r31.json: replica=2 but the plan has 2 replicas (0..1)

// The fields, one line each naming the field.
// RUN: echo '{"replicas": []}' > %t/empty.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/empty.json 2>&1 | FileCheck %s --check-prefix=CHECK-EMPTY
// CHECK-EMPTY: error: {{.*}}empty.json: replicas must be a non-empty list of objects such as {"tp": 4, "batch_share": 2}, got []
// RUN: echo '{"replicas": [4, 2]}' > %t/numbers.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/numbers.json 2>&1 | FileCheck %s --check-prefix=CHECK-NUMBERS
// CHECK-NUMBERS: error: {{.*}}numbers.json: replicas[0] must be an object such as {"tp": 2}, got 4
// RUN: echo '{"replicas": [{"tp": 2}, {"batch_share": 1}]}' > %t/no-tp.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/no-tp.json 2>&1 | FileCheck %s --check-prefix=CHECK-NO-TP
// CHECK-NO-TP: error: {{.*}}no-tp.json: replicas[1].tp is required (the replica's tensor-parallel degree)
// RUN: echo '{"replicas": [{"tp": 0}]}' > %t/tp0.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/tp0.json 2>&1 | FileCheck %s --check-prefix=CHECK-TP0
// CHECK-TP0: error: {{.*}}tp0.json: replicas[0].tp must be a positive integer, got 0
// RUN: echo '{"replicas": [{"tp": 2, "batch_share": 0}]}' > %t/share0.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/share0.json 2>&1 | FileCheck %s --check-prefix=CHECK-SHARE0
// CHECK-SHARE0: error: {{.*}}share0.json: replicas[0].batch_share must be a positive integer (parts of the global batch), got 0
// RUN: echo '{"replicas": [{"tp": 2, "speed": 2}]}' > %t/unknown.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/unknown.json 2>&1 | FileCheck %s --check-prefix=CHECK-UNKNOWN
// CHECK-UNKNOWN: error: {{.*}}unknown.json: unknown field 'replicas[0].speed' (known: tp, batch_share)
// RUN: echo '{"mesh": {"dp": 3}, "replicas": [{"tp": 2}, {"tp": 1}]}' > %t/dp.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/dp.json 2>&1 | FileCheck %s --check-prefix=CHECK-DP
// CHECK-DP: error: {{.*}}dp.json: mesh.dp = 3 but replicas lists 2 replicas; give mesh.dp = 2 or leave it out
// RUN: echo '{"mesh": {"tp": 2}, "replicas": [{"tp": 3}, {"tp": 1}]}' > %t/tp.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/tp.json 2>&1 | FileCheck %s --check-prefix=CHECK-TP
// CHECK-TP: error: {{.*}}tp.json: mesh.tp = 2 but the largest degree in replicas is 3; give mesh.tp = 3 or leave it out

// Against the model: each degree as a uniform tp (the existing messages),
// and the shares must split the batch into whole sequences.
// RUN: echo '{"replicas": [{"tp": 4}, {"tp": 2}]}' > %t/heads.json
// RUN: not partition-opt %s --dist-apply-plan="plan=%t/heads.json replica=1" 2>&1 | FileCheck %s --check-prefix=CHECK-HEADS
// CHECK-HEADS: error: {{.*}}heads.json: heads 6 is not divisible by mesh.tp = 4
// CHECK-HEADS: error: {{.*}}heads.json: kv_heads 3 is not divisible by mesh.tp = 4, nor mesh.tp by kv_heads
// CHECK-HEADS: error: {{.*}}heads.json: kv_heads 3 is not divisible by mesh.tp = 2, nor mesh.tp by kv_heads
// RUN: echo '{"replicas": [{"tp": 3, "batch_share": 3}, {"tp": 1, "batch_share": 1}]}' > %t/shares.json
// RUN: not partition-opt %s --dist-apply-plan="plan=%t/shares.json replica=0" 2>&1 | FileCheck %s --check-prefix=CHECK-SHARES
// CHECK-SHARES: error: {{.*}}shares.json: replicas: batch_share 3:1 does not split the batch of 6 sequences into whole sequences; use a batch that is a multiple of 4 (4, 8, 12...) or other shares

// Not combined with a pipeline or ZeRO (each replica's step is a uniform
// tp step).
// RUN: echo '{"mesh": {"pp": 2}, "replicas": [{"tp": 3}, {"tp": 1}]}' > %t/pp.json
// RUN: not partition-opt %s --dist-apply-plan="plan=%t/pp.json replica=0" 2>&1 | FileCheck %s --check-prefix=CHECK-PP
// CHECK-PP: error: {{.*}}pp.json: replicas with mesh.pp = 2 needs pipeline stages inside nonuniform replicas, which is not implemented yet; leave out mesh.pp or the replicas
// RUN: echo '{"zero": {"stage": 1}, "replicas": [{"tp": 3}, {"tp": 1}]}' > %t/zero.json
// RUN: not partition-opt %s --dist-apply-plan="plan=%t/zero.json replica=0" 2>&1 | FileCheck %s --check-prefix=CHECK-ZERO
// CHECK-ZERO: error: {{.*}}zero.json: replicas with zero.stage = 1 needs ZeRO across replicas of different degrees, which is not implemented yet; use zero.stage 0 or leave out the replicas
// Nor with per-part degrees ("Per-layer degrees").
// RUN: echo '{"mesh": {"tp": 3}, "tensor_parallel": {"per_layer": [{"layers": "0-1", "tp": 3}, {"layers": "2", "tp": 1}]}, "replicas": [{"tp": 3}, {"tp": 1}]}' > %t/per-layer.json
// RUN: not partition-opt %s --dist-apply-plan="plan=%t/per-layer.json replica=0" 2>&1 | FileCheck %s --check-prefix=CHECK-PER-LAYER
// CHECK-PER-LAYER: error: {{.*}}per-layer.json: replicas with tensor_parallel.per_layer (or .embedding) = given needs per-part degrees inside nonuniform replicas, which is not implemented yet; leave out tensor_parallel.per_layer / .embedding or the replicas

func.func @forward(%tokens: tensor<6x12xi32> {xfmr.input = "tokens"}) -> tensor<6x12xi32>
    attributes {xfmr.model = {arch = "gpt2", batch = 6 : i64, heads = 6 : i64, kv_heads = 3 : i64, layers = 3 : i64, vocab = 50257 : i64, seq_len = 12 : i64}} {
  return %tokens : tensor<6x12xi32>
}
