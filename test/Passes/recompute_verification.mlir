// RUN: partition-opt %s --split-input-file --dist-recompute=policy=bogus -verify-diagnostics
// RUN: echo 'module {}' | not partition-opt --dist-recompute=policy=budget 2>&1 | FileCheck %s --check-prefix=BUDGET
// BUDGET: error: recompute policy 'budget' needs a budget: give budget-bytes, or recompute.budget_bytes in the plan
// The budget policy needs a training step (a backward pass) to choose in.
// RUN: echo 'module { func.func @f() { return } }' | not partition-opt --dist-recompute="policy=budget budget-bytes=100" 2>&1 | FileCheck %s --check-prefix=NO-STEP
// NO-STEP: error: recompute policy 'budget' needs exactly one training step, found 0

// expected-error @below {{unknown recompute policy 'bogus': use none, selective, full or budget}}
module {
  func.func @f() {
    return
  }
}

// -----

// A dist.recomputed attribute is a unit attribute.
module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @below {{'dist.recomputed' must be a unit attribute, but is 1 : i64}}
    %y = xfmr.gelu %x {dist.recomputed = 1} : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

