package dump

import (
	"fmt"

	"pagepipe/bitmap"
	"pagepipe/kdumpfmt"
	"pagepipe/kernel"
	"pagepipe/sink"
	"pagepipe/source"
)

// This file holds the rules that copy makedumpfile 1.7.2's behaviour where
// it decides bytes of the output, so that pagepipe's dumps equal its
// dumps: the header's utsname, an ELF dump's pages past mem_map (and, in
// prepare, countPartial: whether a PT_LOAD's partial last page is present).

// fillKernelMeta takes what the dump header says about the crashed kernel
// from its VMCOREINFO: the crash time, phys_base, and utsname, read from
// init_uts_ns through the kernel's own page tables as makedumpfile does.
// When the kernel's memory cannot give utsname (a generated vmcore has no
// page tables), the header still gets "Linux", OSRELEASE and "x86_64", so
// that readers checking the machine accept it; the returned note says so.
func fillKernelMeta(v *source.Vmcore, vi *kernel.VMCOREINFO, m *sink.Meta) (note string) {
	if pb, _, ok := physBase(v, vi); ok {
		m.PhysBase = pb
	}
	if vi == nil {
		return ""
	}
	if t, ok := vi.CrashTime(); ok {
		m.CrashTime = t
	}
	err := readUtsname(v, vi, &m.Utsname)
	if err == nil {
		return ""
	}
	note = fmt.Sprintf("utsname not read from kernel memory (%v); using OSRELEASE", err)
	clear(m.Utsname[:])
	for i, s := range map[int]string{0: "Linux", 2: vi.OSRelease(), 4: "x86_64"} {
		copy(m.Utsname[i*kdumpfmt.UtsnameFieldSize:(i+1)*kdumpfmt.UtsnameFieldSize-1], s)
	}
	return note
}

func readUtsname(v *source.Vmcore, vi *kernel.VMCOREINFO, dst *[kdumpfmt.UtsnameSize]byte) error {
	sym, err := vi.RequireSymbol("init_uts_ns")
	if err != nil {
		return err
	}
	off, err := vi.RequireOffset("uts_namespace.name")
	if err != nil {
		return err
	}
	tr, err := kernel.NewTranslator(v, vi)
	if err != nil {
		return err
	}
	if err := tr.ReadVirt(sym+uint64(off), dst[:]); err != nil {
		return fmt.Errorf("read init_uts_ns: %w", err)
	}
	return nil
}

// bitmapBlockPfns is the number of pfns in one 4 KiB block of
// makedumpfile's bitmap file.
const bitmapBlockPfns = 4096 * 8

// markPastMemMap decides which pfns from maxMapnr (the end of the crashed
// kernel's mem_map) on an ELF dump keeps. The kdump format has no bits for
// them; makedumpfile's ELF walk still visits them when a PT_LOAD reaches
// past mem_map (QEMU's BIOS ROM segment does), and in its usual one-cycle
// mode it reads their bits from past the end of its bitmap file: the read
// fails ("is_dumpable_file: Can't read the bitmap") and the bits come from
// the block it read last, that is, from the pfn at the same place in the
// 32768-pfn block of the last pfn below maxMapnr that its walk visited.
// This reproduces that, so that the dump equals makedumpfile's; only pages
// the vmcore holds are ever taken. (In cycles makedumpfile keeps them all
// instead: keepPastMemMap.)
func markPastMemMap(keep *bitmap.Bitmap, v *source.Vmcore, maxMapnr uint64) {
	const ps, bp = source.PageSize, bitmapBlockPfns
	if maxMapnr == 0 || maxMapnr >= keep.Len() {
		return
	}
	_, hasData := v.Bitmaps(keep.Len(), source.PartialPages{})
	block := (maxMapnr - 1) / bp // the walk starts after a pass over [0, maxMapnr)
	stale := func(pfn uint64) bool {
		q := block*bp + pfn%bp
		switch {
		case q < maxMapnr:
			return keep.Test(q)
		case q < (maxMapnr+7)/8*8:
			return false // the rest of the bitmap file's last byte
		case block > 0:
			return keep.Test(q - bp) // past a short read: the block before
		}
		return false
	}
	for _, l := range v.Loads {
		lo, hi := (l.Paddr+ps-1)/ps, (l.Paddr+l.MemSize+ps-1)/ps
		if in := min(hi, maxMapnr); lo < in {
			block = (in - 1) / bp
		}
		for p := hasData.NextSet(max(lo, maxMapnr)); p < hi; p = hasData.NextSet(p + 1) {
			if stale(p) {
				keep.Set(p)
			}
		}
	}
}

// keepPastMemMap is markPastMemMap's counterpart when makedumpfile builds
// its bitmaps in cycles (--cyclic-buffer, max_mapnr not a multiple of 4,
// --split): the ELF walk then builds the 2nd bitmap afresh for each cycle
// of each PT_LOAD from the PT_LOADs (create_bitmap_from_memhole,
// exclude_nodata_pages), the page scan never reaches past mem_map, and so
// every pfn there with data is kept, but for zero pages with dump level bit
// 1 (its zero scan covers the cycle): the caller's. It reports whether it
// kept any.
func keepPastMemMap(keep *bitmap.Bitmap, v *source.Vmcore, maxMapnr uint64, pp source.PartialPages) bool {
	if maxMapnr == 0 || maxMapnr >= keep.Len() {
		return false
	}
	_, hasData := v.Bitmaps(keep.Len(), pp)
	kept := false
	for p := hasData.NextSet(maxMapnr); p < keep.Len(); p = hasData.NextSet(p + 1) {
		keep.Set(p)
		kept = true
	}
	return kept
}
