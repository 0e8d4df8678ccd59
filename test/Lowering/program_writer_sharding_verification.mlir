// RUN: partition-translate --rt-to-program %s --split-input-file -verify-diagnostics -o /dev/null
// Needs the dist dialect to accept dist.local_sharding on memref views
// (lowered state); remove this line once it does.

// The .ptp writer's errors on dist.local_sharding: Buffer.sharding names
// axes of the program's one mesh, and only whole state can be sharded.

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @train_step(%arena: memref<128xi8>) attributes {rt.arena_bytes = 128 : i64, xfmr.train_step = {}} {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %w = memref.view %arena[%c0][] {rt.role = "param", rt.name = "w"} : memref<128xi8> to memref<2x8xf32>
  // expected-error @+1 {{'memref.view' op is a temporary with dist.local_sharding; only state buffers are sharded}}
  %t = memref.view %arena[%c64][] {dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>} : memref<128xi8> to memref<2x8xf32>
  rt.kernel "copy" ins(%w : memref<2x8xf32>) outs(%t : memref<2x8xf32>)
  return
}

// -----

dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @train_step(%arena: memref<64xi8>) attributes {rt.arena_bytes = 64 : i64, xfmr.train_step = {}} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'memref.view' op dist.local_sharding #dist.sharding<@mesh, [[tp], []], partial = [dp]> is a partial sum; state must be whole}}
  %w = memref.view %arena[%c0][] {rt.role = "param", rt.name = "w", dist.local_sharding = #dist.sharding<@mesh, [[tp], []], partial = [dp]>} : memref<64xi8> to memref<2x8xf32>
  rt.kernel "fill" outs(%w : memref<2x8xf32>) floats = [0.0]
  return
}

// -----

// The eval step must see the parameter sharded as the train step does.
dist.mesh @mesh axes = [dp = 2, tp = 2]
func.func @train_step(%arena: memref<64xi8>) attributes {rt.arena_bytes = 64 : i64, xfmr.train_step = {}} {
  %c0 = arith.constant 0 : index
  %w = memref.view %arena[%c0][] {rt.role = "param", rt.name = "w", dist.local_sharding = #dist.sharding<@mesh, [[tp], []]>} : memref<64xi8> to memref<2x8xf32>
  rt.kernel "fill" outs(%w : memref<2x8xf32>) floats = [0.0]
  return
}
func.func @eval_step(%arena: memref<64xi8>) attributes {rt.arena_bytes = 64 : i64} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'memref.view' op is the param w with another dist.local_sharding than in an earlier function}}
  %w = memref.view %arena[%c0][] {rt.role = "param", rt.name = "w", dist.local_sharding = #dist.sharding<@mesh, [[dp], []]>} : memref<64xi8> to memref<2x8xf32>
  rt.kernel "fill" outs(%w : memref<2x8xf32>) floats = [0.0]
  return
}
