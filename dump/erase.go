package dump

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"pagepipe/debuginfo"
	"pagepipe/erase"
	"pagepipe/kernel"
	"pagepipe/pipeline"
	"pagepipe/sink"
	"pagepipe/source"
)

// The x86_64 kernel image's virtual range, where KASLR moves symbols
// (makedumpfile's __START_KERNEL_map and KERNEL_IMAGE_SIZE_KASLR_ORIG,
// VMCOREINFO's NUMBER(KERNEL_IMAGE_SIZE) when it says).
const (
	startKernelMap      = 0xffffffff80000000
	kernelImageSizeKASR = 1 << 30
)

// resolveConfig reads --config and resolves it against the crashed
// kernel, before any output exists: a config that cannot be read or
// resolved is refused with the line at fault.
func resolveConfig(o *Options, ev Events, v source.Memory, vi *kernel.VMCOREINFO, d *debuginfo.DWARF) (*erase.Filter, error) {
	f, err := os.Open(o.FilterConfig)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	cfg, err := erase.Parse(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", o.FilterConfig, err)
	}
	if vi == nil {
		return nil, fmt.Errorf("--config %s: the dump has no VMCOREINFO (give -i)", o.FilterConfig)
	}
	tr, err := v.Arch().NewTranslator(v, vi)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var secs *sections
	if d != nil {
		off, _ := vi.KernelOffset()
		syms := debuginfo.KernelSymbols{DWARF: d, Offset: off, Relocates: relocates(v.Arch(), vi, d)}
		secs = &sections{
			vmlinux: &erase.Section{Types: d, Symbols: syms},
			types:   d, syms: syms, mem: tr,
			release: vi.OSRelease(), dir: o.ModuleDebuginfo,
		}
	} else {
		// No debuginfo: the kernel's own BTF and kallsyms.
		// Only the symbols the config starts from and those the BTF and
		// the module sections are found by (init_task: whether
		// kallsyms has data symbols at all).
		want := append(cfg.Symbols("vmlinux"), "__start_BTF", "__stop_BTF", "modules", "btf_modules", "init_task")
		syms, err := debuginfo.ReadKallsyms(vi.Symbol, tr, want...)
		if err != nil {
			return nil, fmt.Errorf("--config %s without -x: %w", o.FilterConfig, err)
		}
		btf, err := vmlinuxBTF(syms, tr)
		if err != nil {
			return nil, fmt.Errorf("--config %s without -x: %w", o.FilterConfig, err)
		}
		ev.Notef(Debug, "--config: the kernel's BTF, %d of the symbols it needs from kallsyms\n", len(syms))
		secs = &sections{
			vmlinux: &erase.Section{Types: btf, Symbols: syms},
			types:   btf, btf: btf, syms: syms, mem: tr,
		}
	}
	filter, err := erase.Resolve(cfg, secs, tr, func(s string) { ev.Notef(Common, "--config %s: %s\n", o.FilterConfig, s) })
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", o.FilterConfig, err)
	}
	ev.Notef(Debug, "--config %s: %d ranges to erase\n", o.FilterConfig, filter.Len())
	return filter, nil
}

// relocates is makedumpfile's rule for which of a vmlinux's symbols KASLR
// moved: on x86_64 those in the kernel image's range, elsewhere those
// between _text and _end; ppc64 does not relocate.
func relocates(a kernel.Arch, vi *kernel.VMCOREINFO, d *debuginfo.DWARF) func(uint64) bool {
	switch a.Name() {
	case "x86_64":
		size := uint64(kernelImageSizeKASR)
		if n, ok := vi.NumberUnsigned("KERNEL_IMAGE_SIZE"); ok {
			size = n
		}
		return func(v uint64) bool { return v >= startKernelMap && v-startKernelMap < size }
	case "ppc64le":
		return nil
	}
	text, ok1 := d.SymbolValue("_text")
	end, ok2 := d.SymbolValue("_end")
	if !ok1 || !ok2 {
		return nil
	}
	return func(v uint64) bool { return text <= v && v <= end }
}

// sections gives a config's sections their types and symbols: vmlinux's
// from -x, a module's from its debuginfo file and its symbol table in
// the dump.
type sections struct {
	vmlinux *erase.Section
	types   debuginfo.Types // vmlinux's
	btf     *debuginfo.BTF  // without -x: module sections' base
	syms    debuginfo.Symbols
	mem     debuginfo.VirtReader
	release string
	dir     string
	modules map[string]*debuginfo.Module // nil until a module section asks
}

func (s *sections) Section(name string) (*erase.Section, error) {
	if name == "vmlinux" {
		return s.vmlinux, nil
	}
	if s.modules == nil {
		at, err := s.syms.Symbol("modules")
		if err != nil {
			return nil, err
		}
		mods, err := debuginfo.Modules(s.types, s.mem, at)
		if err != nil {
			return nil, err
		}
		s.modules = map[string]*debuginfo.Module{}
		for _, m := range mods {
			s.modules[m.Name] = m
		}
	}
	m := s.modules[name]
	if m == nil {
		return nil, erase.ErrNotLoaded
	}
	if s.btf != nil {
		b, err := moduleBTF(s.btf, s.syms, s.mem, m)
		if err != nil {
			return nil, err
		}
		return &erase.Section{Types: b, Symbols: m}, nil
	}
	path, err := debuginfo.FindModuleDebuginfo(name, s.release, s.dir)
	if err != nil {
		return nil, fmt.Errorf("%w (give its directory with --module-debuginfo DIR)", err)
	}
	d, err := debuginfo.OpenDWARF(path)
	if err != nil {
		return nil, err
	}
	return &erase.Section{Types: d, Symbols: m}, nil
}

// inputEraseinfo is the ERASEINFO of a refiltered dump, carried on into
// the new one ahead of what this dump erases (makedumpfile's
// copy_eraseinfo).
func inputEraseinfo(d *source.Dump) ([]byte, error) {
	if d == nil || d.Sub.SizeEraseinfo == 0 {
		return nil, nil
	}
	if d.Sub.SizeEraseinfo > 1<<30 {
		return nil, fmt.Errorf("%s: eraseinfo of %d bytes", d.Path, d.Sub.SizeEraseinfo)
	}
	f, err := os.Open(d.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, d.Sub.SizeEraseinfo)
	if _, err := f.ReadAt(b, int64(d.Sub.OffsetEraseinfo)); err != nil {
		return nil, fmt.Errorf("%s: eraseinfo: %w", d.Path, err)
	}
	return b, nil
}

// applyErase decides what the dump erases, page by page and in its
// ERASEINFO, once its shape says which pages each file gets: bounds are a
// split dump's parts (nil: one file). It sets the headers' ERASEINFO and
// returns the erasure the copy pass applies (nil: nothing to erase).
func (j *job) applyErase(bounds []uint64) *erase.Erasure {
	in := j.in
	if in.eraseFilter == nil && len(in.eraseinfo) == 0 {
		return nil
	}
	ps := in.mem.PageSize()
	dumpable := in.plan.Dumpable
	texts := map[uint64][]byte{}
	var all *erase.Erasure
	if in.eraseFilter != nil {
		if bounds == nil {
			bounds = []uint64{0, in.plan.MaxMapnr}
		}
		var parts []*erase.Erasure
		for i := range len(bounds) - 1 {
			lo, hi := bounds[i], bounds[i+1]
			e := in.eraseFilter.Apply(ps, func(pfn uint64) bool { return pfn >= lo && pfn < hi && dumpable.Test(pfn) })
			parts = append(parts, e)
			texts[lo] = slices.Concat(in.eraseinfo, e.Text())
		}
		all = erase.Combine(parts...)
		j.ev.Notef(Debug, "--config: %d pages to erase\n", all.Pages())
	}
	in.meta.Eraseinfo = func(r *sink.SplitRange) []byte {
		if in.eraseFilter == nil {
			return in.eraseinfo
		}
		if r == nil {
			return texts[0]
		}
		return texts[r.Start]
	}
	return all
}

// erasingReader erases a page's sensitive bytes as it is read.
type erasingReader struct {
	pipeline.PageReader
	e   *erase.Erasure
	buf []byte
}

func (r *erasingReader) Page(pfn uint64) ([]byte, error) {
	p, err := r.PageReader.Page(pfn)
	if err != nil || !r.e.Touches(pfn) {
		return p, err
	}
	r.buf = append(r.buf[:0], p...)
	r.e.Erase(pfn, r.buf)
	return r.buf, nil
}

// GenerateVMCOREINFO writes the VMCOREINFO of a debug vmlinux to out, as
// makedumpfile -g writes it (debuginfo.GenerateVMCOREINFO), for -i.
func GenerateVMCOREINFO(vmlinux, out, program string, ev Events) error {
	if ev == nil {
		ev = silent{}
	}
	d, err := debuginfo.OpenDWARF(vmlinux)
	if err != nil {
		return fmt.Errorf("-x: %w", err)
	}
	defer d.Close()
	b, err := debuginfo.GenerateVMCOREINFO(d, int64(os.Getpagesize()))
	if err != nil {
		return fmt.Errorf("-g: %s: %w", vmlinux, err)
	}
	if vi, err := kernel.ParseVMCOREINFO(b); err == nil {
		warnKernelVersion(ev, program, vi.OSRelease())
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return fmt.Errorf("-g: %w", err)
	}
	return nil
}

// The ERASEINFO note of an ELF dump (makedumpfile's write_elf_eraseinfo):
// after the input's notes, a note named "ERASEINFO" of type 0 whose
// descriptor, of the size reserved before the pages were written
// (erase.Filter.ELFNoteSize), holds the text and zeros after it.
const (
	eraseinfoName  = "ERASEINFO\x00"
	noteHeaderSize = 12
)

func roundup4(n int) int { return (n + 3) &^ 3 }

// eraseinfoNoteEnd is the length of the notes with the ERASEINFO note of
// a size-byte descriptor after notes bytes.
func eraseinfoNoteEnd(notes, size int) uint64 {
	return uint64(roundup4(notes) + noteHeaderSize + roundup4(len(eraseinfoName)) + roundup4(size))
}

// eraseinfoNote appends the ERASEINFO note to notes.
func eraseinfoNote(notes, text []byte, size int) []byte {
	out := make([]byte, eraseinfoNoteEnd(len(notes), size))
	copy(out, notes)
	h := out[roundup4(len(notes)):]
	binary.LittleEndian.PutUint32(h[0:], uint32(len(eraseinfoName)))
	binary.LittleEndian.PutUint32(h[4:], uint32(size))
	binary.LittleEndian.PutUint32(h[8:], 0)
	copy(h[noteHeaderSize:], eraseinfoName)
	copy(h[noteHeaderSize+roundup4(len(eraseinfoName)):][:size], text)
	return out
}

// fillFromVmlinux gives the dump the values its VMCOREINFO lacks from the
// vmlinux's DWARF (what -g would write for it; its symbols relocated by
// the note's KERNELOFFSET where KASLR moves them), and all of them for a
// vmcore without VMCOREINFO (vi nil). Where both have a value the note's
// stays: the kernel wrote it about itself. (makedumpfile 1.7.2 keeps the
// vmlinux's; they differ only for a vmlinux of another build.)
func fillFromVmlinux(vi *kernel.VMCOREINFO, d *debuginfo.DWARF, a kernel.Arch) (*kernel.VMCOREINFO, error) {
	gen, err := debuginfo.GenerateVMCOREINFO(d, int64(os.Getpagesize()))
	if err != nil {
		return nil, err
	}
	if vi == nil {
		return kernel.ParseVMCOREINFO(gen)
	}
	g, err := kernel.ParseVMCOREINFO(gen)
	if err != nil {
		return nil, err
	}
	if g.OSRelease() != vi.OSRelease() {
		return nil, fmt.Errorf("%w: the vmlinux is %s, the dump %s", ErrWrongRelease, g.OSRelease(), vi.OSRelease())
	}
	off, _ := vi.KernelOffset()
	moved := relocates(a, vi, d)
	var b strings.Builder
	for _, k := range vi.Keys() {
		v, _ := vi.Raw(k)
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	for _, k := range g.Keys() {
		if vi.Has(k) {
			continue
		}
		v, _ := g.Raw(k)
		if name, ok := strings.CutPrefix(k, "SYMBOL("); ok && off != 0 && moved != nil {
			if addr, ok := g.Symbol(strings.TrimSuffix(name, ")")); ok && moved(addr) {
				v = fmt.Sprintf("%x", addr+off)
			}
		}
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return kernel.ParseVMCOREINFO([]byte(b.String()))
}

// printVtop prints the translation of vaddr as makedumpfile's --vtop
// prints it: on x86_64 every table entry the walk reads, then the
// address and its physical address (all ones when it has none).
func printVtop(ev Events, v source.Memory, vi *kernel.VMCOREINFO, vaddr uint64) {
	ev.Notef(Common, "\n")
	ev.Notef(Common, "Translating virtual address %x to physical address.\n", vaddr)
	paddr := ^uint64(0)
	tr, err := v.Arch().NewTranslator(v, vi)
	if err == nil {
		tr.SetTrace(func(level string, at, entry uint64) {
			ev.Notef(Common, "  %s : %16x => %16x\n", level, at, entry)
		})
		var p uint64
		if p, err = tr.VtoP(vaddr); err == nil {
			paddr = p
		}
	}
	if err != nil {
		var te *kernel.TranslationError
		if errors.As(err, &te) && errors.Is(err, kernel.ErrNotPresent) && v.Arch().Name() == "x86_64" {
			entry := map[string]string{"PGD": "pgd", "P4D": "p4d_pte", "PUD": "pud_pte", "PMD": "pmd_pte", "PTE": "pte"}[te.Level]
			ev.Notef(Error, "__vtop4_x86_64: Can't get a valid %s.\n", entry)
		} else {
			ev.Notef(Error, "vtop: %v\n", err)
		}
	}
	ev.Notef(Common, "VIRTUAL           PHYSICAL\n")
	ev.Notef(Common, "%16x  %x\n", vaddr, paddr)
	ev.Notef(Common, "\n")
}

// maxBTFBytes bounds the BTF read from a dump (a 6.12 vmlinux's is 6 MiB).
const maxBTFBytes = 64 << 20

// vmlinuxBTF reads the kernel's BTF from its image, between __start_BTF
// and __stop_BTF (CONFIG_DEBUG_INFO_BTF).
func vmlinuxBTF(syms debuginfo.Kallsyms, mem debuginfo.VirtReader) (*debuginfo.BTF, error) {
	start, err1 := syms.Symbol("__start_BTF")
	stop, err2 := syms.Symbol("__stop_BTF")
	if err1 != nil || err2 != nil || stop <= start || stop-start > maxBTFBytes {
		if _, err := syms.Symbol("init_task"); err != nil {
			// Debian 12's arm64 6.1: kallsyms without data symbols
			// cannot say where the BTF is, nor where any variable is.
			return nil, errors.New("the kernel's kallsyms hold no data symbols (built without CONFIG_KALLSYMS_ALL): neither its BTF nor a variable can be found; give -x VMLINUX")
		}
		return nil, errors.New("the kernel has no BTF (__start_BTF, __stop_BTF: CONFIG_DEBUG_INFO_BTF): give -x VMLINUX")
	}
	b := make([]byte, stop-start)
	if err := mem.ReadVirt(start, b); err != nil {
		return nil, fmt.Errorf("the kernel's BTF: %w", err)
	}
	return debuginfo.ParseBTF(b, nil)
}

// moduleBTF reads a module's split BTF. The kernel parses it when the
// module loads and keeps its own copy: the struct btf that btf_modules
// (kernel/bpf/btf.c) lists beside the module's struct module, whose data
// and data_size are the raw split BTF. struct module's btf_data points at
// the module file's .BTF only while the module initialises (it is set to
// NULL once its init ran: the section is freed with the load copy), so it
// is the answer only for a module caught initialising.
func moduleBTF(base *debuginfo.BTF, syms debuginfo.Symbols, mem debuginfo.VirtReader, m *debuginfo.Module) (*debuginfo.BTF, error) {
	off := func(s, member string) (uint64, error) {
		mm, err := base.Member(s, member)
		return uint64(mm.Offset), err
	}
	ptr := func(at uint64) (uint64, error) {
		var b [8]byte
		err := mem.ReadVirt(at, b[:])
		return binary.LittleEndian.Uint64(b[:]), err
	}
	u32 := func(at uint64) (uint32, error) {
		var b [4]byte
		err := mem.ReadVirt(at, b[:])
		return binary.LittleEndian.Uint32(b[:]), err
	}
	noBTF := fmt.Errorf("module %s: the kernel keeps no module BTF (CONFIG_DEBUG_INFO_BTF_MODULES): give -x VMLINUX and the module's debuginfo", m.Name)
	var at uint64
	var size uint32
	if data, err := off("module", "btf_data"); err != nil {
		return nil, noBTF
	} else if at, err = ptr(m.Addr + data); err != nil {
		return nil, fmt.Errorf("module %s: btf_data: %w", m.Name, err)
	}
	if at != 0 {
		sizeOff, err := off("module", "btf_data_size")
		if err != nil {
			return nil, noBTF
		}
		if size, err = u32(m.Addr + sizeOff); err != nil {
			return nil, fmt.Errorf("module %s: btf_data_size: %w", m.Name, err)
		}
	} else {
		head, err := syms.Symbol("btf_modules")
		if err != nil {
			return nil, noBTF
		}
		listOff, err1 := off("btf_module", "list")
		modOff, err2 := off("btf_module", "module")
		btfOff, err3 := off("btf_module", "btf")
		dataOff, err4 := off("btf", "data")
		sizeOff, err5 := off("btf", "data_size")
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return nil, fmt.Errorf("module %s: btf_modules: %w", m.Name, err)
		}
		b, err := findModuleBTF(head, listOff, modOff, btfOff, m.Addr, ptr)
		if err != nil {
			return nil, fmt.Errorf("module %s: btf_modules: %w", m.Name, err)
		}
		if b == 0 {
			return nil, fmt.Errorf("module %s has no BTF in the dump (btf_modules does not list it)", m.Name)
		}
		if at, err = ptr(b + dataOff); err != nil {
			return nil, fmt.Errorf("module %s: struct btf: %w", m.Name, err)
		}
		if size, err = u32(b + sizeOff); err != nil {
			return nil, fmt.Errorf("module %s: struct btf: %w", m.Name, err)
		}
	}
	if at == 0 || size == 0 || size > maxBTFBytes {
		return nil, fmt.Errorf("module %s has no BTF in the dump", m.Name)
	}
	b := make([]byte, size)
	if err := mem.ReadVirt(at, b); err != nil {
		return nil, fmt.Errorf("module %s's BTF: %w", m.Name, err)
	}
	return debuginfo.ParseBTF(b, base)
}

// maxBTFModules bounds a walk of btf_modules.
const maxBTFModules = 1 << 14

// findModuleBTF walks the btf_modules list at head for the entry of the
// struct module at mod and returns its struct btf's address (0: none).
func findModuleBTF(head, listOff, modOff, btfOff, mod uint64, ptr func(uint64) (uint64, error)) (uint64, error) {
	next, err := ptr(head)
	for n := 0; err == nil && next != head; n++ {
		if next == 0 || n == maxBTFModules {
			return 0, fmt.Errorf("the list is broken after %d entries", n)
		}
		e := next - listOff
		var m uint64
		if m, err = ptr(e + modOff); err != nil {
			break
		}
		if m == mod {
			return ptr(e + btfOff)
		}
		next, err = ptr(next)
	}
	return 0, err
}
