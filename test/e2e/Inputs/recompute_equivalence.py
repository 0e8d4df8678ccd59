#!/usr/bin/env python3
"""Recomputation changes no number: each plan against the same plan with
"recompute": {"policy": "none"}.

  recompute_equivalence.py --model MODEL.mlir --workdir DIR [--steps 20]
                           [--lr 3e-3] [--lr-scale X]
                           --plan NAME=PLAN_JSON [--plan ...]

For each plan (which names a recompute policy): compiles it and the same
plan with the policy "none", trains both on as many MPI ranks as the mesh
has devices from the same seed on the same data, and requires the loss of
every step and every parameter and AdamW moment of the final checkpoints to
be bit-identical (relative difference exactly 0): recomputation reruns the
same deterministic kernels on the same inputs, in the same order on every
rank. Prints one line per plan and fails if any differs. `--lr-scale`
trains the recomputing program with a scaled learning rate: a control that
the comparison does detect a difference.

Reuses the harness of equivalence.py (same directory) for compiling,
launching and reading checkpoints.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import equivalence as harness  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--plan", action="append", required=True,
                        metavar="NAME=PLAN_JSON")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--lr-scale", type=float, default=1.0)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)

    failed = False
    for spec in args.plan:
        name, _, plan_path = spec.partition("=")
        plan = json.load(open(plan_path))
        policy = plan.get("recompute", {}).get("policy", "none")
        reference_plan = dict(plan, recompute={"policy": "none"})
        reference_path = os.path.join(args.workdir, name + "-none.json")
        with open(reference_path, "w") as f:
            json.dump(reference_plan, f)
        ranks = harness.mesh_devices(plan)
        results = {}
        for label, path, lr in (("none", reference_path, args.lr),
                                (policy, plan_path, args.lr * args.lr_scale)):
            program = os.path.join(args.workdir, f"{name}-{label}.ptp")
            harness.run(["partition-compile", args.model, "-o", program,
                         "--plan", path])
            results[label] = harness.train(
                harness.launcher(ranks) if ranks > 1 else [], program, args,
                args.workdir, f"{name}-{label}", lr)
        (ref_losses, ref_params), (losses, params) = (results["none"],
                                                      results[policy])
        loss_diff = harness.compare_losses(ref_losses, losses, args.steps)
        if set(ref_params) != set(params):
            sys.exit(f"recompute_equivalence: {name}: the checkpoints hold "
                     f"different tensors")
        differing = sorted(n for n in ref_params
                           if ref_params[n].tobytes() != params[n].tobytes())
        ok = loss_diff == 0.0 and not differing
        failed |= not ok
        print(f"{name} ({policy}, {ranks} ranks): loss max rel diff "
              f"{loss_diff:.2e} over {args.steps} steps; "
              f"{len(differing)} of {len(ref_params)} tensors differ"
              f"{' (first ' + differing[0] + ')' if differing else ''}: "
              f"{'IDENTICAL' if ok else 'MISMATCH'}")
    if failed:
        print("recompute_equivalence: some plans differ from policy none")
        return 1
    print("recompute_equivalence: every policy reproduces policy none "
          "bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
