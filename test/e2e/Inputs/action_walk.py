"""action-walk.test: each plan compiled with and without
partition-compile --action-walk, trained 6 steps on its ranks (with an
evaluation every 3 and a checkpoint at the end); prints per plan whether
the losses, evaluation losses and checkpoint are identical and the two
programs' sizes.

  action_walk.py WORKDIR MODEL.mlir PLAN:RANKS...
"""

import json
import os
import subprocess
import sys


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(command), result.stdout,
                                       result.stderr))


def train(workdir, name, ranks):
    program = os.path.join(workdir, name + ".ptp")
    run(["timeout", "180", "mpirun", "-n", str(ranks), "--oversubscribe",
         "partition-run", program, "--steps", "6", "--eval-every", "3",
         "--metrics-out", os.path.join(workdir, name + ".jsonl"),
         "--save", os.path.join(workdir, name + "-ckpt"), "--quiet"])
    with open(os.path.join(workdir, name + ".jsonl")) as f:
        metrics = [json.loads(line) for line in f]
    with open(os.path.join(workdir, name + "-ckpt",
                           "checkpoint.safetensors"), "rb") as f:
        checkpoint = f.read()
    return metrics, checkpoint, os.path.getsize(program)


def main():
    workdir, model, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
    for case in cases:
        plan, ranks = case.split(":")
        results = {}
        for variant, flags in (("loop", ["--action-walk=false"]),
                               ("walk", ["--action-walk"])):
            name = "%s-%s" % (plan, variant)
            run(["partition-compile", model, "--plan",
                 os.path.join(workdir, plan + ".json"), "-o",
                 os.path.join(workdir, name + ".ptp")] + flags)
            results[variant] = train(workdir, name, int(ranks))
        (loop, loop_ckpt, loop_size), (walk, walk_ckpt, walk_size) = (
            results["loop"], results["walk"])
        same = (len(loop) == len(walk) and
                all(a.get(k) == b.get(k) for a, b in zip(loop, walk)
                    for k in ("loss", "eval_loss")))
        print("%s: %d steps, losses and evaluation %s, checkpoint %s, "
              "program %.2f x the loop's" % (
                  plan, sum("loss" in m for m in walk),
                  "identical" if same else "DIFFERENT",
                  "identical" if loop_ckpt == walk_ckpt else "DIFFERENT",
                  walk_size / loop_size))


if __name__ == "__main__":
    main()
