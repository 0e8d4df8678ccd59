#!/usr/bin/env python3
"""The runtime's arena per pipeline stage is the compile-time one, and
1F1B's per-stage activation peak is below GPipe's.

  pipeline_memory.py --model MODEL.mlir --workdir DIR --plan NAME=PLAN_JSON
                     [--plan ...] [--steps 2] [--below LOW=HIGH ...]

For each plan (mesh.pp > 1): compiles it with --memory-report and reads the
memory plan's `memory: stage k arena_peak` and `memory: stage k activations`
(the activations live at the arena's peak); trains it --steps steps on as
many MPI ranks as the mesh has devices and reads partition-run's `peak
memory per pipeline stage` line (the arena each stage's instructions
address). Prints one line per plan and stage and requires the two arenas
to be equal. `--below 1f1b=gpipe` also requires every stage's activations
at the peak under plan 1f1b to be below those under plan gpipe. Exit 1 on
any failure.

Reuses the harness of equivalence.py (same directory).
"""

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import equivalence as harness  # noqa: E402


def stage_figures(report, name):
    return {int(stage): int(value) for stage, value in re.findall(
        rf"^memory: stage (\d+) {name} (\d+)$", report, re.M)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--plan", action="append", required=True,
                        metavar="NAME=PLAN_JSON")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--below", action="append", default=[],
                        metavar="LOW=HIGH")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)

    failed = False
    activations = {}
    for spec in args.plan:
        name, _, plan_path = spec.partition("=")
        plan = json.load(open(plan_path))
        program = os.path.join(args.workdir, name + ".ptp")
        report = harness.run(["partition-compile", args.model, "-o", program,
                              "--plan", plan_path, "--memory-report"]).stdout
        planned = stage_figures(report, "arena_peak")
        activations[name] = stage_figures(report, "activations")
        ranks = harness.mesh_devices(plan)
        ran = harness.run(harness.launcher(ranks) + [
            "partition-run", program, "--steps", str(args.steps)],
            env=harness.mpi_environment()).stdout
        line = re.search(r"^peak memory per pipeline stage \(measured: [^)]*\):"
                         r"(.*)$", ran, re.M)
        measured = ({int(stage): int(value) for stage, value in
                     re.findall(r"stage (\d+) arena (\d+) B", line.group(1))}
                    if line else {})
        if not planned or set(planned) != set(measured):
            print(f"{name}: stages planned {sorted(planned)}, measured "
                  f"{sorted(measured)}: MISSING")
            failed = True
            continue
        for stage in sorted(planned):
            same = planned[stage] == measured[stage]
            failed |= not same
            print(f"{name} stage {stage}: arena planned {planned[stage]}, "
                  f"measured {measured[stage]}: "
                  f"{'EQUAL' if same else 'DIFFERENT'}; activations at the "
                  f"peak {activations[name].get(stage)}")
    for spec in args.below:
        low, _, high = spec.partition("=")
        for stage in sorted(activations[high]):
            below = activations[low].get(stage, 0) < activations[high][stage]
            failed |= not below
            print(f"stage {stage}: {low} activations {activations[low].get(stage)} "
                  f"{'<' if below else '>='} {high} {activations[high][stage]}: "
                  f"{'BELOW' if below else 'NOT BELOW'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
