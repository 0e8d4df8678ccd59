// --dist-apply-plan and a tensor-parallel degree per part of the model
// (tensor_parallel.per_layer and .embedding, docs/nonuniform-tp.md): the
// degrees are recorded in #dist.plan (layer_tp, one per layer, and
// embedding_tp), and the mesh lays tp out as a chain of tensor axes, major
// first, cut at every degree and at the key-value heads, so that each
// part's degree is the size of a major prefix (the ranks keep their
// numbering). This model: a Llama with 8 query heads, 2 key-value heads
// and 4 layers.

// RUN: rm -rf %t && mkdir -p %t

// Degrees 4 and 2 on tp = 4: tp = 2 x tp_sub = 2 (the key-value cut, 2,
// is one of them). The embedding defaults to mesh.tp; the attribute prints
// and parses back the same.
// RUN: echo '{"mesh": {"tp": 4}, "tensor_parallel": {"per_layer": [{"layers": "0-1", "tp": 4}, {"layers": "2-3", "tp": 2}], "sequence_parallel": true}}' > %t/tp4-2.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/tp4-2.json | FileCheck %s --check-prefix=CHECK-42
// RUN: partition-opt %s --dist-apply-plan=plan=%t/tp4-2.json | partition-opt | FileCheck %s --check-prefix=CHECK-42
// CHECK-42-LABEL: module attributes
// CHECK-42-SAME: dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor, tp_sub = tensor], sequence_parallel = true, {{.*}}, layer_tp = [4, 4, 2, 2], embedding_tp = 4>
// CHECK-42: dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2, tp_sub = 2]

// A chain of three degrees and the embedding's own, on tp = 8: cuts at 2
// (the key-value heads and the embedding), 4 and 8; a layer of degree 1 is
// replicated over every tensor axis. "a" names one layer.
// RUN: echo '{"mesh": {"dp": 2, "tp": 8}, "tensor_parallel": {"per_layer": [{"layers": "0", "tp": 8}, {"layers": "1-2", "tp": 4}, {"layers": "3", "tp": 1}], "embedding": {"tp": 2}}}' > %t/chain.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/chain.json | FileCheck %s --check-prefix=CHECK-CHAIN
// CHECK-CHAIN-LABEL: module attributes
// CHECK-CHAIN-SAME: axes = [dp = data, pp = pipeline, tp = tensor, tp_sub = tensor, tp_sub2 = tensor]
// CHECK-CHAIN-SAME: layer_tp = [8, 4, 4, 1], embedding_tp = 2>
// CHECK-CHAIN: dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2, tp_sub = 2, tp_sub2 = 2]

// Every part at mesh.tp: tp is cut at the key-value heads alone (named as
// for per-part degrees), the degrees recorded.
// RUN: echo '{"mesh": {"tp": 4}, "tensor_parallel": {"per_layer": [{"layers": "0-3", "tp": 4}]}}' > %t/same.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/same.json | FileCheck %s --check-prefix=CHECK-ALL4
// CHECK-ALL4-LABEL: module attributes
// CHECK-ALL4-SAME: layer_tp = [4, 4, 4, 4], embedding_tp = 4>
// CHECK-ALL4: dist.mesh @mesh axes = [dp = 1, pp = 1, tp = 2, tp_sub = 2]

// Errors in the plan alone: each names the field.
// RUN: echo '{"mesh": {"tp": 4}, "tensor_parallel": {"per_layer": [{"layers": "0-3", "tp": 3}]}}' > %t/divide.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/divide.json 2>&1 | FileCheck %s --check-prefix=CHECK-DIVIDE
// CHECK-DIVIDE: error: {{.*}}divide.json: tensor_parallel.per_layer[0].tp = 3 does not divide mesh.tp = 4; a part's degree must divide the mesh's tp (the largest degree)
// RUN: echo '{"mesh": {"tp": 4}, "tensor_parallel": {"embedding": {"tp": 8}}}' > %t/embedding.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/embedding.json 2>&1 | FileCheck %s --check-prefix=CHECK-EMBEDDING
// CHECK-EMBEDDING: error: {{.*}}embedding.json: tensor_parallel.embedding.tp = 8 does not divide mesh.tp = 4
// RUN: echo '{"mesh": {"tp": 4}, "tensor_parallel": {"per_layer": [{"layers": "0-2", "tp": 4}, {"layers": "2-3", "tp": 2}]}}' > %t/twice.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/twice.json 2>&1 | FileCheck %s --check-prefix=CHECK-TWICE
// CHECK-TWICE: error: {{.*}}twice.json: tensor_parallel.per_layer: layer 2 is covered twice, by per_layer[0] (layers 0-2) and per_layer[1] (layers 2-3); give each layer one degree
// RUN: echo '{"mesh": {"tp": 6}, "tensor_parallel": {"per_layer": [{"layers": "0-1", "tp": 2}, {"layers": "2-3", "tp": 3}]}}' > %t/chain-broken.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/chain-broken.json 2>&1 | FileCheck %s --check-prefix=CHECK-BROKEN
// CHECK-BROKEN: error: {{.*}}chain-broken.json: tensor_parallel: the degrees 2 and 3 do not divide one another; the degrees of per_layer, embedding and mesh.tp must form a chain in which each divides the next larger (as 1, 2, 4, 8)
// RUN: echo '{"mesh": {"tp": 4}, "tensor_parallel": {"per_layer": [{"layers": "3-1", "tp": 4}, {"layers": "x", "tp": 2}, {"layers": 2, "tp": 2}]}}' > %t/range.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/range.json 2>&1 | FileCheck %s --check-prefix=CHECK-RANGE
// CHECK-RANGE: error: {{.*}}range.json: tensor_parallel.per_layer[0].layers must be "a-b" (first to last layer, inclusive, a <= b) or "a", got "3-1"
// CHECK-RANGE: error: {{.*}}range.json: tensor_parallel.per_layer[1].layers must be "a-b" {{.*}}, got "x"
// CHECK-RANGE: error: {{.*}}range.json: tensor_parallel.per_layer[2].layers must be "a-b" {{.*}}, got 2
// RUN: echo '{"mesh": {"tp": 4}, "tensor_parallel": {"per_layer": [{"tp": 4}, {"layers": "1-3"}, {"layers": "1", "tp": 2, "pp": 1}, 4], "embedding": {"degree": 2}}}' > %t/fields.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/fields.json 2>&1 | FileCheck %s --check-prefix=CHECK-FIELDS
// CHECK-FIELDS: error: {{.*}}fields.json: tensor_parallel.per_layer[0].layers is required: the layers "a-b" (inclusive) or "a" the degree applies to
// CHECK-FIELDS: error: {{.*}}fields.json: tensor_parallel.per_layer[1].tp is required: the tensor-parallel degree of the part
// CHECK-FIELDS: error: {{.*}}fields.json: unknown field 'tensor_parallel.per_layer[2].pp' (known: layers, tp)
// CHECK-FIELDS: error: {{.*}}fields.json: tensor_parallel.per_layer[3] must be an object {"layers": "a-b", "tp": d}, got 4
// CHECK-FIELDS: error: {{.*}}fields.json: unknown field 'tensor_parallel.embedding.degree' (known: tp)
// CHECK-FIELDS: error: {{.*}}fields.json: tensor_parallel.embedding.tp is required
// RUN: echo '{"mesh": {"tp": 4}, "tensor_parallel": {"per_layer": []}}' > %t/empty.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/empty.json 2>&1 | FileCheck %s --check-prefix=CHECK-EMPTY
// CHECK-EMPTY: error: {{.*}}empty.json: tensor_parallel.per_layer must be a non-empty list of {"layers": "a-b", "tp": d}, got []

// Errors against the model: a layer without a degree, layers beyond the
// model.
// RUN: echo '{"mesh": {"tp": 4}, "tensor_parallel": {"per_layer": [{"layers": "0-1", "tp": 4}, {"layers": "3-5", "tp": 2}]}}' > %t/cover.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/cover.json 2>&1 | FileCheck %s --check-prefix=CHECK-COVER
// CHECK-COVER: error: {{.*}}cover.json: tensor_parallel.per_layer[1] (layers 3-5) names layers beyond the model's 4 (0-3)
// CHECK-COVER: error: {{.*}}cover.json: tensor_parallel.per_layer gives layer 2 no degree; the entries must cover every layer of the model (0-3) exactly once

// Per-part degrees compose with a pipeline and with ZeRO
// (docs/nonuniform-tp.md, "Composing with ZeRO and pipelines"): the plan
// is recorded whole (equivalence: test/e2e/ranks/nonuniform-tp-combos.test).
// RUN: echo '{"mesh": {"tp": 2, "pp": 2}, "pipeline": {"microbatches": 2}, "tensor_parallel": {"per_layer": [{"layers": "0-3", "tp": 1}]}}' > %t/pp.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/pp.json | FileCheck %s --check-prefix=CHECK-PP
// CHECK-PP-LABEL: module attributes
// CHECK-PP-SAME: axes = [dp = data, pp = pipeline, tp = tensor]
// CHECK-PP-SAME: microbatches = 2, zero_stage = 0
// CHECK-PP-SAME: layer_tp = [1, 1, 1, 1], embedding_tp = 2>
// CHECK-PP: dist.mesh @mesh axes = [dp = 1, pp = 2, tp = 2]
// RUN: echo '{"mesh": {"dp": 2, "tp": 2}, "zero": {"stage": 1}, "tensor_parallel": {"embedding": {"tp": 1}}}' > %t/zero.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/zero.json | FileCheck %s --check-prefix=CHECK-ZERO
// CHECK-ZERO-LABEL: module attributes
// CHECK-ZERO-SAME: zero_stage = 1
// CHECK-ZERO-SAME: layer_tp = [2, 2, 2, 2], embedding_tp = 1>
// CHECK-ZERO: dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]

func.func @forward(%tokens: tensor<4x16xi32> {xfmr.input = "tokens"}) -> tensor<4x16xi32>
    attributes {xfmr.model = {arch = "llama", batch = 4 : i64, heads = 8 : i64, kv_heads = 2 : i64, layers = 4 : i64, vocab = 64 : i64, seq_len = 16 : i64}} {
  return %tokens : tensor<4x16xi32>
}
