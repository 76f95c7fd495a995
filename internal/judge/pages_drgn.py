#!/usr/bin/python3
"""Print 'pfn sha1' for every page drgn can read from a dump.

Usage: pages_drgn.py DUMP LO:HI...
(pfn ranges to read, end exclusive)
drgn raises FaultError for pages the dump does not hold; those are left
out. Any other error ends the run with a non-zero exit.
"""
import hashlib
import sys

import drgn

path = sys.argv[1]
ranges = [tuple(int(x) for x in r.split(':')) for r in sys.argv[2:]]
prog = drgn.Program()
prog.set_core_dump(path)
out = sys.stdout
for pfn in (p for lo, hi in ranges for p in range(lo, hi)):
    try:
        page = prog.read(pfn * 4096, 4096, True)
    except drgn.FaultError:
        continue
    out.write('%d %s\n' % (pfn, hashlib.sha1(page).hexdigest()))
