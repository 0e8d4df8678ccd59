// RUN: partition-translate --rt-to-program %s --split-input-file -verify-diagnostics -o /dev/null

// One case per error of the .ptp writer (lowering/ProgramWriter.cpp): input
// that partition-run could not execute. Not reachable from parsed input, so
// not here: a view of something other than the arena or at a non-constant
// offset, a subview at a dynamic offset (each needs an op that is rejected
// first), an unknown rt.role (the rt dialect rejects it on parsing), and an
// rt.all_reduce on a buffer that is not a view of the arena (the arena
// itself is i8, which rt.all_reduce rejects).

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
// expected-error @+1 {{all planned functions of a stage must share one arena}}
func.func @eval_step(%arena: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64} {
  return
}

// -----

// expected-error @+1 {{a planned step takes the arena, then one argument per tier it offloads to (rt.tier, at most one each of host and nvme), each an i8 buffer}}
func.func @train_step(%arena: memref<128xi8>, %w: memref<4xf32>) attributes {rt.arena_bytes = 128 : i64} {
  return
}

// -----

// expected-error @+1 {{a planned step takes the arena, then one argument per tier it offloads to (rt.tier, at most one each of host and nvme), each an i8 buffer}}
func.func @train_step() attributes {rt.arena_bytes = 0 : i64} {
  return
}

// -----

// Only rt.kernel ops (and the views and index constants they use) run.
func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  // expected-error @+1 {{'arith.addi' op cannot be written to a program: the runtime executes rt.kernel, collective, rt.wait, rt.send, rt.recv, rt.tier_read and rt.tier_write ops only}}
  %off = arith.addi %c0, %c64 : index
  %w = memref.view %arena[%off][] : memref<128xi8> to memref<4xf32>
  return
}

// -----

func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  // expected-error @+1 {{'memref.alloc' op cannot be written to a program: the runtime executes rt.kernel, collective, rt.wait, rt.send, rt.recv, rt.tier_read and rt.tier_write ops only}}
  %x = memref.alloc() : memref<4xf32>
  rt.kernel "fill" outs(%x : memref<4xf32>) floats = [0.0]
  return
}

// -----

func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'memref.view' op buffer element type 'f16' is not supported by the runtime (f32, bf16, i32)}}
  %w = memref.view %arena[%c0][] : memref<128xi8> to memref<4xf16>
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

// A collapse names the bytes of its source from the source's start: a
// strided source (here rows 1-2 of a [4, 8] buffer) has none to name.
func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  %c0 = arith.constant 0 : index
  %v = memref.view %arena[%c0][] : memref<128xi8> to memref<4x8xf32>
  %s = memref.subview %v[1, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 8>>
  // expected-error @+1 {{'memref.collapse_shape' op must collapse a planned buffer of the identity layout}}
  %c = memref.collapse_shape %s [[0, 1]] : memref<2x8xf32, strided<[8, 1], offset: 8>> into memref<16xf32, strided<[1], offset: 8>>
  return
}

// -----

func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  // expected-error @+1 {{'rt.kernel' op operand is not a planned buffer (run --lower-memory-plan first)}}
  rt.kernel "fill" outs(%arena : memref<128xi8>) floats = [0.0]
  return
}

//===----------------------------------------------------------------------===//
// The mesh and the collectives
//===----------------------------------------------------------------------===//

// -----

dist.mesh @m axes = [dp = 2]
// expected-error @+1 {{'dist.mesh' op is a second device mesh: a program runs on one mesh, and this module already declares @m}}
dist.mesh @other axes = [tp = 2]
func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  return
}

// -----

// Program.mesh indexes axes with one byte.
// expected-error @+1 {{'dist.mesh' op has more than 255 axes, more than a program can index}}
dist.mesh @m axes = [a0 = 1, a1 = 1, a2 = 1, a3 = 1, a4 = 1, a5 = 1, a6 = 1, a7 = 1, a8 = 1, a9 = 1, a10 = 1, a11 = 1, a12 = 1, a13 = 1, a14 = 1, a15 = 1, a16 = 1, a17 = 1, a18 = 1, a19 = 1, a20 = 1, a21 = 1, a22 = 1, a23 = 1, a24 = 1, a25 = 1, a26 = 1, a27 = 1, a28 = 1, a29 = 1, a30 = 1, a31 = 1, a32 = 1, a33 = 1, a34 = 1, a35 = 1, a36 = 1, a37 = 1, a38 = 1, a39 = 1, a40 = 1, a41 = 1, a42 = 1, a43 = 1, a44 = 1, a45 = 1, a46 = 1, a47 = 1, a48 = 1, a49 = 1, a50 = 1, a51 = 1, a52 = 1, a53 = 1, a54 = 1, a55 = 1, a56 = 1, a57 = 1, a58 = 1, a59 = 1, a60 = 1, a61 = 1, a62 = 1, a63 = 1, a64 = 1, a65 = 1, a66 = 1, a67 = 1, a68 = 1, a69 = 1, a70 = 1, a71 = 1, a72 = 1, a73 = 1, a74 = 1, a75 = 1, a76 = 1, a77 = 1, a78 = 1, a79 = 1, a80 = 1, a81 = 1, a82 = 1, a83 = 1, a84 = 1, a85 = 1, a86 = 1, a87 = 1, a88 = 1, a89 = 1, a90 = 1, a91 = 1, a92 = 1, a93 = 1, a94 = 1, a95 = 1, a96 = 1, a97 = 1, a98 = 1, a99 = 1, a100 = 1, a101 = 1, a102 = 1, a103 = 1, a104 = 1, a105 = 1, a106 = 1, a107 = 1, a108 = 1, a109 = 1, a110 = 1, a111 = 1, a112 = 1, a113 = 1, a114 = 1, a115 = 1, a116 = 1, a117 = 1, a118 = 1, a119 = 1, a120 = 1, a121 = 1, a122 = 1, a123 = 1, a124 = 1, a125 = 1, a126 = 1, a127 = 1, a128 = 1, a129 = 1, a130 = 1, a131 = 1, a132 = 1, a133 = 1, a134 = 1, a135 = 1, a136 = 1, a137 = 1, a138 = 1, a139 = 1, a140 = 1, a141 = 1, a142 = 1, a143 = 1, a144 = 1, a145 = 1, a146 = 1, a147 = 1, a148 = 1, a149 = 1, a150 = 1, a151 = 1, a152 = 1, a153 = 1, a154 = 1, a155 = 1, a156 = 1, a157 = 1, a158 = 1, a159 = 1, a160 = 1, a161 = 1, a162 = 1, a163 = 1, a164 = 1, a165 = 1, a166 = 1, a167 = 1, a168 = 1, a169 = 1, a170 = 1, a171 = 1, a172 = 1, a173 = 1, a174 = 1, a175 = 1, a176 = 1, a177 = 1, a178 = 1, a179 = 1, a180 = 1, a181 = 1, a182 = 1, a183 = 1, a184 = 1, a185 = 1, a186 = 1, a187 = 1, a188 = 1, a189 = 1, a190 = 1, a191 = 1, a192 = 1, a193 = 1, a194 = 1, a195 = 1, a196 = 1, a197 = 1, a198 = 1, a199 = 1, a200 = 1, a201 = 1, a202 = 1, a203 = 1, a204 = 1, a205 = 1, a206 = 1, a207 = 1, a208 = 1, a209 = 1, a210 = 1, a211 = 1, a212 = 1, a213 = 1, a214 = 1, a215 = 1, a216 = 1, a217 = 1, a218 = 1, a219 = 1, a220 = 1, a221 = 1, a222 = 1, a223 = 1, a224 = 1, a225 = 1, a226 = 1, a227 = 1, a228 = 1, a229 = 1, a230 = 1, a231 = 1, a232 = 1, a233 = 1, a234 = 1, a235 = 1, a236 = 1, a237 = 1, a238 = 1, a239 = 1, a240 = 1, a241 = 1, a242 = 1, a243 = 1, a244 = 1, a245 = 1, a246 = 1, a247 = 1, a248 = 1, a249 = 1, a250 = 1, a251 = 1, a252 = 1, a253 = 1, a254 = 1, a255 = 1]
func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  return
}

// -----

dist.mesh @m axes = [dp = 2]
func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %a = memref.view %arena[%c0][] : memref<128xi8> to memref<8xf32>
  %b = memref.view %arena[%c16][] : memref<128xi8> to memref<4xf32>
  // expected-error @+1 {{'rt.all_reduce' op reduces buffers #0 [0, 32) and #1 [16, 32), which overlap in the arena}}
  rt.all_reduce %a, %b on @m axes [dp] reduce = sum label = "g" : memref<8xf32>, memref<4xf32>
  return
}

// -----

// Sizes are checked (issue 17): an arena beyond 2^48 bytes, or a buffer
// whose size does not fit 64 bits, is refused by name.
// expected-error @+1 {{arena of 562949953421312 bytes: it must be between 0 and 281474976710656 bytes (2^48, what a machine can address)}}
func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 562949953421312 : i64} {
  return
}

// -----

func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'memref.view' op buffer 'memref<4000000000x4000000000xf32>' has more bytes than 64-bit sizes can count}}
  %w = memref.view %arena[%c0][] {rt.role = "param", rt.name = "w"} : memref<128xi8> to memref<4000000000x4000000000xf32>
  return
}

// -----

// The offload's tiers (program format 12): an NVMe tier needs the module's
// rt.offload_path, a tier holds only moments and ZeRO-3 parameter shards,
// and the functions of a stage share their tiers.
// expected-error @below {{the program has an nvme tier but the module no rt.offload_path (the directory of its files; --rt-offload-optimizer sets it)}}
module {
  func.func @train_step(%arena: memref<128xi8>, %tier: memref<4096xi8> {rt.tier = "nvme"}) attributes {rt.arena_bytes = 128 : i64} {
    return
  }
}

// -----

func.func @train_step(%arena: memref<128xi8>, %tier: memref<4096xi8> {rt.tier = "host"}) attributes {rt.arena_bytes = 128 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'memref.view' op lives in a tier but is neither a moment nor a ZeRO-3 parameter shard: only those are offloaded}}
  %w = memref.view %tier[%c0][] {rt.role = "param", rt.name = "w", rt.tier = "host"} : memref<4096xi8> to memref<4xf32>
  return
}

// -----

func.func @train_step(%arena: memref<128xi8>, %tier: memref<4096xi8> {rt.tier = "host"}) attributes {rt.arena_bytes = 128 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'memref.view' op buffer [0, 8192) lies outside the host tier of 4096 bytes}}
  %m = memref.view %tier[%c0][] {rt.role = "moment1", rt.name = "w", rt.tier = "host"} : memref<4096xi8> to memref<2048xf32>
  return
}

// -----

func.func @train_step(%arena: memref<128xi8>, %tier: memref<4096xi8> {rt.tier = "host"}) attributes {rt.arena_bytes = 128 : i64} {
  return
}
// expected-error @+1 {{has a host tier of 8192 bytes, but another function of its stage has one of 4096; the functions of a stage share their tiers}}
func.func @eval_step(%arena: memref<128xi8>, %tier: memref<8192xi8> {rt.tier = "host"}) attributes {rt.arena_bytes = 128 : i64} {
  return
}

// -----

// A walk's repeated slot before the memory plan set its strides.
func.func @train_step(%arena: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64, xfmr.train_step = {}} {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %x = memref.view %arena[%c0][] {rt.role = "param", rt.name = "x"} : memref<256xi8> to memref<16xf32>
  %a = memref.view %arena[%c64][] : memref<256xi8> to memref<16xf32>
  %a1 = memref.view %arena[%c128][] : memref<256xi8> to memref<16xf32>
  // expected-error @+1 {{'rt.action_walk_begin' op repeats its last slot without strides; run --lower-memory-plan first}}
  rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1, 0, 2, 2]
      slot_sizes = [1] region_rows = [0] slot_repeats = 1
      slots(%a : memref<16xf32>) copies(%a1 : memref<16xf32>)
  rt.action_region "F chunk 0"
  rt.kernel "gelu" ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  rt.action_walk_end live(%a, %a1 : memref<16xf32>, memref<16xf32>)
  return
}
