// Package priority finds the pages an analysis of a crashed kernel needs
// first — the page tables of the kernel's address space, the kernel image,
// the per-cpu areas, the memory model's tables, the printk ring buffer,
// the CPUs' current tasks and stacks — so that the copy pass can write them
// before the bulk (--priority): a dump cut short by a full disk, -L or a
// signal then still opens in crash. Everything is found from VMCOREINFO,
// the NT_PRSTATUS notes and the kernel's page tables, without a vmlinux;
// what cannot be found that way is said (Set.Missing).
package priority

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"pagepipe/bitmap"
	"pagepipe/kernel"
)

// Memory is the crashed machine as discovery reads it (source.Memory is
// one).
type Memory interface {
	kernel.PhysReader
	Arch() kernel.Arch
	Notes() (notes []byte, nrCPUs int, vmcoreinfoOff, vmcoreinfoSize uint64)
	Pfns() uint64
}

// Class is one kind of page an analysis needs.
type Class struct {
	Name string
	// Pfns are the class's pages, sorted, each once.
	Pfns []uint64
}

// Set is the priority set: its classes in the order they are written.
// A page in more than one class counts in the first.
type Set struct {
	Classes []Class
	// Missing says, one line each, what was not found and why, and what
	// a vmlinux would add.
	Missing []string
}

// Len is the number of pages in the set.
func (s *Set) Len() uint64 {
	var n uint64
	for _, c := range s.Classes {
		n += uint64(len(c.Pfns))
	}
	return n
}

// Bitmap is the set as a bitmap of n pfns.
func (s *Set) Bitmap(n uint64) *bitmap.Bitmap {
	m := bitmap.New(n)
	for _, c := range s.Classes {
		for _, p := range c.Pfns {
			if p < n {
				m.Set(p)
			}
		}
	}
	return m
}

// Always missing: what crash's ps, bt and kmem walk past the CPUs'
// current tasks is reached through struct offsets VMCOREINFO does not
// export.
const slabMissing = "the slab pages of the task list, the tasks' mm and files and the slab caches (ps, bt of other tasks, kmem -s): reached through task_struct, mm_struct and kmem_cache offsets that VMCOREINFO does not export; a vmlinux (-x) would give them"

// nonCanonicalStep is how far the walk moves past a non-canonical
// address where no canonical one is found above it (canonicalAbove): a
// top-level slot of 4-level paging.
const nonCanonicalStep = 1 << 39

// maxLookups bounds the page-table walk of the kernel's address space
// (each step is one page, block or unmapped range).
const maxLookups = 1 << 24

// Find finds the priority set of the kernel whose memory m holds. An error
// is returned only when not even the page tables can be walked; a class
// that cannot be found is left out and said in Missing.
func Find(m Memory, vi *kernel.VMCOREINFO) (*Set, error) {
	if vi == nil {
		return nil, errors.New("priority: the dump has no VMCOREINFO")
	}
	f := &finder{m: m, vi: vi, page: uint64(vi.PageSize()), s: &Set{}}
	if f.page == 0 || f.page&(f.page-1) != 0 {
		return nil, fmt.Errorf("priority: page size %d", f.page)
	}
	// Recording from the start: the translator keeps the tables it reads
	// as it is made (the top table for good) in its cache.
	rec := &recorder{r: m, page: f.page}
	rec.on()
	tr, err := m.Arch().NewTranslator(rec, vi)
	if err != nil {
		return nil, fmt.Errorf("priority: %w", err)
	}
	f.tr, f.rec = tr, rec

	// The page tables first: every other read goes through them.
	f.tables()
	f.class("page tables")

	syms, err := readKallsyms(vi, tr, "__per_cpu_offset", "__per_cpu_start", "pcpu_unit_size", "current_task", "pcpu_hot", "_etext")
	if err != nil {
		f.missing("per-cpu areas, the CPUs' current tasks and the end of the kernel text: %v", err)
	}
	// The image's text goes last: crash reads code from the vmlinux, not
	// from the dump, and it is a third of the image.
	text, err := f.image(syms["_etext"])
	if err != nil {
		f.missing("kernel image: %v", err)
	}
	f.class("kernel data")

	_, cpus, _, _ := m.Notes()
	var offsets []uint64
	if syms != nil {
		if offsets, err = f.perCPU(syms, cpus); err != nil {
			f.missing("per-cpu areas: %v", err)
		}
	}
	f.class("per-cpu areas")

	f.memoryModel()
	f.class("memory model")

	rec.on()
	if _, err := kernel.ReadLog(vi, tr, false); err != nil {
		f.missing("printk ring buffer: %v", err)
	}
	f.take(rec.off())
	f.class("kernel log")

	if offsets != nil {
		if err := f.currentTasks(syms, offsets); err != nil {
			f.missing("the CPUs' current tasks: %v", err)
		}
	}
	f.stacks()
	f.class("tasks and stacks")
	f.take(text)
	f.class("kernel text")
	f.s.Missing = append(f.s.Missing, slabMissing)
	return f.s, nil
}

type finder struct {
	m    Memory
	vi   *kernel.VMCOREINFO
	tr   *kernel.Translator
	rec  *recorder
	page uint64
	// seen are the pfns of the earlier classes, sorted; cur, the class
	// being found, as added (sorted, each once and none in seen, by
	// class). Slices, not a map or a machine-sized bitmap: the set is
	// small, and its search leaves little garbage for the copy pass's
	// collector (issue 21's acceptance 3).
	seen []uint64
	cur  []uint64
	s    *Set
}

func (f *finder) missing(format string, a ...any) {
	f.s.Missing = append(f.s.Missing, fmt.Sprintf(format, a...))
}

// add puts the page holding paddr in the current class.
func (f *finder) add(paddr uint64) { f.cur = append(f.cur, paddr/f.page) }

func (f *finder) take(pfns []uint64) {
	for _, p := range pfns {
		f.add(p * f.page)
	}
}

// class closes the current class: its pages sorted, each once, less
// those of the earlier classes.
func (f *finder) class(name string) {
	slices.Sort(f.cur)
	pfns := slices.Compact(f.cur)
	k := 0
	for _, p := range pfns {
		if _, in := slices.BinarySearch(f.seen, p); !in {
			pfns[k] = p
			k++
		}
	}
	pfns = slices.Clone(pfns[:k])
	f.s.Classes = append(f.s.Classes, Class{Name: name, Pfns: pfns})
	f.seen = append(f.seen, pfns...)
	slices.Sort(f.seen)
	f.cur = f.cur[:0] // reused by the next class
}

// virt puts the pages of [va, va+n) of kernel virtual memory in the
// current class, as far as they are mapped.
func (f *finder) virt(va, n uint64) error {
	for a := va &^ (f.page - 1); a < va+n; a += f.page {
		pa, err := f.tr.VtoP(a)
		if err != nil {
			return err
		}
		f.add(pa)
	}
	return nil
}

// tables walks the kernel's half of the address space, from the lowest
// kernel address to the top, and takes every page-table page the walk
// reads: the translator reads tables (and only tables) through the
// recorder, which records from the translator's making on.
func (f *finder) tables() {
	f.add(f.tr.TopTable())
	defer func() { f.take(f.rec.off()) }()
	// A walk that reaches a last-level table has read it: the rest of
	// the range that table maps (page × page/8 bytes: 2 MiB for 4 KiB
	// pages) holds no other table, so the walk moves past it.
	lastLevel := f.page * (f.page / 8)
	va := f.tr.KernelSpaceStart()
	for n := 0; n < maxLookups; n++ {
		step := f.page
		// Step, not Lookup: an empty entry costs no allocation.
		m, span, err := f.tr.Step(va)
		switch {
		case err == nil:
			step = m.PageSize
		case span > 0:
			step = span
		case errors.Is(err, kernel.ErrNonCanonical):
			if c, ok := f.canonicalAbove(va); ok {
				va = c
				continue
			}
			step = nonCanonicalStep
		}
		if step == f.page {
			step = lastLevel
		}
		next := va&^(step-1) + step
		if next <= va {
			return // the top of the address space
		}
		va = next
	}
	f.missing("page tables: the walk stopped after %d steps at %#x", maxLookups, va)
}

// canonicalAbove is the lowest canonical address above the non-canonical
// va. The kernel's canonical addresses are the top of the address space,
// [-2^k, 0) for the geometry's k (x86_64 4-level paging: k = 47, where
// KernelSpaceStart is 5-level paging's -2^56), so it is the first of
// -2^63, -2^62, ... above va that Lookup does not call non-canonical:
// at most 64 lookups instead of one per 512 GiB (130816 of them).
func (f *finder) canonicalAbove(va uint64) (uint64, bool) {
	for k := 63; k > 0; k-- {
		c := ^uint64(0) << k
		if c <= va {
			continue
		}
		if _, _, err := f.tr.Step(c); !errors.Is(err, kernel.ErrNonCanonical) {
			return c, true
		}
	}
	return 0, false
}

// imageStart is how far below _stext the walk of the kernel image starts:
// the image is mapped from a 2 MiB boundary on x86_64 and arm64.
const imageAlign = 2 << 20

// image takes the kernel image — text, rodata, data, bss and brk — from
// the page tables: the pages mapped from _stext's 2 MiB block on, up to
// the first address not mapped (the kernel unmaps its image mapping past
// the image, x86_64's cleanup_highmap). The text's pages, [_stext, etext)
// (etext 0: unknown, the whole image is taken), are returned instead.
func (f *finder) image(etext uint64) (text []uint64, err error) {
	stext, ok := f.vi.Symbol("_stext")
	if !ok {
		return nil, errors.New("VMCOREINFO has no SYMBOL(_stext)")
	}
	limit := uint64(1 << 30)
	if n, ok := f.vi.NumberUnsigned("KERNEL_IMAGE_SIZE"); ok && n > 0 {
		limit = n
	}
	for va := stext &^ (imageAlign - 1); va < stext+limit; va += f.page {
		pa, err := f.tr.VtoP(va)
		if err != nil {
			if va < stext {
				continue
			}
			return text, nil
		}
		if va >= stext && va < etext {
			text = append(text, pa/f.page)
		} else {
			f.add(pa)
		}
	}
	return text, nil
}

// perCPU takes every online CPU's per-cpu area: __per_cpu_offset[cpu]
// plus __per_cpu_start, pcpu_unit_size bytes. It returns the offsets.
func (f *finder) perCPU(syms symbols, cpus int) ([]uint64, error) {
	for _, s := range []string{"__per_cpu_offset", "__per_cpu_start", "pcpu_unit_size"} {
		if _, ok := syms[s]; !ok {
			return nil, fmt.Errorf("kallsyms has no %s", s)
		}
	}
	if cpus <= 0 || cpus > 1<<16 {
		return nil, fmt.Errorf("%d CPUs in the notes", cpus)
	}
	var b [4]byte
	if err := f.tr.ReadVirt(syms["pcpu_unit_size"], b[:]); err != nil {
		return nil, fmt.Errorf("pcpu_unit_size: %w", err)
	}
	unit := uint64(binary.LittleEndian.Uint32(b[:]))
	if unit == 0 || unit > 1<<30 {
		return nil, fmt.Errorf("pcpu_unit_size %#x: implausible", unit)
	}
	raw := make([]byte, 8*cpus)
	if err := f.tr.ReadVirt(syms["__per_cpu_offset"], raw); err != nil {
		return nil, fmt.Errorf("__per_cpu_offset: %w", err)
	}
	offs := make([]uint64, cpus)
	for i := range offs {
		offs[i] = binary.LittleEndian.Uint64(raw[8*i:])
		if err := f.virt(offs[i]+syms["__per_cpu_start"], unit); err != nil {
			return nil, fmt.Errorf("cpu %d: %w", i, err)
		}
	}
	return offs, nil
}

// taskSpan is how much of a task_struct is taken from its start:
// SIZE(task_struct) is not in VMCOREINFO (about 10 KiB on 6.x x86_64,
// with the FPU state at its end).
const taskSpan = 16 << 10

// currentTasks takes each CPU's current task_struct: the per-cpu
// current_task (pcpu_hot.current_task on 6.2 to 6.14, its first field).
func (f *finder) currentTasks(syms symbols, offsets []uint64) error {
	at, ok := syms["current_task"]
	if !ok {
		if at, ok = syms["pcpu_hot"]; !ok {
			return errors.New("kallsyms has neither current_task nor pcpu_hot")
		}
	}
	var b [8]byte
	for cpu, off := range offsets {
		if err := f.tr.ReadVirt(at+off, b[:]); err != nil {
			return fmt.Errorf("cpu %d: current task: %w", cpu, err)
		}
		task := binary.LittleEndian.Uint64(b[:])
		if task < f.tr.KernelSpaceStart() {
			continue // a CPU that never ran a task
		}
		if err := f.virt(task, taskSpan); err != nil {
			return fmt.Errorf("cpu %d: task %#x: %w", cpu, task, err)
		}
	}
	return nil
}

// stackSize is THREAD_SIZE: 16 KiB on x86_64 and arm64 (KASAN doubles it;
// the 16 KiB around the stack pointer are taken either way).
const stackSize = 16 << 10

// stacks takes, for every CPU's NT_PRSTATUS, the stack its stack pointer
// is on: the panicking task's (crash_setup_regs) and, for the other CPUs,
// the stack the NMI that stopped them runs on.
func (f *finder) stacks() {
	notes, _, _, _ := f.m.Notes()
	spOff, ok := map[string]int{"x86_64": 112 + 19*8, "aarch64": 112 + 31*8, "riscv64": 112 + 2*8}[f.m.Arch().Name()]
	if !ok {
		f.missing("stacks: no stack pointer offset in NT_PRSTATUS for %s", f.m.Arch().Name())
		return
	}
	for _, desc := range prstatus(notes) {
		if len(desc) < spOff+8 {
			continue
		}
		sp := binary.LittleEndian.Uint64(desc[spOff:])
		if sp < f.tr.KernelSpaceStart() {
			continue
		}
		// A stack that is not mapped whole is taken as far as it is.
		_ = f.virt(sp&^(stackSize-1), stackSize)
	}
}

// prstatus returns the descriptors of the CORE NT_PRSTATUS notes.
func prstatus(notes []byte) [][]byte {
	var out [][]byte
	align := func(n uint32) int { return int((uint64(n) + 3) &^ 3) }
	for len(notes) >= 12 {
		namesz, descsz, typ := binary.LittleEndian.Uint32(notes), binary.LittleEndian.Uint32(notes[4:]), binary.LittleEndian.Uint32(notes[8:])
		rest := notes[12:]
		if align(namesz) > len(rest) || align(namesz)+align(descsz) > len(rest) {
			break
		}
		name := rest[:namesz]
		if len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		desc := rest[align(namesz):][:descsz]
		if string(name) == "CORE" && typ == 1 {
			out = append(out, desc)
		}
		notes = rest[align(namesz)+align(descsz):]
	}
	return out
}

// memoryModel takes the tables readers find struct pages and memory
// nodes by: mem_section's (the reads kernel.FindMemMap makes) and each
// node's pglist_data (node_data[], SIZE(pglist_data) bytes each), which
// crash reads as it starts and kmem -i sums.
func (f *finder) memoryModel() {
	f.rec.on()
	if _, err := kernel.FindMemMap(f.vi, f.tr, f.m.Pfns()); err != nil {
		f.missing("memory model: %v", err)
	}
	f.take(f.rec.off())
	nd, ok := f.vi.Symbol("node_data")
	if !ok {
		return // FLATMEM or no NUMA: contig_page_data is in the image
	}
	n, _ := f.vi.Length("node_data")
	size, ok := f.vi.Size("pglist_data")
	if n <= 0 || n > 1<<16 || !ok || size <= 0 {
		f.missing("memory nodes: LENGTH(node_data) %d, SIZE(pglist_data) %d", n, size)
		return
	}
	raw := make([]byte, 8*n)
	if err := f.tr.ReadVirt(nd, raw); err != nil {
		f.missing("memory nodes: node_data: %v", err)
		return
	}
	for i := range int(n) {
		p := binary.LittleEndian.Uint64(raw[8*i:])
		if p < f.tr.KernelSpaceStart() {
			continue
		}
		if err := f.virt(p, uint64(size)); err != nil {
			f.missing("memory node %d: %v", i, err)
		}
	}
}

// recorder is a PhysReader that, while on, notes every page read through
// it.
type recorder struct {
	r     kernel.PhysReader
	page  uint64
	rec   bool
	pages []uint64
}

func (r *recorder) ReadPhys(paddr uint64, p []byte) error {
	err := r.r.ReadPhys(paddr, p)
	if err == nil && r.rec && len(p) > 0 {
		for pfn := paddr / r.page; pfn <= (paddr+uint64(len(p))-1)/r.page; pfn++ {
			r.pages = append(r.pages, pfn)
		}
	}
	return err
}

func (r *recorder) on() { r.rec, r.pages = true, nil }

func (r *recorder) off() []uint64 {
	r.rec = false
	return r.pages
}
