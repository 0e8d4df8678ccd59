// RUN: partition-opt %s --split-input-file --verify-diagnostics

// The `dist.plan` attribute (recorded by --dist-apply-plan) is a dictionary
// on a module.

module attributes {dist.plan = {zero = {stage = 1 : i64}}} {
}

// -----

// expected-error @+1 {{'dist.plan' must be a dictionary, but is "1f1b"}}
module attributes {dist.plan = "1f1b"} {
}

// -----

// expected-error @+1 {{'dist.plan' belongs on a module, not on 'func.func'}}
func.func @f() attributes {dist.plan = {}} {
  return
}
