package kernel

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// ppc64 is the Linux ppc64le (book3s64) kernel as VMCOREINFO describes it,
// following /work/shared/docs/ppc64le.md (real Debian 6.1 vmcores, radix
// and hash), the kernel's asm/book3s/64 headers and makedumpfile's
// arch/ppc64.c:
//
//   - no KASLR: the kernel image lives in the linear map at PAGE_OFFSET
//     0xc000000000000000, so a linear address translates by subtraction;
//     under the hash MMU the Linux page tables do not map it at all;
//   - the vmemmap (mem_map) is found through the kernel's vmemmap_list
//     (6.1; under hash it is the only record of it), and through the page
//     tables when that list is empty (radix on 6.6+);
//   - vmalloc and I/O addresses walk the kernel page tables from
//     swapper_pg_dir: big-endian entries, the MMU from NUMBER(RADIX_MMU)
//     (6.6+), else cur_cpu_spec's mmu_features, else hash, as makedumpfile
//     picks.
//
// Pages are 64 KiB (Debian 12's only ppc64el kernel, trixie's -64k
// flavour, other distributions') or 4 KiB (trixie's default powerpc64le
// flavour). The geometry follows from both (ppc64Geometry): radix keeps
// its layout and a 13-bit (with 4 KiB pages a 64 KiB) top table; hash with
// 4 KiB pages has 46-bit tables and packs its regions into the top 3 TiB of
// them (Linux 5.8's "Support large linear mapping range with 4K").
type ppc64 struct{}

// PPC64LE is the little-endian 64-bit PowerPC kernel.
var PPC64LE Arch = ppc64{}

func (ppc64) Name() string       { return "ppc64le" }
func (ppc64) ELFMachine() uint16 { return 21 }  // EM_PPC64
func (ppc64) PrstatusSize() int  { return 504 } // 48 registers at 112, pr_fpvalid

// DefaultPageSize is 64 KiB: Debian's only ppc64el kernel and the other
// distributions' (CONFIG_PPC_64K_PAGES).
func (ppc64) DefaultPageSize() uint64 { return 65536 }
func (ppc64) FallbackUtsname() bool {
	return false // readers decode the dump by the header's machine
}

// The ppc64 kernel address-space layout (book3s64: radix with either page
// size and hash with 64 KiB pages; makedumpfile prints the same
// kernel_start, vmalloc_start and vmemmap_start for both MMUs).
const (
	PPC64PageOffset   uint64 = 0xc000000000000000
	PPC64VmallocStart uint64 = 0xc008000000000000
	PPC64VmemmapStart uint64 = 0xc00c000000000000
	// ppc64RegionEnd is the end of the kernel region the tables map
	// (52-bit effective addresses above the 0xc quadrant).
	ppc64RegionEnd uint64 = 0xc010000000000000
)

// The hash MMU's layout with 4 KiB pages (asm/book3s/64/hash-4k.h since
// Linux 5.8, commit 7746406baa3b): its tables cover 46 bits (64 TiB), of
// which the linear map takes 61 TiB, then vmalloc, I/O and the vmemmap
// 1 TiB each (the real 6.12 vmcore's NUMBER(VMALLOC_START) and
// makedumpfile's vmemmap_start agree).
const (
	PPC64Hash4KVmallocStart uint64 = 0xc0003d0000000000
	PPC64Hash4KVmemmapStart uint64 = 0xc0003f0000000000
	ppc64Hash4KEnd          uint64 = PPC64PageOffset + 1<<46
)

// Page-table entry bits (arch/powerpc/include/asm/book3s/64/pgtable.h):
// entries are __be64 on every book3s64 kernel.
const (
	ppc64Present  = 1 << 63 // _PAGE_PRESENT (radix: valid)
	ppc64Leaf     = 1 << 62 // _PAGE_PTE: a leaf at any level
	ppc64NextMask = 0x0fffffffffffff00
	// ppc64RPNMask is makedumpfile's PTE_RPN_MASK for kernels from 4.11:
	// 53 bits; a hash PTE may carry bit 55, which is not address.
	ppc64RPNMask = 1<<53 - 1
	// ppc64MaxVmemmap bounds the vmemmap_list walk: entries of a page
	// of struct pages each (a 1 GiB hash guest with 4 KiB pages has 4096;
	// 2^24 cover 1 TiB of it), merged as they are read.
	ppc64MaxVmemmap = 1 << 24
	// mmuFtrTypeRadix is MMU_FTR_TYPE_RADIX in cpu_spec.mmu_features.
	mmuFtrTypeRadix = 0x40
)

// ppc64Needs are the keys every ppc64le dump needs: the walk's top table.
// The vmemmap_list keys are read when present.
var ppc64Needs = []string{"SYMBOL(swapper_pg_dir)"}

func (p ppc64) Check(vi *VMCOREINFO) error {
	if vi == nil {
		return errors.New("a ppc64le vmcore needs its VMCOREINFO (the note, or -i): mem_map and the page-table walk come from it")
	}
	if err := vi.Require(ppc64Needs...); err != nil {
		return fmt.Errorf("ppc64le vmcore: %w, which the ppc64 page-table walk needs", err)
	}
	if _, err := ppc64Geometry(uint64(vi.PageSize()), false); err != nil {
		return fmt.Errorf("ppc64le vmcore: %w", err)
	}
	if sym, _ := vi.Symbol("swapper_pg_dir"); sym < PPC64PageOffset || sym >= PPC64VmallocStart {
		return fmt.Errorf("ppc64le vmcore: SYMBOL(swapper_pg_dir)=%#x is not a linear-map address", sym)
	}
	return nil
}

// PhysBase: makedumpfile has no phys_base for ppc64 and writes 0.
func (ppc64) PhysBase(*VMCOREINFO, []Load) (uint64, string, bool) { return 0, "", false }

// ppc64Format is one book3s64 table geometry, its address layout and the
// kernel's vmemmap.
type ppc64Format struct {
	radix     bool
	pageShift uint
	// bits are the index bits per level: PGD, PUD, PMD, PTE.
	bits [4]uint
	// The layout: the linear map is [PPC64PageOffset, linearEnd), the
	// tables alone map [tablesStart, tablesEnd) (vmalloc and I/O), and the
	// vmemmap is [vmemmapStart, vmemmapEnd).
	linearEnd, tablesStart, tablesEnd, vmemmapStart, vmemmapEnd uint64
	// vmemmap is the kernel's vmemmap_list sorted by address (empty: walk
	// the tables).
	vmemmap []VmemmapBacking
}

// VmemmapBacking is a run of vmemmap_list entries: Size bytes of struct
// pages at Virt are backed by physical memory at Phys, contiguously, in
// blocks (entries) of Block bytes (0: one block of Size).
type VmemmapBacking struct{ Virt, Phys, Size, Block uint64 }

// ppc64Geometry is the table layout for the MMU and page size: the
// kernel's RADIX_{PGD,PUD,PMD,PTE}_INDEX_SIZE (13/9/9/5 with 64 KiB pages,
// 13/9/9/9 with 4 KiB: a top table of 8192 entries either way) and
// H_*_INDEX_SIZE (8/10/10/8 with 64 KiB pages, 9/9/7/9 with 4 KiB), as
// makedumpfile.h has them too.
func ppc64Geometry(pageSize uint64, radix bool) (ppc64Format, error) {
	f := ppc64Format{radix: radix, linearEnd: PPC64VmallocStart, tablesStart: PPC64VmallocStart,
		tablesEnd: PPC64VmemmapStart, vmemmapStart: PPC64VmemmapStart, vmemmapEnd: ppc64RegionEnd}
	switch {
	case pageSize == 65536 && radix:
		f.pageShift, f.bits = 16, [4]uint{13, 9, 9, 5}
	case pageSize == 65536:
		f.pageShift, f.bits = 16, [4]uint{8, 10, 10, 8}
	case pageSize == 4096 && radix:
		f.pageShift, f.bits = 12, [4]uint{13, 9, 9, 9}
	case pageSize == 4096:
		f.pageShift, f.bits = 12, [4]uint{9, 9, 7, 9}
		f.linearEnd = PPC64Hash4KVmallocStart
		f.tablesStart, f.tablesEnd = PPC64Hash4KVmallocStart, PPC64Hash4KVmemmapStart
		f.vmemmapStart, f.vmemmapEnd = PPC64Hash4KVmemmapStart, ppc64Hash4KEnd
	default:
		return ppc64Format{}, fmt.Errorf("PAGESIZE=%d: ppc64 kernels have 4 KiB or 64 KiB pages", pageSize)
	}
	return f, nil
}

// PPC64Radix says whether the kernel ran the radix MMU, as makedumpfile
// decides: NUMBER(RADIX_MMU) (6.6+), else cur_cpu_spec->mmu_features &
// MMU_FTR_TYPE_RADIX when VMCOREINFO exports both, else hash.
func PPC64Radix(r PhysReader, vi *VMCOREINFO) (bool, error) {
	if n, ok := vi.Number("RADIX_MMU"); ok {
		return n != 0, nil
	}
	sym, ok := vi.Symbol("cur_cpu_spec")
	off, ok2 := vi.Offset("cpu_spec.mmu_features")
	if !ok || !ok2 {
		return false, nil
	}
	spec, err := ppc64ReadLinear(r, sym, 8)
	if err != nil {
		return false, fmt.Errorf("reading cur_cpu_spec: %w", err)
	}
	b := make([]byte, 4)
	if err := ppc64ReadLinearInto(r, spec+uint64(off), b); err != nil {
		return false, fmt.Errorf("reading cur_cpu_spec->mmu_features: %w", err)
	}
	return binary.LittleEndian.Uint32(b)&mmuFtrTypeRadix != 0, nil
}

// ppc64ReadLinear reads an n-byte (at most 8) little-endian value at a
// linear-map address.
func ppc64ReadLinear(r PhysReader, va uint64, n int) (uint64, error) {
	var b [8]byte
	if err := ppc64ReadLinearInto(r, va, b[:n]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func ppc64ReadLinearInto(r PhysReader, va uint64, p []byte) error {
	if va < PPC64PageOffset || va >= PPC64VmallocStart {
		return fmt.Errorf("%#x is not a linear-map address", va)
	}
	return r.ReadPhys(va-PPC64PageOffset, p)
}

// PPC64VmemmapList reads the kernel's vmemmap_list (nil when VMCOREINFO
// does not export it, or the list is empty): the linked vmemmap_backing
// structs, each backing 1 << mmu_psize_defs[mmu_vmemmap_psize].shift
// bytes of the vmemmap.
func PPC64VmemmapList(r PhysReader, vi *VMCOREINFO) ([]VmemmapBacking, error) {
	head, ok := vi.Symbol("vmemmap_list")
	if !ok {
		return nil, nil
	}
	err := vi.Require("SYMBOL(mmu_vmemmap_psize)", "SYMBOL(mmu_psize_defs)", "SIZE(mmu_psize_def)",
		"OFFSET(mmu_psize_def.shift)", "OFFSET(vmemmap_backing.list)", "OFFSET(vmemmap_backing.phys)",
		"OFFSET(vmemmap_backing.virt_addr)")
	if err != nil {
		return nil, fmt.Errorf("vmemmap_list: %w", err)
	}
	psizeSym, _ := vi.Symbol("mmu_vmemmap_psize")
	defs, _ := vi.Symbol("mmu_psize_defs")
	defSize, _ := vi.Size("mmu_psize_def")
	shiftOff, _ := vi.Offset("mmu_psize_def.shift")
	listOff, _ := vi.Offset("vmemmap_backing.list")
	physOff, _ := vi.Offset("vmemmap_backing.phys")
	virtOff, _ := vi.Offset("vmemmap_backing.virt_addr")
	psize, err := ppc64ReadLinear(r, psizeSym, 4)
	if err != nil {
		return nil, fmt.Errorf("vmemmap_list: reading mmu_vmemmap_psize: %w", err)
	}
	if psize >= 16 || defSize <= 0 || defSize > 1024 || shiftOff < 0 || shiftOff+4 > defSize {
		return nil, fmt.Errorf("vmemmap_list: mmu_vmemmap_psize %d, SIZE(mmu_psize_def) %d, OFFSET(.shift) %d are not plausible", psize, defSize, shiftOff)
	}
	shift, err := ppc64ReadLinear(r, defs+psize*uint64(defSize)+uint64(shiftOff), 4)
	if err != nil {
		return nil, fmt.Errorf("vmemmap_list: reading mmu_psize_defs[%d].shift: %w", psize, err)
	}
	if shift < 12 || shift > 34 {
		return nil, fmt.Errorf("vmemmap_list: vmemmap page shift %d is not plausible", shift)
	}
	var list []VmemmapBacking
	next, err := ppc64ReadLinear(r, head, 8)
	if err != nil {
		return nil, fmt.Errorf("vmemmap_list: reading the head: %w", err)
	}
	// A loop is caught by Brent's method (no set of the entries seen: a
	// big hash machine's list has millions), and the entries are merged
	// into runs as they come (the kernel pushes each at the head, so the
	// list runs down through contiguous memory).
	size := uint64(1) << shift
	tortoise, power, lam := uint64(0), 1, 0
	for n := 0; next != 0; n++ {
		if next == tortoise {
			return nil, fmt.Errorf("vmemmap_list: entry %d at %#x is a loop back to an earlier entry", n, next)
		}
		if lam++; lam == power {
			tortoise, power, lam = next, power*2, 0
		}
		if n == ppc64MaxVmemmap {
			return nil, fmt.Errorf("vmemmap_list: more than %d entries", ppc64MaxVmemmap)
		}
		var e [3]uint64
		for i, off := range []int64{physOff, virtOff, listOff} {
			if e[i], err = ppc64ReadLinear(r, next+uint64(off), 8); err != nil {
				return nil, fmt.Errorf("vmemmap_list: entry %d at %#x: %w", n, next, err)
			}
		}
		phys, virt := e[0], e[1]
		if virt < PPC64PageOffset || virt&(size-1) != 0 || phys&(size-1) != 0 {
			return nil, fmt.Errorf("vmemmap_list: entry %d maps %#x to physical %#x, not an aligned vmemmap block of %#x bytes", n, virt, phys, size)
		}
		switch k := len(list) - 1; {
		case k >= 0 && list[k].Virt == virt+size && list[k].Phys == phys+size:
			list[k].Virt, list[k].Phys, list[k].Size = virt, phys, list[k].Size+size
		case k >= 0 && list[k].Virt+list[k].Size == virt && list[k].Phys+list[k].Size == phys:
			list[k].Size += size
		default:
			list = append(list, VmemmapBacking{Virt: virt, Phys: phys, Size: size, Block: size})
		}
		next = e[2]
	}
	return list, nil
}

// NewTranslator reads the MMU type and the vmemmap_list and walks from
// swapper_pg_dir, whose physical address is its linear-map address less
// PAGE_OFFSET.
func (p ppc64) NewTranslator(r PhysReader, vi *VMCOREINFO) (*Translator, error) {
	if r == nil {
		return nil, errors.New("nil PhysReader")
	}
	if err := p.Check(vi); err != nil {
		return nil, fmt.Errorf("ppc64 page tables: %w", err)
	}
	sym, _ := vi.Symbol("swapper_pg_dir")
	radix, err := PPC64Radix(r, vi)
	if err != nil {
		return nil, fmt.Errorf("ppc64 page tables: %w", err)
	}
	list, err := PPC64VmemmapList(r, vi)
	if err != nil {
		return nil, fmt.Errorf("ppc64 mem_map: %w", err)
	}
	tr, err := NewPPC64TranslatorAt(r, sym-PPC64PageOffset, uint64(vi.PageSize()), radix, list)
	if err != nil {
		return nil, fmt.Errorf("ppc64 page tables: %w", err)
	}
	return tr, nil
}

// NewPPC64TranslatorAt builds a ppc64 Translator for an explicit top-level
// table, page size, MMU and vmemmap_list, whose entries must lie in the
// layout's vmemmap and not overlap.
func NewPPC64TranslatorAt(r PhysReader, top, pageSize uint64, radix bool, vmemmap []VmemmapBacking) (*Translator, error) {
	if r == nil {
		return nil, errors.New("nil PhysReader")
	}
	f, err := ppc64Geometry(pageSize, radix)
	if err != nil {
		return nil, err
	}
	if top&0xff != 0 || top >= 1<<53 {
		return nil, fmt.Errorf("top-level table address %#x is not a 256-byte aligned physical address", top)
	}
	f.vmemmap = slices.SortedFunc(slices.Values(vmemmap), func(a, b VmemmapBacking) int {
		return cmp.Compare(a.Virt, b.Virt)
	})
	for i := range f.vmemmap {
		b := &f.vmemmap[i]
		if b.Block == 0 {
			b.Block = b.Size
		}
		if b.Block == 0 || b.Block&(b.Block-1) != 0 || b.Size%b.Block != 0 || (b.Virt|b.Phys)&(b.Block-1) != 0 {
			return nil, fmt.Errorf("vmemmap_list maps %#x bytes at %#x to %#x, not in aligned blocks of %#x", b.Size, b.Virt, b.Phys, b.Block)
		}
		if b.Virt < f.vmemmapStart || b.Virt >= f.vmemmapEnd || f.vmemmapEnd-b.Virt < b.Size {
			return nil, fmt.Errorf("vmemmap_list maps %#x, outside the vmemmap [%#x, %#x)", b.Virt, f.vmemmapStart, f.vmemmapEnd)
		}
		if i > 0 && f.vmemmap[i-1].Virt+f.vmemmap[i-1].Size > b.Virt {
			return nil, fmt.Errorf("vmemmap_list maps %#x twice", b.Virt)
		}
	}
	return &Translator{r: r, format: f, top: top, levels: 4, bigEndian: true}, nil
}

func (f ppc64Format) tableEntries() int { return 1 << f.bits[0] }

func (f ppc64Format) kernelStart() uint64 { return PPC64PageOffset }

// shift is the lowest address bit a level's (0 PGD .. 3 PTE) index uses.
func (f ppc64Format) shift(level int) uint {
	s := f.pageShift
	for l := 3; l > level; l-- {
		s += f.bits[l]
	}
	return s
}

var ppc64LevelNames = [4]string{"PGD", "PUD", "PMD", "PTE"}

// lookup translates as makedumpfile's vaddr_to_paddr_ppc64 does: linear
// addresses by subtraction, the vmemmap through vmemmap_list, the rest
// (and the vmemmap when the list is empty) by the table walk.
func (f ppc64Format) lookup(t *Translator, vaddr uint64) (Mapping, failure) {
	switch {
	case vaddr >= PPC64PageOffset && vaddr < f.linearEnd:
		// The linear map is one contiguous mapping (how the MMU maps it is
		// its business, and under hash these tables do not): report it in
		// pieces of a top-level entry's span, so that a walk through the
		// address space (package priority's) passes it in a few steps.
		span := uint64(1) << f.shift(0)
		return Mapping{Paddr: vaddr - PPC64PageOffset, PageSize: span}, failure{}
	case vaddr >= f.vmemmapStart && vaddr < f.vmemmapEnd && (len(f.vmemmap) > 0 || !f.radix):
		// Under hash the Linux tables never map the vmemmap: the list is
		// all there is.
		i := sort.Search(len(f.vmemmap), func(i int) bool { return f.vmemmap[i].Virt+f.vmemmap[i].Size > vaddr })
		if i < len(f.vmemmap) && vaddr >= f.vmemmap[i].Virt {
			b := f.vmemmap[i]
			return Mapping{Paddr: b.Phys + vaddr - b.Virt, PageSize: b.Block}, failure{}
		}
		// Not in the list: the span is the largest aligned block around
		// vaddr in the gap between runs, so that a walk passes the gap in
		// a few steps.
		lo, hi := f.vmemmapStart, f.vmemmapEnd
		if i > 0 {
			lo = f.vmemmap[i-1].Virt + f.vmemmap[i-1].Size
		}
		if i < len(f.vmemmap) {
			hi = f.vmemmap[i].Virt
		}
		span := uint64(1) << f.pageShift
		for span < 1<<62 {
			start := vaddr &^ (2*span - 1)
			if start < lo || start+2*span > hi {
				break
			}
			span *= 2
		}
		return Mapping{}, failure{level: "vmemmap_list", span: span, err: ErrNotPresent}
	case vaddr >= f.vmemmapStart && vaddr < f.vmemmapEnd, vaddr >= f.tablesStart && vaddr < f.tablesEnd:
		return f.walk(t, vaddr)
	}
	return Mapping{}, failure{err: ErrNonCanonical}
}

// walk goes down the four levels: an entry of 0 or without the present
// bit is unmapped, one with _PAGE_PTE is a leaf (a huge page above the
// last level), otherwise it points to the next table.
func (f ppc64Format) walk(t *Translator, vaddr uint64) (Mapping, failure) {
	table := t.top
	for level := 0; level < 4; level++ {
		shift := f.shift(level)
		span := uint64(1) << shift
		idx := vaddr >> shift & (1<<f.bits[level] - 1)
		name := ppc64LevelNames[level]
		e, err := t.entryN(table, idx, 1<<f.bits[level])
		if err != nil {
			return Mapping{}, failure{level: name, span: span, err: fmt.Errorf("reading the table at physical %#x: %w", table, err)}
		}
		if e&ppc64Present == 0 {
			return Mapping{}, failure{level: name, entry: e, span: span, err: ErrNotPresent}
		}
		if e&ppc64Leaf != 0 || level == 3 {
			if e&ppc64Leaf == 0 {
				return Mapping{}, failure{level: name, entry: e, span: span, err: errors.New("last-level entry without _PAGE_PTE")}
			}
			return Mapping{Paddr: e&ppc64RPNMask&^(span-1) | vaddr&(span-1), PageSize: span}, failure{}
		}
		table = e & ppc64NextMask
	}
	return Mapping{}, failure{err: errors.New("page-table walk did not end")}
}
