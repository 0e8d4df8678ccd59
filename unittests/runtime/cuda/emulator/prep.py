#!/usr/bin/env python3
"""Turns the real runtime/backend/cuda/kernels sources into host C++ for the
emulator (emu.h): mechanical rewrites only, so what runs is the source.

  prep.py SRC DST
"""
import re, sys, os
src, dst = sys.argv[1], sys.argv[2]
s = open(src).read()
s = s.replace('#include <cub/device/device_radix_sort.cuh>', '#include "cub_shim.h"')
s = re.sub(r'extern\s+__shared__\s+(\w+)\s+(\w+)\s*\[\s*\]\s*;', r'\1 *\2 = emu::dynamicShared<\1>();', s)
s = re.sub(r'__shared__\s+([^;]+?)\s+(\w+)\s*\[(\w+)\]\s*;', r'EMU_SHARED_ARR(\2, \3, \1);', s)
s = re.sub(r'__shared__\s+([^;]+?)\s+(\w+)\s*;', r'EMU_SHARED(\2, \1);', s)
assert '__shared__' not in s, src
# kernel<<<cfg>>>(args)  ->  emu::launch(kernel, cfg)(args)
out = []; i = 0
while True:
    j = s.find('<<<', i)
    if j < 0: out.append(s[i:]); break
    # walk back over whitespace, template args, identifier
    k = j - 1
    while s[k].isspace(): k -= 1
    if s[k] == '>':
        depth = 0
        while True:
            if s[k] == '>': depth += 1
            elif s[k] == '<':
                depth -= 1
                if depth == 0: break
            k -= 1
        k -= 1
    while s[k].isalnum() or s[k] in '_:': k -= 1
    start = k + 1
    kernel = s[start:j].strip()
    e = s.find('>>>', j)
    cfg = s[j+3:e]
    out.append(s[i:start])
    out.append('emu::launch(%s, %s)' % (kernel, cfg))
    i = e + 3
s = ''.join(out)
s = '#include "emu.h"\n' + s
open(dst, 'w').write(s)
