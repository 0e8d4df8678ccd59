// RUN: partition-opt %s -split-input-file | partition-opt -split-input-file | FileCheck %s
// RUN: partition-opt %s -split-input-file --mlir-print-op-generic | partition-opt -split-input-file | FileCheck %s

// Round trip of the offload's tier transfers (rt.tier_read, rt.tier_write),
// synchronous and started, on a state buffer marked rt.tier and on slices
// of one, in the custom and the generic form.

// CHECK-LABEL: func.func @whole_buffer
// CHECK-SAME:    (%[[M:.*]]: memref<64xf32> {rt.name = "w", rt.role = "moment1", rt.tier = "nvme"}, %[[S:.*]]: memref<64xf32>)
func.func @whole_buffer(%m: memref<64xf32> {rt.name = "w", rt.role = "moment1", rt.tier = "nvme"}, %s: memref<64xf32>) {
  // CHECK: rt.tier_read %[[M]], %[[S]] label = "moment1 w" : memref<64xf32>, memref<64xf32>
  rt.tier_read %m, %s label = "moment1 w" : memref<64xf32>, memref<64xf32>
  // CHECK-NEXT: rt.tier_write %[[S]], %[[M]] label = "moment1 w" : memref<64xf32>, memref<64xf32>
  rt.tier_write %s, %m label = "moment1 w" : memref<64xf32>, memref<64xf32>
  return
}

// -----

// Two slices of one tiered buffer in flight at once: a write of the first
// runs while the second is read (disjoint bytes), and the update of the
// second slice's staging buffer runs while the first is written back.
// CHECK-LABEL: func.func @slices
func.func @slices(%m: memref<2x1024xf32> {rt.name = "w", rt.role = "moment2", rt.tier = "host"},
                  %a: memref<1024xf32>, %b: memref<1024xf32>, %x: memref<1024xf32>) {
  %flat = memref.collapse_shape %m [[0, 1]] : memref<2x1024xf32> into memref<2048xf32>
  %m0 = memref.subview %flat[0] [1024] [1] : memref<2048xf32> to memref<1024xf32, strided<[1]>>
  %m1 = memref.subview %flat[1024] [1024] [1] : memref<2048xf32> to memref<1024xf32, strided<[1], offset: 1024>>
  // CHECK: %[[R0:.*]] = rt.tier_read async %{{.*}}, %{{.*}} label = "moment2 w [0, 1024)" : memref<1024xf32, strided<[1]>>, memref<1024xf32>
  %r0 = rt.tier_read async %m0, %a label = "moment2 w [0, 1024)" : memref<1024xf32, strided<[1]>>, memref<1024xf32>
  // CHECK-NEXT: rt.wait %[[R0]], %{{.*}}, %{{.*}} : memref<1024xf32, strided<[1]>>, memref<1024xf32>
  rt.wait %r0, %m0, %a : memref<1024xf32, strided<[1]>>, memref<1024xf32>
  // CHECK: %[[W0:.*]] = rt.tier_write async %{{.*}}, %{{.*}} label = "moment2 w [0, 1024)" : memref<1024xf32>, memref<1024xf32, strided<[1]>>
  %w0 = rt.tier_write async %a, %m0 label = "moment2 w [0, 1024)" : memref<1024xf32>, memref<1024xf32, strided<[1]>>
  // CHECK-NEXT: %[[R1:.*]] = rt.tier_read async %{{.*}}, %{{.*}} label = "moment2 w [1024, 2048)"
  %r1 = rt.tier_read async %m1, %b label = "moment2 w [1024, 2048)" : memref<1024xf32, strided<[1], offset: 1024>>, memref<1024xf32>
  // CHECK-NEXT: rt.wait %[[R1]]
  rt.wait %r1, %m1, %b : memref<1024xf32, strided<[1], offset: 1024>>, memref<1024xf32>
  // CHECK-NEXT: rt.kernel "gelu"
  rt.kernel "gelu" ins(%x : memref<1024xf32>) outs(%b : memref<1024xf32>)
  // CHECK-NEXT: rt.wait %[[W0]]
  rt.wait %w0, %a, %m0 : memref<1024xf32>, memref<1024xf32, strided<[1]>>
  return
}

// -----

// After the memory plan: the tier is an argument of its own, the state a
// view of it.
// CHECK-LABEL: func.func @planned
// CHECK-SAME:    (%{{.*}}: memref<8192xi8>, %[[TIER:.*]]: memref<4096xi8> {rt.tier = "nvme"})
module attributes {rt.offload_path = "/scratch"} {
  func.func @planned(%arena: memref<8192xi8>, %tier: memref<4096xi8> {rt.tier = "nvme"}) attributes {rt.arena_bytes = 8192 : i64} {
    %c0 = arith.constant 0 : index
    %m = memref.view %tier[%c0][] {rt.name = "w", rt.role = "moment1", rt.tier = "nvme"} : memref<4096xi8> to memref<64xf32>
    %s = memref.view %arena[%c0][] : memref<8192xi8> to memref<64xf32>
    // CHECK: rt.tier_read %{{.*}}, %{{.*}} label = "moment1 w"
    rt.tier_read %m, %s label = "moment1 w" : memref<64xf32>, memref<64xf32>
    return
  }
}
