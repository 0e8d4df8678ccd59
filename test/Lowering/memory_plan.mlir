// RUN: partition-opt %s --split-input-file --lower-memory-plan | FileCheck %s
// RUN: partition-opt %s --split-input-file --lower-memory-plan=report=true -o /dev/null | FileCheck %s --check-prefix=REPORT
// The output verifies and is stable under a round trip.
// RUN: partition-opt %s --split-input-file --lower-memory-plan | partition-opt --split-input-file --verify-roundtrip > /dev/null

// --lower-memory-plan on hand-written rt-level steps. Offsets are in bytes;
// the state (the arguments) comes first, 64-byte aligned in argument order,
// then the temporaries, placed largest first at the lowest aligned offset
// free during their live range. A view of an offset N is matched through the
// name the printer gives its constant, %cN.

//===----------------------------------------------------------------------===//
// Liveness
//===----------------------------------------------------------------------===//

// Three 64-byte temporaries a, b, c in a chain: a and c are never live at the
// same time and share an offset; b overlaps both and gets its own.
// CHECK-LABEL: func.func @disjoint_lifetimes_share
// CHECK-SAME:    (%[[ARENA:.*]]: memref<192xi8>) attributes {rt.arena_bytes = 192 : i64}
// CHECK:         %[[X:.*]] = memref.view %[[ARENA]][%c0{{(_[0-9]+)?}}][] {rt.name = "x", rt.role = "param"} : memref<192xi8> to memref<16xf32>
// CHECK:         %[[A:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][] : memref<192xi8> to memref<16xf32>
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[X]] : memref<16xf32>) outs(%[[A]] : memref<16xf32>)
// CHECK:         %[[B:.*]] = memref.view %[[ARENA]][%c128{{(_[0-9]+)?}}][] : memref<192xi8> to memref<16xf32>
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[A]] : memref<16xf32>) outs(%[[B]] : memref<16xf32>)
// CHECK:         %[[C:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][] : memref<192xi8> to memref<16xf32>
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[B]] : memref<16xf32>) outs(%[[C]] : memref<16xf32>)
// CHECK-NEXT:    rt.kernel "copy" ins(%[[C]] : memref<16xf32>) outs(%[[X]] : memref<16xf32>)
// CHECK-NOT:     memref.alloc
// REPORT:        memory: arena_peak 192{{$}}
func.func @disjoint_lifetimes_share(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %a = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  %b = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%a : memref<16xf32>) outs(%b : memref<16xf32>)
  %c = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%b : memref<16xf32>) outs(%c : memref<16xf32>)
  rt.kernel "copy" ins(%c : memref<16xf32>) outs(%x : memref<16xf32>)
  return
}

// -----

// A buffer the micro-batch loop carries from run to run (%slot: written
// before the loop, read in the body, then overwritten whole with what the
// next run reads) holds nothing in each run between that read and that
// write: %t, which lives only there, takes its bytes. %a and %u, live at
// the read or the write, do not.
// CHECK-LABEL: func.func @carried_slot_hole
// CHECK-SAME:    (%[[ARENA:.*]]: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64}
// CHECK:         %[[SLOT:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK:         rt.microbatch_loop_begin count = 3
// CHECK:         %[[A:.*]] = memref.view %[[ARENA]][%c128{{(_[0-9]+)?}}][]
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[SLOT]] : memref<16xf32>) outs(%[[A]] : memref<16xf32>)
// CHECK:         %[[T:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[A]] : memref<16xf32>) outs(%[[T]] : memref<16xf32>)
// CHECK:         %[[U:.*]] = memref.view %[[ARENA]][%c192{{(_[0-9]+)?}}][]
// REPORT:        memory: arena_peak 256{{$}}
func.func @carried_slot_hole(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %slot = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%slot : memref<16xf32>)
  rt.microbatch_loop_begin count = 3
  %a = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%slot : memref<16xf32>) outs(%a : memref<16xf32>)
  %t = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%a : memref<16xf32>) outs(%t : memref<16xf32>)
  %u = memref.alloc() : memref<16xf32>
  rt.kernel "add" ins(%t, %a : memref<16xf32>, memref<16xf32>) outs(%u : memref<16xf32>)
  rt.kernel "gelu" ins(%u : memref<16xf32>) outs(%slot : memref<16xf32>)
  rt.microbatch_loop_end live(%slot : memref<16xf32>)
  rt.kernel "copy" ins(%slot : memref<16xf32>) outs(%x : memref<16xf32>)
  return
}

// -----

// The same with the slot added to in place (an accumulated gradient): the
// write reads the old value, so there is no hole and %t gets bytes of its
// own.
// CHECK-LABEL: func.func @carried_accumulator_no_hole
// CHECK-SAME:    (%[[ARENA:.*]]: memref<320xi8>) attributes {rt.arena_bytes = 320 : i64}
// REPORT:        memory: arena_peak 320{{$}}
func.func @carried_accumulator_no_hole(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %slot = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%slot : memref<16xf32>)
  rt.microbatch_loop_begin count = 3
  %a = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%slot : memref<16xf32>) outs(%a : memref<16xf32>)
  %t = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%a : memref<16xf32>) outs(%t : memref<16xf32>)
  %u = memref.alloc() : memref<16xf32>
  rt.kernel "add" ins(%t, %a : memref<16xf32>, memref<16xf32>) outs(%u : memref<16xf32>)
  rt.kernel "add" ins(%slot, %u : memref<16xf32>, memref<16xf32>) outs(%slot : memref<16xf32>)
  rt.microbatch_loop_end live(%slot : memref<16xf32>)
  rt.kernel "copy" ins(%slot : memref<16xf32>) outs(%x : memref<16xf32>)
  return
}

// -----

// A kernel's output is allocated before the kernel reads its inputs, so an
// output never shares memory with an input whose last use is that kernel;
// the three buffers that are all live at the add get three offsets.
// CHECK-LABEL: func.func @overlapping_lifetimes
// CHECK-SAME:    (%[[ARENA:.*]]: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64}
// CHECK:         %[[A:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][] : memref<256xi8> to memref<16xf32>
// CHECK:         %[[B:.*]] = memref.view %[[ARENA]][%c128{{(_[0-9]+)?}}][] : memref<256xi8> to memref<16xf32>
// CHECK:         %[[S:.*]] = memref.view %[[ARENA]][%c192{{(_[0-9]+)?}}][] : memref<256xi8> to memref<16xf32>
// CHECK-NEXT:    rt.kernel "add" ins(%[[A]], %[[B]] : memref<16xf32>, memref<16xf32>) outs(%[[S]] : memref<16xf32>)
// REPORT:        memory: arena_peak 256{{$}}
func.func @overlapping_lifetimes(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %a = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  %b = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%b : memref<16xf32>)
  %s = memref.alloc() : memref<16xf32>
  rt.kernel "add" ins(%a, %b : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.kernel "copy" ins(%s : memref<16xf32>) outs(%x : memref<16xf32>)
  return
}

// -----

// %t (256 bytes) is last used directly at the fill, but a view of it is read
// later: %u, allocated in between, must not take %t's place. %v may, since
// it comes after the last read through the views.
// CHECK-LABEL: func.func @views_extend_lifetime
// CHECK-SAME:    (%[[ARENA:.*]]: memref<640xi8>) attributes {rt.arena_bytes = 640 : i64}
// CHECK:         %[[T:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][] : memref<640xi8> to memref<4x16xf32>
// CHECK-NEXT:    rt.kernel "fill" outs(%[[T]] : memref<4x16xf32>)
// CHECK-NEXT:    %[[S:.*]] = memref.subview %[[T]][2, 0] [2, 16] [1, 1]
// CHECK-NEXT:    %[[S2:.*]] = memref.subview %[[S]][1, 0] [1, 16] [1, 1]
// CHECK:         %[[U:.*]] = memref.view %[[ARENA]][%c320{{(_[0-9]+)?}}][] : memref<640xi8> to memref<4x16xf32>
// CHECK-NEXT:    rt.kernel "fill" outs(%[[U]] : memref<4x16xf32>)
// CHECK:         rt.kernel "gelu" ins(%[[S2]] : memref<1x16xf32, strided<[16, 1], offset: 48>>) outs(%{{.*}} : memref<1x16xf32>)
// CHECK:         %[[V:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][] : memref<640xi8> to memref<4x16xf32>
// CHECK-NEXT:    rt.kernel "copy" ins(%[[U]] : memref<4x16xf32>) outs(%[[V]] : memref<4x16xf32>)
// REPORT:        memory: arena_peak 640{{$}}
func.func @views_extend_lifetime(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %t = memref.alloc() : memref<4x16xf32>
  rt.kernel "fill" outs(%t : memref<4x16xf32>) floats = [1.0]
  %s = memref.subview %t[2, 0] [2, 16] [1, 1] : memref<4x16xf32> to memref<2x16xf32, strided<[16, 1], offset: 32>>
  %s2 = memref.subview %s[1, 0] [1, 16] [1, 1] : memref<2x16xf32, strided<[16, 1], offset: 32>> to memref<1x16xf32, strided<[16, 1], offset: 48>>
  %u = memref.alloc() : memref<4x16xf32>
  rt.kernel "fill" outs(%u : memref<4x16xf32>) floats = [2.0]
  %r = memref.alloc() : memref<1x16xf32>
  rt.kernel "gelu" ins(%s2 : memref<1x16xf32, strided<[16, 1], offset: 48>>) outs(%r : memref<1x16xf32>)
  %v = memref.alloc() : memref<4x16xf32>
  rt.kernel "copy" ins(%u : memref<4x16xf32>) outs(%v : memref<4x16xf32>)
  return
}

// -----

// Largest first: the 256-byte buffer is placed before the small ones, which
// then fill the space around it.
// CHECK-LABEL: func.func @largest_first
// CHECK-SAME:    (%[[ARENA:.*]]: memref<384xi8>) attributes {rt.arena_bytes = 384 : i64}
// CHECK:         memref.view %[[ARENA]][%c320{{(_[0-9]+)?}}][] : memref<384xi8> to memref<4xf32>
// CHECK:         memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][] : memref<384xi8> to memref<64xf32>
// CHECK:         memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][] : memref<384xi8> to memref<4xf32>
// REPORT:        memory: arena_peak 384{{$}}
func.func @largest_first(%x: memref<4xf32> {rt.role = "param", rt.name = "x"}) {
  // small: live for the whole function.
  %small = memref.alloc() : memref<4xf32>
  rt.kernel "fill" outs(%small : memref<4xf32>) floats = [0.0]
  %big = memref.alloc() : memref<64xf32>
  rt.kernel "fill" outs(%big : memref<64xf32>) floats = [0.0]
  // late: live only after big is dead, so it reuses big's offset.
  %late = memref.alloc() : memref<4xf32>
  rt.kernel "add" ins(%small, %x : memref<4xf32>, memref<4xf32>) outs(%late : memref<4xf32>)
  rt.kernel "copy" ins(%late : memref<4xf32>) outs(%x : memref<4xf32>)
  return
}

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

// -----

// Arguments in order, each at a 64-byte aligned offset: 100 bytes take two
// slots, a scalar one. The function then takes only the arena; views carry
// the argument's rt attributes, arguments without a name give views without
// one.
// CHECK-LABEL: func.func @state_first
// CHECK-SAME:    (%[[ARENA:[a-z0-9]+]]: memref<384xi8>) attributes {rt.arena_bytes = 384 : i64}
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[W:.*]] = memref.view %[[ARENA]][%[[C0]]][] {rt.name = "w", rt.role = "param"} : memref<384xi8> to memref<25xf32>
// CHECK-NEXT:    %[[C128:.*]] = arith.constant 128 : index
// CHECK-NEXT:    %[[T:.*]] = memref.view %[[ARENA]][%[[C128]]][] {rt.role = "step"} : memref<384xi8> to memref<i32>
// CHECK-NEXT:    %[[C192:.*]] = arith.constant 192 : index
// CHECK-NEXT:    %[[M:.*]] = memref.view %[[ARENA]][%[[C192]]][] {rt.name = "w", rt.role = "moment1"} : memref<384xi8> to memref<25xf32>
// CHECK-NEXT:    %[[C320:.*]] = arith.constant 320 : index
// CHECK-NEXT:    %[[ONE:.*]] = memref.view %[[ARENA]][%[[C320]]][] : memref<384xi8> to memref<i32>
// CHECK-NEXT:    rt.kernel "fill" outs(%[[ONE]] : memref<i32>)
// CHECK-NEXT:    rt.kernel "add_i32" ins(%[[T]], %[[ONE]] : memref<i32>, memref<i32>) outs(%[[T]] : memref<i32>)
// CHECK-NEXT:    rt.kernel "scale" ins(%[[M]] : memref<25xf32>) outs(%[[W]] : memref<25xf32>)
// CHECK-NEXT:    return
// REPORT:        memory: parameters 100{{$}}
// REPORT-NEXT:   memory: optimizer_state 104{{$}}
// REPORT-NEXT:   memory: inputs 0{{$}}
// REPORT-NEXT:   memory: gradients 0{{$}}
// REPORT-NEXT:   memory: activations 0{{$}}
// REPORT-NEXT:   memory: temporaries_peak 4{{$}}
// REPORT-NEXT:   memory: arena_peak 384{{$}}
func.func @state_first(%w: memref<25xf32> {rt.role = "param", rt.name = "w"}, %t: memref<i32> {rt.role = "step"},
                       %m: memref<25xf32> {rt.role = "moment1", rt.name = "w"}) {
  %one = memref.alloc() : memref<i32>
  rt.kernel "fill" outs(%one : memref<i32>) floats = [1.0]
  rt.kernel "add_i32" ins(%t, %one : memref<i32>, memref<i32>) outs(%t : memref<i32>)
  rt.kernel "scale" ins(%m : memref<25xf32>) outs(%w : memref<25xf32>) floats = [0.5]
  return
}

// -----

// Nothing but state: the arena is the state, and there are no temporaries.
// CHECK-LABEL: func.func @no_temporaries
// CHECK-SAME:    (%[[ARENA:.*]]: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64, xfmr.train_step = {}}
// CHECK-NOT:     memref.alloc
// REPORT:        memory: temporaries_peak 0{{$}}
// REPORT-NEXT:   memory: arena_peak 128{{$}}
func.func @no_temporaries(%w: memref<16xf32> {rt.role = "param", rt.name = "w"}, %v: memref<16xf32> {rt.role = "param", rt.name = "v"})
    attributes {xfmr.train_step = {}} {
  rt.kernel "copy" ins(%w : memref<16xf32>) outs(%v : memref<16xf32>)
  return
}

// -----

// The train step and the eval step share the state (matched by role and
// name, whatever the argument order) and one arena; a key only one of them
// has is appended. Their temporaries both start after the whole state: the
// functions never run at the same time. Functions without kernels are left
// alone.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME:    (%[[ARENA:.*]]: memref<704xi8>) attributes {rt.arena_bytes = 704 : i64}
// CHECK:         memref.view %[[ARENA]][%c0{{(_[0-9]+)?}}][] {rt.name = "w", rt.role = "param"} : memref<704xi8> to memref<16xf32>
// CHECK:         memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][] {rt.name = "w", rt.role = "moment1"} : memref<704xi8> to memref<16xf32>
// CHECK:         memref.view %[[ARENA]][%c128{{(_[0-9]+)?}}][] {rt.role = "tokens"} : memref<704xi8> to memref<2x3xi32>
// CHECK:         memref.view %[[ARENA]][%c192{{(_[0-9]+)?}}][] {rt.role = "loss"} : memref<704xi8> to memref<f32>
// CHECK:         memref.view %[[ARENA]][%c320{{(_[0-9]+)?}}][] : memref<704xi8> to memref<16xf32>
// CHECK-LABEL: func.func @eval_step
// CHECK-SAME:    (%[[ARENA:.*]]: memref<704xi8>) attributes {rt.arena_bytes = 704 : i64}
// CHECK:         memref.view %[[ARENA]][%c192{{(_[0-9]+)?}}][] {rt.role = "loss"} : memref<704xi8> to memref<f32>
// CHECK:         memref.view %[[ARENA]][%c256{{(_[0-9]+)?}}][] {rt.role = "targets"} : memref<704xi8> to memref<2x3xi32>
// CHECK:         memref.view %[[ARENA]][%c128{{(_[0-9]+)?}}][] {rt.role = "tokens"} : memref<704xi8> to memref<2x3xi32>
// CHECK:         memref.view %[[ARENA]][%c0{{(_[0-9]+)?}}][] {rt.name = "w", rt.role = "param"} : memref<704xi8> to memref<16xf32>
// CHECK:         memref.view %[[ARENA]][%c320{{(_[0-9]+)?}}][] : memref<704xi8> to memref<2x3x16xf32>
// CHECK-LABEL: func.func @not_planned
// CHECK-SAME:    (%{{.*}}: memref<4xf32>)
// CHECK-NEXT:    return
// The report counts the state once, and the temporaries of the function
// with the most (the eval step's 384 bytes of activations, not the sum;
// no gradient is live in it).
// REPORT:        memory: parameters 64{{$}}
// REPORT-NEXT:   memory: optimizer_state 64{{$}}
// REPORT-NEXT:   memory: inputs 52{{$}}
// REPORT-NEXT:   memory: gradients 0{{$}}
// REPORT-NEXT:   memory: activations 384{{$}}
// REPORT-NEXT:   memory: temporaries_peak 384{{$}}
// REPORT-NEXT:   memory: arena_peak 704{{$}}
func.func @train_step(%w: memref<16xf32> {rt.role = "param", rt.name = "w"}, %m: memref<16xf32> {rt.role = "moment1", rt.name = "w"},
                      %tok: memref<2x3xi32> {rt.role = "tokens"}, %loss: memref<f32> {rt.role = "loss"}) {
  %g = memref.alloc() : memref<16xf32>
  rt.kernel "position_embedding_grad" ins(%w : memref<16xf32>) outs(%g : memref<16xf32>)
  rt.kernel "add" ins(%m, %g : memref<16xf32>, memref<16xf32>) outs(%m : memref<16xf32>)
  return
}
func.func @eval_step(%loss: memref<f32> {rt.role = "loss"}, %tgt: memref<2x3xi32> {rt.role = "targets"},
                     %tok: memref<2x3xi32> {rt.role = "tokens"}, %w: memref<16xf32> {rt.role = "param", rt.name = "w"}) {
  %x = memref.alloc() : memref<2x3x16xf32>
  rt.kernel "embedding" ins(%tok, %w : memref<2x3xi32>, memref<16xf32>) outs(%x : memref<2x3x16xf32>)
  rt.kernel "softmax_cross_entropy" ins(%x, %tgt : memref<2x3x16xf32>, memref<2x3xi32>) outs(%loss : memref<f32>)
  return
}
func.func @not_planned(%x: memref<4xf32>) {
  return
}

//===----------------------------------------------------------------------===//
// The report
//===----------------------------------------------------------------------===//

// -----

// A tiny training step, computed by hand.
//   state (argument order, 64-byte aligned): w 128 @0, m1 128 @128,
//     m2 128 @256, step 4 @384, lr 4 @448, tokens 24 @512, targets 24 @576,
//     loss 4 @640: 704 bytes.
//   temporaries (position of alloc .. last use, bytes):
//     e [0, 10] 192, y [2, 8] 96, seed [5, 8] 4, dy [7, 10] 96,
//     dw [9, 14] 128, one [11, 13] 4.
//   largest first: e @0; dw @192 (overlaps e); y @192 (overlaps e only);
//     dy @320 (past e, y and dw; 288 aligned up); seed @448 (past e, y and
//     dy, 416 aligned up); one @0 (only dw is live).
//   peak 448 + 4 = 452; arena 704 + 452 = 1156, aligned 1216.
//   parameters 128; optimizer state 128 + 128 + 4 = 260; inputs lr, tokens,
//     targets, loss = 56; gradients dw = 128; activations
//     192 + 96 + 4 + 96 + 4 = 392.
// CHECK-LABEL: func.func @tiny_step
// CHECK-SAME:    (%[[ARENA:.*]]: memref<1216xi8>) attributes {rt.arena_bytes = 1216 : i64, xfmr.train_step = {}}
// CHECK:         memref.view %[[ARENA]][%c640{{(_[0-9]+)?}}][] {rt.role = "loss"} : memref<1216xi8> to memref<f32>
// CHECK:         %[[E:.*]] = memref.view %[[ARENA]][%c704{{(_[0-9]+)?}}][] : memref<1216xi8> to memref<2x3x8xf32>
// CHECK:         %[[Y:.*]] = memref.view %[[ARENA]][%c896{{(_[0-9]+)?}}][] : memref<1216xi8> to memref<2x3x4xf32>
// CHECK:         %[[SEED:.*]] = memref.view %[[ARENA]][%c1152{{(_[0-9]+)?}}][] : memref<1216xi8> to memref<f32>
// CHECK:         %[[DY:.*]] = memref.view %[[ARENA]][%c1024{{(_[0-9]+)?}}][] : memref<1216xi8> to memref<2x3x4xf32>
// CHECK:         %[[DW:.*]] = memref.view %[[ARENA]][%c896{{(_[0-9]+)?}}][] : memref<1216xi8> to memref<4x8xf32>
// CHECK:         %[[ONE:.*]] = memref.view %[[ARENA]][%c704{{(_[0-9]+)?}}][] : memref<1216xi8> to memref<i32>
// REPORT:        memory: parameters 128{{$}}
// REPORT-NEXT:   memory: optimizer_state 260{{$}}
// REPORT-NEXT:   memory: inputs 56{{$}}
// REPORT-NEXT:   memory: gradients 128{{$}}
// REPORT-NEXT:   memory: activations 192{{$}}
// REPORT-NEXT:   memory: temporaries_peak 452{{$}}
// REPORT-NEXT:   memory: arena_peak 1216{{$}}
// REPORT-NEXT:   memory: arena_peak = parameters 128 + optimizer_state 260 + inputs 56 + gradients 128 + activations 192 + other_temporaries 96 + alignment_and_fragmentation 356{{$}}
func.func @tiny_step(%w: memref<4x8xf32> {rt.role = "param", rt.name = "w"},
                     %m1: memref<4x8xf32> {rt.role = "moment1", rt.name = "w"},
                     %m2: memref<4x8xf32> {rt.role = "moment2", rt.name = "w"},
                     %step: memref<i32> {rt.role = "step"}, %lr: memref<f32> {rt.role = "lr"},
                     %tok: memref<2x3xi32> {rt.role = "tokens"}, %tgt: memref<2x3xi32> {rt.role = "targets"},
                     %loss: memref<f32> {rt.role = "loss"}) attributes {xfmr.train_step = {}} {
  %e = memref.alloc() : memref<2x3x8xf32>
  rt.kernel "embedding" ins(%tok, %w : memref<2x3xi32>, memref<4x8xf32>) outs(%e : memref<2x3x8xf32>)
  %y = memref.alloc() : memref<2x3x4xf32>
  rt.kernel "linear" ins(%e, %w : memref<2x3x8xf32>, memref<4x8xf32>) outs(%y : memref<2x3x4xf32>)
  rt.kernel "softmax_cross_entropy" ins(%y, %tgt : memref<2x3x4xf32>, memref<2x3xi32>) outs(%loss : memref<f32>)
  %seed = memref.alloc() : memref<f32>
  rt.kernel "fill" outs(%seed : memref<f32>) floats = [1.0]
  %dy = memref.alloc() : memref<2x3x4xf32>
  rt.kernel "softmax_cross_entropy_grad" ins(%seed, %y, %tgt : memref<f32>, memref<2x3x4xf32>, memref<2x3xi32>) outs(%dy : memref<2x3x4xf32>)
  %dw = memref.alloc() : memref<4x8xf32>
  rt.kernel "linear_grad_weight" ins(%dy, %e : memref<2x3x4xf32>, memref<2x3x8xf32>) outs(%dw : memref<4x8xf32>)
  %one = memref.alloc() : memref<i32>
  rt.kernel "fill" outs(%one : memref<i32>) floats = [1.0]
  rt.kernel "add_i32" ins(%step, %one : memref<i32>, memref<i32>) outs(%step : memref<i32>)
  rt.kernel "adamw" ins(%w, %dw, %m1, %m2, %step, %lr : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<i32>, memref<f32>)
      outs(%w, %m1, %m2 : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) floats = [0.9, 0.95, 1.0e-08, 0.1]
  return
}

// -----

// Which temporaries are gradients: the weight-side outputs of the backward
// kernels (layernorm_grad's and rmsnorm_grad's all but the first), and
// gradient arguments (steps without an optimizer); activation gradients
// are other temporaries. The report counts what is live at the peak, at
// rmsnorm_grad: dx 192 + dx2 192 (other temporaries) and the gradient
// argument 32, not dgamma, dbeta (dead) or dwte (not yet allocated).
// CHECK-LABEL: func.func @gradient_categories
// REPORT:        memory: parameters 224{{$}}
// REPORT-NEXT:   memory: optimizer_state 0{{$}}
// REPORT-NEXT:   memory: inputs 24{{$}}
// REPORT-NEXT:   memory: gradients 32{{$}}
// REPORT-NEXT:   memory: activations 0{{$}}
// REPORT:        memory: arena_peak = parameters 224 + optimizer_state 0 + inputs 24 + gradients 32 + activations 0 + other_temporaries 384 + alignment_and_fragmentation 104{{$}}
func.func @gradient_categories(%x: memref<2x3x8xf32> {rt.role = "param", rt.name = "x"}, %g: memref<8xf32> {rt.role = "param", rt.name = "g"},
                               %tok: memref<2x3xi32> {rt.role = "tokens"}, %dg: memref<8xf32> {rt.role = "gradient", rt.name = "g"}) {
  // dx (192 bytes): an activation gradient; dgamma, dbeta (32 each): gradients.
  %dx = memref.alloc() : memref<2x3x8xf32>
  %dgamma = memref.alloc() : memref<8xf32>
  %dbeta = memref.alloc() : memref<8xf32>
  rt.kernel "layernorm_grad" ins(%x, %x, %g : memref<2x3x8xf32>, memref<2x3x8xf32>, memref<8xf32>) outs(%dx, %dgamma, %dbeta : memref<2x3x8xf32>, memref<8xf32>, memref<8xf32>) floats = [1.0e-05]
  // rmsnorm_grad writes its weight gradient into the argument.
  %dx2 = memref.alloc() : memref<2x3x8xf32>
  rt.kernel "rmsnorm_grad" ins(%dx, %x, %g : memref<2x3x8xf32>, memref<2x3x8xf32>, memref<8xf32>) outs(%dx2, %dg : memref<2x3x8xf32>, memref<8xf32>) floats = [1.0e-05]
  // embedding_grad (a 4x8 table): a gradient.
  %dwte = memref.alloc() : memref<4x8xf32>
  rt.kernel "embedding_grad" ins(%dx2, %tok : memref<2x3x8xf32>, memref<2x3xi32>) outs(%dwte : memref<4x8xf32>)
  return
}
