// RUN: rm -rf %t && mkdir -p %t
// RUN: partition-opt %s --rt-offload-optimizer="tier=nvme path=/scratch buffer-bytes=24576" --lower-memory-plan | partition-translate --rt-to-program -o %t/program.ptp
// RUN: %python %S/../tools/Inputs/ptp-dump.py %S/../.. %t/program.ptp | FileCheck %s

// The program of an offloaded step (format 12): the stream's NVMe tier,
// the moments in it at whole 4096-byte blocks (their slices too), the tier
// copies with their labels, started and waited for by index, and the
// directory of the files.

// CHECK:      schema_version 16
// CHECK-NEXT: arena_bytes 45056
// CHECK-NEXT: nvme_bytes 24576
// CHECK-NEXT: buffer #0 Param F32 2x1024 @0 "w"
// CHECK-NEXT: buffer #1 Param F32 64 @8192 "b"
// CHECK-NEXT: buffer #2 Moment1 F32 2x1024 @0 "w" tier nvme
// CHECK-NEXT: buffer #3 Moment1 F32 64 @8192 "b" tier nvme
// CHECK-NEXT: buffer #4 Moment2 F32 2x1024 @12288 "w" tier nvme
// CHECK-NEXT: buffer #5 Moment2 F32 64 @20480 "b" tier nvme
// b's update moves up to its gradient (the first fill), so its moments are
// read first.
// CHECK:      function train_step
// CHECK-NEXT: tier_read [3, {{[0-9]+}}] label "moment1 b" started
// CHECK:      tier_read [{{[0-9]+}}, {{[0-9]+}}] label "moment1 w [0, 1024)" started
// CHECK:      wait #0
// CHECK:      adamw
// CHECK-NEXT: tier_write [{{[0-9]+}}, 3] label "moment1 b" started
// CHECK:      wait #3
// CHECK:      adamw
// CHECK-NEXT: tier_write [{{[0-9]+}}, {{[0-9]+}}] label "moment1 w [0, 1024)" started
// CHECK:      offload_path /scratch

module {
  func.func @train_step(%w: memref<2x1024xf32> {rt.role = "param", rt.name = "w"},
                        %b: memref<64xf32> {rt.role = "param", rt.name = "b"},
                        %mw: memref<2x1024xf32> {rt.role = "moment1", rt.name = "w"},
                        %mb: memref<64xf32> {rt.role = "moment1", rt.name = "b"},
                        %vw: memref<2x1024xf32> {rt.role = "moment2", rt.name = "w"},
                        %vb: memref<64xf32> {rt.role = "moment2", rt.name = "b"},
                        %t: memref<i32> {rt.role = "step"}, %lr: memref<f32> {rt.role = "lr"},
                        %x: memref<1x64xi32> {rt.role = "tokens"}, %y: memref<1x64xi32> {rt.role = "targets"},
                        %loss: memref<f32> {rt.role = "loss"}) {
    %gb = memref.alloc() : memref<64xf32>
    rt.kernel "fill" outs(%gb : memref<64xf32>) floats = [1.0]
    %gw = memref.alloc() : memref<2x1024xf32>
    rt.kernel "fill" outs(%gw : memref<2x1024xf32>) floats = [1.0]
    rt.kernel "adamw" ins(%w, %gw, %mw, %vw, %t, %lr : memref<2x1024xf32>, memref<2x1024xf32>, memref<2x1024xf32>, memref<2x1024xf32>, memref<i32>, memref<f32>) outs(%w, %mw, %vw : memref<2x1024xf32>, memref<2x1024xf32>, memref<2x1024xf32>) floats = [0.9, 0.95, 1.0e-08, 0.1]
    rt.kernel "adamw" ins(%b, %gb, %mb, %vb, %t, %lr : memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<i32>, memref<f32>) outs(%b, %mb, %vb : memref<64xf32>, memref<64xf32>, memref<64xf32>) floats = [0.9, 0.95, 1.0e-08, 0.0]
    return
  }
}
