#!/usr/bin/python3
"""Print 'pfn sha1' for every page libkdumpfile can read from a dump.

Usage: pages_kdumpfile.py DUMP LO:HI...
(pfn ranges to read, end exclusive)
Pages the dump does not hold (excluded or lost) are left out; any other
error ends the run with a non-zero exit, so a damaged dump fails the judge.
"""
import hashlib
import sys

import kdumpfile
from kdumpfile.exceptions import NoDataException

path = sys.argv[1]
ranges = [tuple(int(x) for x in r.split(':')) for r in sys.argv[2:]]
k = kdumpfile.kdumpfile(path)
k.attr['addrxlat.ostype'] = 'linux'
out = sys.stdout
for pfn in (p for lo, hi in ranges for p in range(lo, hi)):
    try:
        page = k.read(kdumpfile.KDUMP_MACHPHYSADDR, pfn * 4096, 4096)
    except NoDataException:
        continue
    out.write('%d %s\n' % (pfn, hashlib.sha1(page).hexdigest()))
