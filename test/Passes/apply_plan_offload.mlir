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

// RUN: echo '{"offload": {"optimizer": "host", "parameters": "nvme"}}' > %t/params.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/params.json 2>&1 | FileCheck %s --check-prefix=CHECK-PARAMS
// CHECK-PARAMS: error: {{.*}}params.json: offload.parameters = "nvme" needs parameter offload (ZeRO-Infinity's: ZeRO-3's parameter shards in a tier, gathered layer by layer), which is not implemented yet; leave out offload.parameters (offload.optimizer moves the AdamW moments)

// RUN: echo '{"offload": {"path": "/scratch"}}' > %t/inert.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/inert.json 2>&1 | FileCheck %s --check-prefix=CHECK-INERT
// CHECK-INERT: error: {{.*}}inert.json: offload.path does nothing with offload.optimizer "none" (nothing is offloaded); give offload.optimizer "host" or "nvme", or leave out offload
// RUN: echo '{"offload": {"buffer_bytes": 1048576}}' > %t/inert-buffer.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/inert-buffer.json 2>&1 | FileCheck %s --check-prefix=CHECK-INERT-BUFFER
// CHECK-INERT-BUFFER: error: {{.*}}inert-buffer.json: offload.buffer_bytes does nothing with offload.optimizer "none"

// RUN: echo '{"offload": {"optimizer": "host", "path": "/scratch"}}' > %t/hostpath.json
// RUN: not partition-opt %s --dist-apply-plan=plan=%t/hostpath.json 2>&1 | FileCheck %s --check-prefix=CHECK-HOSTPATH
// CHECK-HOSTPATH: error: {{.*}}hostpath.json: offload.path does nothing with offload.optimizer "host" (only the nvme tier keeps files); leave out offload.path or give offload.optimizer "nvme"

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
