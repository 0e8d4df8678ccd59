#!/usr/bin/env python3
"""Checks on partition-run --metrics-out files (one JSON object per line).

  metrics.py converges FILE --floor F --margin M [--window W]
      Prints the loss curve (train loss averaged over windows of W steps and
      every eval loss) and fails unless
        - the first loss is within 0.25 of log(vocab) (--vocab, an untrained
          model predicts uniformly),
        - every window's mean train loss is below the previous window's,
        - the final eval loss is below F + M, and not below F - 0.3 (the
          floor is the data's entropy rate: no model beats it by more than
          the evaluation's sampling noise; if one does, the evaluation is
          leaking its targets).

  metrics.py same A B [--keys loss,eval_loss]
      Compares the steps A and B share, as the exact text partition-run wrote
      (so bit for bit: a float32 printed as the shortest round-tripping
      double); fails at the first difference. Prints the shared step range.

  metrics.py differ A B
      Fails unless some shared step has a different loss.

  metrics.py router-loss A B [--tolerance T]
      A trains a mixture of experts with its router losses (aux / z-loss),
      B the same model, seed and data without them: at step 1 (the same
      parameters) A's moe_aux_loss must be A's loss minus B's, within T
      relative to it.

  metrics.py same-biases CKPT CKPT...
      The routing biases (DeepSeek-V3's aux-free balancing, tensors named
      *.expert_bias) of every checkpoint equal the first's bit for bit, and
      moved from their zero start. Prints their number and largest |bias|.
"""

import argparse
import json
import math
import os
import re
import sys


def records(path):
    """{step: {key: raw text of the value}} for every step record."""
    result = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            parsed = json.loads(line)
            if parsed.get("summary"):
                continue
            raw = dict(re.findall(r'"(\w+)":([^,}]+)', line))
            if "step" not in parsed or "loss" not in raw:
                sys.exit(f"{path}:{number}: not a step record: {line}")
            result[parsed["step"]] = raw
    if not result:
        sys.exit(f"{path}: no step records")
    return result


def converges(args):
    steps = records(args.file)
    order = sorted(steps)
    if order != list(range(1, len(order) + 1)):
        sys.exit(f"{args.file}: steps are not 1..{len(order)}")
    losses = [float(steps[s]["loss"]) for s in order]
    evals = [(s, float(steps[s]["eval_loss"])) for s in order
             if "eval_loss" in steps[s]]
    ok = True

    first = losses[0]
    expected = math.log(args.vocab)
    print(f"first loss {first:.4f} (log vocab {expected:.4f})")
    if abs(first - expected) > 0.25:
        print(f"error: the first loss is not log(vocab) +- 0.25")
        ok = False

    print(f"{'steps':>11} {'mean train loss':>16}")
    previous = math.inf
    for start in range(0, len(losses), args.window):
        window = losses[start:start + args.window]
        mean = sum(window) / len(window)
        marker = ""
        if mean >= previous:
            marker = "  <- not below the previous window"
            ok = False
        print(f"{start + 1:>5}-{start + len(window):<5} {mean:16.4f}{marker}")
        previous = mean

    print(f"{'step':>11} {'eval loss':>16}")
    for step, value in evals:
        print(f"{step:>11} {value:16.4f}")
    if not evals:
        sys.exit("error: no eval loss recorded")
    final = evals[-1][1]
    print(f"final eval loss {final:.4f}, floor {args.floor:.4f}, "
          f"gap {final - args.floor:.4f} (allowed {args.margin})")
    if not final < args.floor + args.margin:
        print("error: the final eval loss is not within the margin of the "
              "floor")
        ok = False
    if not final > args.floor - 0.3:
        print("error: the final eval loss is below the entropy floor")
        ok = False
    if not ok:
        sys.exit(1)
    print("converges: ok")


def same(args):
    a, b = records(args.a), records(args.b)
    shared = sorted(set(a) & set(b))
    if not shared:
        sys.exit(f"error: {args.a} and {args.b} share no step")
    compared = 0
    for step in shared:
        for key in args.keys.split(","):
            if key in a[step] and key in b[step]:
                compared += 1
                if a[step][key] != b[step][key]:
                    sys.exit(f"error: step {step}: {key} {a[step][key]} in "
                             f"{args.a} but {b[step][key]} in {args.b}")
            elif key == "loss":
                sys.exit(f"error: step {step} has no loss")
    print(f"identical: steps {shared[0]}-{shared[-1]} ({len(shared)} steps, "
          f"{compared} values)")


def close(args):
    """The losses of two runs agree within --tolerance (relative), step by
    step: the same training through different kernels."""
    a, b = records(args.a), records(args.b)
    shared = sorted(set(a) & set(b))
    if not shared:
        sys.exit(f"error: {args.a} and {args.b} share no step")
    worst = 0.0
    for step in shared:
        x, y = float(a[step]["loss"]), float(b[step]["loss"])
        difference = abs(x - y) / max(abs(x), 1e-12)
        worst = max(worst, difference)
        if not difference <= args.tolerance:
            sys.exit(f"error: step {step}: loss {x} in {args.a} but {y} in "
                     f"{args.b} (relative difference {difference:.3g})")
    print(f"close: steps {shared[0]}-{shared[-1]} ({len(shared)} steps) "
          f"within {args.tolerance}")


def differ(args):
    a, b = records(args.a), records(args.b)
    shared = sorted(set(a) & set(b))
    different = [s for s in shared if a[s]["loss"] != b[s]["loss"]]
    if not different:
        sys.exit(f"error: {args.a} and {args.b} have the same losses")
    print(f"different: {len(different)} of {len(shared)} steps")


def router_loss(args):
    a, b = records(args.a), records(args.b)
    if 1 not in a or 1 not in b:
        sys.exit("error: both runs need step 1")
    if "moe_aux_loss" not in a[1]:
        sys.exit(f"error: {args.a}: step 1 has no moe_aux_loss")
    reported = float(a[1]["moe_aux_loss"])
    difference = float(a[1]["loss"]) - float(b[1]["loss"])
    error = abs(reported - difference) / max(abs(difference), 1e-12)
    if not (difference > 0 and error <= args.tolerance):
        sys.exit(f"error: moe_aux_loss {reported} but the losses differ by "
                 f"{difference} (relative error {error:.3g})")
    print(f"router loss: {reported:.6f}, the loss's part {difference:.6f} "
          f"(within {args.tolerance})")


def same_biases(args):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    from equivalence import read_safetensors

    def biases(directory):
        tensors = read_safetensors(
            os.path.join(directory, "checkpoint.safetensors"))
        found = {name: list(values) for name, values in tensors.items()
                 if name.endswith(".expert_bias")}
        if not found:
            sys.exit(f"error: {directory} holds no routing bias")
        return found

    first = biases(args.checkpoints[0])
    for other in args.checkpoints[1:]:
        for name, values in biases(other).items():
            if first.get(name) != values:
                sys.exit(f"error: {name} differs between "
                         f"{args.checkpoints[0]} and {other}: "
                         f"{first.get(name)} against {values}")
    largest = max(abs(x) for values in first.values() for x in values)
    if largest == 0:
        sys.exit("error: the routing biases are all zero: they never moved")
    print(f"{len(first)} routing biases equal bit for bit, moved by up to "
          f"{largest:.4g}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    c = commands.add_parser("converges")
    c.add_argument("file")
    c.add_argument("--floor", type=float, required=True)
    c.add_argument("--margin", type=float, required=True)
    c.add_argument("--vocab", type=int, required=True)
    c.add_argument("--window", type=int, default=50)
    c.set_defaults(run=converges)
    s = commands.add_parser("same")
    s.add_argument("a")
    s.add_argument("b")
    s.add_argument("--keys", default="loss,eval_loss")
    s.set_defaults(run=same)
    c2 = commands.add_parser("close")
    c2.add_argument("a")
    c2.add_argument("b")
    c2.add_argument("--tolerance", type=float, default=1e-6)
    c2.set_defaults(run=close)
    d = commands.add_parser("differ")
    d.add_argument("a")
    d.add_argument("b")
    d.set_defaults(run=differ)
    r = commands.add_parser("router-loss")
    r.add_argument("a")
    r.add_argument("b")
    r.add_argument("--tolerance", type=float, default=1e-4)
    r.set_defaults(run=router_loss)
    b = commands.add_parser("same-biases")
    b.add_argument("checkpoints", nargs="+")
    b.set_defaults(run=same_biases)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
