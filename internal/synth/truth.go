package synth

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Class is the true class of a page frame of a kernel machine: what the
// kernel was using it for at the crash, which decides whether makedumpfile
// keeps it at a dump level.
type Class uint8

const (
	// Hole is a pfn with no RAM (no PT_LOAD covers it).
	Hole Class = iota
	// Kernel pages are kept at every level: the kernel image, boot
	// allocations (page tables, mem_section, struct page arrays), the
	// reserved low megabyte, and pages the kernel allocated for itself.
	Kernel
	// Slab pages (including ones whose mapping word has bit 0 set, which
	// happens from 6.2 on and must not make them anonymous).
	Slab
	// Cache is page cache without private data (shmem/tmpfs included):
	// excluded by dump-level bits 2 and 4.
	Cache
	// CachePrivate is page cache with PG_private (buffer heads): bit 4.
	CachePrivate
	// SwapCache is a swap-cache page no process maps (PG_swapcache and
	// PG_swapbacked, no mapping): non-private cache, bits 2 and 4.
	SwapCache
	// Anon is anonymous memory, THP included: bit 8.
	Anon
	// Hugetlb is hugetlbfs memory (2 MiB and 1 GiB pages): bit 8.
	Hugetlb
	// Free is in the buddy allocator: bit 16.
	Free
	// Offline is logically offline (ballooned out): always excluded.
	Offline
	// Hwpoison is hardware-poisoned: always excluded.
	Hwpoison
	// Unaccepted is memory not yet accepted by a confidential guest
	// (6.16+): bit 16.
	Unaccepted
	// NumClasses is the number of classes.
	NumClasses
)

var classNames = [NumClasses]string{"hole", "kernel", "slab", "cache", "cache-private", "swapcache",
	"anon", "hugetlb", "free", "offline", "hwpoison", "unaccepted"}

func (c Class) String() string {
	if c < NumClasses {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// ParseClass is the inverse of Class.String.
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if n == s {
			return Class(i), nil
		}
	}
	return 0, fmt.Errorf("synth: unknown page class %q", s)
}

// Dump-level bits (makedumpfile -d).
const (
	DLZero       = 1
	DLCache      = 2
	DLCachePriv  = 4
	DLUser       = 8
	DLFree       = 16
	DLMax        = 31
	dlClassesAll = DLCache | DLCachePriv | DLUser | DLFree
)

// ExcludedAt reports whether makedumpfile excludes a page of class c at
// dump level (0–31), following its first-match rules
// (__exclude_unnecessary_pages): cache without PG_private by bit 2 or 4,
// cache with PG_private by bit 4, anonymous and hugetlb by bit 8, buddy and
// unaccepted by bit 16, and hwpoison and offline pages always, because the
// page scan runs at every level when VMCOREINFO has NUMBER(PG_hwpoison), as
// all the profiles' kernels do. Zero pages (bit 1) are a matter of
// contents, not class, and stay in the kdump bitmap anyway. Holes are never
// dumped.
func (c Class) ExcludedAt(level int) bool {
	switch c {
	case Hole, Offline, Hwpoison:
		return true
	case Cache, SwapCache:
		return level&(DLCache|DLCachePriv) != 0
	case CachePrivate:
		return level&DLCachePriv != 0
	case Anon, Hugetlb:
		return level&DLUser != 0
	case Free, Unaccepted:
		return level&DLFree != 0
	}
	return false
}

// TruthOf returns the class of page frame pfn of a kernel machine. It is a
// pure function of the spec and pfn and costs a few dozen hashes. For a
// spec without Kernel (or one that does not validate) it reports Hole
// outside the segments and Kernel inside: such memory has no struct pages,
// so nothing in it can be filtered by class.
func TruthOf(s Spec, pfn uint64) Class {
	if s.Kernel == nil {
		if spans, full := coverage(&s, pfn); full || len(spans) > 0 {
			return Kernel
		}
		return Hole
	}
	k, err := kernelOf(&s)
	if err != nil {
		return Hole
	}
	return k.leafOf(pfn).class
}

// TruthRun is a run of page frames of one class.
type TruthRun struct {
	Start, Count uint64
	Class        Class
}

// forEachRun calls fn for maximal runs of one class covering [0, endPFN).
func (k *kmem) forEachRun(fn func(lo, hi uint64, c Class)) {
	c := blockCache{k: k}
	var runLo, runHi uint64
	runC := Class(NumClasses)
	for b := uint64(0); b < k.endPFN; b += blockPages {
		c.leaf(b)
		for _, l := range c.leaves {
			lo, hi := max(l.head, b), min(l.end(), b+blockPages, k.endPFN)
			if lo >= hi {
				continue
			}
			if l.class == runC && lo == runHi {
				runHi = hi
				continue
			}
			if runHi > runLo {
				fn(runLo, runHi, runC)
			}
			runLo, runHi, runC = lo, hi, l.class
		}
	}
	if runHi > runLo {
		fn(runLo, runHi, runC)
	}
}

// TruthRuns returns the classes of all page frames from 0 to the end of
// RAM as runs.
func TruthRuns(s Spec) ([]TruthRun, error) {
	k, err := kernelOf(&s)
	if err != nil {
		return nil, err
	}
	var r []TruthRun
	k.forEachRun(func(lo, hi uint64, c Class) { r = append(r, TruthRun{lo, hi - lo, c}) })
	return r, nil
}

// truthHeader starts a truth file.
const truthHeader = "# pagepipe synth truth v1"

// WriteTruth writes the truth of a kernel machine to path, beside its
// vmcore, as run-length text: a header, then one "start count class" line
// per run (decimal pfns, class names as Class.String), covering every pfn
// from 0 to the end of RAM. Text rather than a byte per pfn: a 64 GiB
// machine's truth is some hundred kilobytes, and people read it.
func WriteTruth(path string, s Spec) (err error) {
	k, err := kernelOf(&s)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	w := bufio.NewWriterSize(f, 1<<16)
	fmt.Fprintf(w, "%s\n# profile %s seed %#x pfns %d\n", truthHeader, k.prof.name, s.Seed, k.endPFN)
	k.forEachRun(func(lo, hi uint64, c Class) { fmt.Fprintf(w, "%d %d %s\n", lo, hi-lo, c) })
	return w.Flush()
}

// ReadTruth parses a file written by WriteTruth.
func ReadTruth(r io.Reader) ([]TruthRun, error) {
	sc := bufio.NewScanner(r)
	var out []TruthRun
	first := true
	for sc.Scan() {
		line := sc.Text()
		if first {
			if line != truthHeader {
				return nil, errors.New("synth: not a truth file")
			}
			first = false
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("synth: bad truth line %q", line)
		}
		start, err1 := strconv.ParseUint(f[0], 10, 64)
		count, err2 := strconv.ParseUint(f[1], 10, 64)
		c, err3 := ParseClass(f[2])
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("synth: bad truth line %q: %w", line, err)
		}
		out = append(out, TruthRun{start, count, c})
	}
	if first {
		return nil, errors.New("synth: empty truth file")
	}
	return out, sc.Err()
}

// FilterCounts are makedumpfile's report counters for one dump level: the
// "Pages filled with zero", "Non-private cache pages", "Private cache
// pages", "User process data pages", "Free pages", "Hwpoison pages" and
// "Offline pages" lines, plus the pages left in the dump's bitmap.
type FilterCounts struct {
	Zero, Cache, CachePrivate, User, Free, Hwpoison, Offline uint64
	// Dumpable is the number of set bits of the 2nd bitmap (kdump
	// format: zero pages included).
	Dumpable uint64
}

// counter returns the report counter an excluded page of class c adds to.
func (fc *FilterCounts) counter(c Class) *uint64 {
	switch c {
	case Cache, SwapCache:
		return &fc.Cache
	case CachePrivate:
		return &fc.CachePrivate
	case Anon, Hugetlb:
		return &fc.User
	case Free, Unaccepted:
		return &fc.Free
	case Offline:
		return &fc.Offline
	case Hwpoison:
		return &fc.Hwpoison
	}
	return nil
}

// ExpectedFilter returns what makedumpfile's kdump-compressed output holds
// at dump level for a kernel machine: the 2nd bitmap (one bit per pfn from 0
// to the end of RAM, LSB first, as in the file) and the report counters.
// Pages are classed by TruthOf and excluded by Class.ExcludedAt; a folio
// is excluded whole because every page of it has the head's class. Zero
// pages are counted only with bit 1 and, as in the kdump format, stay set
// in the bitmap.
func ExpectedFilter(s Spec, level int) ([]byte, FilterCounts, error) {
	var fc FilterCounts
	if level < 0 || level > DLMax {
		return nil, fc, fmt.Errorf("synth: dump level %d not in [0, 31]", level)
	}
	k, err := kernelOf(&s)
	if err != nil {
		return nil, fc, err
	}
	bm := make([]byte, (k.endPFN+7)/8)
	pg := k.newPager(&s)
	k.forEachRun(func(lo, hi uint64, c Class) {
		if c.ExcludedAt(level) {
			if p := fc.counter(c); p != nil {
				*p += hi - lo
			}
			return
		}
		for pfn := lo; pfn < hi; pfn++ {
			bm[pfn/8] |= 1 << (pfn % 8)
			if level&DLZero != 0 && pg.kind(pfn) == Zero {
				fc.Zero++
			}
		}
		fc.Dumpable += hi - lo
	})
	return bm, fc, nil
}

// KernelVMCOREINFO returns the VMCOREINFO text a kernel machine's note
// carries (when Spec.VMCOREINFO is empty).
func KernelVMCOREINFO(s Spec) (string, error) {
	k, err := kernelOf(&s)
	if err != nil {
		return "", err
	}
	return k.vmcoreinfo, nil
}
