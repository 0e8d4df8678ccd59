// RUN: partition-opt %s -split-input-file --rt-overlap-collectives | FileCheck %s
// RUN: partition-opt %s -split-input-file --rt-overlap-collectives="max-in-flight=1" | FileCheck %s --check-prefix=ONE
// RUN: partition-opt %s -split-input-file --rt-overlap-collectives="max-bytes-in-flight=300" | FileCheck %s --check-prefix=BYTES
// RUN: partition-opt %s -split-input-file --rt-overlap-collectives="tensor-parallel=true data-parallel=false" | FileCheck %s --check-prefix=TP

// --rt-overlap-collectives: each data-parallel all-reduce starts right after
// the last op that touches its buffers and is waited for right before the
// next; tensor-parallel ones and everything else stay where they are.

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]

  // CHECK-LABEL: func.func @buckets
  // ONE-LABEL: func.func @buckets
  // BYTES-LABEL: func.func @buckets
  func.func @buckets(%x: memref<16xf32>, %w: memref<16xf32>) {
    %g0 = memref.alloc() : memref<16xf32>
    %g1 = memref.alloc() : memref<16xf32>
    %a = memref.alloc() : memref<16xf32>
    %h = memref.alloc() : memref<16xf32>
    // CHECK: rt.kernel "gelu" ins(%{{.*}} : memref<16xf32>) outs(%[[G1:[^ ,]+]] : memref<16xf32>)
    // CHECK-NEXT: %[[T1:[^ ,]+]] = rt.all_reduce async %[[G1]] on @mesh axes [dp] reduce = avg label = "gradient bucket 0"
    rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%g1 : memref<16xf32>)
    // CHECK-NEXT: rt.kernel "gelu" ins(%{{.*}} : memref<16xf32>) outs(%[[A:[^ ,]+]] : memref<16xf32>)
    rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
    // A tensor-parallel all-reduce stays synchronous, where it was.
    // CHECK-NEXT: rt.all_reduce %[[A]] on @mesh axes [tp] reduce = sum label = "tp"
    rt.all_reduce %a on @mesh axes [tp] reduce = sum label = "tp" : memref<16xf32>
    // CHECK-NEXT: rt.kernel "gelu" ins(%[[A]] : memref<16xf32>) outs(%[[G0:[^ ,]+]] : memref<16xf32>)
    // CHECK-NEXT: %[[T0:[^ ,]+]] = rt.all_reduce async %[[G0]] on @mesh axes [dp] reduce = avg label = "gradient bucket 1"
    rt.kernel "gelu" ins(%a : memref<16xf32>) outs(%g0 : memref<16xf32>)
    // CHECK-NEXT: rt.kernel "gelu" ins(%[[A]] : memref<16xf32>) outs(%[[H:[^ ,]+]] : memref<16xf32>)
    rt.kernel "gelu" ins(%a : memref<16xf32>) outs(%h : memref<16xf32>)
    rt.all_reduce %g1 on @mesh axes [dp] reduce = avg label = "gradient bucket 0" : memref<16xf32>
    rt.all_reduce %g0 on @mesh axes [dp] reduce = avg label = "gradient bucket 1" : memref<16xf32>
    // CHECK-NEXT: rt.kernel "gelu" ins(%[[H]] : memref<16xf32>) outs(%[[A]] : memref<16xf32>)
    rt.kernel "gelu" ins(%h : memref<16xf32>) outs(%a : memref<16xf32>)
    // Waited for where first read; the first wait and its reader then sink
    // below the second wait, which touches neither (both adds write %w, so
    // they keep their order).
    // CHECK-NEXT: rt.wait %[[T1]], %[[G1]] : memref<16xf32>
    // CHECK-NEXT: rt.wait %[[T0]], %[[G0]] : memref<16xf32>
    // CHECK-NEXT: rt.kernel "add" ins(%[[W:[^ ,]+]], %[[G0]] : memref<16xf32>, memref<16xf32>) outs(%[[W]] : memref<16xf32>)
    rt.kernel "add" ins(%w, %g0 : memref<16xf32>, memref<16xf32>) outs(%w : memref<16xf32>)
    // CHECK-NEXT: rt.kernel "add" ins(%[[W]], %[[G1]] : memref<16xf32>, memref<16xf32>) outs(%[[W]] : memref<16xf32>)
    rt.kernel "add" ins(%w, %g1 : memref<16xf32>, memref<16xf32>) outs(%w : memref<16xf32>)
    return
  }
  // One in flight: bucket 0 is waited for before bucket 1 starts.
  // ONE: %[[T1:[^ ,]+]] = rt.all_reduce async %[[G1:[^ ,]+]] on @mesh axes [dp] reduce = avg label = "gradient bucket 0"
  // ONE: rt.all_reduce %{{.*}} on @mesh axes [tp]
  // ONE-NEXT: rt.kernel "gelu"
  // ONE-NEXT: rt.wait %[[T1]], %[[G1]] : memref<16xf32>
  // ONE-NEXT: %[[T0:[^ ,]+]] = rt.all_reduce async %[[G0:[^ ,]+]] on @mesh axes [dp] reduce = avg label = "gradient bucket 1"
  // ONE: rt.wait %[[T0]], %[[G0]] : memref<16xf32>
  // ONE-NOT: rt.wait
  // ONE-LABEL: func.func @program_order
  // 64 bytes each, within 300 bytes: the same as without a bound.
  // BYTES: rt.kernel "gelu" ins(%{{.*}} : memref<16xf32>) outs(%[[G0:[^ ,]+]] : memref<16xf32>)
  // BYTES-NEXT: rt.all_reduce async %[[G0]]
}

// -----

// The start never moves above the previous start (starts stay in program
// order on every rank), nor above the op that defines its buffer.
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

  // CHECK-LABEL: func.func @program_order
  func.func @program_order(%x: memref<16xf32>, %y: memref<16xf32>, %z: memref<16xf32>) {
    // CHECK: rt.kernel "gelu" ins(%{{.*}} : memref<16xf32>) outs(%[[Y:[^ ,]+]] : memref<16xf32>)
    rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%y : memref<16xf32>)
    // CHECK-NEXT: %[[T0:[^ ,]+]] = rt.all_reduce async %[[Y]] {{.*}} label = "first"
    // CHECK-NEXT: %[[T1:[^ ,]+]] = rt.all_reduce async %[[X:[^ ,]+]] {{.*}} label = "second"
    rt.all_reduce %y on @mesh axes [dp] reduce = sum label = "first" : memref<16xf32>
    rt.all_reduce %x on @mesh axes [dp] reduce = sum label = "second" : memref<16xf32>
    // CHECK-NEXT: rt.wait %[[T0]], %[[Y]]
    // CHECK-NEXT: rt.kernel "gelu"
    rt.kernel "gelu" ins(%y : memref<16xf32>) outs(%z : memref<16xf32>)
    // At the end of the function when nothing reads it again.
    // CHECK-NEXT: rt.wait %[[T1]], %[[X]]
    // CHECK-NEXT: return
    return
  }
}

// -----

// The update of a bucket started last (the tied embedding's: its gradient
// is complete last, and AdamW updates it first) sinks with its wait below
// the updates that commute with it, so that the other buckets' AdamW runs
// while it is reduced.
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

  // CHECK-LABEL: func.func @tied_embedding_last
  func.func @tied_embedding_last(%wte: memref<16xf32>, %w: memref<16xf32>, %x: memref<16xf32>) {
    %gw = memref.alloc() : memref<16xf32>
    %gwte = memref.alloc() : memref<16xf32>
    rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%gw : memref<16xf32>)
    rt.all_reduce %gw on @mesh axes [dp] reduce = avg label = "bucket 0" : memref<16xf32>
    rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%gwte : memref<16xf32>)
    rt.all_reduce %gwte on @mesh axes [dp] reduce = avg label = "bucket 1" : memref<16xf32>
    // Both updates read %x: reads commute.
    // CHECK:      %[[T1:[^ ,]+]] = rt.all_reduce async %[[GWTE:[^ ,]+]] {{.*}} label = "bucket 1"
    // CHECK-NEXT: rt.wait %{{[^ ,]+}}, %[[GW:[^ ,]+]] : memref<16xf32>
    // CHECK-NEXT: rt.kernel "add" ins(%[[GW]], %{{[^ ,]+}} : memref<16xf32>, memref<16xf32>) outs(%{{[^ ,]+}} : memref<16xf32>)
    // CHECK-NEXT: rt.wait %[[T1]], %[[GWTE]] : memref<16xf32>
    // CHECK-NEXT: rt.kernel "add" ins(%[[GWTE]], %{{[^ ,]+}} : memref<16xf32>, memref<16xf32>) outs(%{{[^ ,]+}} : memref<16xf32>)
    // CHECK-NEXT: return
    rt.kernel "add" ins(%gwte, %x : memref<16xf32>, memref<16xf32>) outs(%wte : memref<16xf32>)
    rt.kernel "add" ins(%gw, %x : memref<16xf32>, memref<16xf32>) outs(%w : memref<16xf32>)
    return
  }
}

// -----

// ZeRO-1/2: the reduce-scatter of a gradient bucket starts right after the
// kernel that packs the bucket and is waited for where AdamW reads its
// shard; the all-gather of the updated shard starts right after AdamW, and
// its wait, with the copy of the gathered bucket into the parameter, sinks
// below the next bucket's update, up to the next start (so that the
// gathered buckets do not all live until the end of the step); the last
// is waited for at the end.
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 2, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

  // CHECK-LABEL: func.func @zero
  // ONE-LABEL: func.func @zero
  func.func @zero(%x: memref<2x8xf32>, %p: memref<2x8xf32>, %q: memref<1x8xf32>, %r1: memref<1x8xf32>) {
    %b = memref.alloc() : memref<2x8xf32>
    %h = memref.alloc() : memref<2x8xf32>
    %h2 = memref.alloc() : memref<2x8xf32>
    %r = memref.alloc() : memref<1x8xf32>
    %u = memref.alloc() : memref<1x8xf32>
    %u1 = memref.alloc() : memref<1x8xf32>
    %all = memref.alloc() : memref<2x8xf32>
    %all1 = memref.alloc() : memref<2x8xf32>
    // CHECK: rt.kernel "gelu" ins(%{{.*}} : memref<2x8xf32>) outs(%[[B:[^ ,]+]] : memref<2x8xf32>)
    // CHECK-NEXT: %[[RS:[^ ,]+]] = rt.reduce_scatter async %[[B]], %[[R:[^ ,]+]] on @mesh axes [dp] dim = 0 reduce = avg label = "bucket 0"
    // CHECK-NEXT: rt.kernel "gelu"
    // CHECK-NEXT: rt.kernel "gelu"
    // CHECK-NEXT: rt.wait %[[RS]], %[[B]], %[[R]] : memref<2x8xf32>, memref<1x8xf32>
    // CHECK-NEXT: rt.kernel "add" ins(%[[R]], %{{[^ ,]+}} : {{.*}}) outs(%[[U:[^ ,]+]] : memref<1x8xf32>)
    // CHECK-NEXT: %[[AG:[^ ,]+]] = rt.all_gather async %[[U]], %[[ALL:[^ ,]+]] on @mesh axes [dp] dim = 0 label = "bucket 0 (updated)"
    // CHECK-NEXT: rt.kernel "add" ins(%{{[^ ,]+}}, %{{[^ ,]+}} : {{.*}}) outs(%[[U1:[^ ,]+]] : memref<1x8xf32>)
    // CHECK-NEXT: rt.wait %[[AG]], %[[U]], %[[ALL]]
    // CHECK-NEXT: rt.kernel "gelu" ins(%[[ALL]] : memref<2x8xf32>)
    // CHECK-NEXT: %[[AG1:[^ ,]+]] = rt.all_gather async %[[U1]], %[[ALL1:[^ ,]+]] on @mesh axes [dp] dim = 0 label = "bucket 1 (updated)"
    // CHECK-NEXT: rt.wait %[[AG1]], %[[U1]], %[[ALL1]]
    // CHECK-NEXT: rt.kernel "gelu" ins(%[[ALL1]] : memref<2x8xf32>)
    // CHECK-NEXT: return
    rt.kernel "gelu" ins(%x : memref<2x8xf32>) outs(%b : memref<2x8xf32>)
    rt.kernel "gelu" ins(%x : memref<2x8xf32>) outs(%h : memref<2x8xf32>)
    rt.kernel "gelu" ins(%h : memref<2x8xf32>) outs(%h2 : memref<2x8xf32>)
    rt.reduce_scatter %b, %r on @mesh axes [dp] dim = 0 reduce = avg label = "bucket 0" : memref<2x8xf32>, memref<1x8xf32>
    rt.kernel "add" ins(%r, %q : memref<1x8xf32>, memref<1x8xf32>) outs(%u : memref<1x8xf32>)
    rt.all_gather %u, %all on @mesh axes [dp] dim = 0 label = "bucket 0 (updated)" : memref<1x8xf32>, memref<2x8xf32>
    rt.kernel "gelu" ins(%all : memref<2x8xf32>) outs(%p : memref<2x8xf32>)
    rt.kernel "add" ins(%r1, %q : memref<1x8xf32>, memref<1x8xf32>) outs(%u1 : memref<1x8xf32>)
    rt.all_gather %u1, %all1 on @mesh axes [dp] dim = 0 label = "bucket 1 (updated)" : memref<1x8xf32>, memref<2x8xf32>
    rt.kernel "gelu" ins(%all1 : memref<2x8xf32>) outs(%x : memref<2x8xf32>)
    return
  }
  // One in flight: the same here (bucket 0's gather is waited for before
  // bucket 1's starts either way).
  // ONE: rt.all_gather async
  // ONE-NEXT: rt.kernel "add"
  // ONE-NEXT: rt.wait
  // ONE-NEXT: rt.kernel "gelu"
  // ONE-NEXT: rt.all_gather async
}

// -----

// tensor-parallel=true: the input gradient's sum over tp starts right after
// the kernel that computes it and is waited for where it is read, after
// the weight gradient's kernel; a sum read right after it stays blocking.
// With data-parallel=false the data axis is left alone.
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]

  // By default only the data axis: the bucket.
  // CHECK-LABEL: func.func @tensor_parallel
  // CHECK-NOT: async {{.*}} axes [tp]
  // CHECK: rt.all_reduce async {{.*}} axes [dp]
  // CHECK-NOT: async {{.*}} axes [tp]
  // CHECK: return
  // TP-LABEL: func.func @tensor_parallel
  func.func @tensor_parallel(%x: memref<16xf32>, %dy: memref<16xf32>) {
    %dx = memref.alloc() : memref<16xf32>
    %dw = memref.alloc() : memref<16xf32>
    %y = memref.alloc() : memref<16xf32>
    %a = memref.alloc() : memref<16xf32>
    %b = memref.alloc() : memref<16xf32>
    // TP:      rt.kernel "gelu" ins(%{{.*}} : memref<16xf32>) outs(%[[DX:[^ ,]+]] : memref<16xf32>)
    // TP-NEXT: %[[T:[^ ,]+]] = rt.all_reduce async %[[DX]] on @mesh axes [tp] reduce = sum label = "input gradient"
    // TP-NEXT: rt.kernel "gelu" ins(%{{.*}} : memref<16xf32>) outs(%[[DW:[^ ,]+]] : memref<16xf32>)
    // TP-NEXT: rt.wait %[[T]], %[[DX]] : memref<16xf32>
    // TP-NEXT: rt.kernel "gelu" ins(%[[DX]] : memref<16xf32>)
    rt.kernel "gelu" ins(%dy : memref<16xf32>) outs(%dx : memref<16xf32>)
    rt.all_reduce %dx on @mesh axes [tp] reduce = sum label = "input gradient" : memref<16xf32>
    rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%dw : memref<16xf32>)
    rt.kernel "gelu" ins(%dx : memref<16xf32>) outs(%y : memref<16xf32>)
    // TP-NEXT: rt.kernel "gelu"
    // TP-NEXT: rt.all_reduce %{{[^ ]+}} on @mesh axes [tp] reduce = sum label = "read right after"
    // TP-NEXT: rt.kernel "gelu"
    rt.kernel "gelu" ins(%y : memref<16xf32>) outs(%a : memref<16xf32>)
    rt.all_reduce %a on @mesh axes [tp] reduce = sum label = "read right after" : memref<16xf32>
    rt.kernel "gelu" ins(%a : memref<16xf32>) outs(%b : memref<16xf32>)
    // TP-NEXT: rt.all_reduce %{{[^ ]+}} on @mesh axes [dp] reduce = avg label = "bucket"
    rt.all_reduce %dw on @mesh axes [dp] reduce = avg label = "bucket" : memref<16xf32>
    // TP-NEXT: return
    return
  }
}

// -----

// Without a plan (or a data axis) nothing changes.
dist.mesh @mesh axes = [dp = 2]

// CHECK-LABEL: func.func @no_plan
func.func @no_plan(%x: memref<16xf32>) {
  // CHECK-NEXT: rt.all_reduce %{{.*}} on @mesh axes [dp]
  rt.all_reduce %x on @mesh axes [dp] reduce = sum label = "b" : memref<16xf32>
  return
}

// -----

// ZeRO's per-tensor reduce-scatters are each waited for where their chunk
// is first read, so waits need not come in start order: when "b" starts,
// "g1" is already waited for (before its reader) though "g0", started
// first, is not. Over the byte bound, "g0"'s wait moves up to "b"'s start;
// "g1"'s stays before its reader (the two sink together below the kernel
// that commutes with them, as far as "g0"'s wait), never below it.
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 2, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

  // BYTES-LABEL: func.func @waits_out_of_start_order
  func.func @waits_out_of_start_order(%x: memref<16xf32>, %y: memref<64xf32>) {
    %g0 = memref.alloc() : memref<16xf32>
    %g1 = memref.alloc() : memref<16xf32>
    %c0 = memref.alloc() : memref<8xf32>
    %c1 = memref.alloc() : memref<8xf32>
    %u = memref.alloc() : memref<8xf32>
    %big = memref.alloc() : memref<64xf32>
    %cbig = memref.alloc() : memref<32xf32>
    %cbig2 = memref.alloc() : memref<32xf32>
    // BYTES:      %[[T0:[^ ]+]] = rt.reduce_scatter async %[[G0:[^ ,]+]], %[[C0:[^ ]+]] on {{.*}} label = "g0"
    // BYTES-NEXT: rt.kernel "gelu" ins(%{{.*}} : memref<16xf32>) outs(%[[G1:[^ ]+]] : memref<16xf32>)
    // BYTES-NEXT: %[[T1:[^ ]+]] = rt.reduce_scatter async %[[G1]], %[[C1:[^ ]+]] on {{.*}} label = "g1"
    // BYTES-NEXT: rt.kernel "gelu" ins(%{{.*}} : memref<64xf32>)
    // BYTES-NEXT: rt.wait %[[T0]], %[[G0]], %[[C0]]
    // BYTES-NEXT: rt.wait %[[T1]], %[[G1]], %[[C1]]
    // BYTES-NEXT: rt.kernel "gelu" ins(%[[C1]] : memref<8xf32>)
    // BYTES-NEXT: rt.reduce_scatter async {{.*}} label = "b"
    // BYTES-NEXT: rt.kernel "gelu" ins(%[[C0]] : memref<8xf32>)
    rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%g0 : memref<16xf32>)
    rt.reduce_scatter %g0, %c0 on @mesh axes [dp] dim = 0 reduce = sum label = "g0" : memref<16xf32>, memref<8xf32>
    rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%g1 : memref<16xf32>)
    rt.reduce_scatter %g1, %c1 on @mesh axes [dp] dim = 0 reduce = sum label = "g1" : memref<16xf32>, memref<8xf32>
    rt.kernel "gelu" ins(%c1 : memref<8xf32>) outs(%u : memref<8xf32>)
    rt.kernel "gelu" ins(%y : memref<64xf32>) outs(%big : memref<64xf32>)
    rt.reduce_scatter %big, %cbig on @mesh axes [dp] dim = 0 reduce = sum label = "b" : memref<64xf32>, memref<32xf32>
    rt.kernel "gelu" ins(%c0 : memref<8xf32>) outs(%u : memref<8xf32>)
    rt.kernel "gelu" ins(%cbig : memref<32xf32>) outs(%cbig2 : memref<32xf32>)
    return
  }
}

// -----

// max-in-flight counts a bucket's per-tensor collectives (their `bucket`,
// lowering/FlatBuckets.h) as one: with one in flight, both
// of bucket 0's reduce-scatters run at once, and bucket 1's waits for them.
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 2, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]

  // ONE-LABEL: func.func @bucket_counts_once
  func.func @bucket_counts_once(%x: memref<16xf32>) {
    %g0 = memref.alloc() : memref<16xf32>
    %g1 = memref.alloc() : memref<16xf32>
    %g2 = memref.alloc() : memref<16xf32>
    %c0 = memref.alloc() : memref<8xf32>
    %c1 = memref.alloc() : memref<8xf32>
    %c2 = memref.alloc() : memref<8xf32>
    %u = memref.alloc() : memref<8xf32>
    // ONE:      %[[T0:[^ ]+]] = rt.reduce_scatter async %[[G0:[^ ,]+]], %[[C0:[^ ]+]] on {{.*}} label = "bucket 0 #0"
    // ONE-NEXT: rt.kernel "gelu"
    // ONE-NEXT: %[[T1:[^ ]+]] = rt.reduce_scatter async %[[G1:[^ ,]+]], %[[C1:[^ ]+]] on {{.*}} label = "bucket 0 #1"
    // ONE-NEXT: rt.kernel "gelu"
    // ONE-NEXT: rt.wait %[[T0]], %[[G0]], %[[C0]]
    // ONE-NEXT: rt.wait %[[T1]], %[[G1]], %[[C1]]
    // ONE-NEXT: rt.reduce_scatter async {{.*}} label = "bucket 1"
    rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%g0 : memref<16xf32>)
    rt.reduce_scatter %g0, %c0 on @mesh axes [dp] dim = 0 reduce = sum label = "bucket 0 #0" bucket = "bucket 0" : memref<16xf32>, memref<8xf32>
    rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%g1 : memref<16xf32>)
    rt.reduce_scatter %g1, %c1 on @mesh axes [dp] dim = 0 reduce = sum label = "bucket 0 #1" bucket = "bucket 0" : memref<16xf32>, memref<8xf32>
    rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%g2 : memref<16xf32>)
    rt.reduce_scatter %g2, %c2 on @mesh axes [dp] dim = 0 reduce = sum label = "bucket 1" : memref<16xf32>, memref<8xf32>
    rt.kernel "gelu" ins(%c0 : memref<8xf32>) outs(%u : memref<8xf32>)
    rt.kernel "gelu" ins(%c1 : memref<8xf32>) outs(%u : memref<8xf32>)
    rt.kernel "gelu" ins(%c2 : memref<8xf32>) outs(%u : memref<8xf32>)
    return
  }
}
