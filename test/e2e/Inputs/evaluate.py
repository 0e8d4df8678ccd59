#!/usr/bin/env python3
"""Checks on partition-run --evaluate's --metrics-out record.

  evaluate.py same A B [--tolerance T]
      A holds an --evaluate record ({"evaluate": true, "eval_loss", ...}); B
      another one, or a training run whose last eval_loss is compared. Fails
      unless |a - b| <= T * |b| (T = 0: the same float32) and, in A,
      perplexity = exp(eval_loss) and eval_tokens = eval_batches x the batch.
"""

import argparse
import json
import math
import sys


def evaluation(path):
    """The eval_loss of the --evaluate record, else of the last step."""
    found = None
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if record.get("evaluate"):
                perplexity = math.exp(record["eval_loss"])
                if abs(record["perplexity"] - perplexity) > 1e-9 * perplexity:
                    sys.exit(f"error: {path}: perplexity {record['perplexity']}"
                             f" is not exp({record['eval_loss']})")
                if record["eval_tokens"] % record["eval_batches"]:
                    sys.exit(f"error: {path}: eval_tokens is not a multiple "
                             "of eval_batches")
                return record["eval_loss"]
            if "eval_loss" in record:
                found = record["eval_loss"]
    if found is None:
        sys.exit(f"error: {path}: no eval_loss")
    return found


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    same = commands.add_parser("same")
    same.add_argument("a")
    same.add_argument("b")
    same.add_argument("--tolerance", type=float, default=0.0)
    args = parser.parse_args()
    a, b = evaluation(args.a), evaluation(args.b)
    difference = abs(a - b) / abs(b) if b else abs(a)
    print(f"eval_loss {a!r} and {b!r}: relative difference {difference:.2e}")
    if difference > args.tolerance:
        sys.exit(f"error: more than the tolerance {args.tolerance}")


if __name__ == "__main__":
    main()
