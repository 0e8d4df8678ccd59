// --dist-zero (stages 1 and 2): each data-parallel gradient bucket that
// feeds AdamW becomes a reduce-scatter of a flat, padded bucket, AdamW on
// each rank's chunk with sharded moments, and an all-gather of the updated
// parameters.
// RUN: partition-opt %s -split-input-file --dist-zero | FileCheck %s
// RUN: partition-opt %s -split-input-file --dist-zero=stage=0 | FileCheck %s --check-prefix=STAGE0

// A bucket of a [3, 5] weight (15 elements: chunks of 8, the last padded
// by one) and a [5] bias (chunks of 3, one padded) over dp = 2: the
// bucket is [2, 11]; the loss's reduction is left alone; the moments
// become flat shards of their tensors, in the signature too.

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 1, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  // CHECK-LABEL: func.func @train_step
  // CHECK-SAME: %[[W:[^:]*]]: tensor<3x5xf32> {xfmr.param = "w"}
  // CHECK-SAME: %[[MW:[^:]*]]: tensor<8xf32> {dist.flat_shard = {flat = #dist.sharding<@mesh, {{\[\[}}dp]]>, shape = array<i64: 3, 5>}, xfmr.moment1 = "w"}
  // CHECK-SAME: %[[VB:[^:]*]]: tensor<3xf32> {dist.flat_shard = {flat = #dist.sharding<@mesh, {{\[\[}}dp]]>, shape = array<i64: 5>}, xfmr.moment2 = "b"}
  // CHECK-SAME: -> (tensor<f32> {xfmr.output = "loss"}, tensor<3x5xf32> {xfmr.param = "w"}, tensor<5xf32> {xfmr.param = "b"}, tensor<8xf32> {dist.flat_shard = {{.*}}xfmr.moment1 = "w"}
  // CHECK: %[[LOSS:.*]] = dist.all_reduce %{{.*}} on @mesh axes [dp] reduce = sum {dist.label = "loss"} : tensor<f32>
  // CHECK: %[[BUCKET:.*]] = dist.flat_pack %[[GW:.*]], %[[GB:.*]] : tensor<3x5xf32>, tensor<5xf32> -> tensor<2x11xf32>
  // CHECK-NEXT: %[[ROW:.*]] = dist.reduce_scatter %[[BUCKET]] on @mesh axes [dp] dim = 0 reduce = sum {dist.label = "gradient bucket 0 (reduce-scatter)"} : tensor<2x11xf32> -> tensor<1x11xf32>
  // CHECK-NEXT: %[[G:.*]]:2 = dist.flat_unpack %[[ROW]] : tensor<1x11xf32> -> tensor<8xf32>, tensor<3xf32>
  // CHECK: %[[PARAMS:.*]] = dist.flat_pack %[[W]], %{{.*}} : tensor<3x5xf32>, tensor<5xf32> -> tensor<2x11xf32>
  // CHECK-NEXT: %[[OWN:.*]] = dist.all_slice %[[PARAMS]] on @mesh axes [dp] dim = 0 : tensor<2x11xf32> -> tensor<1x11xf32>
  // CHECK-NEXT: %[[P:.*]]:2 = dist.flat_unpack %[[OWN]] : tensor<1x11xf32> -> tensor<8xf32>, tensor<3xf32>
  // CHECK-NEXT: %[[NW:.*]], %[[NMW:.*]], %[[NVW:.*]] = xfmr.adamw %[[P]]#0, %[[G]]#0, %[[MW]], %{{.*}} {weight_decay = 1.000000e-01 : f32} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i32>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK-NEXT: %[[NB:.*]], %{{.*}}, %[[NVB:.*]] = xfmr.adamw %[[P]]#1, %[[G]]#1, %{{.*}}, %[[VB]], {{.*}} -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  // CHECK-NEXT: %[[MINE:.*]] = dist.flat_pack %[[NW]], %[[NB]] : tensor<8xf32>, tensor<3xf32> -> tensor<1x11xf32>
  // CHECK-NEXT: %[[ALL:.*]] = dist.all_gather %[[MINE]] on @mesh axes [dp] dim = 0 {dist.label = "gradient bucket 0 (updated parameters)"} : tensor<1x11xf32> -> tensor<2x11xf32>
  // CHECK-NEXT: %[[NEW:.*]]:2 = dist.flat_unpack %[[ALL]] : tensor<2x11xf32> -> tensor<3x5xf32>, tensor<5xf32>
  // CHECK-NEXT: return %[[LOSS]], %[[NEW]]#0, %[[NEW]]#1, %[[NMW]], {{.*}}, %[[NVB]] : tensor<f32>, tensor<3x5xf32>, tensor<5xf32>, tensor<8xf32>, tensor<3xf32>, tensor<8xf32>, tensor<3xf32>
  // STAGE0-LABEL: func.func @train_step
  // STAGE0: dist.all_reduce {{.*}} {dist.label = "gradient bucket 0"} : tensor<3x5xf32>, tensor<5xf32>
  // STAGE0-NOT: dist.flat_pack
  func.func @train_step(%w: tensor<3x5xf32> {xfmr.param = "w"}, %b: tensor<5xf32> {xfmr.param = "b"},
                        %mw: tensor<3x5xf32> {xfmr.moment1 = "w"}, %mb: tensor<5xf32> {xfmr.moment1 = "b"},
                        %vw: tensor<3x5xf32> {xfmr.moment2 = "w"}, %vb: tensor<5xf32> {xfmr.moment2 = "b"},
                        %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"}, %l: tensor<f32> {xfmr.input = "tokens"})
      -> (tensor<f32> {xfmr.output = "loss"}, tensor<3x5xf32> {xfmr.param = "w"}, tensor<5xf32> {xfmr.param = "b"},
          tensor<3x5xf32> {xfmr.moment1 = "w"}, tensor<5xf32> {xfmr.moment1 = "b"},
          tensor<3x5xf32> {xfmr.moment2 = "w"}, tensor<5xf32> {xfmr.moment2 = "b"})
      attributes {xfmr.train_step = {}} {
    %loss = dist.all_reduce %l on @mesh axes [dp] reduce = sum {dist.label = "loss"} : tensor<f32>
    %gw = xfmr.scale %w {factor = 2.0 : f32} : (tensor<3x5xf32>) -> tensor<3x5xf32>
    %gb = xfmr.scale %b {factor = 2.0 : f32} : (tensor<5xf32>) -> tensor<5xf32>
    %g:2 = dist.all_reduce %gw, %gb on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 0"} : tensor<3x5xf32>, tensor<5xf32>
    %w2, %mw2, %vw2 = xfmr.adamw %w, %g#0, %mw, %vw, %t, %lr {weight_decay = 0.1 : f32} : (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<i32>, tensor<f32>) -> (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>)
    %b2, %mb2, %vb2 = xfmr.adamw %b, %g#1, %mb, %vb, %t, %lr : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<i32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>)
    return %loss, %w2, %b2, %mw2, %mb2, %vw2, %vb2 : tensor<f32>, tensor<3x5xf32>, tensor<5xf32>, tensor<3x5xf32>, tensor<5xf32>, tensor<3x5xf32>, tensor<5xf32>
  }
}

// -----

// A sum over [dp, tp] of one gradient (sequence parallelism's norm
// weights): the tp part is all-reduced whole, then the dp part
// reduce-scattered; a tensor-parallel moment keeps its block sharding as
// the flat shard's block_of.

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = true, schedule = "1f1b", microbatches = 1, zero_stage = 2, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 2]
  // CHECK-LABEL: func.func @train_step
  // CHECK-SAME: tensor<2xf32> {dist.flat_shard = {block_of = #dist.sharding<@mesh, {{\[\[}}tp]]>, flat = #dist.sharding<@mesh, {{\[\[}}dp]]>, shape = array<i64: 4>}, xfmr.moment1 = "g"}
  // CHECK: %[[TP:.*]] = dist.all_reduce %{{.*}} on @mesh axes [tp] reduce = sum {dist.label = "partial sum 0 over [dp, tp]"} : tensor<4xf32>
  // CHECK-NEXT: %[[BUCKET:.*]] = dist.flat_pack %[[TP]] : tensor<4xf32> -> tensor<2x2xf32>
  // CHECK-NEXT: dist.reduce_scatter %[[BUCKET]] on @mesh axes [dp] dim = 0 reduce = sum {dist.label = "partial sum 0 over [dp, tp] (reduce-scatter)"}
  func.func @train_step(%g: tensor<4xf32> {xfmr.param = "g", dist.local_sharding = #dist.sharding<@mesh, [[tp]]>},
                        %m: tensor<4xf32> {xfmr.moment1 = "g", dist.local_sharding = #dist.sharding<@mesh, [[tp]]>},
                        %v: tensor<4xf32> {xfmr.moment2 = "g", dist.local_sharding = #dist.sharding<@mesh, [[tp]]>},
                        %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"})
      -> (tensor<4xf32> {xfmr.param = "g", dist.local_sharding = #dist.sharding<@mesh, [[tp]]>},
          tensor<4xf32> {xfmr.moment1 = "g", dist.local_sharding = #dist.sharding<@mesh, [[tp]]>},
          tensor<4xf32> {xfmr.moment2 = "g", dist.local_sharding = #dist.sharding<@mesh, [[tp]]>})
      attributes {xfmr.train_step = {}} {
    %d = xfmr.scale %g {factor = 2.0 : f32} : (tensor<4xf32>) -> tensor<4xf32>
    %s = dist.all_reduce %d on @mesh axes [dp, tp] reduce = sum {dist.label = "partial sum 0 over [dp, tp]"} : tensor<4xf32>
    %g2, %m2, %v2 = xfmr.adamw %g, %s, %m, %v, %t, %lr : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    return %g2, %m2, %v2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// Stage 3: the parameters are flat shards too. Each layer's are gathered
// before their forward uses and again before their backward uses, the
// second gather issued where the first is used (one ahead); AdamW updates
// the shard in place of the all-gather of stages 1 and 2. The pass works on
// any function carrying xfmr.train_step (a pipeline stage's, say).
// RUN: partition-opt %s -split-input-file --dist-zero=stage=3 | FileCheck %s --check-prefix=STAGE3

#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 1, zero_stage = 3, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  // STAGE3-LABEL: func.func @pipeline_stage
  // STAGE3-SAME: %[[W:[^:]*]]: tensor<8xf32> {dist.flat_shard = {flat = #dist.sharding<@mesh, {{\[\[}}dp]]>, shape = array<i64: 3, 5>}, xfmr.layer = 0 : i64, xfmr.param = "w"}
  // STAGE3:      %[[ROW:.*]] = dist.flat_pack %[[W]] : tensor<8xf32> -> tensor<1x8xf32>
  // STAGE3-NEXT: %[[ALL:.*]] = dist.all_gather %[[ROW]] on @mesh axes [dp] dim = 0 {dist.label = "parameters from w (forward)"} : tensor<1x8xf32> -> tensor<2x8xf32>
  // STAGE3-NEXT: %[[FW:.*]] = dist.flat_unpack %[[ALL]] : tensor<2x8xf32> -> tensor<3x5xf32>
  // STAGE3:      %[[ROW2:.*]] = dist.flat_pack %[[W]] : tensor<8xf32> -> tensor<1x8xf32>
  // STAGE3-NEXT: %[[ALL2:.*]] = dist.all_gather %[[ROW2]] on @mesh axes [dp] dim = 0 {dist.label = "parameters from w (backward)"}
  // STAGE3-NEXT: %[[BW:.*]] = dist.flat_unpack %[[ALL2]]
  // STAGE3-NEXT: %[[Y:.*]] = xfmr.linear %{{.*}}, %[[FW]]
  // STAGE3:      xfmr.linear_grad_input %{{.*}}, %[[BW]]
  // STAGE3:      dist.reduce_scatter
  // STAGE3:      %[[NW:.*]], %{{.*}}, %{{.*}} = xfmr.adamw %[[W]], %{{.*}} : (tensor<8xf32>,
  // STAGE3-NOT:  dist.all_gather
  // STAGE3:      return %{{.*}}, %[[NW]],
  func.func @pipeline_stage(%w: tensor<3x5xf32> {xfmr.param = "w", xfmr.layer = 0 : i64},
                        %mw: tensor<3x5xf32> {xfmr.moment1 = "w"}, %vw: tensor<3x5xf32> {xfmr.moment2 = "w"},
                        %x: tensor<4x5xf32> {xfmr.input = "tokens"},
                        %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"})
      -> (tensor<4x3xf32> {xfmr.output = "loss"}, tensor<3x5xf32> {xfmr.param = "w"},
          tensor<3x5xf32> {xfmr.moment1 = "w"}, tensor<3x5xf32> {xfmr.moment2 = "w"})
      attributes {xfmr.train_step = {}} {
    %y = xfmr.linear %x, %w : (tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<4x3xf32>
    %dx = xfmr.linear_grad_input %y, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %dw = xfmr.linear_grad_weight %y, %dx : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
    %g = dist.all_reduce %dw on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 0"} : tensor<3x5xf32>
    %w2, %m2, %v2 = xfmr.adamw %w, %g, %mw, %vw, %t, %lr : (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<i32>, tensor<f32>) -> (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>)
    return %y, %w2, %m2, %v2 : tensor<4x3xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>
  }
}

// -----

// Stage 3 on a pipeline stage whose actions are marked for an action walk
// (--dist-pipeline=mark-actions=true): each action gathers what it reads
// (the walk runs one copy of each kind of action for every micro-batch),
// where unmarked the two forwards would share one gather; no gather is
// prefetched into the action before.
#plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 2, zero_stage = 3, recompute = none, precision = "fp32">
module attributes {dist.plan = #plan} {
  dist.mesh @mesh axes = [dp = 2, pp = 1, tp = 1]
  // STAGE3-LABEL: func.func @marked_actions
  // STAGE3:      rt.action_mark "F" model_chunk = 0 microbatch = 0
  // STAGE3-NEXT: dist.flat_pack
  // STAGE3-NEXT: dist.all_gather {{.*}}"parameters from w (forward)"
  // STAGE3-NEXT: dist.flat_unpack
  // STAGE3-NEXT: xfmr.linear
  // STAGE3-NEXT: rt.action_mark "F" model_chunk = 0 microbatch = 1
  // STAGE3-NEXT: dist.flat_pack
  // STAGE3-NEXT: dist.all_gather {{.*}}"parameters from w (forward)"
  // STAGE3-NEXT: dist.flat_unpack
  // STAGE3-NEXT: xfmr.linear
  // STAGE3-NEXT: rt.action_mark "B" model_chunk = 0 microbatch = 0
  // STAGE3-NEXT: dist.flat_pack
  // STAGE3-NEXT: dist.all_gather {{.*}}"parameters from w (backward)"
  func.func @marked_actions(%w: tensor<3x5xf32> {xfmr.param = "w", xfmr.layer = 0 : i64},
                        %mw: tensor<3x5xf32> {xfmr.moment1 = "w"}, %vw: tensor<3x5xf32> {xfmr.moment2 = "w"},
                        %x: tensor<4x5xf32> {xfmr.input = "tokens"},
                        %t: tensor<i32> {xfmr.input = "step"}, %lr: tensor<f32> {xfmr.input = "lr"})
      -> (tensor<4x3xf32> {xfmr.output = "loss"}, tensor<3x5xf32> {xfmr.param = "w"},
          tensor<3x5xf32> {xfmr.moment1 = "w"}, tensor<3x5xf32> {xfmr.moment2 = "w"})
      attributes {xfmr.train_step = {}} {
    rt.action_mark "F" model_chunk = 0 microbatch = 0
    %y = xfmr.linear %x, %w : (tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<4x3xf32>
    rt.action_mark "F" model_chunk = 0 microbatch = 1
    %y1 = xfmr.linear %x, %w : (tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<4x3xf32>
    rt.action_mark "B" model_chunk = 0 microbatch = 0
    %dx = xfmr.linear_grad_input %y, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %dw = xfmr.linear_grad_weight %y1, %dx : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
    %g = dist.all_reduce %dw on @mesh axes [dp] reduce = sum {dist.label = "gradient bucket 0"} : tensor<3x5xf32>
    rt.action_mark "update" model_chunk = 0 microbatch = 0
    %w2, %m2, %v2 = xfmr.adamw %w, %g, %mw, %vw, %t, %lr : (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<i32>, tensor<f32>) -> (tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>)
    return %y, %w2, %m2, %v2 : tensor<4x3xf32>, tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>
  }
}
