package dump

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"pagepipe/chunk"
	"pagepipe/codec"
	"pagepipe/kdumpfmt"
	"pagepipe/kernel"
	"pagepipe/priority"
	"pagepipe/source"
)

// Inspect prints a dump's headers and page counts to w (pagepipe
// inspect): a kdump-compressed file (whole or split), a flattened stream
// of one, or an ELF file (an -E dump or a vmcore).
func Inspect(w io.Writer, path string) error {
	f, err := openDumpFile(path)
	if err != nil {
		return err
	}
	defer f.close()
	if f.elf {
		return inspectELF(w, path, f)
	}
	d, err := source.OpenDump(f.path)
	if err != nil {
		return err
	}
	defer d.Close()
	d.Path = path
	return inspect(d, w, f.format)
}

func inspect(d *source.Dump, w io.Writer, format string) error {
	h, s := d.Header, d.Sub
	fmt.Fprintf(w, "file            : %s\n", d.Path)
	fmt.Fprintf(w, "format          : %s\n", format)
	fmt.Fprintf(w, "signature       : %q (header_version %d)\n", h.Signature[:], h.HeaderVersion)
	fmt.Fprintf(w, "release         : %s\n", h.Utsfield(2))
	fmt.Fprintf(w, "machine         : %s\n", h.Utsfield(4))
	fmt.Fprintf(w, "crash time      : %s\n", time.Unix(h.TimestampSec, 0).UTC().Format(time.RFC3339))
	if notes, _, _, _ := d.Notes(); findLiveNote(notes) != nil {
		printLive(w, findLiveNote(notes))
	}
	fmt.Fprintf(w, "status          : %#x%s\n", h.Status, statusNames(h.Status))
	fmt.Fprintf(w, "block size      : %d\n", h.BlockSize)
	fmt.Fprintf(w, "sub header      : %d blocks\n", h.SubHdrSize)
	fmt.Fprintf(w, "bitmaps         : %d blocks\n", h.BitmapBlocks)
	fmt.Fprintf(w, "max_mapnr       : %d\n", d.MaxMapnr)
	fmt.Fprintf(w, "cpus            : %d\n", h.NrCPUs)
	fmt.Fprintf(w, "phys_base       : %#x\n", s.PhysBase)
	fmt.Fprintf(w, "dump level      : %d\n", s.DumpLevel)
	fmt.Fprintf(w, "notes           : %d bytes at %d\n", s.SizeNote, s.OffsetNote)
	fmt.Fprintf(w, "vmcoreinfo      : %d bytes at %d\n", s.SizeVmcoreinfo, s.OffsetVmcoreinfo)
	if s.SizeEraseinfo > 0 {
		// What --config erased, as makedumpfile's and pagepipe's
		// ERASEINFO records it: "erase EXPR size N" lines.
		text, err := inputEraseinfo(d)
		if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
		fmt.Fprintf(w, "eraseinfo       : %d bytes at %d, %d lines\n", s.SizeEraseinfo, s.OffsetEraseinfo, len(lines))
		const show = 32
		for _, l := range lines[:min(show, len(lines))] {
			fmt.Fprintf(w, "  %s\n", l)
		}
		if len(lines) > show {
			fmt.Fprintf(w, "  … %d more\n", len(lines)-show)
		}
	}
	if s.Split != 0 {
		fmt.Fprintf(w, "split           : pfns [%d, %d)\n", s.StartPFN64, s.EndPFN64)
	}
	present, dumpable := d.Present.Count(0, d.MaxMapnr), d.NumDumpable()
	fmt.Fprintf(w, "present pages   : %d\n", present)
	fmt.Fprintf(w, "dumpable pages  : %d\n", dumpable)

	// One pass over the descriptors: counts by codec flag, and the pages
	// at the lowest data offset, where the writer stores the shared zero
	// page (see isSharedZeroPage).
	counts := map[uint32]uint64{}
	var lost, atFirst uint64
	first, firstPFN := int64(-1), uint64(0)
	err := eachDesc(d, func(pfn uint64, desc kdumpfmt.PageDesc) error {
		switch {
		case desc.Offset == 0:
			lost++
			return nil
		case first < 0 || desc.Offset < first:
			first, firstPFN, atFirst = desc.Offset, pfn, 0
		}
		if desc.Offset == first {
			atFirst++
		}
		counts[desc.Flags]++
		return nil
	})
	if err != nil {
		return err
	}
	var zero uint64
	zeroAt := int64(-1)
	if s.DumpLevel&1 != 0 && first >= 0 {
		isZero, err := isSharedZeroPage(d, firstPFN)
		if err != nil {
			return err
		}
		if isZero {
			zero, zeroAt = atFirst, first
			counts[0] -= atFirst
		}
	}
	fmt.Fprintf(w, "  zero (shared) : %d\n", zero)
	fmt.Fprintf(w, "  raw           : %d\n", counts[0])
	for _, c := range codec.All() {
		if n := counts[c.Flag]; n > 0 {
			fmt.Fprintf(w, "  %-14s: %d\n", c.Name, n)
		}
	}
	if lost > 0 {
		fmt.Fprintf(w, "  lost          : %d\n", lost)
	}
	return inspectPriority(d, w, zeroAt)
}

// inspectPriority reports the priority set (package priority), found
// again from the dump's own VMCOREINFO and page tables: how many of its
// pages the dump holds, and whether their data comes first (a dump
// written with --priority) — for a dump cut short, how much of the set
// landed. zeroAt is the shared zero page's offset (-1: none).
func inspectPriority(d *source.Dump, w io.Writer, zeroAt int64) error {
	notes, _, off, size := d.Notes()
	if size == 0 {
		return nil
	}
	if d.Sub.Split != 0 {
		// The set is found by walking the kernel's page tables, which lie
		// in whichever parts hold their pfns.
		fmt.Fprintf(w, "priority set    : not looked for in a split file (inspect the dump --reassemble makes)\n")
		return nil
	}
	vi, err := kernel.ParseVMCOREINFO(notes[off : off+size])
	if err != nil {
		return nil // said by the vmcoreinfo line's readers; not this report's
	}
	// The set is found through the dump's kernel's page tables: its own
	// architecture's (an arm64 dump's read as x86_64's find nothing).
	if err := d.DecideArch(); err != nil {
		fmt.Fprintf(w, "priority set    : not looked for: %v\n", err)
		return nil
	}
	set, err := priority.Find(d, vi)
	if err != nil {
		fmt.Fprintf(w, "priority set    : not found: %v\n", err)
		return nil
	}
	in := set.Bitmap(d.MaxMapnr)
	var held uint64
	var prioEnd, bulkFirst int64 = 0, -1
	err = eachDesc(d, func(pfn uint64, desc kdumpfmt.PageDesc) error {
		if desc.Offset == 0 || desc.Offset == zeroAt {
			if in.Test(pfn) && desc.Offset != 0 {
				held++
			}
			return nil
		}
		if in.Test(pfn) {
			held++
			prioEnd = max(prioEnd, desc.Offset+int64(desc.Size))
		} else if bulkFirst < 0 || desc.Offset < bulkFirst {
			bulkFirst = desc.Offset
		}
		return nil
	})
	if err != nil {
		return err
	}
	found := set.Len()
	fmt.Fprintf(w, "priority set    : %d pages found, %d in the dump (%.1f %%)\n", found, held, 100*float64(held)/float64(max(found, 1)))
	for _, c := range set.Classes {
		n := uint64(0)
		for _, p := range c.Pfns {
			if p < d.MaxMapnr && d.Dumpable.Test(p) {
				n++
			}
		}
		fmt.Fprintf(w, "  %-14s: %d of %d\n", c.Name, n, len(c.Pfns))
	}
	order := "pfn order"
	if held > 0 && (bulkFirst < 0 || prioEnd <= bulkFirst) {
		order = fmt.Sprintf("priority set first (its data ends at byte %d)", prioEnd)
	}
	fmt.Fprintf(w, "data order      : %s\n", order)
	return nil
}

// eachDesc calls fn with the descriptor of every page the dump (or, for a
// split file, this part) holds, in pfn order.
func eachDesc(d *source.Dump, fn func(pfn uint64, desc kdumpfmt.PageDesc) error) error {
	for pfn := d.Dumpable.NextSet(0); pfn < d.MaxMapnr; pfn = d.Dumpable.NextSet(pfn + 1) {
		desc, err := d.Desc(pfn)
		if errors.Is(err, source.ErrNotDumped) {
			continue // another part's page, in a split file
		} else if err != nil {
			return err
		}
		if err := fn(pfn, desc); err != nil {
			return err
		}
	}
	return nil
}

// isSharedZeroPage reports whether pfn, the page at the lowest data offset
// of a dump at a level with bit 1, is the zero page that pages excluded as
// zero share: the writer stores that page first in the data area, raw and
// all zeros (a kept page is never all zeros at dump level 1).
// The 2nd bitmap cannot say where it is: an incomplete dump's was cut
// after the descriptor table was laid out.
func isSharedZeroPage(d *source.Dump, pfn uint64) (bool, error) {
	desc, err := d.Desc(pfn)
	if err != nil || desc.Flags != 0 || int64(desc.Size) != int64(d.Header.BlockSize) {
		return false, err
	}
	page := make([]byte, d.Header.BlockSize)
	if err := d.ReadPage(pfn, page); err != nil {
		return false, fmt.Errorf("read pfn %d: %w", pfn, err)
	}
	return chunk.IsZero(page), nil
}

// inspectELF prints an ELF dump's (or vmcore's) headers: the machine,
// page size, CPUs, VMCOREINFO, and its PT_LOADs' memory and file bytes.
func inspectELF(w io.Writer, path string, f *dumpFile) error {
	v, err := source.Open(f.path)
	if err != nil {
		return err
	}
	defer v.Close()
	var mem, file uint64
	for _, l := range v.Loads {
		mem += l.MemSize
		file += l.FileSize
	}
	fmt.Fprintf(w, "file            : %s\n", path)
	fmt.Fprintf(w, "format          : %s\n", f.format)
	fmt.Fprintf(w, "machine         : %s\n", v.Arch().Name())
	if vi, err := kernel.ParseVMCOREINFO(v.Vmcoreinfo()); err == nil {
		fmt.Fprintf(w, "release         : %s\n", vi.OSRelease())
	}
	if li := findLiveNote(v.Info.Notes); li != nil {
		printLive(w, li)
	}
	fmt.Fprintf(w, "page size       : %d\n", v.PageSize())
	fmt.Fprintf(w, "max_mapnr       : %d\n", v.MaxMapnr)
	fmt.Fprintf(w, "cpus            : %d\n", v.NrCPUs)
	fmt.Fprintf(w, "notes           : %d bytes at %d\n", len(v.Info.Notes), v.NoteOffset)
	fmt.Fprintf(w, "vmcoreinfo      : %d bytes\n", v.VmcoreinfoSize)
	fmt.Fprintf(w, "PT_LOADs        : %d\n", len(v.Loads))
	fmt.Fprintf(w, "memory          : %d bytes\n", mem)
	fmt.Fprintf(w, "in the file     : %d bytes (%d pages)\n", file, file/v.PageSize())
	return nil
}

func statusNames(st uint32) string {
	s := ""
	for _, c := range codec.All() {
		if st&c.Flag != 0 {
			s += " " + c.Name
		}
	}
	if st&kdumpfmt.StatusIncomplete != 0 {
		s += " INCOMPLETE"
	}
	if st&kdumpfmt.StatusExcludedVmemmap != 0 {
		s += " excluded-vmemmap"
	}
	return s
}

// printLive says that a dump is of the running kernel, and when it was read.
func printLive(w io.Writer, li *LiveInfo) {
	fmt.Fprintf(w, "live dump       : the running kernel, read from %s at %s (pages changed while they were read)\n",
		li.Source, li.Taken.UTC().Format(time.RFC3339))
}
