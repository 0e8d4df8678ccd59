// RUN: partition-translate --rt-to-program %s --split-input-file -verify-diagnostics -o /dev/null

// One case per error of the .ptp writer (lowering/ProgramWriter.cpp): input
// that partition-run could not execute. Not reachable from parsed input, so
// not here: a view of something other than the arena or at a non-constant
// offset, a subview at a dynamic offset (each needs an op that is rejected
// first), and an unknown rt.role (the rt dialect rejects it on parsing).

// expected-error @+1 {{no memory-planned function (rt.arena_bytes); run --lower-to-rt --lower-memory-plan first}}
module {
  func.func @train_step(%w: memref<4xf32> {rt.role = "param", rt.name = "w"}) {
    rt.kernel "fill" outs(%w : memref<4xf32>) floats = [0.0]
    return
  }
}

// -----

func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64, xfmr.train_step = {}} {
  return
}
// expected-error @+1 {{all planned functions must share one arena}}
func.func @eval_step(%arena: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64} {
  return
}

// -----

// expected-error @+1 {{a planned step takes exactly one argument, the arena}}
func.func @train_step(%arena: memref<128xi8>, %w: memref<4xf32>) attributes {rt.arena_bytes = 128 : i64} {
  return
}

// -----

// expected-error @+1 {{a planned step takes exactly one argument, the arena}}
func.func @train_step() attributes {rt.arena_bytes = 0 : i64} {
  return
}

// -----

// Only rt.kernel ops (and the views and index constants they use) run.
func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  // expected-error @+1 {{'arith.addi' op cannot be written to a program: the runtime executes rt.kernel ops only}}
  %off = arith.addi %c0, %c64 : index
  %w = memref.view %arena[%off][] : memref<128xi8> to memref<4xf32>
  return
}

// -----

func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  // expected-error @+1 {{'memref.alloc' op cannot be written to a program: the runtime executes rt.kernel ops only}}
  %x = memref.alloc() : memref<4xf32>
  rt.kernel "fill" outs(%x : memref<4xf32>) floats = [0.0]
  return
}

// -----

func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'memref.view' op buffer element type 'bf16' is not supported by the runtime (f32, i32)}}
  %w = memref.view %arena[%c0][] : memref<128xi8> to memref<4xbf16>
  return
}

// -----

func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  %c96 = arith.constant 96 : index
  // expected-error @+1 {{'memref.view' op buffer [96, 160) lies outside the arena of 128 bytes}}
  %w = memref.view %arena[%c96][] {rt.role = "param", rt.name = "w"} : memref<128xi8> to memref<16xf32>
  return
}

// -----

// The attribute, not the arena argument's type, gives the arena's size.
func.func @train_step(%arena: memref<4096xi8>) attributes {rt.arena_bytes = 32 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'memref.view' op buffer [0, 64) lies outside the arena of 32 bytes}}
  %w = memref.view %arena[%c0][] : memref<4096xi8> to memref<16xf32>
  return
}

// -----

func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  // expected-error @+1 {{'memref.subview' op must view a planned buffer}}
  %s = memref.subview %arena[64] [64] [1] : memref<128xi8> to memref<64xi8, strided<[1], offset: 64>>
  return
}

// -----

func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  // expected-error @+1 {{'rt.kernel' op operand is not a planned buffer (run --lower-memory-plan first)}}
  rt.kernel "fill" outs(%arena : memref<128xi8>) floats = [0.0]
  return
}
