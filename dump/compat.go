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
// prepare, partialPages: whether a PT_LOAD's partial last page is present).

// fillKernelMeta takes what the dump header says about the crashed kernel
// from its VMCOREINFO: the crash time, phys_base, and utsname, read from
// init_uts_ns through the kernel's own page tables as makedumpfile does.
// When the kernel's memory cannot give utsname (a generated x86_64 vmcore
// has no page tables), the header still gets "Linux", OSRELEASE and the
// architecture's name, so that readers checking the machine accept it;
// the returned note says so. An architecture whose readers need more than
// the machine (arm64's decode the linear map from phys_base and utsname)
// gets an error instead: no dump is better than a wrong one.
func fillKernelMeta(v *source.Vmcore, vi *kernel.VMCOREINFO, m *sink.Meta) (note string, err error) {
	arch := v.Arch()
	if pb, _, ok := arch.PhysBase(vi, loadAddrs(v)); ok {
		m.PhysBase = pb
	}
	if vi == nil {
		return "", nil
	}
	if t, ok := vi.CrashTime(); ok {
		m.CrashTime = t
	}
	err = readUtsname(v, vi, &m.Utsname)
	if err == nil {
		return "", nil
	}
	if !arch.FallbackUtsname() {
		return "", source.Unsupported(fmt.Errorf("%s vmcore: utsname for the header: %w", arch.Name(), err))
	}
	note = fmt.Sprintf("utsname not read from kernel memory (%v); using OSRELEASE", err)
	clear(m.Utsname[:])
	for i, s := range map[int]string{0: "Linux", 2: vi.OSRelease(), 4: arch.Name()} {
		copy(m.Utsname[i*kdumpfmt.UtsnameFieldSize:(i+1)*kdumpfmt.UtsnameFieldSize-1], s)
	}
	return note, nil
}

// loadAddrs are the vmcore's PT_LOADs as the phys_base rules read them.
func loadAddrs(v *source.Vmcore) []kernel.Load {
	l := make([]kernel.Load, len(v.Loads))
	for i, s := range v.Loads {
		l[i] = kernel.Load{Paddr: s.Paddr, Vaddr: s.Vaddr}
	}
	return l
}

func readUtsname(v source.Memory, vi *kernel.VMCOREINFO, dst *[kdumpfmt.UtsnameSize]byte) error {
	sym, err := vi.RequireSymbol("init_uts_ns")
	if err != nil {
		return err
	}
	off, err := vi.RequireOffset("uts_namespace.name")
	if err != nil {
		return err
	}
	tr, err := v.Arch().NewTranslator(v, vi)
	if err != nil {
		return err
	}
	if err := tr.ReadVirt(sym+uint64(off), dst[:]); err != nil {
		return fmt.Errorf("read init_uts_ns: %w", err)
	}
	return nil
}

// markPastMemMap decides which pfns from maxMapnr (the end of the crashed
// kernel's mem_map) on an ELF dump keeps. The kdump format has no bits for
// them; makedumpfile's ELF walk still visits them when a PT_LOAD reaches
// past mem_map (QEMU's BIOS ROM segment does), and in its usual one-cycle
// mode it reads their bits from past the end of its bitmap file: the read
// fails ("is_dumpable_file: Can't read the bitmap") and the bits come from
// the block it read last, that is, from the pfn at the same place in the
// bitmap block (one page of bits: 32768 pfns with 4 KiB pages) of the last
// pfn below maxMapnr that its walk visited.
// This reproduces that, so that the dump equals makedumpfile's; only pages
// the vmcore holds are ever taken. (In cycles makedumpfile keeps them all
// instead: keepPastMemMap.)
func markPastMemMap(keep *bitmap.Bitmap, v *source.Vmcore, maxMapnr uint64) {
	ps := v.PageSize()
	bp := ps * 8 // pfns per bitmap block
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
