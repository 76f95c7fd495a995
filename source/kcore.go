package source

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"

	"pagepipe/kernel"
)

// /proc/kcore is an ELF core of the running kernel, made afresh at every
// open (fs/proc/kcore.c). Its PT_LOADs are the kernel's address ranges,
// not physical memory: the kernel image (p_paddr its physical address),
// the direct map of each System RAM range (p_paddr the RAM's), and, with
// p_paddr -1, vmalloc, the modules' range, the vmemmap backing each RAM
// range and, on x86_64, the vsyscall page. Its notes are one zeroed
// NT_PRSTATUS, NT_PRPSINFO, NT_TASKSTRUCT and, since Linux 4.19, the
// kernel's VMCOREINFO. A live dump reads only the RAM ranges: vmalloc and
// the rest may map device memory, whose reads have side effects.

// SegmentKind is what one of kcore's PT_LOADs maps.
type SegmentKind uint8

// The kinds of kcore's PT_LOADs, by address range.
const (
	KcoreRAM     SegmentKind = iota // direct-mapped System RAM
	KcoreText                       // the kernel image (_text to _end)
	KcoreVmalloc                    // vmalloc's range
	KcoreModules                    // the modules' range, where it is not vmalloc's
	KcoreVmemmap                    // the struct pages of a RAM range
	KcoreOther                      // anything else (x86_64's vsyscall page)
)

func (k SegmentKind) String() string {
	return [...]string{"ram", "text", "vmalloc", "modules", "vmemmap", "other"}[k]
}

// KcoreSegment is one of kcore's PT_LOADs, typed.
type KcoreSegment struct {
	Kind         SegmentKind
	Vaddr, Size  uint64
	Paddr        uint64 // ^0 where the PT_LOAD has none
	Offset       uint64 // p_offset
	FileSizeLoad uint64 // p_filesz
}

// Kcore is the layout of a /proc/kcore-shaped input.
type Kcore struct {
	// Segments are the PT_LOADs in file order.
	Segments []KcoreSegment
	// DirectMap is the kernel's PAGE_OFFSET: vaddr - paddr of every RAM
	// segment.
	DirectMap uint64
	// VmemmapBase is where the struct page of pfn 0 would lie (0 when no
	// vmemmap segment was found: a kernel without SPARSEMEM_VMEMMAP).
	VmemmapBase uint64
	// ImageStart and ImageEnd are the kernel image's physical range
	// (_text to _end), which every live dump holds whole.
	ImageStart, ImageEnd uint64
}

// ErrNoVmcoreinfo is a kcore without the VMCOREINFO note (a kernel older
// than 4.19): without it the struct pages cannot be found.
var ErrNoVmcoreinfo = errors.New("no VMCOREINFO note (it needs Linux 4.19 or later): the kernel's struct pages cannot be found")

// IsKcore reports whether the ELF looks like /proc/kcore rather than a
// vmcore: the kernel puts a CORE NT_TASKSTRUCT note in kcore, kexec-tools
// none in /proc/vmcore.
func (in *Info) IsKcore() bool { return in.Tasks > 0 }

// TypeKcore types kcore's PT_LOADs by address range, from the kernel's
// VMCOREINFO (in's note): the one holding _stext with a physical address
// is the image; the others with one are direct-mapped RAM, all at the same
// offset (PAGE_OFFSET); those without are typed by the ranges VMCOREINFO
// names where it does (arm64's 6.1 has MODULES_VADDR, VMALLOC_START,
// VMEMMAP_START and their ends), or else by their shape: the largest is vmalloc, one within
// 2 GiB of the image or ending where vmalloc begins the modules', and
// those whose addresses are one base plus the struct pages of the RAM
// ranges (SIZE(page) each) the vmemmap. It then keeps only the RAM segments as in's Loads: a live dump
// reads nothing else.
func TypeKcore(in *Info) (*Kcore, error) {
	raw := in.Vmcoreinfo()
	if raw == nil {
		return nil, Unsupported(ErrNoVmcoreinfo)
	}
	vi, err := kernel.ParseVMCOREINFO(raw)
	if err != nil {
		return nil, fmt.Errorf("VMCOREINFO note: %w", err)
	}
	stext, err := vi.RequireSymbol("_stext")
	if err != nil {
		return nil, Unsupported(fmt.Errorf("kcore: %w", err))
	}
	pageStruct, _ := vi.Size("page")
	k := &Kcore{}
	ps := in.pageSize
	var ram []Load
	haveDM := false
	for _, l := range in.Loads {
		s := KcoreSegment{Vaddr: l.Vaddr, Size: l.MemSize, Paddr: l.Paddr, Offset: l.Offset, FileSizeLoad: l.FileSize}
		switch {
		case stext >= l.Vaddr && stext-l.Vaddr < l.MemSize:
			if k.ImageEnd != 0 {
				return nil, Unsupported(errors.New("kcore: two PT_LOADs hold the kernel image (_stext)"))
			}
			s.Kind = KcoreText
			k.ImageStart, k.ImageEnd = l.Paddr, l.Paddr+l.MemSize
		default:
			s.Kind = KcoreRAM
			dm := l.Vaddr - l.Paddr
			if haveDM && dm != k.DirectMap {
				return nil, Unsupported(fmt.Errorf("kcore: RAM at %#x is mapped at %#x, not at the direct map's offset %#x", l.Paddr, l.Vaddr, k.DirectMap))
			}
			k.DirectMap, haveDM = dm, true
			ram = append(ram, l)
		}
		k.Segments = append(k.Segments, s)
	}
	if k.ImageEnd == 0 {
		return nil, Unsupported(fmt.Errorf("kcore: no PT_LOAD with a physical address holds the kernel image (_stext %#x)", stext))
	}
	if len(ram) == 0 {
		return nil, Unsupported(errors.New("kcore: no direct-mapped RAM"))
	}
	// The unmapped ranges: by the ranges VMCOREINFO gives (arm64's),
	// else by their shape.
	kinds := make([]SegmentKind, len(in.Unmapped))
	ranges := []struct {
		lo, hi string
		kind   SegmentKind
	}{{"MODULES_VADDR", "MODULES_END", KcoreModules}, {"VMALLOC_START", "VMALLOC_END", KcoreVmalloc}, {"VMEMMAP_START", "VMEMMAP_END", KcoreVmemmap}}
	byRange := false
	for i, l := range in.Unmapped {
		kinds[i] = KcoreOther
		for _, r := range ranges {
			lo, ok1 := vi.NumberUnsigned(r.lo)
			hi, ok2 := vi.NumberUnsigned(r.hi)
			if ok1 && ok2 && l.Vaddr >= lo && l.Vaddr < hi && l.MemSize <= hi-l.Vaddr {
				kinds[i], byRange = r.kind, true
				break
			}
		}
	}
	if byRange {
		if pageStruct > 0 {
			k.VmemmapBase = vmemmapBase(in.Unmapped, kinds, KcoreVmemmap, ram, ps, uint64(pageStruct), in.MaxMapnr)
		}
		return k.finish(in, kinds, ram), nil
	}
	var largest = -1
	for i, l := range in.Unmapped {
		if largest < 0 || l.MemSize > in.Unmapped[largest].MemSize {
			largest = i
		}
	}
	if largest >= 0 {
		kinds[largest] = KcoreVmalloc
	}
	// The modules' range: x86_64's lies within 2 GiB of the image (its
	// calls reach the kernel), arm64's ends where vmalloc's starts
	// (MODULES_END is VMALLOC_START), however far KASLR put the image.
	const near = 2 << 30
	for i, l := range in.Unmapped {
		if kinds[i] != KcoreOther || l.MemSize < 2<<20 {
			continue
		}
		if absDiff(l.Vaddr, stext) < near || largest >= 0 && l.Vaddr+l.MemSize == in.Unmapped[largest].Vaddr {
			kinds[i] = KcoreModules
		}
	}
	if pageStruct > 0 {
		k.VmemmapBase = vmemmapBase(in.Unmapped, kinds, KcoreOther, ram, ps, uint64(pageStruct), in.MaxMapnr)
		if k.VmemmapBase != 0 {
			for i, l := range in.Unmapped {
				if kinds[i] == KcoreOther && isVmemmapOf(l, k.VmemmapBase, ram, ps, uint64(pageStruct), in.MaxMapnr) {
					kinds[i] = KcoreVmemmap
				}
			}
		}
	}
	return k.finish(in, kinds, ram), nil
}

// finish adds the unmapped segments of the given kinds, sorts the
// segments in file order and leaves in with the RAM as its Loads.
func (k *Kcore) finish(in *Info, kinds []SegmentKind, ram []Load) *Kcore {
	ps := in.pageSize
	for i, l := range in.Unmapped {
		k.Segments = append(k.Segments, KcoreSegment{Kind: kinds[i], Vaddr: l.Vaddr, Size: l.MemSize, Paddr: l.Paddr, Offset: l.Offset, FileSizeLoad: l.FileSize})
	}
	slices.SortStableFunc(k.Segments, func(a, b KcoreSegment) int {
		switch {
		case a.Offset < b.Offset:
			return -1
		case a.Offset > b.Offset:
			return 1
		}
		return 0
	})
	in.Loads = ram
	in.MaxMapnr = 0
	for _, l := range in.Loads {
		in.MaxMapnr = max(in.MaxMapnr, (l.Paddr+l.MemSize+ps-1)/ps)
	}
	return k
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// vmemmapAlign is the least alignment of a vmemmap base: the kernel maps
// struct pages with PMD-sized pages (2 MiB), and every architecture's
// VMEMMAP_START is aligned far beyond that.
const vmemmapAlign = 2 << 20

// vmemmapBase finds the base B with the most segments of kind starting at
// B + (the first struct page of a RAM range, rounded down to a page), as
// the kernel adds one for each RAM range (merging those that overlap).
func vmemmapBase(segs []Load, kinds []SegmentKind, kind SegmentKind, ram []Load, ps, sp, maxMapnr uint64) uint64 {
	votes := map[uint64]int{}
	for i, l := range segs {
		if kinds[i] != kind {
			continue
		}
		for _, r := range ram {
			first := (r.Paddr / ps * sp) &^ (ps - 1)
			b := l.Vaddr - first
			if b%vmemmapAlign == 0 && isVmemmapOf(l, b, ram, ps, sp, maxMapnr) {
				votes[b]++
			}
		}
	}
	var best uint64
	n := 0
	for b, c := range votes {
		if c > n || c == n && b < best {
			best, n = b, c
		}
	}
	return best
}

// isVmemmapOf reports whether l lies at base's struct pages of some RAM
// range's first pfn and within the struct pages of the machine.
func isVmemmapOf(l Load, base uint64, ram []Load, ps, sp, maxMapnr uint64) bool {
	if l.Vaddr < base {
		return false
	}
	end := (maxMapnr*sp + ps - 1) &^ (ps - 1)
	if l.Vaddr-base+l.MemSize > end {
		return false
	}
	for _, r := range ram {
		first := (r.Paddr / ps * sp) &^ (ps - 1)
		if l.Vaddr-base == first {
			return true
		}
	}
	return false
}

// KcoreDeniedError is a refused open or read of /proc/kcore: it needs
// root (CAP_SYS_RAWIO), and kernel lockdown forbids it even to root.
type KcoreDeniedError struct {
	Path string
	// Lockdown is the active lockdown mode ("integrity",
	// "confidentiality"), "" when none is known.
	Lockdown string
	// Root: the process runs as root.
	Root bool
	Err  error
}

func (e *KcoreDeniedError) Error() string {
	switch {
	case e.Lockdown != "":
		return fmt.Sprintf("%s: the kernel is locked down (%s), which forbids reading the running kernel's memory: %v", e.Path, e.Lockdown, e.Err)
	case !e.Root:
		return fmt.Sprintf("%s: reading the running kernel's memory needs root (CAP_SYS_RAWIO): %v", e.Path, e.Err)
	}
	return fmt.Sprintf("%s: the kernel refused to let the running kernel's memory be read (CAP_SYS_RAWIO): %v", e.Path, e.Err)
}

func (e *KcoreDeniedError) Unwrap() []error { return []error{e.Err, ErrUnsupported} }

// lockdownFile is the lockdown LSM's state: "none [integrity]
// confidentiality", the active mode in brackets.
var lockdownFile = "/sys/kernel/security/lockdown"

// activeLockdown is the lockdown mode in force, "" for none or unknown.
func activeLockdown() string {
	b, err := os.ReadFile(lockdownFile)
	if err != nil {
		return ""
	}
	return parseLockdown(string(b))
}

func parseLockdown(s string) string {
	_, rest, ok := strings.Cut(s, "[")
	if !ok {
		return ""
	}
	mode, _, ok := strings.Cut(rest, "]")
	if !ok || mode == "none" {
		return ""
	}
	return mode
}

// denied turns a permission error met opening or reading path into a
// KcoreDeniedError; other errors are returned as they are.
func denied(path string, err error) error {
	if !strings.HasSuffix(path, "kcore") || !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EACCES) {
		return err
	}
	return &KcoreDeniedError{Path: path, Lockdown: activeLockdown(), Root: os.Geteuid() == 0, Err: syscall.EPERM}
}

// LiveKcore reports whether path is the running kernel's /proc/kcore.
func LiveKcore(path string) bool {
	var st syscall.Statfs_t
	return strings.HasSuffix(path, "kcore") && syscall.Statfs(path, &st) == nil && st.Type == 0x9fa0 // PROC_SUPER_MAGIC
}

// LiveNotes makes in's notes those of a live dump of it: kcore's
// NT_TASKSTRUCT (the reading process's task, of no use to an analysis,
// and what tells kcore from a vmcore: IsKcore) left out and extra (whole
// notes) appended. VMCOREINFO is found again.
func (in *Info) LiveNotes(extra []byte) error {
	le := binary.LittleEndian
	var out []byte
	b := in.Notes
	for off := 0; off+12 <= len(b); {
		namesz, descsz, typ := int(le.Uint32(b[off:])), int(le.Uint32(b[off+4:])), le.Uint32(b[off+8:])
		if namesz == 0 && descsz == 0 && typ == 0 {
			break
		}
		next := off + 12 + (namesz+3)&^3 + (descsz+3)&^3
		if next > len(b) || next < off {
			return fmt.Errorf("kcore note at %#x runs past the notes", off)
		}
		name := string(bytes.TrimRight(b[off+12:off+12+namesz], "\x00"))
		if name != "CORE" || typ != ntTaskstruct {
			out = append(out, b[off:next]...)
		}
		off = next
	}
	out = append(out, extra...)
	in.Notes, in.NrCPUs, in.Tasks, in.VmcoreinfoOff, in.VmcoreinfoSize = out, 0, 0, 0, 0
	binary.LittleEndian.PutUint64(in.NotePhdr[32:], uint64(len(out))) // p_filesz
	binary.LittleEndian.PutUint64(in.NotePhdr[40:], uint64(len(out))) // p_memsz
	return in.walkNotes(0)
}
