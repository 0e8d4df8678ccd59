// RUN: partition-translate --rt-to-program %s --split-input-file -verify-diagnostics -o /dev/null

// One case per error of the .ptp writer on tensor-parallel buffers and
// collectives (lowering/ProgramWriter.cpp).

module {
  dist.mesh @mesh axes = [dp = 2, tp = 2]
  func.func @train_step(%arena: memref<256xi8>) attributes {rt.arena_bytes = 256 : i64, xfmr.train_step = {}} {
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %x = memref.view %arena[%c0][] : memref<256xi8> to memref<8x4xf32>
    %y = memref.view %arena[%c64][] : memref<256xi8> to memref<4x4xf32>
    // expected-error @+1 {{'rt.reduce_scatter' op reads [0, 128) and writes [64, 128), which overlap in the arena}}
    rt.reduce_scatter %x, %y on @mesh axes [tp] dim = 0 reduce = sum label = "s" : memref<8x4xf32>, memref<4x4xf32>
    return
  }
}

// -----

module {
  dist.mesh @mesh axes = [dp = 2, tp = 2]
  func.func @train_step(%arena: memref<64xi8>) attributes {rt.arena_bytes = 64 : i64, xfmr.train_step = {}} {
    %c0 = arith.constant 0 : index
    // expected-error @+1 {{'memref.view' op is the index on axes 'dp,ep', but 'ep' is not an axis of @mesh}}
    %i = memref.view %arena[%c0][] {rt.role = "axis_index", rt.name = "dp,ep"} : memref<64xi8> to memref<i32>
    return
  }
}

// -----

module {
  func.func @train_step(%arena: memref<64xi8>) attributes {rt.arena_bytes = 64 : i64, xfmr.train_step = {}} {
    %c0 = arith.constant 0 : index
    // expected-error @+1 {{'memref.view' op is the index on axes 'tp', but the module has no dist.mesh}}
    %i = memref.view %arena[%c0][] {rt.role = "axis_index", rt.name = "tp"} : memref<64xi8> to memref<i32>
    return
  }
}

// -----

module {
  dist.mesh @mesh axes = [dp = 2, tp = 2]
  func.func @train_step(%arena: memref<64xi8>) attributes {rt.arena_bytes = 64 : i64, xfmr.train_step = {}} {
    %c0 = arith.constant 0 : index
    // expected-error @+1 {{'memref.view' op is an axis index, which must be memref<i32>}}
    %i = memref.view %arena[%c0][] {rt.role = "axis_index", rt.name = "tp"} : memref<64xi8> to memref<f32>
    return
  }
}
