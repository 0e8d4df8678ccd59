// RUN: partition-opt %s --split-input-file --lower-memory-plan | FileCheck %s
// RUN: partition-opt %s --split-input-file --lower-memory-plan=report=true -o /dev/null | FileCheck %s --check-prefix=REPORT
// The output verifies and is stable under a round trip.
// RUN: partition-opt %s --split-input-file --lower-memory-plan | partition-opt --split-input-file --verify-roundtrip > /dev/null

// --lower-memory-plan on steps with rt.all_reduce: the buffers of an
// all-reduce are live at it (read and written in place), the module's mesh
// is kept, and the report states per function the bytes each rank sends:
// 2 (N - 1) / N * S for an all-reduce of S bytes over a group of N ranks
// (a ring all-reduce), rounded down per collective.

//===----------------------------------------------------------------------===//
// Liveness
//===----------------------------------------------------------------------===//

// a is written by the first gelu and last used by the all-reduce, after b is
// written: the two are live together and do not share memory (were the
// all-reduce not a use, b would land on a and the all-reduce would reduce
// b's values).
// CHECK:       dist.mesh @mesh axes = [dp = 2]
// CHECK-LABEL: func.func @live_until_all_reduce
// CHECK-SAME:    (%[[ARENA:.*]]: memref<192xi8>) attributes {rt.arena_bytes = 192 : i64}
// CHECK:         %[[X:.*]] = memref.view %[[ARENA]][%c0{{(_[0-9]+)?}}][] {rt.name = "x", rt.role = "param"} : memref<192xi8> to memref<16xf32>
// CHECK:         %[[A:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][] : memref<192xi8> to memref<16xf32>
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[X]] : memref<16xf32>) outs(%[[A]] : memref<16xf32>)
// CHECK:         %[[B:.*]] = memref.view %[[ARENA]][%c128{{(_[0-9]+)?}}][] : memref<192xi8> to memref<16xf32>
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[X]] : memref<16xf32>) outs(%[[B]] : memref<16xf32>)
// CHECK-NEXT:    rt.all_reduce %[[A]] on @mesh axes [dp] reduce = sum label = "a" : memref<16xf32>
// CHECK-NEXT:    rt.kernel "copy" ins(%[[B]] : memref<16xf32>) outs(%[[X]] : memref<16xf32>)
// CHECK-NOT:     memref.alloc
// REPORT:        memory: arena_peak 192{{$}}
// REPORT-NEXT:   memory: arena_peak = parameters 64 + optimizer_state 0 + inputs 0 + gradients 0 + activations 128 + other_temporaries 0 + alignment_and_fragmentation 0{{$}}
// REPORT-NEXT:   communication: live_until_all_reduce sends 64 bytes per rank per step (1 all-reduce bucket, 64 bytes reduced over dp=2){{$}}
dist.mesh @mesh axes = [dp = 2]
func.func @live_until_all_reduce(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %a = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  %b = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%b : memref<16xf32>)
  rt.all_reduce %a on @mesh axes [dp] reduce = sum label = "a" : memref<16xf32>
  rt.kernel "copy" ins(%b : memref<16xf32>) outs(%x : memref<16xf32>)
  return
}

// -----

// A function whose only op is an all-reduce of its state is planned too.
// CHECK-LABEL: func.func @only_a_collective
// CHECK-SAME:    (%[[ARENA:.*]]: memref<64xi8>) attributes {rt.arena_bytes = 64 : i64}
// CHECK:         %[[G:.*]] = memref.view %[[ARENA]][%c0{{(_[0-9]+)?}}][] {rt.name = "w", rt.role = "gradient"} : memref<64xi8> to memref<4xf32>
// CHECK-NEXT:    rt.all_reduce %[[G]] on @mesh axes [dp] reduce = avg label = "g" : memref<4xf32>
// REPORT:        memory: gradients 16{{$}}
// REPORT:        communication: only_a_collective sends 24 bytes per rank per step (1 all-reduce bucket, 16 bytes reduced over dp=4){{$}}
dist.mesh @mesh axes = [dp = 4]
func.func @only_a_collective(%g: memref<4xf32> {rt.role = "gradient", rt.name = "w"}) {
  rt.all_reduce %g on @mesh axes [dp] reduce = avg label = "g" : memref<4xf32>
  return
}

// -----

// A gradient copied into a buffer of its own for the all-reduce is still a
// gradient: 2 x 128 bytes of gradients live at the peak; the filled buffer
// is neither gradient nor activation.
// REPORT:        memory: gradients 256{{$}}
// REPORT-NEXT:   memory: activations 0{{$}}
// REPORT:        memory: arena_peak = parameters 320 + optimizer_state 0 + inputs 0 + gradients 256 + activations 0 + other_temporaries 64 + alignment_and_fragmentation 0{{$}}
// REPORT:        communication: copied_gradient sends 128 bytes per rank per step (1 all-reduce bucket, 128 bytes reduced over dp=2){{$}}
dist.mesh @mesh axes = [dp = 2]
func.func @copied_gradient(%dy: memref<2x2x4xf32> {rt.role = "param", rt.name = "dy"}, %x: memref<2x2x8xf32> {rt.role = "param", rt.name = "x"},
                           %w: memref<4x8xf32> {rt.role = "param", rt.name = "w"}) {
  %g = memref.alloc() : memref<4x8xf32>
  rt.kernel "linear_grad_weight" ins(%dy, %x : memref<2x2x4xf32>, memref<2x2x8xf32>) outs(%g : memref<4x8xf32>)
  %c = memref.alloc() : memref<4x8xf32>
  rt.kernel "copy" ins(%g : memref<4x8xf32>) outs(%c : memref<4x8xf32>)
  rt.all_reduce %c on @mesh axes [dp] reduce = avg label = "g" : memref<4x8xf32>
  %s = memref.alloc() : memref<4x4xf32>
  rt.kernel "fill" outs(%s : memref<4x4xf32>) floats = [0.0]
  rt.kernel "add" ins(%g, %c : memref<4x8xf32>, memref<4x8xf32>) outs(%w : memref<4x8xf32>)
  return
}

//===----------------------------------------------------------------------===//
// The communication report
//===----------------------------------------------------------------------===//

// -----

// A data-parallel step on two ranks: a bucket of two gradients (16384 + 256
// bytes) and the loss (4 bytes); on two ranks a ring all-reduce sends as
// many bytes as it reduces. The eval step averages the loss over all eight
// ranks: 2 * 7 / 8 * 4 = 7 bytes. A function without collectives sends
// nothing.
// REPORT:        memory: arena_peak = {{.*}} + gradients 16640 + {{.*}}
// REPORT-NEXT:   communication: train_step sends 16644 bytes per rank per step (2 all-reduce buckets, 16644 bytes reduced over dp=2){{$}}
// REPORT-NEXT:   communication: eval_step sends 7 bytes per rank per step (1 all-reduce bucket, 4 bytes reduced over dp=2,tp=4){{$}}
// REPORT-NEXT:   communication: init sends 0 bytes per rank per step (no collectives){{$}}
dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 4]
func.func @train_step(%w: memref<64x64xf32> {rt.role = "gradient", rt.name = "w"}, %b: memref<64xf32> {rt.role = "gradient", rt.name = "b"},
                      %loss: memref<f32> {rt.role = "loss"}) {
  rt.all_reduce %w, %b on @mesh axes [dp] reduce = avg label = "gradient bucket 0" : memref<64x64xf32>, memref<64xf32>
  rt.all_reduce %loss on @mesh axes [dp] reduce = avg label = "loss" : memref<f32>
  return
}
func.func @eval_step(%loss: memref<f32> {rt.role = "loss"}) {
  rt.all_reduce %loss on @mesh axes [dp, tp] reduce = avg label = "loss" : memref<f32>
  return
}
func.func @init(%w: memref<64x64xf32> {rt.role = "gradient", rt.name = "w"}) {
  rt.kernel "fill" outs(%w : memref<64x64xf32>) floats = [0.0]
  return
}

// -----

// The group size is the product of the axes' sizes; an axis of size 1 makes
// a group of one rank, which sends nothing.
// REPORT:        communication: one_rank sends 0 bytes per rank per step (1 all-reduce bucket, 256 bytes reduced over pp=1){{$}}
dist.mesh @mesh axes = [dp = 2, pp = 1]
func.func @one_rank(%a: memref<64xf32> {rt.role = "gradient", rt.name = "a"}) {
  rt.all_reduce %a on @mesh axes [pp] reduce = sum label = "a" : memref<64xf32>
  return
}

// -----

// Buckets over different groups are listed apart, in order of first use:
// over dp (4 ranks) 2 * 3 / 4 * 1024 = 1536 bytes, over tp (2 ranks) 256.
// REPORT:        communication: mixed_groups sends 1792 bytes per rank per step (3 all-reduce buckets, 1024 bytes reduced over dp=4, 256 bytes reduced over tp=2){{$}}
dist.mesh @mesh axes = [dp = 4, tp = 2]
func.func @mixed_groups(%a: memref<128xf32> {rt.role = "gradient", rt.name = "a"}, %b: memref<64xf32> {rt.role = "gradient", rt.name = "b"},
                        %c: memref<128xf32> {rt.role = "gradient", rt.name = "c"}) {
  rt.all_reduce %a on @mesh axes [dp] reduce = sum label = "a" : memref<128xf32>
  rt.all_reduce %b on @mesh axes [tp] reduce = sum label = "b" : memref<64xf32>
  rt.all_reduce %c on @mesh axes [dp] reduce = sum label = "c" : memref<128xf32>
  return
}
