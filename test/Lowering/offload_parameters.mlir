// RUN: partition-opt %s --rt-offload-optimizer="tier=none parameters=nvme path=/scratch buffer-bytes=24576" | FileCheck %s
// RUN: partition-opt %s --rt-offload-optimizer="tier=nvme parameters=nvme path=/scratch buffer-bytes=36864" | FileCheck %s --check-prefix=BOTH
// RUN: partition-opt %s --rt-offload-optimizer="tier=host parameters=nvme path=/scratch" | FileCheck %s --check-prefix=MIXED
// RUN: partition-opt %s --rt-offload-optimizer="tier=none parameters=host" | FileCheck %s --check-prefix=HOST
// The memory plan of the result: the shards in the tier, the report's line.
// RUN: partition-opt %s --rt-offload-optimizer="tier=none parameters=nvme path=/scratch buffer-bytes=24576" --lower-memory-plan | partition-opt --verify-roundtrip | FileCheck %s --check-prefix=PLAN
// RUN: partition-opt %s --rt-offload-optimizer="tier=nvme parameters=nvme path=/scratch buffer-bytes=36864" --lower-memory-plan=report=true -o /dev/null | FileCheck %s --check-prefix=REPORT

// --rt-offload-optimizer parameters=...: ZeRO-3's parameter shards (the
// arguments with a dist.flat_shard) move to a tier. Each flat_pack of a
// shard into its all-gather's one-row bucket packs slices read into
// staging buffers (columns offset + o of the bucket), each adamw stages the
// parameter's slice (with the moments when they are tiered too) and
// writes it back. w's shard is 2048 elements: with buffer-bytes 24576 and
// only the parameter staged, slices of 4096 bytes (1024 elements).

// CHECK: module attributes {rt.offload_path = "/scratch"}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[^:]+]]: memref<2048xf32> {dist.flat_shard = {{.*}}, rt.name = "w", rt.role = "param", rt.tier = "nvme"}
// CHECK-SAME: %[[B:[^:]+]]: memref<32xf32> {dist.flat_shard = {{.*}}, rt.name = "b", rt.role = "param", rt.tier = "nvme"}
// CHECK-SAME: %{{[^:]+}}: memref<2048xf32> {rt.name = "w", rt.role = "moment1"}
// CHECK-SAME: %[[MB:[^:]+]]: memref<32xf32> {rt.name = "b", rt.role = "moment1"}
// The forward pack: w's first slice is read before the fill that precedes
// it, the next units' reads as far ahead as half the budget holds (three
// units of 4096 bytes: w's second slice, b, then the update's first
// slice), each packed at its columns of the bucket.
// CHECK:      %[[W0:.*]] = memref.subview %[[W]][0] [1024] [1]
// CHECK-NEXT: %[[S0:.*]] = memref.alloc() : memref<1024xf32>
// CHECK-NEXT: %[[R0:.*]] = rt.tier_read async %[[W0]], %[[S0]] label = "param w [0, 1024)"
// CHECK-NEXT: rt.kernel "fill"
// CHECK:      %[[R1:.*]] = rt.tier_read async %{{.*}}, %[[S1:[^ ]+]] label = "param w [1024, 2048)"
// CHECK:      %[[RB:.*]] = rt.tier_read async %[[B]], %[[SB:[^ ]+]] label = "param b"
// CHECK-NEXT: rt.wait %[[R0]], %[[W0]], %[[S0]]
// CHECK-NEXT: rt.kernel "flat_pack" ins(%[[S0]] : memref<1024xf32>) outs(%[[BUCKET:.*]] : memref<1x2080xf32>) ints = [0]
// CHECK:      %[[RU0:.*]] = rt.tier_read async %{{.*}}, %[[U0:[^ ]+]] label = "param w [0, 1024)"
// CHECK-NEXT: rt.wait %[[R1]]
// CHECK-NEXT: rt.kernel "flat_pack" ins(%[[S1]] : memref<1024xf32>) outs(%[[BUCKET]] : memref<1x2080xf32>) ints = [1024]
// CHECK:      rt.tier_read async {{.*}} label = "param w [1024, 2048)"
// CHECK-NEXT: rt.wait %[[RB]]
// CHECK-NEXT: rt.kernel "flat_pack" ins(%[[SB]] : memref<32xf32>) outs(%[[BUCKET]] : memref<1x2080xf32>) ints = [2048]
// CHECK:      rt.all_gather async %[[BUCKET]]
// The update: the parameter's slice staged, updated in place with the
// moments' slices (in the arena), written back; waited for at the end.
// CHECK:      rt.wait %[[RU0]]
// CHECK:      rt.kernel "adamw" ins(%[[U0]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<1024xf32>, memref<1024xf32, strided<[1]>>, memref<1024xf32, strided<[1]>>, memref<1024xf32, strided<[1]>>, memref<i32>, memref<f32>) outs(%[[U0]], %{{.*}}, %{{.*}} : memref<1024xf32>, memref<1024xf32, strided<[1]>>, memref<1024xf32, strided<[1]>>)
// CHECK-NEXT: %[[WU0:.*]] = rt.tier_write async %[[U0]], %{{.*}} label = "param w [0, 1024)"
// CHECK:      rt.kernel "adamw" ins(%{{[^,]+}}, %{{[^,]+}}, %[[MB]], {{.*}} : memref<32xf32>
// CHECK-NEXT: rt.tier_write async {{.*}} label = "param b"
// CHECK-NEXT: rt.wait %[[WU0]]
// CHECK-NEXT: rt.wait
// CHECK-NEXT: rt.wait
// CHECK-NEXT: return
// The evaluation step's pack reads the tier the same way.
// CHECK-LABEL: func.func @eval_step
// CHECK:      rt.tier_read async {{.*}} label = "param w [0, 1024)"
// CHECK:      rt.kernel "flat_pack" ins(%{{.*}} : memref<1024xf32>)

// Both tiered (36864 bytes: a sixth of it per unit, slices of one 4096-byte
// block of each of the three staged operands): one read per operand, the
// parameter's with the moments', and all three written back.
// BOTH-LABEL: func.func @train_step
// BOTH-SAME:  rt.role = "moment1", rt.tier = "nvme"
// BOTH:       label = "param w [0, 1024)"
// BOTH:       rt.tier_read async {{.*}} label = "moment1 w [0, 1024)"
// BOTH:       rt.tier_read async {{.*}} label = "moment2 w [0, 1024)"
// BOTH:       rt.tier_read async {{.*}} label = "param w [0, 1024)"
// BOTH:       rt.kernel "adamw" ins(%[[P:[^,]+]], %{{[^,]+}}, %[[M:[^,]+]], %[[V:[^,]+]], {{.*}} outs(%[[P]], %[[M]], %[[V]] :
// BOTH-NEXT:  rt.tier_write async %[[M]], {{.*}} label = "moment1 w [0, 1024)"
// BOTH-NEXT:  rt.tier_write async %[[V]], {{.*}} label = "moment2 w [0, 1024)"
// BOTH-NEXT:  rt.tier_write async %[[P]], {{.*}} label = "param w [0, 1024)"

// Two tiers: the moments in host memory, the shards on NVMe (64 MiB of
// budget: every tensor whole).
// MIXED:      rt.offload_path = "/scratch"
// MIXED:      rt.name = "w", rt.role = "param", rt.tier = "nvme"
// MIXED:      rt.name = "w", rt.role = "moment1", rt.tier = "host"
// MIXED:      rt.tier_read async {{.*}} label = "param w" : memref<2048xf32>, memref<2048xf32>

// HOST-NOT:   rt.offload_path
// HOST:       rt.role = "param", rt.tier = "host"
// HOST-NOT:   rt.role = "moment1", rt.tier

// The shards are views of the tier argument at whole blocks; the arena
// keeps the rest.
// PLAN-LABEL: func.func @train_step
// PLAN-SAME:  %[[TIER:[^:]+]]: memref<12288xi8> {rt.tier = "nvme"}
// PLAN:       memref.view %[[TIER]][%c0{{(_[0-9]+)?}}][] {{.*}}rt.name = "w", rt.role = "param", rt.tier = "nvme"} : memref<12288xi8> to memref<2048xf32>
// PLAN:       memref.view %[[TIER]][%c8192{{(_[0-9]+)?}}][] {{.*}}rt.name = "b", rt.role = "param", rt.tier = "nvme"} : memref<12288xi8> to memref<32xf32>

// REPORT:      memory: parameters 0{{$}}
// REPORT:      memory: offloaded_optimizer_state 16640 + parameters 8320 in the nvme tier (36864 bytes at whole 4096-byte blocks), staged through at most 36864 bytes of the arena
// REPORT-NEXT: memory: tiers per rank: arena {{[0-9]+}}, host 0, nvme 36864 bytes

module {
  dist.mesh @mesh axes = [dp = 2]
  func.func @train_step(%w: memref<2048xf32> {rt.role = "param", rt.name = "w", dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>, shape = array<i64: 4096>}},
                        %b: memref<32xf32> {rt.role = "param", rt.name = "b", dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>, shape = array<i64: 64>}},
                        %mw: memref<2048xf32> {rt.role = "moment1", rt.name = "w"},
                        %mb: memref<32xf32> {rt.role = "moment1", rt.name = "b"},
                        %vw: memref<2048xf32> {rt.role = "moment2", rt.name = "w"},
                        %vb: memref<32xf32> {rt.role = "moment2", rt.name = "b"},
                        %t: memref<i32> {rt.role = "step"}, %lr: memref<f32> {rt.role = "lr"},
                        %x: memref<64xf32> {rt.role = "tokens"}) {
    %one = memref.alloc() : memref<f32>
    rt.kernel "fill" outs(%one : memref<f32>) floats = [1.0]
    %bucket = memref.alloc() : memref<1x2080xf32>
    rt.kernel "flat_pack" ins(%w : memref<2048xf32>) outs(%bucket : memref<1x2080xf32>) ints = [0]
    rt.kernel "flat_pack" ins(%b : memref<32xf32>) outs(%bucket : memref<1x2080xf32>) ints = [2048]
    %gathered = memref.alloc() : memref<2x2080xf32>
    %g = rt.all_gather async %bucket, %gathered on @mesh axes [dp] dim = 0 label = "parameters from w (forward)" : memref<1x2080xf32>, memref<2x2080xf32>
    rt.wait %g, %bucket, %gathered : memref<1x2080xf32>, memref<2x2080xf32>
    %gw = memref.alloc() : memref<2048xf32>
    rt.kernel "fill" outs(%gw : memref<2048xf32>) floats = [1.0]
    %gb = memref.alloc() : memref<32xf32>
    rt.kernel "fill" outs(%gb : memref<32xf32>) floats = [1.0]
    rt.kernel "adamw" ins(%w, %gw, %mw, %vw, %t, %lr : memref<2048xf32>, memref<2048xf32>, memref<2048xf32>, memref<2048xf32>, memref<i32>, memref<f32>) outs(%w, %mw, %vw : memref<2048xf32>, memref<2048xf32>, memref<2048xf32>) floats = [0.9, 0.95, 1.0e-08, 0.1]
    rt.kernel "adamw" ins(%b, %gb, %mb, %vb, %t, %lr : memref<32xf32>, memref<32xf32>, memref<32xf32>, memref<32xf32>, memref<i32>, memref<f32>) outs(%b, %mb, %vb : memref<32xf32>, memref<32xf32>, memref<32xf32>) floats = [0.9, 0.95, 1.0e-08, 0.0]
    return
  }
  func.func @eval_step(%w: memref<2048xf32> {rt.role = "param", rt.name = "w", dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>, shape = array<i64: 4096>}},
                       %b: memref<32xf32> {rt.role = "param", rt.name = "b", dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>, shape = array<i64: 64>}},
                       %x: memref<64xf32> {rt.role = "tokens"}) {
    %bucket = memref.alloc() : memref<1x2080xf32>
    rt.kernel "flat_pack" ins(%w : memref<2048xf32>) outs(%bucket : memref<1x2080xf32>) ints = [0]
    rt.kernel "flat_pack" ins(%b : memref<32xf32>) outs(%bucket : memref<1x2080xf32>) ints = [2048]
    %gathered = memref.alloc() : memref<2x2080xf32>
    %g = rt.all_gather async %bucket, %gathered on @mesh axes [dp] dim = 0 label = "parameters from w (eval)" : memref<1x2080xf32>, memref<2x2080xf32>
    rt.wait %g, %bucket, %gathered : memref<1x2080xf32>, memref<2x2080xf32>
    return
  }
}
