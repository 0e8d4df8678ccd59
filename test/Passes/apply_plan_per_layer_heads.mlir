// --dist-apply-plan checks each part's tensor-parallel degree
// (tensor_parallel.per_layer, .embedding) against the model's heads by the
// rules mesh.tp follows, naming the part's layers. This model: 6 query
// heads, 3 key-value heads, 3 layers.

// RUN: rm -rf %t && mkdir -p %t

// tp = 12 splits neither (the mesh's own errors), and the part of degree 4
// splits neither either; layer 0 at 12 is reported once, as mesh.tp.
// RUN: echo '{"mesh": {"tp": 12}, "tensor_parallel": {"per_layer": [{"layers": "0", "tp": 12}, {"layers": "1-2", "tp": 4}]}}' > %t/heads.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/heads.json 2>&1 | FileCheck %s --check-prefix=CHECK-HEADS
// CHECK-HEADS:     error: {{.*}}heads.json: heads 6 is not divisible by mesh.tp = 12
// CHECK-HEADS-NOT: per_layer[0]
// CHECK-HEADS:     error: {{.*}}heads.json: heads 6 is not divisible by tensor_parallel.per_layer[1].tp = 4 (layers 1-2)
// CHECK-HEADS:     error: {{.*}}heads.json: kv_heads 3 is not divisible by tensor_parallel.per_layer[1].tp = 4 (layers 1-2), nor it by kv_heads; choose a degree that divides kv_heads or is a multiple of it

// tp = 6 with 3 key-value heads cuts tp at 3: an embedding of degree 2
// does not chain with it.
// RUN: echo '{"mesh": {"tp": 6}, "tensor_parallel": {"embedding": {"tp": 2}}}' > %t/embedding.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/embedding.json 2>&1 | FileCheck %s --check-prefix=CHECK-EMBEDDING
// CHECK-EMBEDDING: error: {{.*}}embedding.json: kv_heads 3 and tensor_parallel.embedding.tp = 2 do not divide one another; with fewer key-value heads than mesh.tp, every degree must divide kv_heads or be a multiple of it

// A layer of degree 3 on tp = 6 is fine: cuts 3 and 6.
// RUN: echo '{"mesh": {"tp": 6}, "tensor_parallel": {"per_layer": [{"layers": "0-1", "tp": 6}, {"layers": "2", "tp": 3}]}}' > %t/ok.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/ok.json | FileCheck %s --check-prefix=CHECK-OK
// CHECK-OK-LABEL: module attributes
// CHECK-OK-SAME: layer_tp = [6, 6, 3], embedding_tp = 6>
// CHECK-OK: dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 3, tp_sub = 2]

func.func @forward(%tokens: tensor<6x15xi32> {xfmr.input = "tokens"}) -> tensor<6x15xi32>
    attributes {xfmr.model = {arch = "llama", batch = 6 : i64, heads = 6 : i64, kv_heads = 3 : i64, layers = 3 : i64, vocab = 64 : i64, seq_len = 15 : i64}} {
  return %tokens : tensor<6x15xi32>
}
