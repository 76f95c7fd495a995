// Package synth generates synthetic ELF64 vmcores: files shaped like the
// kernel's /proc/vmcore (or like QEMU's dump-guest-memory ELF output) whose
// page contents are a pure function of a seed and the page frame number.
//
// Why: tests, the demo and the benchmarks need vmcores of any size and shape
// on machines with no kdump and no spare GiBs of fixtures. Because the
// contents are computable, a test can check a dump page by page against
// Page without keeping or re-reading the source file.
//
// Plain specs (Default, Shapes) hold no kernel structures, so only
// filtering that looks at page contents (zero pages, dump level 1) can be
// exercised on them. Kernel machines (Spec.Kernel, KernelMachine) add what
// struct-page filtering needs, laid out after a chosen kernel era (4.19,
// 5.10, 6.1, 6.6, 6.9, 6.12): x86_64 page tables, the SPARSEMEM_EXTREME
// mem_section tree, a struct page for every page frame describing a known
// mix of page classes, init_uts_ns and the era's VMCOREINFO. The class of
// every pfn is known (TruthOf, WriteTruth), and so is what makedumpfile
// keeps at each dump level (ExpectedFilter); Debian's makedumpfile 1.7.2
// agrees with it on the eras it supports (see kernel_test.go).
package synth

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// PageSize is the page size of a spec that sets none (Spec.PageSize 0):
// x86_64's, and Debian's arm64 kernels'.
const PageSize = 4096

// Layout selects how the ELF file is arranged.
type Layout uint8

const (
	// ProcVmcore mirrors the kernel's /proc/vmcore: program headers at 64,
	// PT_NOTE first with a page-aligned p_offset, every PT_LOAD's data in a
	// page-granular chunk laid out back to back, so that the file offset of
	// every page is page aligned (what makedumpfile's mmap path needs).
	ProcVmcore Layout = iota
	// QEMU mirrors QEMU 7.2's dump-guest-memory "elf" output: two section
	// headers at 64 (NULL and .shstrtab, whose string data sits at the very
	// end of the file), program headers at e_phoff = 192, e_ehsize = 8
	// (QEMU's bug), notes right after the program headers and segment data
	// right after the notes with no alignment at all. Readers that assume
	// e_phoff == 64 (makedumpfile does) fail on it, as on the real thing.
	QEMU
)

func (l Layout) String() string {
	switch l {
	case ProcVmcore:
		return "procvmcore"
	case QEMU:
		return "qemu"
	}
	return fmt.Sprintf("Layout(%d)", uint8(l))
}

// Kind is the class of a page's contents.
type Kind uint8

const (
	// Zero pages are all zero bytes.
	Zero Kind = iota
	// Text pages are printable ASCII words and lines; zlib shrinks them
	// about 3x, like log buffers and page cache of text files.
	Text
	// Repetitive pages repeat a short pattern (1..64 bytes), like memset
	// poison or arrays of identical structs: they compress very well but
	// are never all zero.
	Repetitive
	// Random pages are PRNG output: incompressible, like encrypted or
	// already compressed data.
	Random
)

func (k Kind) String() string {
	switch k {
	case Zero:
		return "zero"
	case Text:
		return "text"
	case Repetitive:
		return "repetitive"
	case Random:
		return "random"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Mix gives the fraction of pages of each kind. The fractions must sum to
// at most 1; whatever is left over is Text. So the zero value Mix{} means
// "all text", not "all zero".
type Mix struct {
	Zero, Text, Repetitive, Random float64
}

// DefaultMix is a plausible mix for a crashed machine: a lot of free
// (zero) memory, text-like page cache, some repetitive kernel data and
// some incompressible user data.
var DefaultMix = Mix{Zero: 0.30, Text: 0.30, Repetitive: 0.20, Random: 0.20}

// Segment is one PT_LOAD.
type Segment struct {
	// Paddr is the physical address of the first byte. Normally page
	// aligned; an unaligned start is allowed and placed as the kernel does
	// (p_offset points at the exact byte inside a page-aligned chunk).
	Paddr uint64
	// FileSize is the number of bytes with data in the file. It may end in
	// the middle of a page: exactly FileSize bytes are written, so a reader
	// meets a partial last page (the kernel's /proc/vmcore would pad to a
	// whole page; writing exactly FileSize is deliberate, to exercise the
	// reader's partial-page path). In the ProcVmcore layout the next
	// segment still starts on a page boundary; the gap reads as zeros.
	FileSize uint64
	// MemSize is at least FileSize; the bytes FileSize..MemSize have no
	// data in the file and read as zeros (ELF semantics). Only FileSize
	// bytes of file space are used.
	MemSize uint64
	// Vaddr is written to p_vaddr as given (0 is fine: QEMU writes 0).
	Vaddr uint64
}

// End returns the physical address just past the segment's file data.
func (g Segment) End() uint64 { return g.Paddr + g.FileSize }

// Spec describes a machine's memory as /proc/vmcore would show it.
type Spec struct {
	// Arch is the architecture the ELF header and notes claim (the zero
	// value is x86_64); a kernel machine is x86_64 or aarch64
	// (NewARM64Machine).
	Arch Arch
	// PageSize is the page size the memory is generated and numbered in
	// (pfn = physical address / PageSize), a power of two from 4 KiB to
	// 64 KiB; 0 means the package's PageSize. A kernel machine's
	// VMCOREINFO says it (x86_64 machines have 4 KiB pages, arm64 ones 4,
	// 16 or 64 KiB); a plain spec's VMCOREINFO is the caller's text
	// (WithPageSize keeps its PAGESIZE in step).
	PageSize uint64
	// Segments are the PT_LOADs, in order; holes between them are
	// allowed, and so are overlaps (the kernel-text alias of a real
	// /proc/vmcore overlaps RAM). Contents depend only on the address, so
	// overlapping segments always agree.
	Segments []Segment
	// CPUs is the number of NT_PRSTATUS "CORE" notes (336-byte desc, the
	// x86_64 struct elf_prstatus).
	CPUs int
	// VMCOREINFO is the text of the VMCOREINFO note; "" means no note.
	VMCOREINFO string
	// Seed selects the contents: every page is a pure function of
	// (Seed, pfn).
	Seed uint64
	// Mix gives the fraction of each page kind.
	Mix Mix
	// Layout selects the file arrangement.
	Layout Layout
	// ExtraNotes adds one "QEMU" note (type 0, QEMUCPUState) per CPU, as
	// QEMU does, so tests can prove that unknown notes are kept verbatim.
	ExtraNotes bool
	// PNXnum forces ELF extended numbering: e_phnum = 0xffff and the real
	// count in section header 0's sh_info, even for a small count, so the
	// readers' PN_XNUM path is tested. It is used anyway when the count
	// does not fit in 16 bits.
	PNXnum bool
	// Kernel, when set, fills memory with kernel structures laid out
	// after a kernel era (page tables, mem_section, struct pages,
	// init_uts_ns) describing a known mix of page classes (TruthOf), and
	// an empty VMCOREINFO means the kernel's own. Segments must then be
	// whole pages with data (MemSize == FileSize): they are the RAM.
	// KernelMachine builds such specs.
	Kernel *KernelSpec
}

// Validate reports whether the spec can be written.
func (s Spec) Validate() error {
	if s.Layout != ProcVmcore && s.Layout != QEMU {
		return fmt.Errorf("synth: unknown layout %d", s.Layout)
	}
	if ps := s.PageBytes(); ps < 4096 || ps > 65536 || ps&(ps-1) != 0 {
		return fmt.Errorf("synth: page size %d is not a power of two from 4 KiB to 64 KiB", ps)
	}
	if s.Kernel != nil && s.Arch == X86_64 && s.PageBytes() != 4096 {
		return fmt.Errorf("synth: an x86_64 kernel machine has 4 KiB pages, not %d", s.PageBytes())
	}
	if s.CPUs < 0 || s.CPUs > 1<<16 {
		return fmt.Errorf("synth: CPUs %d out of range [0, 65536]", s.CPUs)
	}
	if _, ok := archs[s.Arch]; !ok {
		return fmt.Errorf("synth: unknown architecture %d", int(s.Arch))
	}
	if s.Kernel != nil && s.Arch != X86_64 && s.Arch != AArch64 && s.Arch != RISCV64 {
		return fmt.Errorf("synth: a kernel machine is x86_64, aarch64 or riscv64, not %v", s.Arch)
	}
	if s.Kernel != nil {
		if _, err := kernelOf(&s); err != nil {
			return err
		}
	}
	if len(vmcoreinfoOf(&s)) > math.MaxUint32 {
		return errors.New("synth: VMCOREINFO too long")
	}
	if len(s.Segments) >= math.MaxUint32-1 {
		return errors.New("synth: too many segments")
	}
	m := s.Mix
	sum := 0.0
	for _, f := range []float64{m.Zero, m.Text, m.Repetitive, m.Random} {
		if !(f >= 0 && f <= 1) { // also rejects NaN
			return fmt.Errorf("synth: mix fraction %v not in [0, 1]", f)
		}
		sum += f
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("synth: mix fractions sum to %v > 1", sum)
	}
	for i, g := range s.Segments {
		if g.MemSize < g.FileSize {
			return fmt.Errorf("synth: segment %d: MemSize %#x < FileSize %#x", i, g.MemSize, g.FileSize)
		}
		if g.Paddr+g.MemSize < g.Paddr || g.Paddr+g.MemSize > math.MaxUint64-s.PageBytes() {
			return fmt.Errorf("synth: segment %d: paddr %#x + memsz %#x overflows", i, g.Paddr, g.MemSize)
		}
		if g.FileSize > math.MaxInt64/2 {
			return fmt.Errorf("synth: segment %d: FileSize %#x too large", i, g.FileSize)
		}
	}
	return nil
}

// vmcoreinfoOf is the text of the VMCOREINFO note: the spec's, or for a
// kernel machine with none given, the kernel's.
func vmcoreinfoOf(s *Spec) string {
	if s.VMCOREINFO == "" && s.Kernel != nil {
		if k, err := kernelOf(s); err == nil {
			return k.vmcoreinfo
		}
	}
	return s.VMCOREINFO
}

// PageBytes is the spec's page size in bytes: PageSize, or the package's
// PageSize when that is 0.
func (s Spec) PageBytes() uint64 {
	if s.PageSize == 0 {
		return PageSize
	}
	return s.PageSize
}

// WithPageSize returns s generated in pages of ps bytes, with the
// PAGESIZE line of its VMCOREINFO text (if it has one) saying so. A
// kernel machine's VMCOREINFO follows its page size by itself.
func WithPageSize(s Spec, ps uint64) Spec {
	s.PageSize = ps
	if i := strings.Index(s.VMCOREINFO, "PAGESIZE="); i >= 0 && (i == 0 || s.VMCOREINFO[i-1] == '\n') {
		end := strings.IndexByte(s.VMCOREINFO[i:], '\n')
		if end < 0 {
			end = len(s.VMCOREINFO) - i
		}
		s.VMCOREINFO = s.VMCOREINFO[:i] + fmt.Sprintf("PAGESIZE=%d", ps) + s.VMCOREINFO[i+end:]
	}
	return s
}

// MaxMapnr returns what makedumpfile computes from the headers alone:
// roundup(max(p_paddr + p_memsz), page) / page.
func (s Spec) MaxMapnr() uint64 {
	var m uint64
	for _, g := range s.Segments {
		if e := g.Paddr + g.MemSize; e > m {
			m = e
		}
	}
	ps := s.PageBytes()
	return (m + ps - 1) / ps
}

// DataBytes returns the total of the segments' FileSize: the bytes of
// memory the file carries (overlapping segments counted twice).
//
// For a kernel machine these are FileSegments.
func (s Spec) DataBytes() uint64 {
	var n uint64
	for _, g := range kernelView(&s).Segments {
		n += g.FileSize
	}
	return n
}

// directMap is x86_64's PAGE_OFFSET without KASLR: /proc/vmcore's RAM
// segments carry p_vaddr = directMap + p_paddr.
const directMap = 0xffff888000000000

// DefaultSeed is the seed of Default: "pagepipe" in ASCII.
const DefaultSeed = 0x7061676570697065

// DefaultVMCOREINFO is a VMCOREINFO text in the shape a Debian 12 kernel
// writes, cut down to keys that make no claim about memory contents: the
// synthetic memory holds no kernel structures, so symbols such as
// SYMBOL(mem_section) or SYMBOL(init_top_pgt) would point at noise.
// CRASHTIME is fixed so that generated files are reproducible.
const DefaultVMCOREINFO = "OSRELEASE=6.1.0-57-amd64\n" +
	"BUILD-ID=5c4be1d9c8e2a1d0f1e3b6a7c9d8e0f1a2b3c4d5\n" +
	"PAGESIZE=4096\n" +
	"KERNELOFFSET=0\n" +
	"NUMBER(phys_base)=0\n" +
	"NUMBER(pgtable_l5_enabled)=0\n" +
	"NUMBER(sme_mask)=0\n" +
	"NUMBER(KERNEL_IMAGE_SIZE)=1073741824\n" +
	"CRASHTIME=1733000000\n"

// Default returns the demo machine: sizeMiB MiB of RAM (at least 4) in
// three PT_LOADs with the holes of a PC ([0x1000, 0x9f000), RAM from
// 1 MiB up to at most 3 GiB, the rest above 4 GiB, at least a quarter of
// the RAM there so the high segment always exists), 2 CPUs (4 from
// 512 MiB up), DefaultVMCOREINFO and DefaultMix, in the ProcVmcore layout
// with direct-map p_vaddr.
func Default(sizeMiB int) Spec {
	if sizeMiB < 4 {
		sizeMiB = 4
	}
	const (
		lowStart  = 0x1000
		lowEnd    = 0x9f000
		mainStart = 0x100000
		mainCap   = 0xc0000000 - mainStart // PCI hole from 3 GiB
		highStart = 0x100000000
	)
	total := uint64(sizeMiB) << 20
	rest := total - (lowEnd - lowStart)
	high := (rest / 4) &^ (64<<10 - 1)
	low := rest - high
	if low > mainCap {
		high += low - mainCap
		low = mainCap
	}
	seg := func(p, n uint64) Segment {
		return Segment{Paddr: p, FileSize: n, MemSize: n, Vaddr: directMap + p}
	}
	cpus := 2
	if sizeMiB >= 512 {
		cpus = 4
	}
	return Spec{
		Segments: []Segment{
			seg(lowStart, lowEnd-lowStart),
			seg(mainStart, low),
			seg(highStart, high),
		},
		CPUs:       cpus,
		VMCOREINFO: DefaultVMCOREINFO,
		Seed:       DefaultSeed,
		Mix:        DefaultMix,
		Layout:     ProcVmcore,
	}
}
