#!/usr/bin/env python3
"""Writes a recompute budget plan between full and none, and checks what
--dist-recompute chose for it.

  recompute_budget.py --model MODEL.mlir --plan BASE.json --out BUDGET.json
                      [--workdir DIR] [--name NAME] [--fraction 0.5]

Compiles MODEL under BASE (a plan without a recompute policy) with policy
"none" and policy "full" (--memory-report), sets recompute.budget_bytes
at FRACTION of the way from full's arena peak to none's, compiles that plan
and requires:

  full's peak <= the chosen arena peak <= budget < none's peak,
  the memory plan's arena_peak equals the peak the recompute report chose,
  the next cheaper choice on the frontier does not fit the budget,
  some forward ops are rebuilt, and the extra matmul FLOPs are at most
  full's.

Prints one line (ending BETWEEN, or naming what failed, exit 1) and writes
the budget plan to OUT for recompute_equivalence.py.
"""

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import equivalence as harness  # noqa: E402


def compile_report(model, plan, workdir, label):
    path = os.path.join(workdir, label + ".json")
    with open(path, "w") as f:
        json.dump(plan, f)
    result = harness.run(["partition-compile", model, "-o",
                          os.path.join(workdir, label + ".ptp"), "--plan",
                          path, "--memory-report"])
    text = result.stdout
    figures = {
        "arena_peak": int(re.search(r"^memory: arena_peak (\d+)$", text,
                                    re.M).group(1)),
        "extra_flops": int(re.search(r"^recompute: (\d+) extra FLOPs", text,
                                     re.M).group(1)),
    }
    chosen = re.search(r"^recompute: budget (\d+) bytes: arena peak (\d+) "
                       r"bytes(?:, the next cheaper choice at least (\d+) "
                       r"bytes)?; "
                       r"(\d+) forward ops rebuilt",
                       text, re.M)
    if chosen:
        figures["budget"] = int(chosen.group(1))
        figures["chosen_peak"] = int(chosen.group(2))
        figures["cheaper_peak"] = (int(chosen.group(3)) if chosen.group(3)
                                   else None)
        figures["rebuilt"] = int(chosen.group(4))
    return figures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--plan", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--workdir")
    parser.add_argument("--name", default="budget")
    parser.add_argument("--fraction", type=float, default=0.5,
                        help="where between full (0) and none (1) the "
                        "budget lies")
    args = parser.parse_args()
    workdir = args.workdir or os.path.dirname(os.path.abspath(args.out))
    os.makedirs(workdir, exist_ok=True)
    base = json.load(open(args.plan))

    none = compile_report(args.model, dict(base, recompute={"policy": "none"}),
                          workdir, args.name + "-ref-none")
    full = compile_report(args.model, dict(base, recompute={"policy": "full"}),
                          workdir, args.name + "-ref-full")
    budget = full["arena_peak"] + int(
        (none["arena_peak"] - full["arena_peak"]) * args.fraction)
    plan = dict(base, recompute={"policy": "budget", "budget_bytes": budget})
    with open(args.out, "w") as f:
        json.dump(plan, f)
    chosen = compile_report(args.model, plan, workdir, args.name + "-chosen")

    problems = []
    if "chosen_peak" not in chosen:
        problems.append("no 'recompute: budget' line in the report")
    else:
        if not (full["arena_peak"] <= chosen["chosen_peak"] <= budget
                < none["arena_peak"]):
            problems.append("the chosen peak is not between full and none")
        if chosen["arena_peak"] != chosen["chosen_peak"]:
            problems.append(f"the memory plan's arena_peak "
                            f"{chosen['arena_peak']} is not the chosen peak")
        if chosen["cheaper_peak"] is None or chosen["cheaper_peak"] <= budget:
            problems.append("the next cheaper choice fits the budget")
        if chosen["rebuilt"] == 0:
            problems.append("nothing is rebuilt")
    if not chosen["extra_flops"] <= full["extra_flops"]:
        problems.append("more extra FLOPs than full's")
    print(f"{args.name}: full {full['arena_peak']} <= chosen "
          f"{chosen.get('chosen_peak')} <= budget {budget} < none "
          f"{none['arena_peak']}; next cheaper {chosen.get('cheaper_peak')}; "
          f"extra FLOPs {chosen['extra_flops']} of full's "
          f"{full['extra_flops']}; {chosen.get('rebuilt')} ops rebuilt: "
          f"{'BETWEEN' if not problems else 'WRONG: ' + '; '.join(problems)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
