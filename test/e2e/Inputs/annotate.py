#!/usr/bin/env python3
"""Annotates a model's weights with shardings (for --dist-shard).

  annotate.py IN OUT --mesh "dp = 2, pp = 1, tp = 2" \\
      --shard "h.0.mlp.c_fc.weight=[[dp, tp], []]" [--shard ...]

Declares `dist.mesh @mesh axes = [MESH]` (it must be the plan's) and puts
`dist.sharding = #dist.sharding<@mesh, LAYOUT>` on each named parameter of
the forward function (or input: tokens, targets). Fails if a name is not
one.
"""

import argparse
import re
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--mesh", required=True)
    parser.add_argument("--shard", action="append", default=[],
                        metavar="NAME=LAYOUT")
    args = parser.parse_args()
    text = open(args.input).read()
    if not text.startswith("module {"):
        sys.exit("annotate: expected the model to start with 'module {'")
    text = text.replace("module {", "module {\n  dist.mesh @mesh axes = [%s]"
                        % args.mesh, 1)
    for spec in args.shard:
        name, _, layout = spec.partition("=")
        # A parameter (perhaps with its xfmr.layer first), or an input
        # (tokens, targets).
        for role in ("param", "input"):
            pattern = re.compile(r'\{((?:xfmr\.layer = \d+ : i64, )?)xfmr\.%s = "%s"\}'
                                 % (role, re.escape(name)))
            if len(pattern.findall(text)) == 1:
                break
        else:
            sys.exit(f"annotate: '{name}' is not a parameter or input of "
                     "the model")
        text = pattern.sub(
            lambda m: '{dist.sharding = #dist.sharding<@mesh, %s>, %s'
            'xfmr.%s = "%s"}' % (layout, m.group(1), role, name), text)
    open(args.output, "w").write(text)


if __name__ == "__main__":
    main()
