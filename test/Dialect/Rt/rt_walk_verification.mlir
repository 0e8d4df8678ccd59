// RUN: partition-opt %s -split-input-file -verify-diagnostics

// One case per error of the action walk's verifiers (RtScheduleOps.cpp).

func.func @two_walks(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.action_walk_begin' op needs the block's only action walk and no micro-batch loop beside it}}
  rt.action_walk_begin actions = [0, 0, 0] slot_sizes = [] region_rows = [0]
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  rt.action_walk_begin actions = [0, 0, 0] slot_sizes = [] region_rows = [0]
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  return
}

// -----

func.func @beside_a_loop(%x: memref<4xf32>, %y: memref<4xf32>) {
  rt.microbatch_loop_begin count = 2
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.microbatch_loop_end
  // expected-error @+1 {{'rt.action_walk_begin' op needs the block's only action walk and no micro-batch loop beside it}}
  rt.action_walk_begin actions = [0, 0, 0] slot_sizes = [] region_rows = [0]
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  return
}

// -----

func.func @no_end(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.action_walk_begin' op needs an rt.action_walk_end after it in its block}}
  rt.action_walk_begin actions = [0, 0, 0] slot_sizes = [] region_rows = [0]
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  return
}

// -----

func.func @no_first_region(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.action_walk_begin' op must be followed by its first rt.action_region}}
  rt.action_walk_begin actions = [0, 0, 0] slot_sizes = [] region_rows = [0]
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  return
}

// -----

func.func @negative_slot(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.action_walk_begin' op has a slot of -1 buffers}}
  rt.action_walk_begin actions = [0, 0, 0] slot_sizes = [-1] region_rows = [0]
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  return
}

// -----

func.func @slot_sizes(%x: memref<4xf32>, %y: memref<4xf32>, %z: memref<4xf32>) {
  // expected-error @+1 {{'rt.action_walk_begin' op substitutes 1 copies for 1 buffers, but its slots hold 2}}
  rt.action_walk_begin actions = [0, 0, 0] slot_sizes = [2] region_rows = [0]
      slots(%y : memref<4xf32>) copies(%z : memref<4xf32>)
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  return
}

// -----

func.func @slot_type(%x: memref<4xf32>, %y: memref<4xf32>, %z: memref<8xf32>) {
  // expected-error @+1 {{'rt.action_walk_begin' op substitutes a 'memref<8xf32>' for a 'memref<4xf32>'; a slot's buffer is another of the same type}}
  rt.action_walk_begin actions = [0, 0, 0] slot_sizes = [1] region_rows = [0]
      slots(%y : memref<4xf32>) copies(%z : memref<8xf32>)
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  return
}

// -----

func.func @region_rows(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.action_walk_begin' op copies rows for 2 regions, but the walk has 1}}
  rt.action_walk_begin actions = [0, 0, 0] slot_sizes = [] region_rows = [0, 0]
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  return
}

// -----

func.func @rows_count(%x: memref<4xf32>, %y: memref<4xf32>, %rows: memref<2xi32>, %tokens: memref<4x2xi32>) {
  // expected-error @+1 {{'rt.action_walk_begin' op copies 1 inputs' rows into 1 buffers, but its regions copy 2}}
  rt.action_walk_begin actions = [0, 0, 0] slot_sizes = [] region_rows = [2]
      rows(%rows : memref<2xi32>) sources(%tokens : memref<4x2xi32>)
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  return
}

// -----

func.func @rows_type(%x: memref<4xf32>, %y: memref<4xf32>, %rows: memref<2xf32>, %tokens: memref<4x2xi32>) {
  // expected-error @+1 {{'rt.action_walk_begin' op copies rows of a 'memref<4x2xi32>' into a 'memref<2xf32>'}}
  rt.action_walk_begin actions = [0, 0, 0] slot_sizes = [] region_rows = [1]
      rows(%rows : memref<2xf32>) sources(%tokens : memref<4x2xi32>)
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  return
}

// -----

func.func @repeat_without_slot(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.action_walk_begin' op repeats its last slot 2 times; it needs a slot after slot 0 and a count of at least 0}}
  rt.action_walk_begin actions = [0, 0, 0] slot_sizes = [] region_rows = [0]
      slot_repeats = 2
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  return
}

// -----

func.func @strides_per_copy(%x: memref<4xf32>, %a: memref<4xf32>, %a1: memref<4xf32>) {
  // expected-error @+1 {{'rt.action_walk_begin' op has 2 slot strides; a repeated last slot needs one positive stride per copy, 1}}
  rt.action_walk_begin actions = [0, 0, 0, 0, 2, 1] slot_sizes = [1] region_rows = [0]
      slot_repeats = 1 slot_strides = [16, 16]
      slots(%a : memref<4xf32>) copies(%a1 : memref<4xf32>)
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%a : memref<4xf32>)
  rt.action_walk_end
  return
}

// -----

func.func @not_triples(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.action_walk_begin' op needs actions as (region, slot, micro-batch) triples, but has 4 numbers}}
  rt.action_walk_begin actions = [0, 0, 0, 1] slot_sizes = [] region_rows = [0]
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  return
}

// -----

func.func @action_out_of_range(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.action_walk_begin' op action 1 runs region 0 in slot 1 on micro-batch 1, but the walk has 1 regions and 1 slots}}
  rt.action_walk_begin actions = [0, 0, 0, 0, 1, 1] slot_sizes = [] region_rows = [0]
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  rt.action_walk_end
  return
}

// -----

func.func @stray_region(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'rt.action_region' op must lie between an rt.action_walk_begin and its rt.action_walk_end}}
  rt.action_region "F"
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  return
}

// -----

func.func @stray_end(%x: memref<4xf32>, %y: memref<4xf32>) {
  rt.kernel "gelu" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>)
  // expected-error @+1 {{'rt.action_walk_end' op needs an rt.action_walk_begin before it in its block, after any other rt.action_walk_end}}
  rt.action_walk_end
  return
}

// -----

func.func @mark_phase() {
  // expected-error @+1 {{'rt.action_mark' op marks phase 'X'; an action is F, B or W, or the update after them}}
  rt.action_mark "X" model_chunk = 0 microbatch = 0
  return
}

// -----

func.func @mark_update_of_a_microbatch() {
  // expected-error @+1 {{'rt.action_mark' op marks the update with model_chunk 0 and microbatch 2; the update is of no chunk or micro-batch (0 and 0)}}
  rt.action_mark "update" model_chunk = 0 microbatch = 2
  return
}

// -----

func.func @mark_negative() {
  // expected-error @+1 {{'rt.action_mark' op attribute 'microbatch' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  rt.action_mark "F" model_chunk = 0 microbatch = -1
  return
}
