#!/usr/bin/env python3
"""Prints the device mesh and the collectives of a .ptp program, for FileCheck.

    ptp-collectives.py PROGRAM.ptp

The schema version 2 and 3 additions (Program.mesh, Instruction.collective), read
with the FlatBuffer reader of ptp-dump.py, which prints the rest. One line for
the mesh, then per function one line per collective with its position in the
function's instruction list:

    mesh dp=2 pp=1 tp=1                 ("mesh none" when the field is empty)
    function train_step
      #3 all_reduce avg axes [0] (dp) buffers [5, 6] label "gradient bucket 0"
      #4 all_gather dim 1 axes [2] (tp) buffers [7, 8] label "all_gather"
      #5 reduce_scatter dim 0 sum axes [2] (tp) buffers [8, 9] label "x"
      #6 started all_reduce avg axes [0] (dp) buffers [5] label "gradient bucket 1"
      #9 wait #6

Schema version 8: Collective.started and Instruction.wait.
"""

import importlib.util
import os
import sys

KINDS = ["all_reduce", "all_gather", "reduce_scatter"]
REDUCES = ["sum", "avg", "max"]


def load_reader():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ptp-dump.py")
    spec = importlib.util.spec_from_file_location("ptp_dump", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    reader = load_reader()
    data = open(sys.argv[1], "rb").read()
    program = reader.Table(data, int.from_bytes(data[0:4], "little"))
    # Program: schema_version, (three fields of version 4), model_json,
    # train_json, mesh, streams. MeshAxis: name, size. Stream: arena_bytes,
    # buffers, functions.
    mesh = [(axis.string(0), axis.scalar(1, "q")) for axis in program.tables(6)]
    print("mesh", " ".join("%s=%d" % axis for axis in mesh) or "none")
    functions = [f for stream in program.tables(7) for f in stream.tables(2)]
    for function in functions:
        print("function", function.string(0))
        # Instruction: kernel, args, ints, floats, collective.
        for index, ins in enumerate(function.tables(1)):
            # Instruction.wait (field 6): the started collective's index.
            wait = ins._target(6)
            if wait is not None:
                print("  #%d wait #%d" % (index, reader.Table(data, wait).scalar(0, "I")))
                continue
            at = ins._target(4)
            if at is None:
                continue
            # Collective: kind, reduce, axes, label, dim, started.
            collective = reader.Table(data, at)
            axes = collective.vector(2, "B")
            names = ", ".join(mesh[a][0] if a < len(mesh) else "?%d" % a for a in axes)
            kind = collective.scalar(0, "B")
            # all_gather and reduce_scatter take blocks along a dimension;
            # an all_gather's reduction is meaningless.
            what = "%s dim %d" % (KINDS[kind], collective.scalar(4, "I")) if kind else KINDS[kind]
            if kind != 1:
                what += " " + REDUCES[collective.scalar(1, "B")]
            if collective.scalar(5, "B"):
                what = "started " + what
            print('  #%d %s axes %s (%s) buffers %s label "%s"' % (
                index, what, axes, names, ins.vector(1, "I"), collective.string(3)))


if __name__ == "__main__":
    main()
