#!/usr/bin/python3
"""Print 'pfn sha1' for every page libkdumpfile can read from a dump.

Usage: pages_kdumpfile.py DUMP PAGESIZE LO:HI...
(pfn ranges of PAGESIZE-byte pages to read, end exclusive)
Pages the dump does not hold (excluded or lost) are left out; any other
error ends the run with a non-zero exit, so a damaged dump fails the judge.
"""
import hashlib
import sys

import kdumpfile
from kdumpfile.exceptions import NoDataException

path = sys.argv[1]
page_size = int(sys.argv[2])
ranges = [tuple(int(x) for x in r.split(':')) for r in sys.argv[3:]]
k = kdumpfile.kdumpfile(path)
k.attr['addrxlat.ostype'] = 'linux'
out = sys.stdout
for pfn in (p for lo, hi in ranges for p in range(lo, hi)):
    try:
        page = k.read(kdumpfile.KDUMP_MACHPHYSADDR, pfn * page_size, page_size)
    except NoDataException:
        continue
    out.write('%d %s\n' % (pfn, hashlib.sha1(page).hexdigest()))
