package dump

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"pagepipe/bitmap"
	"pagepipe/codec"
	"pagepipe/debuginfo"
	"pagepipe/erase"
	"pagepipe/filter"
	"pagepipe/internal/memprobe"
	"pagepipe/kdumpfmt"
	"pagepipe/kernel"
	"pagepipe/sink"
	"pagepipe/source"
)

// input is the dump's input after the filter pass: the memory, the plan
// (which pages go in) and everything the headers hold besides the pages.
type input struct {
	mem    source.Memory
	vmcore *source.Vmcore // nil when the input is a kdump-compressed dump
	level  Level
	plan   *filter.Plan
	// vmemmap is set when -e waits for an ELF dump's zero scan: the
	// vmemmap pages are found from the bitmaps as they are after it.
	vmemmap *filter.Vmemmap
	// partial is how the bitmaps took partial pages; its LastPresent
	// also says makedumpfile would build them in one cycle, which the
	// ELF walk past mem_map depends on (dump/compat.go).
	partial source.PartialPages
	codec   *codec.Codec // nil: pages stored raw
	meta    *sink.Meta
	vi      *kernel.VMCOREINFO // nil: none
	// eraseFilter is --config resolved (nil: none); eraseinfo a
	// refiltered dump's own ERASEINFO, carried on.
	eraseFilter *erase.Filter
	eraseinfo   []byte
	dwarf       *debuginfo.DWARF // -x
	live        *live            // nil: not the running kernel
}

// prepare opens the input and runs the filter pass.
func prepare(ctx context.Context, o *Options, ev Events, level Level) (in *input, err error) {
	v, err := source.OpenMemory(o.Input)
	if err != nil {
		return nil, fmt.Errorf("open vmcore: %w", err)
	}
	defer func() {
		if err != nil {
			v.Close()
		}
	}()
	in = &input{mem: v}
	var dump *source.Dump
	switch m := v.(type) {
	case *source.Vmcore:
		in.vmcore = m
		if m.Kcore != nil {
			// The running kernel: see live.go. (A kcore-shaped file is
			// dumped as one, but it is no memory of this machine.)
			if source.LiveKcore(o.Input) {
				if err := checkLiveTarget(o); err != nil {
					return nil, err
				}
			}
			in.live = &live{kcore: m.Kcore, taken: time.Now()}
			o.Mmap = MmapOff // kcore has no mmap
			if err := m.Info.LiveNotes(liveNote(in.live.taken, o.Input)); err != nil {
				return nil, fmt.Errorf("%s: %w", o.Input, err)
			}
			ev.Notef(Common, "Dumping the running kernel (%s): pages may change while they are read.\n", o.Input)
		}
		if debugging(ev) {
			m.MapStats().KeepWindows() // named in the copy pass's debug lines
		}
		if o.useMmap() {
			// The kernel's metadata (page tables, mem_section, the
			// priority search's structures) through mmap windows too.
			m.MapReads(source.MetadataMapSize, source.MetadataWindows)
		}
	case *source.Dump:
		dump = m
	case interface{ Unwrap() *source.Dump }:
		dump = m.Unwrap()
	}
	if dump != nil {
		// Refiltering: what the dump left out stays out.
		level |= Level(dump.Sub.DumpLevel)
	}
	in.level = level
	noteVMCOREINFO(ev, v)
	vi, err := loadVMCOREINFO(v, o.VMCOREINFOFile)
	if err != nil {
		return nil, err
	}
	if o.Vmlinux != "" {
		if in.dwarf, err = debuginfo.OpenDWARF(o.Vmlinux); err != nil {
			return nil, fmt.Errorf("-x: %w", err)
		}
		if vi, err = fillFromVmlinux(vi, in.dwarf, v.Arch()); err != nil {
			return nil, fmt.Errorf("-x %s: %w", o.Vmlinux, err)
		}
	}
	if vi, err = withDefaults(vi, in.vmcore); err != nil {
		return nil, err
	}
	if _, _, _, noteSize := v.Notes(); noteSize == 0 && vi != nil {
		if vi, err = memSectionArray(vi, v); err != nil {
			return nil, err
		}
	}
	in.vi = vi
	if err := v.Arch().Check(vi); err != nil {
		return nil, source.Unsupported(err)
	}
	if vi != nil && uint64(vi.PageSize()) != v.PageSize() {
		return nil, source.Unsupported(fmt.Errorf("VMCOREINFO says %d-byte pages, the input's are %d bytes (%s)", vi.PageSize(), v.PageSize(), pageSizeFrom(v)))
	}
	if vi != nil && dump == nil {
		if err := checkRelease(in.vmcore, vi, o.VMCOREINFOFile); err != nil {
			return nil, err
		}
		warnKernelVersion(ev, o.Program, vi.OSRelease())
	}
	var kern *filter.Kernel
	if vi != nil {
		kern, err = filter.OpenKernel(vi, v, v.Pfns())
		if err != nil {
			if level.NeedsPageScan() {
				return nil, fmt.Errorf("dump level %d: %w", level, err)
			}
			ev.Notef(Debug, "mem_map not found (%v): dumping every page with data\n", err)
			kern = nil
		}
		if kern != nil && o.useMmap() {
			kern.MapSize = o.MapSize // the page scan's struct pages, too
		}
	}
	if o.Vtop != 0 && vi != nil {
		printVtop(ev, v, vi, o.Vtop)
	}
	if in.eraseinfo, err = inputEraseinfo(dump); err != nil {
		return nil, err
	}
	if o.FilterConfig != "" {
		if in.eraseFilter, err = resolveConfig(o, ev, v, vi, in.dwarf); err != nil {
			return nil, err
		}
	}
	var vm *filter.Vmemmap
	if o.ExcludeVmemmap {
		vm = findVmemmap(ev, kern, in.vmcore, v)
	}
	scanStart := time.Now()
	cycle := cycleOf(o, ev)
	in.partial = partialPages(o, ev, cycle, v.Pfns())
	window := cycleWindow(o, ev, cycle)
	if in.isLive() {
		// Scanned once, held whole: the count that fixes the page index
		// is the bitmap the copy pass follows.
		ev.Notef(Debug, "live: the 2nd bitmap is held whole\n")
		window = 0
	}
	if in.vmcore != nil && o.useMmap() {
		// The windows stay mapped while their page tables (a 512th of
		// what they map) come to a quarter of the bitmap budget at most.
		avail, _ := memprobe.Available()
		keep := int64(cycle.ChooseBudget(avail).Bytes) / 4 * 512
		in.vmcore.KeepWindows(keep)
		ev.Notef(Debug, "the readers keep their windows of the vmcore while they map at most %d bytes\n", keep)
	}
	if in.isLive() && kern != nil {
		kern.Record = new(filter.Excluded)
	}
	if in.plan, err = filter.NewPlan(ctx, v, level, kern, o.Workers, in.partial, window); err != nil {
		return nil, err
	}
	if in.isLive() {
		in.live.imagePages = holdImage(in.plan, in.live.kcore, v.PageSize())
		ev.Notef(Debug, "live: the kernel image [%#x, %#x): %d of its pages the page scan left out are dumped\n",
			in.live.kcore.ImageStart, in.live.kcore.ImageEnd, in.live.imagePages)
		if kern != nil && kern.Record != nil {
			var n uint64
			in.live.revisit, n = kern.Record.Revisit(in.plan)
			in.live.excluded, in.live.kern, in.live.level = kern.Record, kern, level
			kern.Record = nil
			ev.Notef(Debug, "live: %d pages the page scan left out as free, cache or user memory are revisited by the copy pass\n", n)
		}
	}
	if n := in.plan.MaxMapnr; window != 0 && window < n {
		ev.Notef(Debug, "the 2nd bitmap in %d cycles of %d pfns\n", (n+window-1)/window, window)
	}
	// makedumpfile's first two steps, the 1st bitmap (memory holes) and
	// the 2nd (the page scan): NewPlan made both.
	ev.End("Checking for memory holes", 0)
	var took time.Duration
	if in.plan.Scanned {
		took = time.Since(scanStart)
	}
	ev.End("Excluding unnecessary pages", took)
	if vm != nil {
		if o.Out.Shape == ELF && level.Has(filter.ExcludeZero) {
			in.vmemmap = vm // after the zero scan (elfLayout)
		} else {
			excludeVmemmap(ev, in.plan, vm, nil)
		}
	}
	if in.codec, err = codecByName(o.Codec); err != nil {
		return nil, err
	}
	if in.codec != nil && !in.codec.Standard {
		ev.Notef(Common, "WARNING: %s compression is a pagepipe extension that crash, libkdumpfile and makedumpfile cannot read; convert the dump with pagepipe before sharing it.\n", in.codec.Name)
	}

	plan := in.plan
	notes, nrCPUs, viOff, viSize := v.Notes()
	m := &sink.Meta{
		BlockSize:      v.PageSize(),
		NrCPUs:         int32(nrCPUs),
		DumpLevel:      int32(level),
		Notes:          notes,
		VmcoreinfoOff:  viOff,
		VmcoreinfoSize: viSize,
		MaxMapnr:       plan.MaxMapnr,
		Present:        plan.Present,
		Dumpable:       plan.Dumpable,
		NumDumpable:    plan.NumDumpable,
		ZeroPage:       level.Has(filter.ExcludeZero),
	}
	if in.codec != nil {
		m.Status = in.codec.Flag
	}
	if vm != nil {
		m.Status |= kdumpfmt.StatusExcludedVmemmap
	}
	if dump != nil {
		// The header describes the same crash: keep what the input says.
		m.Utsname, m.CrashTime, m.PhysBase = dump.Header.Utsname, dump.Header.TimestampSec, dump.Sub.PhysBase
		// But utsname from the dump's memory, as makedumpfile reads it
		// there: a dump made with --config may have its node name erased.
		if vi != nil {
			var uts [kdumpfmt.UtsnameSize]byte
			if readUtsname(v, vi, &uts) == nil {
				m.Utsname = uts
			}
		}
		m.NrCPUs = dump.Header.NrCPUs
	} else {
		note, err := fillKernelMeta(in.vmcore, vi, m)
		if err != nil {
			return nil, err
		}
		if in.isLive() {
			m.CrashTime = in.live.taken.Unix() // no crash: when it was read
		}
		if note != "" {
			ev.Notef(Debug, "%s\n", note)
		}
	}
	in.meta = m
	return in, nil
}

// pageSizeFrom says where the input's page size came from, for messages.
func pageSizeFrom(m source.Memory) string {
	if _, ok := m.(*source.Vmcore); ok {
		return "its architecture's default"
	}
	return "the kdump header's block_size"
}

// findVmemmap finds the vmemmap for -e, or says on the error stream why
// there is none (makedumpfile then dumps without -e, and so does pagepipe)
// and returns nil.
func findVmemmap(ev Events, kern *filter.Kernel, v *source.Vmcore, m source.Memory) *filter.Vmemmap {
	var vm *filter.Vmemmap
	err := errors.New("the crashed kernel's mem_map was not found")
	if kern != nil {
		vm, err = kern.FindVmemmap(highPFN(v, m))
	}
	if err != nil {
		ev.Notef(Error, "find_vmemmap: %v\n", err)
		ev.Notef(Error, "create_dumpfile: Can't find vmemmap pages\n")
		return nil
	}
	ev.Notef(Debug, "vmemmap_start: %16x\n", vm.Base)
	for _, g := range vm.Groups() {
		ev.Notef(Debug, "vmap pfns %#x-%x represent pfns %#x-%x\n\n", g.VmapStart, g.VmapLast, g.RepStart, g.RepEnd)
	}
	ev.Notef(Debug, "vmemmap: %d blocks of 2 MiB walked, %d mapped\n", vm.Blocks, vm.Mapped)
	return vm
}

// highPFN is where makedumpfile's vmemmap walk stops: the end of the
// highest PT_LOAD, rounded down to a page (a dump's max_mapnr when the
// input is a dump).
func highPFN(v *source.Vmcore, m source.Memory) uint64 {
	if v == nil {
		return m.Pfns()
	}
	var end uint64
	for _, l := range v.Loads {
		end = max(end, l.Paddr+l.MemSize)
	}
	return end / v.PageSize()
}

// excludeVmemmap applies -e to the plan (dumpable nil) or to an ELF dump's
// bitmap, with makedumpfile's progress message.
func excludeVmemmap(ev Events, plan *filter.Plan, vm *filter.Vmemmap, dumpable *bitmap.Bitmap) {
	n := plan.ExcludeVmemmap(vm, dumpable)
	ev.Notef(Progress, "\nExcluded %d unused vmemmap pages\n", n)
}

// cycleOf is what makedumpfile looks at to choose how it builds its
// bitmaps, on this machine with these options (filter.Cycle).
func cycleOf(o *Options, ev Events) filter.Cycle {
	// -e: makedumpfile requires --work-dir, so its bitmaps are in one cycle.
	c := filter.Cycle{WorkDir: o.WorkDir || o.ExcludeVmemmap, CyclicBufferKiB: o.CyclicBufferKiB, Dumpfiles: 1}
	if o.Out.Shape == Split {
		c.Dumpfiles = len(o.Out.Paths)
	}
	var err error
	if c.MemFree, err = memprobe.MemFree(); err != nil {
		ev.Notef(Debug, "%v: taking the bitmaps as built in cycles\n", err)
	}
	return c
}

// partialPages decides, as makedumpfile would on this machine with these
// options (c), whether the bitmaps count a PT_LOAD's partial last page,
// and takes the release's rule for the page holding a PT_LOAD's data end.
// It depends on makedumpfile's choice of one cycle or many, never on
// pagepipe's own cycles (cycleWindow), which change no byte.
func partialPages(o *Options, ev Events, c filter.Cycle, maxMapnr uint64) source.PartialPages {
	one := c.OneCycle(maxMapnr)
	ev.Notef(Debug, "bitmaps as makedumpfile builds them %s (MemFree %d bytes)\n", map[bool]string{true: "in one cycle", false: "in cycles"}[one], c.MemFree)
	return source.PartialPages{LastPresent: one, KeepData: o.KeepPartialData}
}

// cycleWindow is how many pfns of the 2nd bitmap the dump holds at a time
// (filter.NewPlan's window): the budget's bits (filter.Cycle.ChooseBudget),
// printed as makedumpfile prints its buffer. -e needs the whole bitmap
// (0): its vmemmap pages lie anywhere in memory.
func cycleWindow(o *Options, ev Events, c filter.Cycle) uint64 {
	avail, err := memprobe.Available()
	if err != nil && o.CyclicBufferKiB == 0 {
		ev.Notef(Debug, "%v: the bitmap budget is the least one\n", err)
	}
	b := c.ChooseBudget(avail)
	if b.Truncated {
		ev.Notef(Common, "Specified buffer size is larger than free memory.\n")
	}
	ev.Notef(Debug, "Buffer size for the cyclic mode: %d\n", b.Bytes)
	ev.Notef(Debug, "the bitmap budget: %d bytes, from %s\n", b.Bytes, b.From)
	if o.ExcludeVmemmap {
		ev.Notef(Debug, "-e: the 2nd bitmap is held whole\n")
		return 0
	}
	return b.Bytes * 8
}

// loadVMCOREINFO returns the crashed kernel's VMCOREINFO: the vmcore's own
// note, else the -i file's. With both, the note wins and the file's release
// must match it (makedumpfile exits 2 otherwise: ErrWrongRelease).
func loadVMCOREINFO(v source.Memory, file string) (*kernel.VMCOREINFO, error) {
	var fromFile *kernel.VMCOREINFO
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("-i: %w", err)
		}
		if fromFile, err = kernel.ParseVMCOREINFO(b); err != nil {
			return nil, fmt.Errorf("-i %s: %w", file, err)
		}
	}
	notes, _, off, size := v.Notes()
	if size == 0 {
		return fromFile, nil
	}
	raw := notes[off : off+size]
	vi, err := kernel.ParseVMCOREINFO(raw)
	if err != nil {
		return nil, fmt.Errorf("VMCOREINFO note: %w", err)
	}
	if fromFile != nil && fromFile.OSRelease() != vi.OSRelease() {
		return nil, fmt.Errorf("%w: %s is for %s, the dump is %s", ErrWrongRelease, file, fromFile.OSRelease(), vi.OSRelease())
	}
	return vi, nil
}

// withDefaults gives a VMCOREINFO what makedumpfile takes where it lacks
// it (a -i file, -x's, an old kernel's): phys_base from the vmcore's
// kernel-text PT_LOAD, which the page-table walk needs, and the buddy
// allocator's _mapcount mark of its release (get_value_for_old_linux).
func withDefaults(vi *kernel.VMCOREINFO, v *source.Vmcore) (*kernel.VMCOREINFO, error) {
	if vi == nil {
		return vi, nil
	}
	var add []string
	if !vi.Has("NUMBER(phys_base)") && v != nil {
		if pb, _, ok := v.Arch().PhysBase(vi, loadAddrs(v)); ok {
			add = append(add, fmt.Sprintf("NUMBER(phys_base)=%d", int64(pb)))
		}
	}
	if !vi.Has("NUMBER(PAGE_BUDDY_MAPCOUNT_VALUE)") {
		if rel, err := kernel.ParseVersion(vi.OSRelease()); err == nil {
			switch {
			case rel.Major > 2 || rel.Major == 2 && (rel.Minor > 6 || rel.Minor == 6 && rel.Patch >= 39):
				add = append(add, "NUMBER(PAGE_BUDDY_MAPCOUNT_VALUE)=-129")
			case rel.Major == 2 && rel.Minor == 6 && rel.Patch == 38:
				add = append(add, "NUMBER(PAGE_BUDDY_MAPCOUNT_VALUE)=-2")
			}
		}
	}
	if len(add) == 0 {
		return vi, nil
	}
	var b strings.Builder
	for _, k := range vi.Keys() {
		val, _ := vi.Raw(k)
		fmt.Fprintf(&b, "%s=%s\n", k, val)
	}
	for _, l := range add {
		b.WriteString(l + "\n")
	}
	return kernel.ParseVMCOREINFO([]byte(b.String()))
}

// memSectionArray turns a debuginfo's SYMBOL(mem_section) (a -i file, or
// -x's for a vmcore without VMCOREINFO) into the kernel's: since 4.15
// mem_section is a pointer to the section roots, and the kernel exports
// its value where the vmlinux has the pointer's address; makedumpfile
// tries both. A debuginfo that has LENGTH(mem_section) knows it as the
// array itself (older kernels) and is left as it is.
func memSectionArray(vi *kernel.VMCOREINFO, v source.Memory) (*kernel.VMCOREINFO, error) {
	sym, ok := vi.Symbol("mem_section")
	if !ok || vi.Has("LENGTH(mem_section)") {
		return vi, nil
	}
	tr, err := v.Arch().NewTranslator(v, vi)
	if err != nil {
		return vi, nil
	}
	var b [8]byte
	if err := tr.ReadVirt(sym, b[:]); err != nil {
		return nil, fmt.Errorf("mem_section at %#x: %w", sym, err)
	}
	var out strings.Builder
	for _, k := range vi.Keys() {
		val, _ := vi.Raw(k)
		if k == "SYMBOL(mem_section)" {
			val = fmt.Sprintf("%x", binary.LittleEndian.Uint64(b[:]))
		}
		fmt.Fprintf(&out, "%s=%s\n", k, val)
	}
	return kernel.ParseVMCOREINFO([]byte(out.String()))
}

// checkRelease refuses, as makedumpfile's check_release does (exit 2), a
// -i file for another kernel than the one whose memory the vmcore holds,
// when the vmcore has no VMCOREINFO note of its own to compare it with
// (loadVMCOREINFO compares the two): the release is read from the
// kernel's utsname through the file's symbols. When the memory cannot
// give utsname (no page tables), there is nothing to compare.
func checkRelease(v *source.Vmcore, vi *kernel.VMCOREINFO, file string) error {
	if _, _, _, size := v.Notes(); file == "" || size != 0 {
		return nil
	}
	var uts [kdumpfmt.UtsnameSize]byte
	if readUtsname(v, vi, &uts) != nil {
		return nil
	}
	release := uts[2*kdumpfmt.UtsnameFieldSize : 3*kdumpfmt.UtsnameFieldSize]
	if n := bytes.IndexByte(release, 0); n >= 0 {
		release = release[:n]
	}
	if string(release) != vi.OSRelease() {
		return fmt.Errorf("check_release: %s and %s don't match: %w (%s is for %s, the crashed kernel is %s)",
			file, v.Path, ErrWrongRelease, file, vi.OSRelease(), release)
	}
	return nil
}

// noteVMCOREINFO gives the VMCOREINFO lines as debug messages, as
// makedumpfile prints them: SUSE's kdump reads OSRELEASE= and CRASHTIME=
// from these lines.
func noteVMCOREINFO(ev Events, m source.Memory) {
	notes, _, off, size := m.Notes()
	if size == 0 {
		return
	}
	ev.Notef(Debug, "VMCOREINFO   :\n")
	for _, line := range strings.Split(strings.TrimRight(string(notes[off:off+size]), "\x00\n"), "\n") {
		ev.Notef(Debug, "  %s\n", line)
		if v, ok := strings.CutPrefix(line, "PAGESIZE="); ok {
			ev.Notef(Debug, "page_size    : %s\n", v)
		}
	}
	ev.Notef(Debug, "\n")
}

// Kernel releases whose memory layout pagepipe knows (its tests run 4.19 to
// 6.12 layouts); makedumpfile has the same check against its own table
// (1.7.2's ends before 6.1).
var (
	oldestKernel = [3]int{2, 6, 15}
	latestKernel = [3]int{6, 12, 1 << 20}
)

// warnKernelVersion gives makedumpfile's two common lines for a kernel
// release outside the supported range.
func warnKernelVersion(ev Events, program, release string) {
	v, err := kernel.ParseVersion(release)
	if err != nil {
		return
	}
	cur := []int{v.Major, v.Minor, v.Patch}
	if slices.Compare(cur, oldestKernel[:]) < 0 || slices.Compare(latestKernel[:], cur) < 0 {
		ev.Notef(Common, "The kernel version is not supported.\n")
		ev.Notef(Common, "The %s operation may be incomplete.\n", program)
	}
}
