// RUN: partition-opt %s -split-input-file -verify-diagnostics --rt-offload-optimizer="tier=nvme path=/scratch buffer-bytes=24576"
// RUN: not partition-opt %s -split-input-file --rt-offload-optimizer="tier=disk" 2>&1 | FileCheck %s --check-prefix=TIER
// RUN: not partition-opt %s -split-input-file --rt-offload-optimizer="tier=host buffer-bytes=4096" 2>&1 | FileCheck %s --check-prefix=SMALL
// RUN: not partition-opt %s -split-input-file --rt-offload-optimizer="tier=nvme" 2>&1 | FileCheck %s --check-prefix=PATH

// One case per error of --rt-offload-optimizer: its options, a moment it
// cannot stage, a step with nothing to offload.

// TIER: error: --rt-offload-optimizer: tier must be none, host or nvme, not 'disk'
// SMALL: error: --rt-offload-optimizer: buffer-bytes 4096 is below 24576, three 4096-byte slices of both moments
// PATH: error: --rt-offload-optimizer: the nvme tier needs path, the directory of the offload files

// A moment read by something other than its adamw.
func.func @other_use(%w: memref<64xf32> {rt.role = "param", rt.name = "w"},
                     %m: memref<64xf32> {rt.role = "moment1", rt.name = "w"},
                     %v: memref<64xf32> {rt.role = "moment2", rt.name = "w"},
                     %x: memref<64xf32> {rt.role = "tokens"}) {
  // expected-error @+1 {{'rt.kernel' op uses an AdamW moment, which --rt-offload-optimizer moves to the nvme tier: only an adamw kernel that updates both moments in place can be staged}}
  rt.kernel "gelu" ins(%m : memref<64xf32>) outs(%x : memref<64xf32>)
  return
}

// -----

// An adamw whose moments are written elsewhere.
func.func @not_in_place(%w: memref<64xf32> {rt.role = "param", rt.name = "w"},
                        %g: memref<64xf32> {rt.role = "tokens"},
                        %m: memref<64xf32> {rt.role = "moment1", rt.name = "w"},
                        %v: memref<64xf32> {rt.role = "moment2", rt.name = "w"},
                        %t: memref<i32> {rt.role = "step"}, %lr: memref<f32> {rt.role = "lr"}) {
  %m2 = memref.alloc() : memref<64xf32>
  // expected-error @+1 {{'rt.kernel' op uses an AdamW moment, which --rt-offload-optimizer moves to the nvme tier: only an adamw kernel that updates both moments in place can be staged}}
  rt.kernel "adamw" ins(%w, %g, %m, %v, %t, %lr : memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<i32>, memref<f32>) outs(%w, %m2, %v : memref<64xf32>, memref<64xf32>, memref<64xf32>) floats = [0.9, 0.95, 1.0e-08, 0.1]
  return
}

// -----

// A moment updated twice in one step.
func.func @twice(%w: memref<64xf32> {rt.role = "param", rt.name = "w"},
                 %g: memref<64xf32> {rt.role = "tokens"},
                 %m: memref<64xf32> {rt.role = "moment1", rt.name = "w"},
                 %v: memref<64xf32> {rt.role = "moment2", rt.name = "w"},
                 %t: memref<i32> {rt.role = "step"}, %lr: memref<f32> {rt.role = "lr"}) {
  rt.kernel "adamw" ins(%w, %g, %m, %v, %t, %lr : memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<i32>, memref<f32>) outs(%w, %m, %v : memref<64xf32>, memref<64xf32>, memref<64xf32>) floats = [0.9, 0.95, 1.0e-08, 0.1]
  // expected-error @+1 {{'rt.kernel' op updates a moment that an earlier adamw of @twice updates too; each moment is staged once per step}}
  rt.kernel "adamw" ins(%w, %g, %m, %v, %t, %lr : memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<i32>, memref<f32>) outs(%w, %m, %v : memref<64xf32>, memref<64xf32>, memref<64xf32>) floats = [0.9, 0.95, 1.0e-08, 0.1]
  return
}

// -----

// expected-error @below {{--rt-offload-optimizer: the step has no AdamW moments to offload (compiled with --optimizer none?); leave out offload.optimizer}}
module {
  func.func @no_optimizer(%w: memref<64xf32> {rt.role = "param", rt.name = "w"},
                          %g: memref<64xf32> {rt.role = "gradient", rt.name = "w"}) {
    rt.kernel "copy" ins(%w : memref<64xf32>) outs(%g : memref<64xf32>)
    return
  }
}
