package kernel

import (
	"errors"
	"fmt"
)

// arm64 is the Linux arm64 kernel as VMCOREINFO describes it
// (arch/arm64/kernel/crash_core.c): NUMBER(VA_BITS), NUMBER(kimage_voffset),
// NUMBER(PHYS_OFFSET) (both above 2^63, read unsigned), NUMBER(TCR_EL1_T1SZ)
// and SYMBOL(swapper_pg_dir). The facts come from a real Debian 6.1 arm64
// vmcore and makedumpfile's arch/arm64.c (docs/arm64.md in the shared
// notes); the geometries other than 4 KiB pages with 48-bit VA follow the
// architecture and makedumpfile's table of them.
type arm64 struct{}

// ARM64 is the arm64 (aarch64) kernel.
var ARM64 Arch = arm64{}

func (arm64) Name() string       { return "aarch64" }
func (arm64) ELFMachine() uint16 { return 183 } // EM_AARCH64
func (arm64) PrstatusSize() int  { return 392 } // x0..x30, sp, pc, pstate at 112

// DefaultPageSize is the 4 KiB granule Debian's and most distributions'
// arm64 kernels use (16 and 64 KiB kernels say so in PAGESIZE).
func (arm64) DefaultPageSize() uint64 { return 4096 }
func (arm64) FallbackUtsname() bool {
	return false // readers decode the dump by machine and phys_base: both must be right
}

// arm64Needs are the keys without which no arm64 dump can be right: the
// walk (every virtual read, utsname included, goes through it) and the
// header's phys_base.
var arm64Needs = []string{"NUMBER(VA_BITS)", "NUMBER(kimage_voffset)", "NUMBER(PHYS_OFFSET)", "SYMBOL(swapper_pg_dir)"}

func (a arm64) Check(vi *VMCOREINFO) error {
	if vi == nil {
		return errors.New("an aarch64 vmcore needs its VMCOREINFO (the note, or -i): the page-table walk and the header's phys_base come from it")
	}
	if err := vi.Require(arm64Needs...); err != nil {
		return fmt.Errorf("aarch64 vmcore: %w, which the arm64 page-table walk needs", err)
	}
	if _, err := a.geometry(vi); err != nil {
		return err
	}
	for _, n := range []string{"PHYS_OFFSET", "kimage_voffset"} {
		if _, err := vi.RequireNumberUnsigned(n); err != nil {
			return fmt.Errorf("aarch64 vmcore: %w", err)
		}
	}
	if _, err := vi.RequireSymbol("swapper_pg_dir"); err != nil {
		return fmt.Errorf("aarch64 vmcore: %w", err)
	}
	return nil
}

// PhysBase is NUMBER(PHYS_OFFSET), memstart_addr: what makedumpfile puts in
// the sub-header's phys_base and readers use for the linear map.
func (arm64) PhysBase(vi *VMCOREINFO, _ []Load) (uint64, string, bool) {
	if vi == nil {
		return 0, "", false
	}
	n, ok := vi.NumberUnsigned("PHYS_OFFSET")
	return n, "vmcoreinfo", ok
}

// arm64Format is one arm64 translation regime for TTBR1 (kernel)
// addresses: granule, the kernel's VA size and the output-address layout.
type arm64Format struct {
	pageShift uint // 12, 14 or 16 (4, 16 or 64 KiB granule)
	vaBits    uint // vabits_actual: 64 - TCR_EL1.T1SZ
	levels    int  // 2 to 5
	// pgdBits is the VA size the top table is indexed with: VA_BITS
	// where the kernel built for it runs at vabits_actual with the same
	// depth (a 52-bit 64 KiB-page kernel on 48-bit hardware: its PGD has
	// PTRS_PER_PGD for 52 bits, a 48-bit address's entries are its last
	// ones, and TTBR1 points TTBR1_BADDR_4852_OFFSET into it), else
	// vabits_actual.
	pgdBits uint
	// pa52: NUMBER(MAX_PHYSMEM_BITS)=52. With 64 KiB pages (FEAT_LPA)
	// PA[51:48] sit in descriptor bits [15:12]; with 4 and 16 KiB pages
	// and a 52-bit VA in use (FEAT_LPA2, TCR_EL1.DS=1: the kernel enables
	// it only where it also uses 52-bit VAs), PA[51:50] sit in bits [9:8].
	pa52 bool
}

// arm64Levels is the paging depth for each granule and kernel VA size
// (arch/arm64/Kconfig; the table of makedumpfile's calculate_plat_config
// at b7587f1, which added 5-level 4 KiB tables).
var arm64Levels = map[[2]uint]int{
	{12, 39}: 3, {12, 48}: 4, {12, 52}: 5,
	{14, 36}: 2, {14, 47}: 3, {14, 48}: 4, {14, 52}: 4,
	{16, 42}: 2, {16, 48}: 3, {16, 52}: 3,
}

// geometry reads the translation regime from VMCOREINFO, as makedumpfile's
// get_versiondep_info_arm64 and get_machdep_info_arm64 do: vabits_actual
// from TCR_EL1_T1SZ (5.9+), else guessed from mem_section for a 52-bit
// kernel, else VA_BITS.
func (arm64) geometry(vi *VMCOREINFO) (arm64Format, error) {
	var f arm64Format
	switch vi.PageSize() {
	case 4096:
		f.pageShift = 12
	case 16384:
		f.pageShift = 14
	case 65536:
		f.pageShift = 16
	default:
		return f, fmt.Errorf("aarch64 vmcore: PAGESIZE=%d is no arm64 granule", vi.PageSize())
	}
	vaBits, err := vi.RequireNumber("VA_BITS")
	if err != nil {
		return f, fmt.Errorf("aarch64 vmcore: %w", err)
	}
	actual := vaBits
	if t1sz, ok := vi.Number("TCR_EL1_T1SZ"); ok {
		actual = 64 - t1sz
	} else if ms, ok := vi.Symbol("mem_section"); ok && vaBits == 52 {
		// 5.4 to 5.10: the 48-bit linear map has bit 51 set, the 52-bit one not.
		actual = 52
		if ms&(1<<51) != 0 {
			actual = 48
		}
	}
	if actual < 36 || actual > 52 {
		return f, fmt.Errorf("aarch64 vmcore: %d-bit kernel virtual addresses (VA_BITS %d) are not arm64's", actual, vaBits)
	}
	f.vaBits = uint(actual)
	levels, ok := arm64Levels[[2]uint{f.pageShift, f.vaBits}]
	if !ok {
		return f, fmt.Errorf("aarch64 vmcore: %d-byte pages with %d-bit virtual addresses are not a geometry arm64 Linux has", vi.PageSize(), actual)
	}
	f.levels = levels
	f.pgdBits = f.vaBits
	if l, ok := arm64Levels[[2]uint{f.pageShift, uint(vaBits)}]; ok && l == levels && uint(vaBits) > f.vaBits {
		f.pgdBits = uint(vaBits)
	}
	if pb, ok := vi.Number("MAX_PHYSMEM_BITS"); ok && pb == 52 {
		f.pa52 = true
	}
	return f, nil
}

// NewTranslator walks from swapper_pg_dir, whose physical address is
// SYMBOL(swapper_pg_dir) - kimage_voffset: makedumpfile's __pa of a
// kernel-image address, the only translation it does without the tables.
func (a arm64) NewTranslator(r PhysReader, vi *VMCOREINFO) (*Translator, error) {
	if err := vi.Require(arm64Needs...); err != nil {
		return nil, fmt.Errorf("arm64 page tables: %w", err)
	}
	f, err := a.geometry(vi)
	if err != nil {
		return nil, fmt.Errorf("arm64 page tables: %w", err)
	}
	voff, err := vi.RequireNumberUnsigned("kimage_voffset")
	if err != nil {
		return nil, fmt.Errorf("arm64 page tables: %w", err)
	}
	sym, err := vi.RequireSymbol("swapper_pg_dir")
	if err != nil {
		return nil, fmt.Errorf("arm64 page tables: %w", err)
	}
	top := sym - voff
	t, err := newARM64Translator(r, top, f)
	if err != nil {
		return nil, fmt.Errorf("arm64 page tables from SYMBOL(swapper_pg_dir)=%#x, kimage_voffset %#x: %w", sym, voff, err)
	}
	return t, nil
}

func newARM64Translator(r PhysReader, top uint64, f arm64Format) (*Translator, error) {
	if top&(1<<f.pageShift-1) != 0 || top >= 1<<f.paBits() {
		return nil, fmt.Errorf("top-level table address %#x is not a page-aligned %d-bit physical address", top, f.paBits())
	}
	return &Translator{r: r, format: f, top: top, levels: f.levels}, nil
}

func (f arm64Format) paBits() uint {
	if f.pa52 {
		return 52
	}
	return 48
}

func (f arm64Format) tableEntries() int { return 1 << (f.pageShift - 3) }

// kernelStart: TTBR1 translates the addresses whose bits [63:vaBits] are
// all ones.
func (f arm64Format) kernelStart() uint64 { return ^uint64(0) << f.vaBits }

// shift is ARM64_HW_PGTABLE_LEVEL_SHIFT: the lowest virtual-address bit a
// level-n entry indexes (level -1 is the 5-level 4 KiB table's top).
func (f arm64Format) shift(level int) uint {
	return (f.pageShift-3)*uint(4-level) + 3
}

// lpa2 reports whether descriptors carry PA[51:50] in bits [9:8].
func (f arm64Format) lpa2() bool { return f.pa52 && f.pageShift != 16 && f.vaBits == 52 }

// outputAddr decodes a descriptor's output address (the next table, the
// block or the page) for the regime's layout.
func (f arm64Format) outputAddr(d uint64) uint64 {
	switch {
	case f.lpa2():
		return d&(1<<50-1)&^(1<<f.pageShift-1) | (d>>8&3)<<50
	case f.pa52 && f.pageShift == 16:
		return d&(1<<48-1)&^(1<<f.pageShift-1) | (d>>12&0xf)<<48
	}
	return d & (1<<48 - 1) &^ (1<<f.pageShift - 1)
}

// blockAt reports whether a level may hold a block descriptor: level 2
// always; level 1 with 4 KiB pages (1 GiB blocks), or with 52-bit
// physical addresses (64 KiB: 4 TiB, 16 KiB LPA2: 64 GiB).
func (f arm64Format) blockAt(level int) bool {
	return level == 2 || level == 1 && (f.pageShift == 12 || f.pa52)
}

// levelName names a level's table as Linux does: the top is the PGD; then
// P4D (level 0 of a 5-level table), PUD, PMD and PTE.
func (f arm64Format) levelName(level int) string {
	if level == 4-f.levels {
		return "PGD"
	}
	return [...]string{"P4D", "PUD", "PMD", "PTE"}[level]
}

// lookup walks as the MMU does (and makedumpfile's vaddr_to_paddr_arm64):
// bit 0 of a descriptor is valid; above the last level bits [1:0] = 01 is
// a block and 11 a table; at the last level 11 is a page. The walk is
// bounded by the depth.
func (f arm64Format) lookup(t *Translator, vaddr uint64) (Mapping, failure) {
	if vaddr < f.kernelStart() {
		return Mapping{}, failure{err: ErrNonCanonical}
	}
	first := 4 - f.levels
	mask := uint64(f.tableEntries() - 1)
	table := t.top
	for level := first; level <= 3; level++ {
		shift := f.shift(level)
		idx := vaddr >> shift & mask
		if level == first {
			idx = vaddr >> shift & (1<<(f.pgdBits-shift) - 1)
		}
		span := uint64(1) << shift
		name := f.levelName(level)
		d, err := t.entry(table, idx)
		if err != nil {
			return Mapping{}, failure{level: name, span: span, err: fmt.Errorf("reading the table at physical %#x: %w", table, err)}
		}
		if d&1 == 0 {
			return Mapping{}, failure{level: name, entry: d, span: span, err: ErrNotPresent}
		}
		addr := f.outputAddr(d)
		switch {
		case level == 3:
			return Mapping{Paddr: addr | vaddr&(span-1), PageSize: span}, failure{}
		case d&2 == 0 && f.blockAt(level):
			return Mapping{Paddr: addr&^(span-1) | vaddr&(span-1), PageSize: span}, failure{}
		case d&2 == 0:
			return Mapping{}, failure{level: name, entry: d, span: span, err: errors.New("block descriptor at a level that cannot hold a block")}
		}
		table = addr
	}
	// Not reached: the last level always returns above.
	return Mapping{}, failure{err: errors.New("page-table walk did not end")}
}
