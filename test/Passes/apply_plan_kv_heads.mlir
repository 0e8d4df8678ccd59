// --dist-apply-plan and the key-value heads of grouped-query attention: tp
// must divide them. Fewer key-value heads than tp ranks (tp a multiple of
// them) needs each head replicated over the ranks whose query heads use it
// (as Megatron-LM does), which is not implemented yet: refused with both
// numbers and what to choose, never partitioned wrongly. This model: a
// Llama with 8 query heads and 2 key-value heads.

// RUN: not partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_tp4.json 2>&1 | FileCheck %s --check-prefix=CHECK-TP4
// CHECK-TP4-NOT:  error: {{.*}}plan_tp4.json: heads
// CHECK-TP4:      error: {{.*}}plan_tp4.json: kv_heads 2 is fewer than mesh.tp = 4: replicating key-value heads over tensor-parallel ranks is not implemented yet; choose a mesh.tp that divides kv_heads
// CHECK-TP4-NOT:  error:

// tp = 2 divides both: accepted.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_tp2.json | FileCheck %s --check-prefix=CHECK-TP2
// CHECK-TP2: dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]

func.func @forward(%tokens: tensor<4x16xi32> {xfmr.input = "tokens"}) -> tensor<4x16xi32>
    attributes {xfmr.model = {arch = "llama", batch = 4 : i64, heads = 8 : i64, kv_heads = 2 : i64, layers = 2 : i64, vocab = 64 : i64, seq_len = 16 : i64}} {
  return %tokens : tensor<4x16xi32>
}
