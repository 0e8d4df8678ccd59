// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error of the tier transfers' verifiers (RtTiers.cpp), of
// rt.tier and rt.offload_path (RtDialect.cpp), of a kernel or collective
// on a tiered buffer, and of a started transfer's wait.

func.func @read_from_arena(%m: memref<64xf32>, %s: memref<64xf32>) {
  // expected-error @+1 {{'rt.tier_read' op the source must live in a tier (a buffer marked rt.tier, or a view of one)}}
  rt.tier_read %m, %s label = "m" : memref<64xf32>, memref<64xf32>
  return
}

// -----

func.func @write_to_arena(%m: memref<64xf32>, %s: memref<64xf32>) {
  // expected-error @+1 {{'rt.tier_write' op the destination must live in a tier (a buffer marked rt.tier, or a view of one)}}
  rt.tier_write %s, %m label = "m" : memref<64xf32>, memref<64xf32>
  return
}

// -----

func.func @stage_in_a_tier(%m: memref<64xf32> {rt.tier = "nvme"}, %s: memref<64xf32> {rt.tier = "host"}) {
  // expected-error @+1 {{'rt.tier_read' op the destination lives in the host tier; it must be a staging buffer of the arena}}
  rt.tier_read %m, %s label = "m" : memref<64xf32>, memref<64xf32>
  return
}

// -----

func.func @sizes(%m: memref<64xf32> {rt.tier = "nvme"}, %s: memref<32xf32>) {
  // expected-error @+1 {{'rt.tier_read' op moves 'memref<64xf32>' into 'memref<32xf32>': both must have one element type and as many elements}}
  rt.tier_read %m, %s label = "m" : memref<64xf32>, memref<32xf32>
  return
}

// -----

func.func @types(%m: memref<64xf32> {rt.tier = "nvme"}, %s: memref<64xi32>) {
  // expected-error @+1 {{'rt.tier_write' op moves 'memref<64xi32>' into 'memref<64xf32>': both must have one element type and as many elements}}
  rt.tier_write %s, %m label = "m" : memref<64xi32>, memref<64xf32>
  return
}

// -----

func.func @strided(%m: memref<8x8xf32> {rt.tier = "nvme"}, %s: memref<8x4xf32>) {
  %half = memref.subview %m[0, 0] [8, 4] [1, 1] : memref<8x8xf32> to memref<8x4xf32, strided<[8, 1]>>
  // expected-error @+1 {{'rt.tier_read' op source 'memref<8x4xf32, strided<[8, 1]>>' must be f32, bf16 or i32 with a static shape and a contiguous row-major layout (the runtime moves whole byte ranges)}}
  rt.tier_read %half, %s label = "m" : memref<8x4xf32, strided<[8, 1]>>, memref<8x4xf32>
  return
}

// -----

func.func @label(%m: memref<64xf32> {rt.tier = "nvme"}, %s: memref<64xf32>) {
  // expected-error @+1 {{'rt.tier_read' op must have a non-empty label}}
  rt.tier_read %m, %s label = "" : memref<64xf32>, memref<64xf32>
  return
}

// -----

func.func @never_waited(%m: memref<64xf32> {rt.tier = "nvme"}, %s: memref<64xf32>) {
  // expected-error @+1 {{'rt.tier_read' op is async: its token must be waited for by exactly one rt.wait and used nowhere else, but has 0 rt.wait and 0 other uses}}
  %t = rt.tier_read async %m, %s label = "m" : memref<64xf32>, memref<64xf32>
  return
}

// -----

// The staging buffer belongs to the read until its wait.
func.func @staging_used_early(%m: memref<64xf32> {rt.tier = "nvme"}, %s: memref<64xf32>, %x: memref<64xf32>) {
  // expected-note @+1 {{the tier transfer starts here}}
  %t = rt.tier_read async %m, %s label = "m" : memref<64xf32>, memref<64xf32>
  // expected-error @+1 {{'rt.kernel' op uses a buffer of an async tier transfer before its rt.wait}}
  rt.kernel "gelu" ins(%s : memref<64xf32>) outs(%x : memref<64xf32>)
  // expected-note @+1 {{and is waited for here}}
  rt.wait %t, %m, %s : memref<64xf32>, memref<64xf32>
  return
}

// -----

// Overlapping slices of one tiered buffer conflict (disjoint ones do not:
// rt_tier_ops.mlir).
func.func @overlapping_slices(%m: memref<2048xf32> {rt.tier = "nvme"}, %a: memref<1024xf32>, %b: memref<1024xf32>) {
  %m0 = memref.subview %m[0] [1024] [1] : memref<2048xf32> to memref<1024xf32, strided<[1]>>
  %m1 = memref.subview %m[512] [1024] [1] : memref<2048xf32> to memref<1024xf32, strided<[1], offset: 512>>
  // expected-note @+1 {{the tier transfer starts here}}
  %t = rt.tier_write async %a, %m0 label = "m0" : memref<1024xf32>, memref<1024xf32, strided<[1]>>
  // expected-error @+1 {{'rt.tier_read' op uses a buffer of an async tier transfer before its rt.wait}}
  rt.tier_read %m1, %b label = "m1" : memref<1024xf32, strided<[1], offset: 512>>, memref<1024xf32>
  // expected-note @+1 {{and is waited for here}}
  rt.wait %t, %a, %m0 : memref<1024xf32>, memref<1024xf32, strided<[1]>>
  return
}

// -----

func.func @kernel_on_tier(%m: memref<64xf32> {rt.tier = "nvme"}, %x: memref<64xf32>) {
  // expected-error @+1 {{'rt.kernel' op operand #0 lives in the nvme tier (rt.tier); kernels and collectives run on the arena: stage it through rt.tier_read and rt.tier_write}}
  rt.kernel "gelu" ins(%m : memref<64xf32>) outs(%x : memref<64xf32>)
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

func.func @collective_on_tier(%m: memref<64xf32> {rt.tier = "host"}) {
  // expected-error @+1 {{'rt.all_reduce' op operand #0 lives in the host tier (rt.tier); kernels and collectives run on the arena: stage it through rt.tier_read and rt.tier_write}}
  rt.all_reduce %m on @mesh axes [dp] reduce = sum label = "g" : memref<64xf32>
  return
}

// -----

// expected-error @+1 {{'rt.tier' on argument #0 must be "host" or "nvme", but is "disk"}}
func.func @unknown_tier(%m: memref<64xf32> {rt.tier = "disk"}) {
  return
}

// -----

func.func @path_on_function() attributes {rt.offload_path = "/scratch"} {
  return
}
// expected-error @-3 {{'rt.offload_path' must be a non-empty string on the module, but is "/scratch"}}

// -----

// expected-error @+1 {{'rt.offload_path' must be a non-empty string on the module, but is ""}}
module attributes {rt.offload_path = ""} {
}
