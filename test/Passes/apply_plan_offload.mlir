// The plan's offload field (docs/offload.md): the optimizer state in the
// host or NVMe tier, planned by --rt-offload-optimizer after the lowering;
// --dist-apply-plan reads and checks it, each refusal one line naming the
// field.

// RUN: rm -rf %t && mkdir -p %t
// RUN: echo '{"offload": {"optimizer": "nvme", "path": "/scratch", "buffer_bytes": 24576}}' > %t/nvme.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/nvme.json | FileCheck %s --check-prefix=CHECK-NVME
// CHECK-NVME: dist.plan = #dist.plan<
// RUN: echo '{"offload": {"optimizer": "host"}}' > %t/host.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/host.json | FileCheck %s --check-prefix=CHECK-NVME
// RUN: echo '{"offload": {"optimizer": "none"}}' > %t/none.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/none.json | FileCheck %s --check-prefix=CHECK-NVME

// RUN: echo '{"offload": {"optimizer": "disk"}}' > %t/tier.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/tier.json 2>&1 | FileCheck %s --check-prefix=CHECK-TIER
// CHECK-TIER: error: {{.*}}tier.json: offload.optimizer must be one of none, host, nvme, got "disk"

// RUN: echo '{"offload": {"optimizer": "nvme"}}' > %t/nopath.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/nopath.json 2>&1 | FileCheck %s --check-prefix=CHECK-NOPATH
// CHECK-NOPATH: error: {{.*}}nopath.json: offload.path is required with offload.optimizer "nvme": the directory of each rank's offload file (partition-run --offload-path overrides it)

// RUN: echo '{"offload": {"optimizer": "nvme", "path": ""}}' > %t/empty.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/empty.json 2>&1 | FileCheck %s --check-prefix=CHECK-EMPTY
// CHECK-EMPTY: error: {{.*}}empty.json: offload.path must be a directory (a non-empty string: where each rank's offload file goes), got ""

// RUN: echo '{"offload": {"optimizer": "host", "buffer_bytes": 4096}}' > %t/small.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/small.json 2>&1 | FileCheck %s --check-prefix=CHECK-SMALL
// CHECK-SMALL: error: {{.*}}small.json: offload.buffer_bytes must be at least 24576 (three slices of both moments staged at once, each at least one 4096-byte I/O block), got 4096

// Parameter offload (ZeRO-Infinity's): ZeRO-3's parameter shards in a
// tier, with or without the moments; an NVMe tier of either needs a path.
// RUN: echo '{"mesh": {"dp": 2}, "zero": {"stage": 3}, "offload": {"parameters": "nvme", "path": "/scratch"}}' > %t/params.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/params.json | FileCheck %s --check-prefix=CHECK-NVME
// RUN: echo '{"mesh": {"dp": 2}, "zero": {"stage": 3}, "offload": {"optimizer": "host", "parameters": "host"}}' > %t/params-host.json
// RUN: partition-opt %s --dist-apply-plan=plan=%t/params-host.json | FileCheck %s --check-prefix=CHECK-NVME
// RUN: echo '{"mesh": {"dp": 2}, "zero": {"stage": 3}, "offload": {"optimizer": "host", "parameters": "nvme"}}' > %t/params-nopath.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/params-nopath.json 2>&1 | FileCheck %s --check-prefix=CHECK-PARAMS-NOPATH
// CHECK-PARAMS-NOPATH: error: {{.*}}params-nopath.json: offload.path is required with offload.parameters "nvme": the directory of each rank's offload file (partition-run --offload-path overrides it)
// RUN: echo '{"mesh": {"dp": 2}, "zero": {"stage": 1}, "offload": {"parameters": "host"}}' > %t/params-zero1.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/params-zero1.json 2>&1 | FileCheck %s --check-prefix=CHECK-PARAMS-ZERO1
// CHECK-PARAMS-ZERO1: error: {{.*}}params-zero1.json: offload.parameters = "host" offloads ZeRO-3's parameter shards, but the plan has zero.stage 1; give zero.stage 3 with mesh.dp > 1, or leave out offload.parameters
// RUN: echo '{"offload": {"parameters": "host"}}' > %t/params-nozero.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/params-nozero.json 2>&1 | FileCheck %s --check-prefix=CHECK-PARAMS-NOZERO
// CHECK-PARAMS-NOZERO: error: {{.*}}params-nozero.json: offload.parameters = "host" offloads ZeRO-3's parameter shards, but the plan has zero.stage 0; give zero.stage 3
// RUN: echo '{"mesh": {"cp": 2}, "zero": {"stage": 3}, "offload": {"parameters": "host"}}' > %t/params-cp.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/params-cp.json 2>&1 | FileCheck %s --check-prefix=CHECK-PARAMS-CP
// CHECK-PARAMS-CP: error: {{.*}}params-cp.json: offload.parameters = "host" offloads ZeRO-3's parameter shards, but the plan has no data-parallel axis (mesh.dp = 1); give zero.stage 3 with mesh.dp > 1, or leave out offload.parameters
// RUN: echo '{"mesh": {"dp": 2}, "zero": {"stage": 3}, "offload": {"parameters": "host", "path": "/scratch"}}' > %t/params-hostpath.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/params-hostpath.json 2>&1 | FileCheck %s --check-prefix=CHECK-PARAMS-HOSTPATH
// CHECK-PARAMS-HOSTPATH: error: {{.*}}params-hostpath.json: offload.path does nothing without the nvme tier (only it keeps files; offload.optimizer is "none", offload.parameters "host"); leave out offload.path or give "nvme"

// RUN: echo '{"offload": {"path": "/scratch"}}' > %t/inert.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/inert.json 2>&1 | FileCheck %s --check-prefix=CHECK-INERT
// CHECK-INERT: error: {{.*}}inert.json: offload.path does nothing with offload.optimizer "none" (nothing is offloaded); give offload.optimizer "host" or "nvme", or leave out offload
// RUN: echo '{"offload": {"buffer_bytes": 1048576}}' > %t/inert-buffer.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/inert-buffer.json 2>&1 | FileCheck %s --check-prefix=CHECK-INERT-BUFFER
// CHECK-INERT-BUFFER: error: {{.*}}inert-buffer.json: offload.buffer_bytes does nothing with offload.optimizer "none"

// RUN: echo '{"offload": {"optimizer": "host", "path": "/scratch"}}' > %t/hostpath.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/hostpath.json 2>&1 | FileCheck %s --check-prefix=CHECK-HOSTPATH
// CHECK-HOSTPATH: error: {{.*}}hostpath.json: offload.path does nothing without the nvme tier (only it keeps files; offload.optimizer is "host", offload.parameters "none"); leave out offload.path or give "nvme"

// RUN: echo '{"replicas": [{"tp": 2}, {"tp": 1}], "offload": {"optimizer": "host"}}' > %t/replicas.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/replicas.json 2>&1 | FileCheck %s --check-prefix=CHECK-REPLICAS
// CHECK-REPLICAS: error: {{.*}}replicas.json: offload.optimizer with replicas = "host" needs optimizer-state offload inside nonuniform replicas, which is not implemented yet; leave out offload or the replicas

// RUN: echo '{"offload": {"optimizer": "host", "bucket": 1}}' > %t/unknown.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/unknown.json 2>&1 | FileCheck %s --check-prefix=CHECK-UNKNOWN
// CHECK-UNKNOWN: error: {{.*}}unknown.json: unknown field 'offload.bucket' (known: optimizer, parameters, path, buffer_bytes)

func.func @forward(%tokens: tensor<8x16xi32> {xfmr.input = "tokens"}) -> tensor<8x16xi32>
    attributes {xfmr.model = {arch = "llama", batch = 8 : i64, heads = 4 : i64, kv_heads = 2 : i64, layers = 4 : i64, vocab = 256 : i64, seq_len = 16 : i64}} {
  return %tokens : tensor<8x16xi32>
}
