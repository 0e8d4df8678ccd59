#!/usr/bin/env python3
"""Checks on partition-run --dump-logits files (numpy's .npz).

  logits.py check NPZ --metrics EVAL.jsonl [--tolerance T]
      The arrays are input_ids and targets (int32, B x T) and logits
      (float32, B x T x V); targets are the inputs shifted by one. The mean
      cross-entropy recomputed from the logits (float64) must equal the
      eval_loss of the --evaluate record in EVAL.jsonl (--eval-batches 1:
      the same first batch) within T relative (default 1e-5).

  logits.py same A B [--tolerance T]
      The same input ids, and logits within T of each other relative to
      their largest magnitude (default 1e-5): the dump of one plan against
      another's.

Needs numpy (tests that run it say REQUIRES: numpy).
"""

import argparse
import json
import sys

import numpy as np


def load(path):
    arrays = np.load(path)
    ids, targets, logits = (arrays["input_ids"], arrays["targets"],
                            arrays["logits"])
    if ids.dtype != np.int32 or targets.dtype != np.int32:
        sys.exit(f"error: {path}: the ids are not int32")
    if logits.dtype != np.float32 or logits.ndim != 3 or \
            logits.shape[:2] != ids.shape or targets.shape != ids.shape:
        sys.exit(f"error: {path}: logits {logits.dtype} {logits.shape} do "
                 f"not match ids {ids.shape}")
    if not np.array_equal(ids.reshape(-1)[1:], targets.reshape(-1)[:-1]):
        sys.exit(f"error: {path}: targets are not the inputs shifted by one")
    return ids, targets, logits


def check(args):
    ids, targets, logits = load(args.npz)
    wide = logits.astype(np.float64)
    top = wide.max(axis=-1, keepdims=True)
    logsumexp = np.log(np.exp(wide - top).sum(axis=-1)) + top[..., 0]
    picked = np.take_along_axis(wide, targets[..., None].astype(np.int64),
                                axis=-1)[..., 0]
    loss = float((logsumexp - picked).mean())
    with open(args.metrics) as f:
        evaluation = [json.loads(line) for line in f
                      if json.loads(line).get("evaluate")]
    if not evaluation:
        sys.exit(f"error: {args.metrics}: no --evaluate record")
    expected = evaluation[0]["eval_loss"]
    difference = abs(loss - expected) / abs(expected)
    print(f"logits {logits.shape}: cross-entropy {loss:.7f}, eval_loss "
          f"{expected:.7f}, relative difference {difference:.1e}")
    if difference > args.tolerance:
        sys.exit(f"error: more than the tolerance {args.tolerance}")


def same(args):
    a_ids, _, a = load(args.a)
    b_ids, _, b = load(args.b)
    if not np.array_equal(a_ids, b_ids):
        sys.exit("error: the input ids differ")
    if a.shape != b.shape:
        sys.exit(f"error: logits {a.shape} and {b.shape}")
    scale = float(np.abs(a).max())
    difference = float(np.abs(a.astype(np.float64) - b).max()) / scale
    print(f"logits {a.shape}: largest difference {difference:.1e} of the "
          f"largest magnitude {scale:.3f}")
    if difference > args.tolerance:
        sys.exit(f"error: more than the tolerance {args.tolerance}")


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    c = commands.add_parser("check")
    c.add_argument("npz")
    c.add_argument("--metrics", required=True)
    c.add_argument("--tolerance", type=float, default=1e-5)
    c.set_defaults(run=check)
    s = commands.add_parser("same")
    s.add_argument("a")
    s.add_argument("b")
    s.add_argument("--tolerance", type=float, default=1e-5)
    s.set_defaults(run=same)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
