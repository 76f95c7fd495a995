package main

import (
	"time"

	"pagepipe/dump"
)

// step prints makedumpfile's STEP timing line (report level).
func (c *console) step(label string, d time.Duration) {
	c.report("STEP [%-27s] : %f seconds\n", label, d.Seconds())
}

// printReport prints the excluded-pages report in makedumpfile's format
// (message-level bit 16, --show-stats).
func (c *console) printReport(r dump.Result) {
	if c.level&mlReport == 0 {
		return
	}
	maxMapnr, original := r.Pages.Total, r.Pages.Original
	ex := r.Pages.Excluded
	excluded := ex.Total()
	elf := r.ELF
	c.report("\n")
	c.report("Original pages  : 0x%016x\n", original)
	c.report("  Excluded pages   : 0x%016x\n", excluded)
	if elf != nil {
		c.report("     in ELF format : 0x%016x\n", elf.Excluded)
	}
	c.report("    Pages filled with zero  : 0x%016x\n", ex.Zero)
	c.report("    Non-private cache pages : 0x%016x\n", ex.Cache)
	c.report("    Private cache pages     : 0x%016x\n", ex.CachePrivate)
	c.report("    User process data pages : 0x%016x\n", ex.User)
	c.report("    Free pages              : 0x%016x\n", ex.Free)
	c.report("    Hwpoison pages          : 0x%016x\n", ex.Hwpoison)
	c.report("    Offline pages           : 0x%016x\n", ex.Offline)
	c.report("  Remaining pages  : 0x%016x\n", original-excluded)
	if elf != nil {
		c.report("     in ELF format : 0x%016x\n", elf.InFile)
	}
	if original > 0 {
		c.report("  (The number of pages is reduced to %d%%.)\n", (original-excluded)*100/original)
	}
	c.report("Memory Hole     : 0x%016x\n", maxMapnr-original)
	c.report("--------------------------------------------------\n")
	c.report("Total pages     : 0x%016x\n", maxMapnr)
	c.report("Write bytes     : %d\n", r.Written)
	c.report("\n")
}
