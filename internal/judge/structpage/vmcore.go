// Package structpage is a second reading of a real x86_64 or riscv64 vmcore's struct
// pages, for tests: it says what the kernel made of each page (free, page
// cache, anonymous, hugetlb, slab, ...) and so which pages a dump level
// leaves out, without any of pagepipe's own code. It parses the ELF file
// with debug/elf, VMCOREINFO with strings.Cut, walks the page tables and
// mem_section itself, and decodes struct page from the VMCOREINFO offsets
// and the kernel's own definitions of 6.12 and later (one page type in the
// top byte of page_type, folio order in page[1]'s flags). pagepipe's
// source, kernel and filter packages do all of this too; a test that
// compared pagepipe with them would compare pagepipe with itself.
//
// It reads only what it needs for kernels 6.12+ (the kernels no Debian
// makedumpfile is right for from 7.1 on, and riscv64's, which released
// makedumpfile reads wrong) on x86_64 and riscv64 with SPARSEMEM_EXTREME
// and SPARSEMEM_VMEMMAP, which every distribution kernel has; anything
// else is an error, never a guess.
package structpage

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Vmcore is an ELF vmcore mapped into memory, with its VMCOREINFO.
type Vmcore struct {
	data     []byte
	loads    []load
	Info     map[string]string // VMCOREINFO, key (e.g. "OFFSET(page.flags)") to value
	PageSize uint64
	physBase uint64 // NUMBER(phys_base): where the kernel image was loaded
	top      uint64 // physical address of init_top_pgt
	levels   int    // 4 or 5
	// riscv: a riscv64 vmcore, whose kernel image is at va - imageOff
	// and whose other addresses walk Sv39/48/57 tables (riscv.go).
	riscv               bool
	imageOff, linkAddr  uint64
	pageOffset, ramBase uint64
	modules             [2]uint64
	// Released178, on a riscv64 vmcore, translates as makedumpfile 1.7.8
	// does, wrongly: a superpage (a leaf above the last level) is taken
	// for a 4 KiB page, its offset cut to the low 12 bits (upstream's
	// 863e2c4, after 1.7.8, fixed it). A test sets it to show that this,
	// and nothing else, is where 1.7.8 and pagepipe part.
	Released178 bool
}

// load is a PT_LOAD's physical range and where its bytes are in the file.
type load struct{ paddr, size, off uint64 }

// startKernelMap is x86_64's __START_KERNEL_map: kernel-image virtual
// addresses are this plus the physical address less phys_base.
const startKernelMap = 0xffffffff80000000

// Open maps the vmcore at path and reads its program headers and
// VMCOREINFO note.
func Open(path string) (*Vmcore, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("structpage: %s: %w", path, err)
	}
	defer ef.Close()
	if ef.Machine != elf.EM_X86_64 && ef.Machine != elf.EM_RISCV || ef.Class != elf.ELFCLASS64 {
		return nil, fmt.Errorf("structpage: %s: not an x86_64 or riscv64 ELF64 vmcore", path)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("structpage: map %s: %w", path, err)
	}
	v := &Vmcore{data: data, riscv: ef.Machine == elf.EM_RISCV}
	var note []byte
	for _, p := range ef.Progs {
		switch p.Type {
		case elf.PT_LOAD:
			if p.Off+p.Filesz > uint64(len(data)) {
				v.Close()
				return nil, fmt.Errorf("structpage: %s: a PT_LOAD runs past the end of the file", path)
			}
			v.loads = append(v.loads, load{p.Paddr, p.Filesz, p.Off})
		case elf.PT_NOTE:
			if p.Off+p.Filesz > uint64(len(data)) {
				v.Close()
				return nil, fmt.Errorf("structpage: %s: the PT_NOTE runs past the end of the file", path)
			}
			if n := findNote(data[p.Off:p.Off+p.Filesz], "VMCOREINFO"); n != nil {
				note = n
			}
		}
	}
	if note == nil {
		v.Close()
		return nil, fmt.Errorf("structpage: %s: no VMCOREINFO note", path)
	}
	v.Info = parseInfo(note)
	if err := v.setup(); err != nil {
		v.Close()
		return nil, fmt.Errorf("structpage: %s: %w", path, err)
	}
	return v, nil
}

// Close unmaps the vmcore.
func (v *Vmcore) Close() error {
	if v.data == nil {
		return nil
	}
	err := syscall.Munmap(v.data)
	v.data = nil
	return err
}

// findNote returns the descriptor of the ELF note called name in notes.
func findNote(notes []byte, name string) []byte {
	le := binary.LittleEndian
	align := func(n uint64) uint64 { return (n + 3) &^ 3 }
	for len(notes) >= 12 {
		nsz, dsz := uint64(le.Uint32(notes)), uint64(le.Uint32(notes[4:]))
		body := notes[12:]
		if align(nsz)+dsz > uint64(len(body)) {
			return nil
		}
		if string(bytes.TrimRight(body[:nsz], "\x00")) == name {
			return body[align(nsz) : align(nsz)+dsz]
		}
		notes = body[min(align(nsz)+align(dsz), uint64(len(body))):]
	}
	return nil
}

// parseInfo reads VMCOREINFO's KEY=VALUE lines.
func parseInfo(note []byte) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(string(bytes.TrimRight(note, "\x00")), "\n") {
		if k, val, ok := strings.Cut(line, "="); ok {
			m[k] = val
		}
	}
	return m
}

// Number reads a decimal VMCOREINFO value (NUMBER, OFFSET, SIZE, LENGTH
// are printed signed, in decimal).
func (v *Vmcore) Number(key string) (int64, error) {
	s, ok := v.Info[key]
	if !ok {
		return 0, fmt.Errorf("VMCOREINFO has no %s", key)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("VMCOREINFO %s=%q: %w", key, s, err)
	}
	return n, nil
}

// Symbol reads a SYMBOL(name) address (hexadecimal, no 0x).
func (v *Vmcore) Symbol(name string) (uint64, error) {
	key := "SYMBOL(" + name + ")"
	s, ok := v.Info[key]
	if !ok {
		return 0, fmt.Errorf("VMCOREINFO has no %s", key)
	}
	n, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("VMCOREINFO %s=%q: %w", key, s, err)
	}
	return n, nil
}

func (v *Vmcore) setup() error {
	ps, err := v.Number("PAGESIZE")
	if err != nil {
		return err
	}
	if ps != 4096 {
		return fmt.Errorf("PAGESIZE=%d, x86_64's and riscv64's is 4096", ps)
	}
	v.PageSize = uint64(ps)
	if v.riscv {
		return v.setupRISCV()
	}
	pb, err := v.Number("NUMBER(phys_base)")
	if err != nil {
		return err
	}
	v.physBase = uint64(pb)
	top, err := v.Symbol("init_top_pgt")
	if err != nil {
		return err
	}
	if top < startKernelMap {
		return fmt.Errorf("SYMBOL(init_top_pgt)=%#x is not in the kernel image", top)
	}
	v.top = top - startKernelMap + v.physBase
	v.levels = 4
	if l5, _ := v.Number("NUMBER(pgtable_l5_enabled)"); l5 == 1 {
		v.levels = 5
	}
	return nil
}

// Phys returns the n bytes at physical address paddr, all in one PT_LOAD;
// ok is false where the vmcore does not hold them all.
func (v *Vmcore) Phys(paddr, n uint64) (b []byte, ok bool) {
	for _, l := range v.loads {
		if paddr >= l.paddr && paddr+n <= l.paddr+l.size {
			o := l.off + paddr - l.paddr
			return v.data[o : o+n], true
		}
	}
	return nil, false
}

// MaxPFN is one past the highest pfn any PT_LOAD holds a byte of.
func (v *Vmcore) MaxPFN() uint64 {
	var m uint64
	for _, l := range v.loads {
		m = max(m, (l.paddr+l.size+v.PageSize-1)/v.PageSize)
	}
	return m
}

// InRAM reports whether the vmcore holds every byte of page pfn.
func (v *Vmcore) InRAM(pfn uint64) bool {
	_, ok := v.Phys(pfn*v.PageSize, v.PageSize)
	return ok
}

// Page returns the contents of page pfn, or false where the vmcore does
// not hold it whole.
func (v *Vmcore) Page(pfn uint64) ([]byte, bool) {
	return v.Phys(pfn*v.PageSize, v.PageSize)
}

func (v *Vmcore) u64(paddr uint64) (uint64, error) {
	b, ok := v.Phys(paddr, 8)
	if !ok {
		return 0, fmt.Errorf("physical address %#x is not in the vmcore", paddr)
	}
	return binary.LittleEndian.Uint64(b), nil
}

// x86_64 page-table entry bits.
const (
	ptePresent  = 1 << 0
	ptePageSize = 1 << 7             // a 1 GiB or 2 MiB page, at the PUD or PMD level
	pteAddr     = 0x000ffffffffff000 // bits 12-51
)

// errUnmapped is returned for an address the page tables do not map.
var errUnmapped = errors.New("not mapped in the page tables")

// Virt translates a kernel virtual address: kernel-image addresses by
// phys_base, all others by walking init_top_pgt (4 or 5 levels, 1 GiB and
// 2 MiB pages).
func (v *Vmcore) Virt(vaddr uint64) (uint64, error) {
	if v.riscv {
		return v.virtRISCV(vaddr)
	}
	if vaddr >= startKernelMap {
		return vaddr - startKernelMap + v.physBase, nil
	}
	table := v.top
	for level := v.levels; level >= 1; level-- {
		shift := 12 + 9*uint(level-1)
		e, err := v.u64(table + (vaddr>>shift)&511*8)
		if err != nil {
			return 0, fmt.Errorf("walk %#x, level %d: %w", vaddr, level, err)
		}
		if e&ptePresent == 0 {
			return 0, fmt.Errorf("%#x: %w", vaddr, errUnmapped)
		}
		if level == 1 || (level <= 3 && e&ptePageSize != 0) {
			mask := uint64(1)<<shift - 1
			return e&pteAddr&^mask | vaddr&mask, nil
		}
		table = e & pteAddr
	}
	panic("unreachable")
}

// ReadVirt returns n bytes at kernel virtual address vaddr, which may
// cross pages.
func (v *Vmcore) ReadVirt(vaddr, n uint64) ([]byte, error) {
	out := make([]byte, 0, n)
	for n > 0 {
		p, err := v.Virt(vaddr)
		if err != nil {
			return nil, err
		}
		k := min(n, v.PageSize-vaddr%v.PageSize)
		b, ok := v.Phys(p, k)
		if !ok {
			return nil, fmt.Errorf("%#x (physical %#x) is not in the vmcore", vaddr, p)
		}
		out = append(out, b...)
		vaddr, n = vaddr+k, n-k
	}
	return out, nil
}
