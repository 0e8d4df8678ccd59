// RUN: partition-opt %s -split-input-file -verify-diagnostics --rt-offload-optimizer="tier=none parameters=nvme path=/scratch buffer-bytes=24576"
// RUN: not partition-opt %s -split-input-file --rt-offload-optimizer="tier=none parameters=disk" 2>&1 | FileCheck %s --check-prefix=TIER
// RUN: not partition-opt %s -split-input-file --rt-offload-optimizer="tier=none parameters=none" 2>&1 | FileCheck %s --check-prefix=NOTHING
// RUN: not partition-opt %s -split-input-file --rt-offload-optimizer="tier=host parameters=nvme" 2>&1 | FileCheck %s --check-prefix=PATH

// One case per error of --rt-offload-optimizer's parameter offload: its
// options, a parameter that is no ZeRO-3 shard, a shard it cannot stage, a
// step without shards.

// TIER: error: --rt-offload-optimizer: parameters must be none, host or nvme, not 'disk'
// NOTHING: error: --rt-offload-optimizer: nothing to offload (tier and parameters are both none); leave out the pass
// PATH: error: --rt-offload-optimizer: the nvme tier needs path, the directory of the offload files

// A parameter without dist.flat_shard (no ZeRO-3).
// expected-error @+1 {{parameter 'w' is no ZeRO-3 shard (no dist.flat_shard): --rt-offload-optimizer parameters=nvme offloads ZeRO-3's parameter shards; compile with zero.stage 3, or leave out offload.parameters}}
func.func @replicated(%w: memref<64xf32> {rt.role = "param", rt.name = "w"},
                      %x: memref<64xf32> {rt.role = "tokens"}) {
  return
}

// -----

// A shard read by something other than a pack or its adamw.
dist.mesh @mesh axes = [dp = 2]
func.func @other_use(%w: memref<64xf32> {rt.role = "param", rt.name = "w", dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>, shape = array<i64: 128>}},
                     %x: memref<64xf32> {rt.role = "tokens"}) {
  // expected-error @+1 {{'rt.kernel' op uses a ZeRO-3 parameter shard, which --rt-offload-optimizer moves to the nvme tier: only an adamw kernel that updates it in place and a flat_pack into a one-row bucket (the all-gather's packing) can be staged}}
  rt.kernel "gelu" ins(%w : memref<64xf32>) outs(%x : memref<64xf32>)
  return
}

// -----

// A shard all-gathered straight from the argument (--lower-to-rt's
// per-tensor gathers): nothing to stage the tier's reads into.
dist.mesh @mesh axes = [dp = 2]
func.func @direct_gather(%w: memref<64xf32> {rt.role = "param", rt.name = "w", dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>, shape = array<i64: 128>}}) {
  %whole = memref.alloc() : memref<128xf32>
  // expected-error @+1 {{'rt.all_gather' op all-gathers a ZeRO-3 parameter shard straight from the argument, which --rt-offload-optimizer moves to the nvme tier and can stage only through a pack: lower with --lower-to-rt=gather-shards-per-tensor=false (as partition-compile does when the plan offloads parameters)}}
  rt.all_gather %w, %whole on @mesh axes [dp] dim = 0 label = "parameters from w (forward) #0" : memref<64xf32>, memref<128xf32>
  return
}

// -----

// A pack into a bucket of two rows (its slices are not contiguous there).
dist.mesh @mesh axes = [dp = 2]
func.func @two_rows(%w: memref<64xf32> {rt.role = "param", rt.name = "w", dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>, shape = array<i64: 128>}}) {
  %bucket = memref.alloc() : memref<2x32xf32>
  // expected-error @+1 {{'rt.kernel' op uses a ZeRO-3 parameter shard}}
  rt.kernel "flat_pack" ins(%w : memref<64xf32>) outs(%bucket : memref<2x32xf32>) ints = [0]
  return
}

// -----

// An adamw writing the updated shard elsewhere.
dist.mesh @mesh axes = [dp = 2]
func.func @not_in_place(%w: memref<64xf32> {rt.role = "param", rt.name = "w", dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>, shape = array<i64: 128>}},
                        %g: memref<64xf32> {rt.role = "tokens"},
                        %m: memref<64xf32> {rt.role = "moment1", rt.name = "w"},
                        %v: memref<64xf32> {rt.role = "moment2", rt.name = "w"},
                        %t: memref<i32> {rt.role = "step"}, %lr: memref<f32> {rt.role = "lr"}) {
  %w2 = memref.alloc() : memref<64xf32>
  // expected-error @+1 {{'rt.kernel' op uses a ZeRO-3 parameter shard}}
  rt.kernel "adamw" ins(%w, %g, %m, %v, %t, %lr : memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<i32>, memref<f32>) outs(%w2, %m, %v : memref<64xf32>, memref<64xf32>, memref<64xf32>) floats = [0.9, 0.95, 1.0e-08, 0.1]
  return
}

// -----

// A shard updated twice in one step.
dist.mesh @mesh axes = [dp = 2]
func.func @twice(%w: memref<64xf32> {rt.role = "param", rt.name = "w", dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>, shape = array<i64: 128>}},
                 %g: memref<64xf32> {rt.role = "tokens"},
                 %m: memref<64xf32> {rt.role = "moment1", rt.name = "w"},
                 %v: memref<64xf32> {rt.role = "moment2", rt.name = "w"},
                 %t: memref<i32> {rt.role = "step"}, %lr: memref<f32> {rt.role = "lr"}) {
  rt.kernel "adamw" ins(%w, %g, %m, %v, %t, %lr : memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<i32>, memref<f32>) outs(%w, %m, %v : memref<64xf32>, memref<64xf32>, memref<64xf32>) floats = [0.9, 0.95, 1.0e-08, 0.1]
  // expected-error @+1 {{'rt.kernel' op updates a parameter shard that an earlier adamw of @twice updates too; each shard is staged once per step}}
  rt.kernel "adamw" ins(%w, %g, %m, %v, %t, %lr : memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<i32>, memref<f32>) outs(%w, %m, %v : memref<64xf32>, memref<64xf32>, memref<64xf32>) floats = [0.9, 0.95, 1.0e-08, 0.1]
  return
}

// -----

// A shard packed after its update in the same step.
dist.mesh @mesh axes = [dp = 2]
func.func @pack_after_update(%w: memref<64xf32> {rt.role = "param", rt.name = "w", dist.flat_shard = {flat = #dist.sharding<@mesh, [[dp]]>, shape = array<i64: 128>}},
                             %g: memref<64xf32> {rt.role = "tokens"},
                             %m: memref<64xf32> {rt.role = "moment1", rt.name = "w"},
                             %v: memref<64xf32> {rt.role = "moment2", rt.name = "w"},
                             %t: memref<i32> {rt.role = "step"}, %lr: memref<f32> {rt.role = "lr"}) {
  rt.kernel "adamw" ins(%w, %g, %m, %v, %t, %lr : memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<i32>, memref<f32>) outs(%w, %m, %v : memref<64xf32>, memref<64xf32>, memref<64xf32>) floats = [0.9, 0.95, 1.0e-08, 0.1]
  %bucket = memref.alloc() : memref<1x64xf32>
  // expected-error @+1 {{'rt.kernel' op packs a ZeRO-3 parameter shard after its adamw in the same step; --rt-offload-optimizer stages a shard's packs before its update only}}
  rt.kernel "flat_pack" ins(%w : memref<64xf32>) outs(%bucket : memref<1x64xf32>) ints = [0]
  return
}

// -----

// Nothing to offload: the step has no parameter shard.
// expected-error @below {{--rt-offload-optimizer: the step has no ZeRO-3 parameter shards to offload (parameters=nvme needs zero.stage 3 over dp > 1); leave out offload.parameters or give zero.stage 3}}
module {
  func.func @no_parameters(%x: memref<64xf32> {rt.role = "tokens"}) {
    return
  }
}
