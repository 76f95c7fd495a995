#!/usr/bin/python3
"""Print 'pfn sha1' for every page drgn can read from a dump.

Usage: pages_drgn.py DUMP PAGESIZE LO:HI...
(pfn ranges of PAGESIZE-byte pages to read, end exclusive)
drgn raises FaultError for pages the dump does not hold; those are left
out. Any other error ends the run with a non-zero exit.
"""
import hashlib
import sys

import drgn

path = sys.argv[1]
page_size = int(sys.argv[2])
ranges = [tuple(int(x) for x in r.split(':')) for r in sys.argv[3:]]
prog = drgn.Program()
prog.set_core_dump(path)
out = sys.stdout
for pfn in (p for lo, hi in ranges for p in range(lo, hi)):
    try:
        page = prog.read(pfn * page_size, page_size, True)
    except drgn.FaultError:
        continue
    out.write('%d %s\n' % (pfn, hashlib.sha1(page).hexdigest()))
