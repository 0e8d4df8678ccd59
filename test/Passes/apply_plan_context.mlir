// Context parallelism in the plan (docs/context-parallel.md): the mesh
// gains a context axis between pp and tp, #dist.plan its chunks and method;
// each refusal is one line naming the field.

// RUN: rm -rf %t && mkdir -p %t
// RUN: echo '{"mesh": {"dp": 2, "cp": 4}}' > %t/zigzag.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/zigzag.json | FileCheck %s --check-prefix=CHECK-ZIGZAG
// CHECK-ZIGZAG: dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, cp = context, tp = tensor], {{.*}}context_chunks = 8>
// CHECK-ZIGZAG: dist.mesh @mesh axes = [dp = 2, pp = 1, cp = 4, tp = 1]

// RUN: echo '{"mesh": {"cp": 2}, "context_parallel": {"method": "ring", "load_balance": "none"}}' > %t/ring.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/ring.json | FileCheck %s --check-prefix=CHECK-RING
// CHECK-RING: context_chunks = 1, context_method = "ring">

// Without cp the mesh keeps its three axes.
// RUN: echo '{"mesh": {"dp": 2}}' > %t/dp.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/dp.json | FileCheck %s --check-prefix=CHECK-NOCP
// CHECK-NOCP: axes = [dp = data, pp = pipeline, tp = tensor]
// CHECK-NOCP-NOT: context

// 16 positions do not cut into 2 x 16 chunks.
// RUN: echo '{"mesh": {"cp": 16}}' > %t/chunks.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/chunks.json 2>&1 | FileCheck %s --check-prefix=CHECK-CHUNKS
// CHECK-CHUNKS: error: {{.*}}chunks.json: mesh.cp = 16: seq_len 16 does not split into 32 equal chunks (2 x cp, the zigzag load balance); use a seq_len that is a multiple of 32 or context_parallel.load_balance "none"

// RUN: echo '{"mesh": {"cp": 4, "tp": 2}, "context_parallel": {"load_balance": "none"}, "tensor_parallel": {"sequence_parallel": true}}' > %t/sp.json
// RUN: echo '{"mesh": {"cp": 16, "tp": 2}, "context_parallel": {"load_balance": "none"}, "tensor_parallel": {"sequence_parallel": true}}' > %t/sp-bad.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/sp.json > /dev/null
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/sp-bad.json 2>&1 | FileCheck %s --check-prefix=CHECK-SP
// CHECK-SP: error: {{.*}}sp-bad.json: mesh.cp = 16 with sequence parallelism: seq_len 16 is not divisible by mesh.cp x mesh.tp = 32

// RUN: echo '{"context_parallel": {"method": "ring"}}' > %t/nocp.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/nocp.json 2>&1 | FileCheck %s --check-prefix=CHECK-EFFECT
// CHECK-EFFECT: error: {{.*}}nocp.json: context_parallel does nothing without context parallelism (mesh.cp = 1); give mesh.cp > 1 or leave out context_parallel

// RUN: echo '{"mesh": {"cp": 2}, "context_parallel": {"method": "ulysses"}}' > %t/method.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/method.json 2>&1 | FileCheck %s --check-prefix=CHECK-METHOD
// CHECK-METHOD: error: {{.*}}method.json: context_parallel.method must be one of

// RUN: echo '{"mesh": {"cp": 2}, "context_parallel": {"load_balance": "striped"}}' > %t/balance.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/balance.json 2>&1 | FileCheck %s --check-prefix=CHECK-BALANCE
// CHECK-BALANCE: error: {{.*}}balance.json: context_parallel.load_balance must be one of

// RUN: echo '{"replicas": [{"tp": 2}, {"tp": 1}], "mesh": {"cp": 2}}' > %t/replicas.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/replicas.json 2>&1 | FileCheck %s --check-prefix=CHECK-REPLICAS
// CHECK-REPLICAS: error: {{.*}}replicas.json: mesh.cp with replicas = 2 needs context parallelism inside nonuniform replicas, which is not implemented yet; leave out mesh.cp or the replicas

// ZeRO takes effect over the context axis alone.
// RUN: echo '{"mesh": {"cp": 2}, "zero": {"stage": 1}}' > %t/zero.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/zero.json | FileCheck %s --check-prefix=CHECK-ZERO
// CHECK-ZERO: zero_stage = 1

func.func @forward(%tokens: tensor<8x16xi32> {xfmr.input = "tokens"}) -> tensor<8x16xi32>
    attributes {xfmr.model = {arch = "llama", batch = 8 : i64, heads = 4 : i64, kv_heads = 2 : i64, layers = 4 : i64, vocab = 256 : i64, seq_len = 16 : i64}} {
  return %tokens : tensor<8x16xi32>
}
