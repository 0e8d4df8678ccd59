// RUN: partition-opt %s --split-input-file --verify-diagnostics --dist-pipeline

// expected-error @+1 {{dist-pipeline: the module has no plan; run --dist-apply-plan with a plan whose mesh has pp > 1 first}}
module {
}

// -----

// expected-error @+1 {{dist-pipeline: no training step (a function with xfmr.train_step) to cut; run --xfmr-train-step first}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 2, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 1, pp = 2, tp = 1]
}

// -----

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 2, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 1, pp = 2, tp = 1]
  // expected-error @+1 {{dist-pipeline: no parameter carries xfmr.layer; the pipeline cuts the model at layer boundaries}}
  func.func @train_step(%w: tensor<4xf32> {xfmr.param = "w"}) -> tensor<4xf32>
      attributes {xfmr.train_step = {microbatches = 2 : i64}} {
    return %w : tensor<4xf32>
  }
}

// -----

module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 2, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 1, pp = 2, tp = 1]
  // expected-error @+1 {{dist-pipeline: the module is already cut into pipeline stages; run the pass once}}
  func.func @train_step_stage0(%w: tensor<4xf32> {xfmr.param = "w", xfmr.layer = 0 : i64}) -> tensor<4xf32>
      attributes {dist.pipeline_stage = 0 : i64, xfmr.train_step = {microbatches = 2 : i64}} {
    return %w : tensor<4xf32>
  }
}

// -----

// The step was built for one micro-batch, the plan asks for two.
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "1f1b", microbatches = 2, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 1, pp = 2, tp = 1]
  // expected-error @+1 {{dist-pipeline: pipeline.microbatches = 2 but the training step has 1 micro-batches; give partition-compile --microbatches 2 or leave the option out (the plan's count is its default), or build the step with partition-opt --xfmr-train-step=microbatches=2}}
  func.func @train_step(%w: tensor<4xf32> {xfmr.param = "w", xfmr.layer = 0 : i64}, %v: tensor<4xf32> {xfmr.param = "v", xfmr.layer = 1 : i64}) -> tensor<4xf32>
      attributes {xfmr.train_step = {microbatches = 1 : i64}} {
    %0 = xfmr.add %w, %v : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// Interleaving needs micro-batches in groups of pp.
// expected-error @+1 {{dist-pipeline: pipeline.microbatches = 3 is not divisible by mesh.pp = 2: interleaved-1f1b runs the micro-batches in groups of pp; use 2 or 4}}
module attributes {dist.plan = #dist.plan<mesh = @mesh, axes = [dp = data, pp = pipeline, tp = tensor], sequence_parallel = false, schedule = "interleaved-1f1b", microbatches = 3, zero_stage = 0, recompute = none, precision = "fp32">} {
  dist.mesh @mesh axes = [dp = 1, pp = 2, tp = 1]
  func.func @train_step(%w: tensor<4xf32> {xfmr.param = "w", xfmr.layer = 0 : i64}, %v: tensor<4xf32> {xfmr.param = "v", xfmr.layer = 1 : i64}, %tokens: tensor<3x4xi32> {xfmr.input = "tokens"}) -> tensor<4xf32>
      attributes {xfmr.train_step = {microbatches = 3 : i64}} {
    %s0 = tensor.extract_slice %tokens[0, 0] [1, 4] [1, 1] : tensor<3x4xi32> to tensor<1x4xi32>
    %s1 = tensor.extract_slice %tokens[1, 0] [1, 4] [1, 1] : tensor<3x4xi32> to tensor<1x4xi32>
    %s2 = tensor.extract_slice %tokens[2, 0] [1, 4] [1, 1] : tensor<3x4xi32> to tensor<1x4xi32>
    %0 = xfmr.add %w, %v : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
