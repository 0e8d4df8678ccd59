// RUN: partition-opt %s --split-input-file --lower-memory-plan | FileCheck %s
// RUN: partition-opt %s --split-input-file --lower-memory-plan=report=true -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: partition-opt %s --split-input-file --lower-memory-plan | partition-opt --split-input-file --verify-roundtrip > /dev/null

// --lower-memory-plan on action walks (lowering/ActionWalkMemory.h): a slot
// buffer (rt.held) holds a micro-batch's values only from the first action
// of that micro-batch touching it to the last, so two that no action holds
// together share bytes, although both are live across the whole walk in
// the program's order. The state %x takes bytes [0, 64); the temporaries
// follow.

// Chunk 0's %a is held in actions 0-1 and 4-5, chunk 1's %b in 2-3 and
// 6-7: never together, one offset. The sum %s has its own.
// CHECK-LABEL: func.func @chunks_in_turn_share
// CHECK-SAME:    (%[[ARENA:.*]]: memref<192xi8>) attributes {rt.arena_bytes = 192 : i64}
// CHECK:         %[[A:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK:         %[[B:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK:         %[[S:.*]] = memref.view %[[ARENA]][%c128{{(_[0-9]+)?}}][]
// CHECK:         rt.action_region "F chunk 0"
// CHECK-NEXT:    rt.kernel "gelu" ins(%{{.*}} : memref<16xf32>) outs(%[[A]] : memref<16xf32>)
// CHECK:         rt.action_region "F chunk 1"
// CHECK-NEXT:    rt.kernel "gelu" ins(%{{.*}} : memref<16xf32>) outs(%[[B]] : memref<16xf32>)
// The report counts the held bytes at the action holding the most (one
// of %a and %b), so the parts still sum to the arena.
// REPORT:        memory: arena_peak 192{{$}}
// REPORT:        memory: arena_peak = parameters 64 + optimizer_state 0 + inputs 0 + gradients 0 + activations 128 + other_temporaries 0 + alignment_and_fragmentation 0{{$}}
func.func @chunks_in_turn_share(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %a = memref.alloc() {rt.held} : memref<16xf32>
  %b = memref.alloc() {rt.held} : memref<16xf32>
  %s = memref.alloc() : memref<16xf32>
  rt.kernel "fill" outs(%s : memref<16xf32>) floats = [0.0]
  rt.action_walk_begin actions = [0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0,
                                  0, 0, 1, 1, 0, 1, 2, 0, 1, 3, 0, 1]
      slot_sizes = [] region_rows = [0, 0, 0, 0]
  rt.action_region "F chunk 0"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  rt.action_region "B chunk 0"
  rt.kernel "add" ins(%s, %a : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_region "F chunk 1"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%b : memref<16xf32>)
  rt.action_region "B chunk 1"
  rt.kernel "add" ins(%s, %b : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_walk_end live(%a, %b, %s : memref<16xf32>, memref<16xf32>, memref<16xf32>)
  rt.kernel "copy" ins(%s : memref<16xf32>) outs(%x : memref<16xf32>)
  return
}

// -----

// The same actions interleaved (F0 F1 B0 B1): %a and %b are held together
// in actions 1-2 and take offsets of their own.
// CHECK-LABEL: func.func @chunks_together_apart
// CHECK-SAME:    (%[[ARENA:.*]]: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64}
// CHECK:         memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK:         memref.view %[[ARENA]][%c128{{(_[0-9]+)?}}][]
// CHECK:         memref.view %[[ARENA]][%c192{{(_[0-9]+)?}}][]
// REPORT:        memory: arena_peak 256{{$}}
func.func @chunks_together_apart(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %a = memref.alloc() {rt.held} : memref<16xf32>
  %b = memref.alloc() {rt.held} : memref<16xf32>
  %s = memref.alloc() : memref<16xf32>
  rt.kernel "fill" outs(%s : memref<16xf32>) floats = [0.0]
  rt.action_walk_begin actions = [0, 0, 0, 2, 0, 0, 1, 0, 0, 3, 0, 0]
      slot_sizes = [] region_rows = [0, 0, 0, 0]
  rt.action_region "F chunk 0"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  rt.action_region "B chunk 0"
  rt.kernel "add" ins(%s, %a : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_region "F chunk 1"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%b : memref<16xf32>)
  rt.action_region "B chunk 1"
  rt.kernel "add" ins(%s, %b : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_walk_end live(%a, %b, %s : memref<16xf32>, memref<16xf32>, memref<16xf32>)
  rt.kernel "copy" ins(%s : memref<16xf32>) outs(%x : memref<16xf32>)
  return
}

// -----

// Slot copies: chunk 0 holds slot 0 (%a) in actions 0-2 and slot 1 (%a1)
// in 1-3; chunk 1's %b is held in 4-5. Slots 0 and 1 of chunk 0 are held
// together; %b is held with neither and takes %a's bytes.
// CHECK-LABEL: func.func @slot_copies
// CHECK-SAME:    (%[[ARENA:.*]]: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64}
// CHECK:         %[[A:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK:         %[[A1:.*]] = memref.view %[[ARENA]][%c128{{(_[0-9]+)?}}][]
// CHECK:         %[[B:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK:         memref.view %[[ARENA]][%c192{{(_[0-9]+)?}}][]
// REPORT:        memory: arena_peak 256{{$}}
func.func @slot_copies(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %a = memref.alloc() {rt.held} : memref<16xf32>
  %a1 = memref.alloc() {rt.held} : memref<16xf32>
  %b = memref.alloc() {rt.held} : memref<16xf32>
  %s = memref.alloc() : memref<16xf32>
  rt.kernel "fill" outs(%s : memref<16xf32>) floats = [0.0]
  rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1,
                                  2, 0, 0, 3, 0, 0]
      slot_sizes = [1] region_rows = [0, 0, 0, 0]
      slots(%a : memref<16xf32>) copies(%a1 : memref<16xf32>)
  rt.action_region "F chunk 0"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  rt.action_region "B chunk 0"
  rt.kernel "add" ins(%s, %a : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_region "F chunk 1"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%b : memref<16xf32>)
  rt.action_region "B chunk 1"
  rt.kernel "add" ins(%s, %b : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_walk_end live(%a, %a1, %b, %s : memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<16xf32>)
  rt.kernel "copy" ins(%s : memref<16xf32>) outs(%x : memref<16xf32>)
  return
}

// -----

// A held buffer that an op after the walk reads (%a, copied out) is live
// wherever the program says: %b may not take its bytes.
// CHECK-LABEL: func.func @read_after_walk
// CHECK-SAME:    (%[[ARENA:.*]]: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64}
// REPORT:        memory: arena_peak 256{{$}}
func.func @read_after_walk(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %a = memref.alloc() {rt.held} : memref<16xf32>
  %b = memref.alloc() {rt.held} : memref<16xf32>
  %s = memref.alloc() : memref<16xf32>
  rt.kernel "fill" outs(%s : memref<16xf32>) floats = [0.0]
  rt.action_walk_begin actions = [0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0]
      slot_sizes = [] region_rows = [0, 0, 0, 0]
  rt.action_region "F chunk 0"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  rt.action_region "B chunk 0"
  rt.kernel "add" ins(%s, %a : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_region "F chunk 1"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%b : memref<16xf32>)
  rt.action_region "B chunk 1"
  rt.kernel "add" ins(%s, %b : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_walk_end live(%a, %b, %s : memref<16xf32>, memref<16xf32>, memref<16xf32>)
  rt.kernel "add" ins(%s, %a : memref<16xf32>, memref<16xf32>) outs(%x : memref<16xf32>)
  return
}

// -----

// GPipe's order (F0 F1 B1 B0): a region's own temporary (%t, in B) takes
// the bytes of the slot its region has finished reading (%a1, after its
// last read in B1), which no other action of B holds then; not those of
// %a, which B1 runs through (micro-batch 0 holds it).
// CHECK-LABEL: func.func @temporary_in_finished_slot
// CHECK-SAME:    (%[[ARENA:.*]]: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64}
// CHECK:         %[[A:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK:         %[[A1:.*]] = memref.view %[[ARENA]][%c128{{(_[0-9]+)?}}][]
// CHECK:         %[[S:.*]] = memref.view %[[ARENA]][%c192{{(_[0-9]+)?}}][]
// CHECK:         rt.action_region "B chunk 0"
// CHECK-NEXT:    rt.kernel "add" ins(%[[S]], %[[A]] : memref<16xf32>, memref<16xf32>) outs(%[[S]] : memref<16xf32>)
// CHECK:         %[[T:.*]] = memref.view %[[ARENA]][%c128{{(_[0-9]+)?}}][]
// CHECK-NEXT:    rt.kernel "gelu" ins(%{{.*}} : memref<16xf32>) outs(%[[T]] : memref<16xf32>)
// REPORT:        memory: arena_peak 256{{$}}
// REPORT:        memory: arena_peak = parameters 64 + optimizer_state 0 + inputs 0 + gradients 0 + activations 192 + other_temporaries 0 + alignment_and_fragmentation 0{{$}}
func.func @temporary_in_finished_slot(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %a = memref.alloc() {rt.held} : memref<16xf32>
  %a1 = memref.alloc() {rt.held} : memref<16xf32>
  %s = memref.alloc() : memref<16xf32>
  rt.kernel "fill" outs(%s : memref<16xf32>) floats = [0.0]
  rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0]
      slot_sizes = [1] region_rows = [0, 0]
      slots(%a : memref<16xf32>) copies(%a1 : memref<16xf32>)
  rt.action_region "F chunk 0"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  rt.action_region "B chunk 0"
  rt.kernel "add" ins(%s, %a : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  %t = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%t : memref<16xf32>)
  rt.kernel "add" ins(%s, %t : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_walk_end live(%a, %a1, %s : memref<16xf32>, memref<16xf32>, memref<16xf32>)
  rt.kernel "copy" ins(%s : memref<16xf32>) outs(%x : memref<16xf32>)
  return
}

// -----

// 1F1B's order over two slots (F0 F1 B0 B1), with the backward's
// temporary copied per slot (%t, %t1): each meets its own slot's
// activation only in that slot's backward, after the activation's last
// read there. %t takes %a's bytes (B0 runs through %a1, so not those);
// %t1 takes them too, free once B0 is done. 256 bytes where one %t for
// both slots, apart from both, would need 320.
// CHECK-LABEL: func.func @backward_temporary_per_slot
// CHECK-SAME:    (%[[ARENA:.*]]: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64}
// CHECK:         memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK:         memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK:         memref.view %[[ARENA]][%c128{{(_[0-9]+)?}}][]
// CHECK:         memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK:         memref.view %[[ARENA]][%c192{{(_[0-9]+)?}}][]
// REPORT:        memory: arena_peak 256{{$}}
// REPORT:        memory: arena_peak = parameters 64 + optimizer_state 0 + inputs 0 + gradients 0 + activations 192 + other_temporaries 0 + alignment_and_fragmentation 0{{$}}
func.func @backward_temporary_per_slot(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %a = memref.alloc() {rt.held} : memref<16xf32>
  %t = memref.alloc() {rt.held} : memref<16xf32>
  %a1 = memref.alloc() {rt.held} : memref<16xf32>
  %t1 = memref.alloc() {rt.held} : memref<16xf32>
  %s = memref.alloc() : memref<16xf32>
  rt.kernel "fill" outs(%s : memref<16xf32>) floats = [0.0]
  rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1]
      slot_sizes = [2] region_rows = [0, 0]
      slots(%a, %t : memref<16xf32>, memref<16xf32>)
      copies(%a1, %t1 : memref<16xf32>, memref<16xf32>)
  rt.action_region "F chunk 0"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  rt.action_region "B chunk 0"
  rt.kernel "add" ins(%s, %a : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%t : memref<16xf32>)
  rt.kernel "add" ins(%s, %t : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_walk_end live(%a, %t, %a1, %t1, %s : memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<16xf32>)
  rt.kernel "copy" ins(%s : memref<16xf32>) outs(%x : memref<16xf32>)
  return
}

// -----

// GPipe's order over 4 micro-batches, each in a slot of its own: slot 1's
// copy (%a1) repeats twice, so the memory plan gives it three times its
// bytes, [64, 256): slots 1 to 3 at a 64-byte stride, and sets the
// strides. Slot 0 (%a) holds micro-batch 0, whose backward runs first.
// CHECK-LABEL: func.func @repeated_slot
// CHECK-SAME:    (%[[ARENA:.*]]: memref<384xi8>) attributes {rt.arena_bytes = 384 : i64}
// CHECK:         %[[A:.*]] = memref.view %[[ARENA]][%c256{{(_[0-9]+)?}}][]
// CHECK:         %[[A1:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK:         rt.action_walk_begin {{.*}} slot_repeats = 2 slot_strides = [64]
// CHECK-SAME:      slots(%[[A]] : memref<16xf32>) copies(%[[A1]] : memref<16xf32>)
// REPORT:        memory: arena_peak 384{{$}}
func.func @repeated_slot(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %a = memref.alloc() {rt.held} : memref<16xf32>
  %a1 = memref.alloc() {rt.held} : memref<16xf32>
  %s = memref.alloc() : memref<16xf32>
  rt.kernel "fill" outs(%s : memref<16xf32>) floats = [0.0]
  rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 0, 2, 2, 0, 3, 3,
                                  1, 0, 0, 1, 1, 1, 1, 2, 2, 1, 3, 3]
      slot_sizes = [1] region_rows = [0, 0] slot_repeats = 2
      slots(%a : memref<16xf32>) copies(%a1 : memref<16xf32>)
  rt.action_region "F chunk 0"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  rt.action_region "B chunk 0"
  rt.kernel "add" ins(%s, %a : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_walk_end live(%a, %a1, %s : memref<16xf32>, memref<16xf32>, memref<16xf32>)
  rt.kernel "copy" ins(%s : memref<16xf32>) outs(%x : memref<16xf32>)
  return
}

// -----

// GPipe's first backward as a region of its own (F0 F1, then B0 in region
// 1, B1 in region 2): the sum %s starts in it, so the forward's own
// temporary %t takes its bytes. Region 2's code names slot 0's %a, which
// no action runs it with: its temporary %u may take %a's bytes too (the
// loader checks only code some action runs). 256 bytes where a sum live
// across the walk would need 320.
// CHECK-LABEL: func.func @first_backward_sum
// CHECK-SAME:    (%[[ARENA:.*]]: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64}
// CHECK:         %[[A:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK:         %[[T:.*]] = memref.view %[[ARENA]][%c192{{(_[0-9]+)?}}][]
// CHECK:         rt.kernel "gelu" ins(%{{.*}} : memref<16xf32>) outs(%[[T]] : memref<16xf32>)
// CHECK:         %[[S:.*]] = memref.view %[[ARENA]][%c192{{(_[0-9]+)?}}][]
// CHECK:         %[[U:.*]] = memref.view %[[ARENA]][%c64{{(_[0-9]+)?}}][]
// CHECK-NEXT:    rt.kernel "gelu" ins(%[[A]] : memref<16xf32>) outs(%[[U]] : memref<16xf32>)
// REPORT:        memory: arena_peak 256{{$}}
func.func @first_backward_sum(%x: memref<16xf32> {rt.role = "param", rt.name = "x"}) {
  %a = memref.alloc() {rt.held} : memref<16xf32>
  %a1 = memref.alloc() {rt.held} : memref<16xf32>
  rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 1, 0, 0, 2, 1, 1]
      slot_sizes = [1] region_rows = [0, 0, 0]
      slots(%a : memref<16xf32>) copies(%a1 : memref<16xf32>)
  rt.action_region "F chunk 0"
  %t = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%t : memref<16xf32>)
  rt.kernel "gelu" ins(%t : memref<16xf32>) outs(%a : memref<16xf32>)
  rt.action_region "B chunk 0"
  %s = memref.alloc() : memref<16xf32>
  rt.kernel "fill" outs(%s : memref<16xf32>) floats = [0.0]
  rt.kernel "add" ins(%s, %a : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_region "B chunk 0"
  %u = memref.alloc() : memref<16xf32>
  rt.kernel "gelu" ins(%a : memref<16xf32>) outs(%u : memref<16xf32>)
  rt.kernel "add" ins(%s, %u : memref<16xf32>, memref<16xf32>) outs(%s : memref<16xf32>)
  rt.action_walk_end live(%a, %a1, %s : memref<16xf32>, memref<16xf32>, memref<16xf32>)
  rt.kernel "copy" ins(%s : memref<16xf32>) outs(%x : memref<16xf32>)
  return
}
