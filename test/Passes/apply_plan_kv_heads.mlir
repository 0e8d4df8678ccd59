// --dist-apply-plan and the key-value heads of grouped-query attention. tp
// must divide them or be a multiple of them; with fewer key-value heads
// than tp, each is replicated on the ranks whose query heads use it (as in
// Megatron-LM), and the mesh lays tp out as two tensor-parallel axes: tp,
// one coordinate per key-value head, major, and tp_kv_rep, the ranks that
// share one (the ranks keep their numbering). This model: a Llama with 8
// query heads and 2 key-value heads.

// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_tp4.json | FileCheck %s --check-prefix=CHECK-TP4
// CHECK-TP4: dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor, tp_kv_rep = tensor]
// CHECK-TP4: dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2, tp_kv_rep = 2]

// RUN: rm -rf %t && mkdir -p %t
// RUN: echo '{"mesh": {"dp": 2, "tp": 8}}' > %t/dp2-tp8.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/dp2-tp8.json | FileCheck %s --check-prefix=CHECK-TP8
// CHECK-TP8: dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2, tp_kv_rep = 4]

// tp = 2 divides both: one tp axis, as for any other model.
// RUN: partition-opt %s --dist-apply-plan=plan=%S/Inputs/plan_tp2.json | FileCheck %s --check-prefix=CHECK-TP2
// CHECK-TP2: axes = [dp = data, pp = pipeline, tp = tensor],
// CHECK-TP2: dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2]

// Neither divides the other: refused, with both numbers (and the query
// heads' own error).
// RUN: echo '{"mesh": {"tp": 3}}' > %t/tp3.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/tp3.json 2>&1 | FileCheck %s --check-prefix=CHECK-TP3
// CHECK-TP3: error: {{.*}}tp3.json: heads 8 is not divisible by mesh.tp = 3
// CHECK-TP3: error: {{.*}}tp3.json: kv_heads 2 is not divisible by mesh.tp = 3, nor mesh.tp by kv_heads; choose a mesh.tp that divides kv_heads or is a multiple of it

func.func @forward(%tokens: tensor<4x16xi32> {xfmr.input = "tokens"}) -> tensor<4x16xi32>
    attributes {xfmr.model = {arch = "llama", batch = 4 : i64, heads = 8 : i64, kv_heads = 2 : i64, layers = 2 : i64, vocab = 64 : i64, seq_len = 16 : i64}} {
  return %tokens : tensor<4x16xi32>
}
