package kernel

import (
	"errors"
	"fmt"
)

// riscv64 is the Linux riscv64 kernel as VMCOREINFO describes it
// (arch/riscv/kernel/vmcore_info.c, 6.12): NUMBER(VA_BITS) (39, 48 or 57:
// Sv39, Sv48 or Sv57, whichever the hart offered at boot), phys_ram_base,
// PAGE_OFFSET, the vmalloc, vmemmap and module ranges, KERNEL_LINK_ADDR and
// va_kernel_pa_offset, with the generic SYMBOL(swapper_pg_dir). The facts
// come from the shared notes' s390x-riscv64.md, makedumpfile's
// arch/riscv64.c at b7587f1 (which has the two translation fixes made after
// 1.7.8: vmalloc and vmemmap walked, huge leaves at upper levels) and a real
// Debian 13 riscv64 vmcore (fixtures/make-capture-riscv64.sh).
//
// Every address is walked from swapper_pg_dir, the linear map and the image
// too: the tables map them all, and the walk is right for vmalloc and
// vmemmap addresses, which no arithmetic translates. Only swapper_pg_dir
// itself is found by arithmetic: it lives in the kernel image, at
// pa = va - va_kernel_pa_offset.
type riscv64 struct{}

// RISCV64 is the 64-bit RISC-V kernel.
var RISCV64 Arch = riscv64{}

func (riscv64) Name() string       { return "riscv64" }
func (riscv64) ELFMachine() uint16 { return 243 } // EM_RISCV
// PrstatusSize: struct elf_prstatus with 32 registers (pc, x1..x31).
func (riscv64) PrstatusSize() int { return 376 }

// DefaultPageSize: riscv64 Linux has only 4 KiB pages.
func (riscv64) DefaultPageSize() uint64 { return 4096 }
func (riscv64) FallbackUtsname() bool {
	return false // readers decode the dump by machine and phys_base: both must be right
}

// riscvNeeds are the keys without which no riscv64 dump is right: the
// walk's geometry and top table, and the header's phys_base.
// (va_kernel_pa_offset is absent from XIP kernels, which makedumpfile
// refuses too.)
var riscvNeeds = []string{"NUMBER(VA_BITS)", "NUMBER(phys_ram_base)", "NUMBER(va_kernel_pa_offset)",
	"NUMBER(KERNEL_LINK_ADDR)", "SYMBOL(swapper_pg_dir)"}

func (r riscv64) Check(vi *VMCOREINFO) error {
	if vi == nil {
		return errors.New("a riscv64 vmcore needs its VMCOREINFO (the note, or -i): the page-table walk and the header's phys_base come from it")
	}
	if err := vi.Require(riscvNeeds...); err != nil {
		return fmt.Errorf("riscv64 vmcore: %w, which the riscv64 page-table walk needs", err)
	}
	if ps := vi.PageSize(); ps != 4096 {
		return fmt.Errorf("riscv64 vmcore: PAGESIZE=%d; riscv64 kernels have 4096-byte pages", ps)
	}
	_, _, err := r.layout(vi)
	return err
}

// PhysBase is NUMBER(phys_ram_base), where the linear map starts in
// physical memory: makedumpfile's get_phys_base_riscv64 puts it in the
// sub-header's phys_base.
func (riscv64) PhysBase(vi *VMCOREINFO, _ []Load) (uint64, string, bool) {
	if vi == nil {
		return 0, "", false
	}
	n, ok := vi.NumberUnsigned("phys_ram_base")
	return n, "vmcoreinfo", ok
}

// layout reads what the walk needs: the VA size, and the top table's
// physical address from swapper_pg_dir's image address.
func (riscv64) layout(vi *VMCOREINFO) (f riscvFormat, top uint64, err error) {
	vaBits, err := vi.RequireNumber("VA_BITS")
	if err != nil {
		return f, 0, fmt.Errorf("riscv64 vmcore: %w", err)
	}
	f.levels, err = riscvLevels(uint(vaBits))
	if err != nil {
		return f, 0, fmt.Errorf("riscv64 vmcore: %w", err)
	}
	f.vaBits = uint(vaBits)
	var n [2]uint64
	for i, key := range []string{"va_kernel_pa_offset", "KERNEL_LINK_ADDR"} {
		if n[i], err = vi.RequireNumberUnsigned(key); err != nil {
			return f, 0, fmt.Errorf("riscv64 vmcore: %w", err)
		}
	}
	off, link := n[0], n[1]
	sym, err := vi.RequireSymbol("swapper_pg_dir")
	if err != nil {
		return f, 0, fmt.Errorf("riscv64 vmcore: %w", err)
	}
	if sym < link {
		return f, 0, fmt.Errorf("riscv64 vmcore: SYMBOL(swapper_pg_dir)=%#x is below KERNEL_LINK_ADDR %#x, not in the kernel image", sym, link)
	}
	// The lowest kernel address a mem_map pointer may hold, as
	// makedumpfile's KVBASE: the vmemmap's start.
	f.vmemmapStart, _ = vi.NumberUnsigned("VMEMMAP_START")
	return f, sym - off, nil
}

// riscvLevels is the paging depth of a VA size: Sv39, Sv48 or Sv57.
func riscvLevels(vaBits uint) (int, error) {
	switch vaBits {
	case 39:
		return 3, nil
	case 48:
		return 4, nil
	case 57:
		return 5, nil
	}
	return 0, fmt.Errorf("VA_BITS %d is none of riscv64's Sv39, Sv48 and Sv57", vaBits)
}

func (r riscv64) NewTranslator(pr PhysReader, vi *VMCOREINFO) (*Translator, error) {
	if err := vi.Require(riscvNeeds...); err != nil {
		return nil, fmt.Errorf("riscv64 page tables: %w", err)
	}
	f, top, err := r.layout(vi)
	if err != nil {
		return nil, fmt.Errorf("riscv64 page tables: %w", err)
	}
	t, err := newRISCV64Translator(pr, top, f)
	if err != nil {
		return nil, fmt.Errorf("riscv64 page tables from SYMBOL(swapper_pg_dir): %w", err)
	}
	return t, nil
}

// NewRISCV64TranslatorAt builds a riscv64 Translator for an explicit
// top-level table and VA size (39, 48 or 57).
func NewRISCV64TranslatorAt(r PhysReader, top uint64, vaBits uint) (*Translator, error) {
	levels, err := riscvLevels(vaBits)
	if err != nil {
		return nil, err
	}
	return newRISCV64Translator(r, top, riscvFormat{vaBits: vaBits, levels: levels})
}

func newRISCV64Translator(r PhysReader, top uint64, f riscvFormat) (*Translator, error) {
	if r == nil {
		return nil, errors.New("nil PhysReader")
	}
	if top&(pageSize4K-1) != 0 || top >= 1<<riscvPABits {
		return nil, fmt.Errorf("top-level table address %#x is not a page-aligned %d-bit physical address", top, riscvPABits)
	}
	return &Translator{r: r, format: f, top: top, levels: f.levels}, nil
}

// Page-table entry bits (arch/riscv/include/asm/pgtable-bits.h and the
// privileged spec's Sv39/48/57): V, then R, W and X (any set: a leaf, at
// any level); the PPN from bit 10 to 53, above it Svpbmt's and Svnapot's
// bits, which are no address.
const (
	riscvValid    = 1 << 0
	riscvLeaf     = 0b1110 // R | W | X
	riscvPFNShift = 10
	riscvPTEMask  = 1<<54 - 1 // makedumpfile's PTE_PFN_PROT_MASK: bits 0-53
	// riscvPABits is the physical address size a PPN of 44 bits gives.
	riscvPABits = 56
)

// riscvFormat is one riscv64 translation mode: Sv39, Sv48 or Sv57, with
// 512-entry tables of 4 KiB pages at every level.
type riscvFormat struct {
	vaBits uint
	levels int
	// vmemmapStart, when known, is the lowest address a decoded kernel
	// pointer may hold (makedumpfile's KVBASE for riscv64).
	vmemmapStart uint64
}

func (f riscvFormat) tableEntries() int { return ptEntries }

// kernelStart is VMEMMAP_START when VMCOREINFO says it, else the start of
// the upper (kernel) half of the mode's address space.
func (f riscvFormat) kernelStart() uint64 {
	if f.vmemmapStart != 0 {
		return f.vmemmapStart
	}
	return ^uint64(0) << (f.vaBits - 1)
}

// riscvLevelNames name the levels from the top, as Linux does: 5 levels
// PGD P4D PUD PMD PTE; Sv48 folds the P4D, Sv39 the PUD too.
var riscvLevelNames = map[int][]string{
	3: {"PGD", "PMD", "PTE"},
	4: {"PGD", "PUD", "PMD", "PTE"},
	5: {"PGD", "P4D", "PUD", "PMD", "PTE"},
}

// lookup walks as the MMU does: an address whose bits above the mode's VA
// size do not all copy its top bit is not translated; an entry without V
// is not present; one with any of R, W, X is a leaf, mapping a page at the
// last level and a superpage (2 MiB, 1 GiB, 512 GiB, 256 TiB) above it,
// whose PPN must be aligned to its size (else the MMU faults: a misaligned
// superpage); one without them points to the next table, which the last
// level cannot.
func (f riscvFormat) lookup(t *Translator, vaddr uint64) (Mapping, failure) {
	top := f.vaBits - 1
	if hi := vaddr >> top; hi != 0 && hi != 1<<(64-top)-1 {
		return Mapping{}, failure{err: ErrNonCanonical}
	}
	names := riscvLevelNames[f.levels]
	table := t.top
	for level := range f.levels {
		shift := uint(12 + 9*(f.levels-1-level))
		span := uint64(1) << shift
		name := names[level]
		e, err := t.entry(table, vaddr>>shift&(ptEntries-1))
		if err != nil {
			return Mapping{}, failure{level: name, span: span, err: fmt.Errorf("reading the table at physical %#x: %w", table, err)}
		}
		e &= riscvPTEMask
		if e&riscvValid == 0 {
			return Mapping{}, failure{level: name, entry: e, span: span, err: ErrNotPresent}
		}
		addr := e >> riscvPFNShift << 12
		if e&riscvLeaf != 0 {
			if addr&(span-1) != 0 {
				return Mapping{}, failure{level: name, entry: e, span: span, err: errors.New("misaligned superpage")}
			}
			return Mapping{Paddr: addr | vaddr&(span-1), PageSize: span}, failure{}
		}
		if level == f.levels-1 {
			return Mapping{}, failure{level: name, entry: e, span: span, err: errors.New("last-level entry without R, W or X")}
		}
		table = addr
	}
	// Not reached: the last level always returns above.
	return Mapping{}, failure{err: errors.New("page-table walk did not end")}
}
