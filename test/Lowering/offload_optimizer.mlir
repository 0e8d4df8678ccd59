// RUN: partition-opt %s --rt-offload-optimizer="tier=nvme path=/scratch buffer-bytes=24576" | FileCheck %s
// RUN: partition-opt %s --rt-offload-optimizer="tier=host buffer-bytes=24576" | FileCheck %s --check-prefix=HOST
// RUN: partition-opt %s --rt-offload-optimizer="tier=nvme path=/scratch buffer-bytes=49152" | FileCheck %s --check-prefix=AHEAD
// RUN: partition-opt %s --rt-offload-optimizer="tier=nvme path=/scratch" | FileCheck %s --check-prefix=WHOLE
// The memory plan of the result: the moments in a tier of their own, the
// staging buffers at whole 4096-byte blocks of the arena.
// RUN: partition-opt %s --rt-offload-optimizer="tier=nvme path=/scratch buffer-bytes=24576" --lower-memory-plan | FileCheck %s --check-prefix=PLAN
// RUN: partition-opt %s --rt-offload-optimizer="tier=nvme path=/scratch buffer-bytes=24576" --lower-memory-plan=report=true -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: partition-opt %s --rt-offload-optimizer="tier=nvme path=/scratch buffer-bytes=24576" --lower-memory-plan | partition-opt --verify-roundtrip > /dev/null

// --rt-offload-optimizer: the moments of w (3 x 1024) and b (64) move to a
// tier; with buffer-bytes 24576 (three slices of both moments at 4096 bytes
// each, 1024 elements) w's update runs in three slices, b's whole. Each
// update first moves up to just below what it depends on: b's below the
// gelu that writes its gradient, above w's gradient (fill), so b's
// write-back runs under fill. Reads start as many slices ahead as half the
// budget holds (here one: before the previous slice's update; the first
// before the kernel that precedes its update), write-backs right after
// their update, waited for at the end unless a later read would exceed the
// 24576 bytes of staging: b's is waited for before w's last slice's read.

// CHECK: module attributes {rt.offload_path = "/scratch"}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[MW:[^:]+]]: memref<3x1024xf32> {rt.name = "w", rt.role = "moment1", rt.tier = "nvme"}
// CHECK-SAME: %[[MB:[^:]+]]: memref<64xf32> {rt.name = "b", rt.role = "moment1", rt.tier = "nvme"}
// CHECK-SAME: %[[VW:[^:]+]]: memref<3x1024xf32> {rt.name = "w", rt.role = "moment2", rt.tier = "nvme"}
// CHECK-SAME: %[[VB:[^:]+]]: memref<64xf32> {rt.name = "b", rt.role = "moment2", rt.tier = "nvme"}
// b's reads run under gelu.
// CHECK:      %[[RB:.*]] = rt.tier_read async %[[MB]], %[[SB:[^ ]+]] label = "moment1 b"
// CHECK:      rt.tier_read async %[[VB]], %{{.*}} label = "moment2 b"
// CHECK-NEXT: rt.kernel "gelu"
// w's first slice is read under b's update.
// CHECK:      %[[FLATM:.*]] = memref.collapse_shape %[[MW]] {{\[\[}}0, 1]] : memref<3x1024xf32> into memref<3072xf32>
// CHECK-NEXT: %[[M0:.*]] = memref.subview %[[FLATM]][0] [1024] [1]
// CHECK-NEXT: %[[SM0:.*]] = memref.alloc() : memref<1024xf32>
// CHECK-NEXT: %[[RM0:.*]] = rt.tier_read async %[[M0]], %[[SM0]] label = "moment1 w [0, 1024)"
// CHECK:      %[[SV0:.*]] = memref.alloc() : memref<1024xf32>
// CHECK-NEXT: %[[RV0:.*]] = rt.tier_read async %{{.*}}, %[[SV0]] label = "moment2 w [0, 1024)"
// CHECK-NEXT: rt.wait %[[RB]], %[[MB]], %[[SB]]
// CHECK-NEXT: rt.wait
// CHECK-NEXT: rt.kernel "adamw" ins(%{{.*}}, %{{.*}}, %[[SB]], %{{.*}}, %{{.*}}, %{{.*}} : memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<i32>, memref<f32>)
// CHECK-NEXT: %[[WB:.*]] = rt.tier_write async %[[SB]], %[[MB]] label = "moment1 b"
// CHECK-NEXT: %[[WVB:.*]] = rt.tier_write async
// w's gradient, under b's write-backs and w's first reads.
// CHECK:      rt.kernel "fill" outs(%[[GW:.*]] : memref<3x1024xf32>)
// CHECK:      rt.tier_read async %{{.*}}, %{{.*}} label = "moment1 w [1024, 2048)"
// CHECK:      rt.tier_read async %{{.*}}, %{{.*}} label = "moment2 w [1024, 2048)"
// CHECK-NEXT: rt.wait %[[RM0]], %[[M0]], %[[SM0]]
// CHECK-NEXT: rt.wait %[[RV0]], %{{.*}}, %[[SV0]]
// The update of the first slice, in place on its staging buffers.
// CHECK:      rt.kernel "adamw" ins(%{{.*}}, %{{.*}}, %[[SM0]], %[[SV0]], %{{.*}}, %{{.*}} : memref<1024xf32, strided<[1]>>, memref<1024xf32, strided<[1]>>, memref<1024xf32>, memref<1024xf32>, memref<i32>, memref<f32>) outs(%{{.*}}, %[[SM0]], %[[SV0]] : memref<1024xf32, strided<[1]>>, memref<1024xf32>, memref<1024xf32>)
// CHECK-NEXT: %[[WM0:.*]] = rt.tier_write async %[[SM0]], %[[M0]] label = "moment1 w [0, 1024)"
// CHECK-NEXT: %[[WV0:.*]] = rt.tier_write async %[[SV0]], %{{.*}} label = "moment2 w [0, 1024)"
// Three units staged (b, w's first two slices): b's write-back completes
// before the last slice's reads take its room.
// CHECK-NEXT: rt.wait %[[WB]], %[[SB]], %[[MB]]
// CHECK-NEXT: rt.wait %[[WVB]]
// CHECK:      rt.tier_read async %{{.*}}, %{{.*}} label = "moment1 w [2048, 3072)"
// CHECK:      rt.tier_read async %{{.*}}, %{{.*}} label = "moment2 w [2048, 3072)"
// CHECK:      rt.kernel "adamw" ins(%{{.*}} : memref<1024xf32, strided<[1], offset: 1024>>
// CHECK:      rt.kernel "adamw" ins(%{{.*}} : memref<1024xf32, strided<[1], offset: 2048>>
// CHECK:      rt.tier_write async {{.*}} label = "moment2 w [2048, 3072)"
// The rest complete at the end of the step, oldest first.
// CHECK-NEXT: rt.wait %[[WM0]], %[[SM0]], %[[M0]]
// CHECK-NEXT: rt.wait %[[WV0]], %[[SV0]]
// CHECK-NEXT: rt.wait {{.*}} : memref<1024xf32>, memref<1024xf32, strided<[1], offset: 1024>>
// CHECK-NEXT: rt.wait {{.*}} : memref<1024xf32>, memref<1024xf32, strided<[1], offset: 1024>>
// CHECK-NEXT: rt.wait {{.*}} : memref<1024xf32>, memref<1024xf32, strided<[1], offset: 2048>>
// CHECK-NEXT: rt.wait {{.*}} : memref<1024xf32>, memref<1024xf32, strided<[1], offset: 2048>>
// CHECK-NEXT: return
// CHECK-NOT:  rt.kernel "adamw" ins(%{{.*}}, %{{.*}}, %[[MW]]

// A budget of 49152 bytes (half of it, three units, for reads ahead): w's
// first two slices are read before b's update, its last under the fill,
// and every write-back completes at the end.
// AHEAD:      rt.kernel "gelu"
// AHEAD:      label = "moment2 w [0, 1024)"
// AHEAD-NOT:  rt.kernel
// AHEAD:      rt.tier_read async {{.*}} label = "moment1 w [1024, 2048)"
// AHEAD-NOT:  rt.kernel
// AHEAD:      rt.tier_read async {{.*}} label = "moment2 w [1024, 2048)"
// AHEAD-NEXT: rt.wait
// AHEAD-NEXT: rt.wait
// AHEAD-NEXT: rt.kernel "adamw" ins({{.*}} : memref<64xf32>,
// AHEAD:      rt.kernel "fill"
// AHEAD-NOT:  rt.kernel
// AHEAD:      rt.tier_read async {{.*}} label = "moment1 w [2048, 3072)"
// AHEAD:      rt.tier_write async {{.*}} label = "moment2 w [2048, 3072)"
// AHEAD-NEXT: rt.wait {{.*}} : memref<64xf32>, memref<64xf32>

// The host tier: the same staging, no path.
// HOST-NOT:   rt.offload_path
// HOST:       rt.tier = "host"
// HOST:       rt.tier_read async

// The default buffer (64 MiB): every update in one piece, on staging
// buffers of the moments' own shapes.
// WHOLE:      rt.tier_read async %{{.*}}, %[[S:[^ ]+]] label = "moment1 w" : memref<3x1024xf32>, memref<3x1024xf32>
// WHOLE-NOT:  memref.subview
// WHOLE:      rt.kernel "adamw" ins(%{{.*}}, %{{.*}}, %[[S]], %{{.*}} : memref<3x1024xf32>

// The arena holds the parameters, step, lr and tokens (12928 bytes), then,
// from the next whole block on, the temporaries; the moments are views of
// the tier argument at whole blocks.
// PLAN-LABEL: func.func @train_step
// PLAN-SAME:  (%[[ARENA:.*]]: memref<53248xi8>, %[[TIER:.*]]: memref<32768xi8> {rt.tier = "nvme"})
// PLAN:       memref.view %[[TIER]][%c0{{(_[0-9]+)?}}][] {rt.name = "w", rt.role = "moment1", rt.tier = "nvme"} : memref<32768xi8> to memref<3x1024xf32>
// PLAN:       memref.view %[[TIER]][%c12288{{(_[0-9]+)?}}][] {rt.name = "b", rt.role = "moment1", rt.tier = "nvme"} : memref<32768xi8> to memref<64xf32>
// PLAN:       memref.view %[[TIER]][%c16384{{(_[0-9]+)?}}][] {rt.name = "w", rt.role = "moment2", rt.tier = "nvme"}
// PLAN:       memref.view %[[TIER]][%c28672{{(_[0-9]+)?}}][] {rt.name = "b", rt.role = "moment2", rt.tier = "nvme"}
// PLAN:       memref.view %[[ARENA]][%c12672{{(_[0-9]+)?}}][] {rt.role = "tokens"}
// PLAN:       %[[SB:.*]] = memref.view %[[ARENA]][%c28672{{(_[0-9]+)?}}][] : memref<53248xi8> to memref<64xf32>
// PLAN-NEXT:  rt.tier_read async %{{.*}}, %[[SB]] label = "moment1 b"
// PLAN:       %[[S0:.*]] = memref.view %[[ARENA]][%c36864{{(_[0-9]+)?}}][] : memref<53248xi8> to memref<1024xf32>
// PLAN-NEXT:  rt.tier_read async %{{.*}}, %[[S0]] label = "moment1 w [0, 1024)"
// w's last slice reuses b's blocks, free once its write-back completed.
// PLAN:       %[[S2:.*]] = memref.view %[[ARENA]][%c28672{{(_[0-9]+)?}}][] : memref<53248xi8> to memref<1024xf32>
// PLAN-NEXT:  rt.tier_read async %{{.*}}, %[[S2]] label = "moment1 w [2048, 3072)"

// REPORT:      memory: optimizer_state 4{{$}}
// REPORT:      memory: arena_peak = parameters 12544 + optimizer_state 4 + inputs 260 + gradients 0 + activations 0 + other_temporaries 12288 + offload_staging 24576 + alignment_and_fragmentation 3576{{$}}
// REPORT-NEXT: memory: offloaded_optimizer_state 25088 in the nvme tier (32768 bytes at whole 4096-byte blocks), staged through at most 24576 bytes of the arena
// REPORT-NEXT: memory: tiers per rank: arena 53248, host 0, nvme 32768 bytes

module {
  func.func @train_step(%w: memref<3x1024xf32> {rt.role = "param", rt.name = "w"},
                        %b: memref<64xf32> {rt.role = "param", rt.name = "b"},
                        %mw: memref<3x1024xf32> {rt.role = "moment1", rt.name = "w"},
                        %mb: memref<64xf32> {rt.role = "moment1", rt.name = "b"},
                        %vw: memref<3x1024xf32> {rt.role = "moment2", rt.name = "w"},
                        %vb: memref<64xf32> {rt.role = "moment2", rt.name = "b"},
                        %t: memref<i32> {rt.role = "step"}, %lr: memref<f32> {rt.role = "lr"},
                        %x: memref<64xf32> {rt.role = "tokens"}) {
    %gb = memref.alloc() : memref<64xf32>
    rt.kernel "gelu" ins(%x : memref<64xf32>) outs(%gb : memref<64xf32>)
    %gw = memref.alloc() : memref<3x1024xf32>
    rt.kernel "fill" outs(%gw : memref<3x1024xf32>) floats = [1.0]
    rt.kernel "adamw" ins(%w, %gw, %mw, %vw, %t, %lr : memref<3x1024xf32>, memref<3x1024xf32>, memref<3x1024xf32>, memref<3x1024xf32>, memref<i32>, memref<f32>) outs(%w, %mw, %vw : memref<3x1024xf32>, memref<3x1024xf32>, memref<3x1024xf32>) floats = [0.9, 0.95, 1.0e-08, 0.1]
    rt.kernel "adamw" ins(%b, %gb, %mb, %vb, %t, %lr : memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<i32>, memref<f32>) outs(%b, %mb, %vb : memref<64xf32>, memref<64xf32>, memref<64xf32>) floats = [0.9, 0.95, 1.0e-08, 0.0]
    return
  }
}
