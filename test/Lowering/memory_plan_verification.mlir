// RUN: partition-opt %s --split-input-file --lower-memory-plan -verify-diagnostics

// One case per error of --lower-memory-plan (MemoryPlan.cpp).

// expected-error @+1 {{no function with rt.kernel or rt.all_reduce ops to plan (run --lower-to-rt first)}}
module {
  func.func @train_step(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}) {
    return
  }
}

// -----

// Still tensors: --lower-to-rt has not run.
// expected-error @+1 {{no function with rt.kernel or rt.all_reduce ops to plan (run --lower-to-rt first)}}
module {
  func.func @train_step(%w: tensor<4xf32> {xfmr.param = "w"}) -> tensor<4xf32> attributes {xfmr.train_step = {}} {
    %y = xfmr.gelu %w : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

func.func @dynamic_alloc(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}) {
  %n = arith.constant 4 : index
  // expected-error @+1 {{'memref.alloc' op needs a static shape to be planned, but is 'memref<?xf32>'}}
  %a = memref.alloc(%n) : memref<?xf32>
  rt.kernel "fill" outs(%w : memref<4xf32>) floats = [0.0]
  return
}

// -----

func.func @strided_alloc(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}) {
  // expected-error @+1 {{'memref.alloc' op needs the identity layout to be planned, but is 'memref<4xf32, strided<[2]>>'}}
  %a = memref.alloc() : memref<4xf32, strided<[2]>>
  rt.kernel "fill" outs(%w : memref<4xf32>) floats = [0.0]
  return
}

// -----

func.func @index_alloc(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}) {
  // expected-error @+1 {{'memref.alloc' op needs a whole-byte integer or float element type to be planned, but is 'memref<4xindex>'}}
  %a = memref.alloc() : memref<4xindex>
  rt.kernel "fill" outs(%w : memref<4xf32>) floats = [0.0]
  return
}

// -----

func.func @i1_alloc(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}) {
  // expected-error @+1 {{'memref.alloc' op needs a whole-byte integer or float element type to be planned, but is 'memref<4xi1>'}}
  %a = memref.alloc() : memref<4xi1>
  rt.kernel "fill" outs(%w : memref<4xf32>) floats = [0.0]
  return
}

// -----

// expected-error @+1 {{argument #1 must be a memref, but is 'index'}}
func.func @scalar_argument(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}, %n: index) {
  rt.kernel "fill" outs(%w : memref<4xf32>) floats = [0.0]
  return
}

// -----

// expected-error @+1 {{argument #0 needs a static shape to be planned, but is 'memref<?xf32>'}}
func.func @dynamic_argument(%w: memref<?xf32> {rt.role = "param", rt.name = "w"}, %v: memref<4xf32> {rt.role = "param", rt.name = "v"}) {
  rt.kernel "fill" outs(%v : memref<4xf32>) floats = [0.0]
  return
}

// -----

// expected-error @+1 {{argument #0 needs the identity layout to be planned, but is 'memref<4xf32, strided<[1], offset: 4>>'}}
func.func @offset_argument(%w: memref<4xf32, strided<[1], offset: 4>> {rt.role = "param", rt.name = "w"}) {
  rt.kernel "fill" outs(%w : memref<4xf32, strided<[1], offset: 4>>) floats = [0.0]
  return
}

// -----

// expected-error @+1 {{argument #1 has no rt.role}}
func.func @argument_without_role(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}, %v: memref<4xf32>) {
  rt.kernel "copy" ins(%w : memref<4xf32>) outs(%v : memref<4xf32>)
  return
}

// -----

// A name without a role is not enough.
// expected-error @+1 {{argument #0 has no rt.role}}
func.func @name_without_role(%w: memref<4xf32> {rt.name = "w"}) {
  rt.kernel "fill" outs(%w : memref<4xf32>) floats = [0.0]
  return
}

// -----

// An already planned function: its arena has no role.
// expected-error @+1 {{argument #0 has no rt.role}}
func.func @planned_twice(%arena: memref<64xi8>) attributes {rt.arena_bytes = 64 : i64} {
  %c0 = arith.constant 0 : index
  %w = memref.view %arena[%c0][] {rt.role = "param", rt.name = "w"} : memref<64xi8> to memref<4xf32>
  rt.kernel "fill" outs(%w : memref<4xf32>) floats = [0.0]
  return
}

// -----

// Two arguments of one function with one role and name would share a buffer.
// expected-error @+1 {{arguments #0 and #2 are both the param of w}}
func.func @same_state_twice(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}, %m: memref<4xf32> {rt.role = "moment1", rt.name = "w"},
                            %w2: memref<4xf32> {rt.role = "param", rt.name = "w"}) {
  rt.kernel "copy" ins(%w : memref<4xf32>) outs(%w2 : memref<4xf32>)
  return
}

// -----

// expected-error @+1 {{arguments #0 and #1 are both the loss}}
func.func @two_losses(%a: memref<f32> {rt.role = "loss"}, %b: memref<f32> {rt.role = "loss"}) {
  rt.kernel "copy" ins(%a : memref<f32>) outs(%b : memref<f32>)
  return
}

// -----

func.func @train_step(%w: memref<4x8xf32> {rt.role = "param", rt.name = "w"}) {
  rt.kernel "fill" outs(%w : memref<4x8xf32>) floats = [0.0]
  return
}
// expected-error @+1 {{argument #0 (param w) is 'memref<8x4xf32>' here but 'memref<4x8xf32>' in another function}}
func.func @eval_step(%w: memref<8x4xf32> {rt.role = "param", rt.name = "w"}) {
  rt.kernel "fill" outs(%w : memref<8x4xf32>) floats = [0.0]
  return
}

// -----

// The same for an input without a name, here the element type differs.
func.func @train_step(%t: memref<2x3xi32> {rt.role = "tokens"}, %w: memref<4xf32> {rt.role = "param", rt.name = "w"}) {
  rt.kernel "fill" outs(%w : memref<4xf32>) floats = [0.0]
  return
}
// expected-error @+1 {{argument #1 (tokens) is 'memref<2x3xf32>' here but 'memref<2x3xi32>' in another function}}
func.func @eval_step(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}, %t: memref<2x3xf32> {rt.role = "tokens"}) {
  rt.kernel "fill" outs(%w : memref<4xf32>) floats = [0.0]
  return
}

// -----

// Sizes are checked (issue 17): a buffer beyond what a machine can address
// (2^48 bytes) or beyond 64-bit sizes is refused, never planned with a
// wrapped-around size.
func.func @huge_alloc(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}) {
  // expected-error @+1 {{'memref.alloc' op buffer 'memref<100000000x100000000xf32>' needs 40000000000000000 bytes, more than the 2^48 bytes a machine can address; partition the model over more ranks or make it smaller}}
  %a = memref.alloc() : memref<100000000x100000000xf32>
  rt.kernel "fill" outs(%a : memref<100000000x100000000xf32>) floats = [0.0]
  return
}

// -----

func.func @overflowing_alloc(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}) {
  // expected-error @+1 {{'memref.alloc' op buffer 'memref<4000000000x4000000000xf32>' needs about 6.40e+19 bytes, more than 64-bit sizes can count; partition the model over more ranks or make it smaller}}
  %a = memref.alloc() : memref<4000000000x4000000000xf32>
  rt.kernel "fill" outs(%a : memref<4000000000x4000000000xf32>) floats = [0.0]
  return
}

// -----

// expected-error @+1 {{buffer 'memref<4000000000x4000000000xf32>' needs about 6.40e+19 bytes, more than 64-bit sizes can count}}
func.func @overflowing_state(%w: memref<4000000000x4000000000xf32> {rt.role = "param", rt.name = "w"}) {
  rt.kernel "fill" outs(%w : memref<4000000000x4000000000xf32>) floats = [0.0]
  return
}

// -----

// Two parameters of 2^47 bytes fill the 2^48; one more byte does not fit.
// expected-error @+1 {{the parameters, optimizer state and inputs need more than the 2^48 bytes a machine can address (reached at argument #2, param c); partition the model over more ranks or make it smaller}}
func.func @state_beyond_2_48(%a: memref<35184372088832xf32> {rt.role = "param", rt.name = "a"},
                             %b: memref<35184372088832xf32> {rt.role = "param", rt.name = "b"},
                             %c: memref<4xf32> {rt.role = "param", rt.name = "c"}) {
  rt.kernel "fill" outs(%c : memref<4xf32>) floats = [0.0]
  return
}

// -----

// Three temporaries of 2^47 bytes live at once.
// expected-error @+1 {{the temporaries of @temporaries_beyond_2_48 need more than the 2^48 bytes a machine can address (reached placing buffer 'memref<35184372088832xf32>'); partition the model over more ranks or make it smaller}}
func.func @temporaries_beyond_2_48(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}) {
  %a = memref.alloc() : memref<35184372088832xf32>
  %b = memref.alloc() : memref<35184372088832xf32>
  %c = memref.alloc() : memref<35184372088832xf32>
  rt.kernel "fill" outs(%a : memref<35184372088832xf32>) floats = [0.0]
  rt.kernel "fill" outs(%b : memref<35184372088832xf32>) floats = [0.0]
  rt.kernel "add" ins(%a, %b : memref<35184372088832xf32>, memref<35184372088832xf32>) outs(%c : memref<35184372088832xf32>)
  return
}

// -----

// State and temporaries each fit, their sum does not.
// expected-error @+1 {{the arena needs 281474976710720 bytes (state 140737488355392, temporaries 140737488355328), more than the 2^48 bytes a machine can address; partition the model over more ranks or make it smaller}}
module {
  func.func @arena_beyond_2_48(%w: memref<35184372088832xf32> {rt.role = "param", rt.name = "w"},
                               %x: memref<4xf32> {rt.role = "param", rt.name = "x"}) {
    %a = memref.alloc() : memref<35184372088832xf32>
    rt.kernel "fill" outs(%a : memref<35184372088832xf32>) floats = [0.0]
    return
  }
}

// -----

// A walk's repeated slot whose copy is the function's argument: the plan
// has no bytes of its own to give its repeats.
func.func @repeated_copy_not_allocated(%x: memref<16xf32> {rt.role = "param", rt.name = "x"},
                                       %a1: memref<16xf32> {rt.role = "param", rt.name = "a1"}) {
  %a = memref.alloc() {rt.held} : memref<16xf32>
  // expected-error @+1 {{'rt.action_walk_begin' op repeats a slot whose copy is no buffer allocated in its function}}
  rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 0, 2, 2]
      slot_sizes = [1] region_rows = [0] slot_repeats = 1
      slots(%a : memref<16xf32>) copies(%a1 : memref<16xf32>)
  rt.action_region "F chunk 0"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  rt.action_walk_end live(%a, %a1 : memref<16xf32>, memref<16xf32>)
  return
}

// -----

// 2^44 bytes in slot 1, repeated 16 times: 17 x 2^44 bytes.
func.func @repeated_slot_beyond_2_48(%x: memref<4398046511104xf32> {rt.role = "param", rt.name = "x"}) {
  %a = memref.alloc() {rt.held} : memref<4398046511104xf32>
  %a1 = memref.alloc() {rt.held} : memref<4398046511104xf32>
  // expected-error @+1 {{'rt.action_walk_begin' op repeats a slot 16 times: a copy of 17592186044416 bytes would take more than 281474976710656; use fewer micro-batches or a schedule that holds fewer at once (1F1B)}}
  rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 0, 17, 17]
      slot_sizes = [1] region_rows = [0] slot_repeats = 16
      slots(%a : memref<4398046511104xf32>) copies(%a1 : memref<4398046511104xf32>)
  rt.action_region "F chunk 0"
  rt.kernel "gelu" ins(%x : memref<4398046511104xf32>) outs(%a : memref<4398046511104xf32>)
  rt.action_walk_end live(%a, %a1 : memref<4398046511104xf32>, memref<4398046511104xf32>)
  return
}
