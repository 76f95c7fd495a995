package synth

import (
	"bytes"
	"testing"
)

// TestKexecMachine: the capture-kernel machines have kexec-tools' layout —
// the kernel-text PT_LOAD first and aliasing RAM, low RAM ending mid-page
// at 0x9fc00 with data in that page's first 3 KiB, no PT_LOAD over the
// crashkernel reservation — and max_mapnr of each residue mod 4; the file
// holds what Page says, the partial page included.
func TestKexecMachine(t *testing.T) {
	const resLo, resHi = 24 * mib, 28 * mib
	for r := range uint64(4) {
		s := KexecMachine(r)
		if err := s.Validate(); err != nil {
			t.Fatalf("r%d: %v", r, err)
		}
		if got := s.MaxMapnr() % 4; got != r {
			t.Errorf("r%d: max_mapnr %#x ≡ %d mod 4", r, s.MaxMapnr(), got)
		}
		segs := s.FileSegments()
		text := segs[0]
		if text.Vaddr < startKernelMap {
			t.Errorf("r%d: first PT_LOAD %+v is not kernel text", r, text)
		}
		aliased := false
		for _, g := range segs[1:] {
			aliased = aliased || g.Paddr <= text.Paddr && text.End() <= g.End()
			if g.Paddr < resHi && g.End() > resLo {
				t.Errorf("r%d: PT_LOAD %#x-%#x overlaps the reservation", r, g.Paddr, g.End())
			}
		}
		if !aliased {
			t.Errorf("r%d: kernel text %#x-%#x aliases no RAM PT_LOAD", r, text.Paddr, text.End())
		}
		if low := segs[1]; low.Paddr != 0x1000 || low.End() != 0x9fc00 {
			t.Errorf("r%d: low RAM %#x-%#x, want 0x1000-0x9fc00", r, low.Paddr, low.End())
		}
		if c := TruthOf(s, 0x9f); c != Hole {
			t.Errorf("r%d: the partial page is %v, want no RAM", r, c)
		}

		g, dense, file := denseAndFile(t, s)
		if d := firstDiff(dense, file); d >= 0 {
			t.Fatalf("r%d: Write and WriteFile differ at byte %#x", r, d/8)
		}
		buf := make([]byte, PageSize)
		for _, pfn := range []uint64{0x9e, 0x9f, 0x100, text.Paddr / PageSize, resHi / PageSize} {
			Page(s, pfn, buf)
			i := 1
			for i < len(segs) && !(segs[i].Paddr <= pfn*PageSize && pfn*PageSize < segs[i].End()) {
				i++
			}
			n := min(PageSize, segs[i].End()-pfn*PageSize)
			off := g.LoadOff[i] + int64(pfn*PageSize-segs[i].Paddr)
			if !bytes.Equal(buf[:n], file[off:off+int64(n)]) || !allZero(buf[n:]) {
				t.Errorf("r%d: pfn %#x: Page differs from the file", r, pfn)
			}
		}
		Page(s, 0x9f, buf)
		if allZero(buf[:0xc00]) {
			t.Errorf("r%d: the partial page holds only zeros", r)
		}
	}
}

// The capture-kernel machines' kernel text holds freed init memory: pages
// of the kernel-text PT_LOAD that dump level 31 excludes (as pages of RAM,
// which the same pfns are in the RAM PT_LOAD).
func TestKexecMachineFreedInit(t *testing.T) {
	for r := range uint64(4) {
		s := KexecMachine(r)
		text := s.FileSegments()[0]
		excluded := 0
		for pfn := text.Paddr / PageSize; pfn < text.End()/PageSize; pfn++ {
			if TruthOf(s, pfn).ExcludedAt(DLMax) {
				excluded++
			}
		}
		if excluded < 32 {
			t.Errorf("r%d: %d pages of kernel text excluded at -d 31, want at least 32", r, excluded)
		}
	}
}
