#!/usr/bin/env python3
"""Checks that memory falls with recomputation.

  recompute_memory.py NONE.txt SELECTIVE.txt FULL.txt

Each file is a `partition-compile --memory-report` output. Prints
`<figure>: full < selective < none (...)` for the activations live at the
arena's peak, the arena peak and each layer's kept activations, and exits non-zero, naming the figures, if any
of them does not fall strictly.
"""

import sys


def report(path):
    figures = {}
    for line in open(path):
        if line.startswith("memory: "):
            name, _, value = line[len("memory: "):].strip().partition(" ")
            if value.split()[0].isdigit():
                figures[name] = int(value.split()[0])
        elif line.startswith("layer ") and ": activations " in line:
            layer, _, rest = line.partition(": activations ")
            figures[layer + " activations"] = int(rest.split()[0])
    return figures


def main():
    none, selective, full = (report(p) for p in sys.argv[1:4])
    failed = False
    layers = sorted(k for k in none if k.startswith("layer "))
    for category in ["activations", "arena_peak"] + layers:
        values = (full[category], selective[category], none[category])
        if values[0] < values[1] < values[2]:
            print(f"{category}: full < selective < none ({values[0]} < "
                  f"{values[1]} < {values[2]})")
        else:
            print(f"{category} does not fall: full {values[0]}, selective "
                  f"{values[1]}, none {values[2]}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
