package filter

import (
	"cmp"
	"context"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"

	"pagepipe/bitmap"
	"pagepipe/internal/cpuclock"
	"pagepipe/kernel"
	"pagepipe/source"
)

// Kernel is the crashed kernel as the page scan sees it: where its struct
// pages are and how to read them.
type Kernel struct {
	VMCOREINFO *kernel.VMCOREINFO
	MemMap     *kernel.MemMap
	Layout     *kernel.PageLayout
	// MapSize, when not 0, makes the page scan read struct pages through
	// mmap windows of that many bytes instead of pread: what the engine
	// asks for on /proc/vmcore (see piecePages).
	MapSize int
	// Record, when set (a live dump), collects the blocks the page scan
	// leaves out as free, cache or user pages, for Revisit.
	Record *Excluded
	mem    source.Memory
}

// OpenKernel finds the mem_map and struct page layout of the kernel whose
// memory mem holds, for pfns below maxMapnr.
func OpenKernel(vi *kernel.VMCOREINFO, mem source.Memory, maxMapnr uint64) (*Kernel, error) {
	tr, err := mem.Arch().NewTranslator(mem, vi)
	if err != nil {
		return nil, err
	}
	mm, err := kernel.FindMemMap(vi, tr, maxMapnr)
	if err != nil {
		return nil, err
	}
	layout, err := kernel.NewPageLayout(vi)
	if err != nil {
		return nil, err
	}
	return &Kernel{VMCOREINFO: vi, MemMap: mm, Layout: layout, mem: mem}, nil
}

// Counts are the excluded pages per class, as the report prints them.
type Counts struct {
	Zero, Cache, CachePrivate, User, Free, Hwpoison, Offline uint64
}

func (c *Counts) add(o Counts) {
	c.Zero += o.Zero
	c.Cache += o.Cache
	c.CachePrivate += o.CachePrivate
	c.User += o.User
	c.Free += o.Free
	c.Hwpoison += o.Hwpoison
	c.Offline += o.Offline
}

// Total is every excluded page.
func (c Counts) Total() uint64 {
	return c.Zero + c.Cache + c.CachePrivate + c.User + c.Free + c.Hwpoison + c.Offline
}

// NeedsScan reports whether makedumpfile would read struct pages at this
// level: for cache, user or free bits, and whenever hwpoison pages can be
// recognised (they and offline pages are always left out).
func (k *Kernel) NeedsScan(level Level) bool {
	return level&(ExcludeCache|ExcludeCachePri|ExcludeUser) != 0 ||
		level.Has(ExcludeFree) && k.Layout.HasBuddy() ||
		k.Layout.HasHwpoison()
}

// unitPages is the work unit of the scan: whole sections or 32768-pfn
// pieces of them, aligned to the bitmap's blocks. Units sharing a block
// (sections smaller than a block) go to one worker together: a write to a
// block may replace it, so no two workers may write one block.
const unitPages = bitmap.BlockPfns

// piecePages struct pages (512 KiB) are read at a time. From a file in
// the page cache they are read with pread into a buffer per scan worker
// that stays live through every cycle (the copy pass makes cycles again).
// Measured on a generated 64 GiB machine at 4 workers (2026-12-02, five
// runs each, alternating, under load): the scan's CPU 0.31 s against 0.38 s
// for 2 MiB pieces, and 3.6 MiB less peak RSS; earlier, 2 MiB had beaten
// 64 KiB (0.16 s against 0.20 s) and 16 KiB (0.32 s), and there every size
// beats mapping the struct pages, whose page faults cost more than the
// copy. /proc/vmcore is the other way round (Kernel.MapSize): its read()
// maps, copies and unmaps old memory a page at a time, where an mmap
// window is mapped whole, without faults (docs/benchmarks.md, "In the
// capture kernel").
const piecePages = unitPages / 4

// spill is an exclusion that runs past the end of the unit that found it
// (a compound page or free block crossing into the next section): spills
// are applied after every unit of the pfns being made has been scanned.
// An edge spill is one that runs past the end of a cycle (a window of the
// 2nd bitmap, see Plan) but not past its unit: without cycles it would
// have been cleared before the rest of its unit was scanned, so it is
// applied before the next cycle's scan.
type spill struct {
	lo, hi  uint64
	counter func(*Counts) *uint64
	edge    bool
}

// unit is a piece of one section, within one bitmap block.
type unit struct {
	sec    kernel.Section
	lo, hi uint64
}

// workUnits are the units of a scan and their groups by bitmap block,
// kept from one cycle to the next (scanners): cut anew for every cycle of
// every pass, they were the page scan's garbage, a cycle's worth each
// time, and garbage lets the Go heap grow towards twice what is live.
type workUnits struct {
	units  []unit
	groups [][]unit
}

// cut cuts the sections into units and groups them by bitmap block, in
// pfn order: one group is one worker's. The groups stay valid until the
// next cut.
func (w *workUnits) cut(sections []kernel.Section) [][]unit {
	w.units, w.groups = w.units[:0], w.groups[:0]
	for _, s := range sections {
		for lo := s.StartPFN; lo < s.EndPFN; lo = (lo/unitPages + 1) * unitPages {
			w.units = append(w.units, unit{s, lo, min((lo/unitPages+1)*unitPages, s.EndPFN)})
		}
	}
	slices.SortFunc(w.units, func(a, b unit) int { return cmp.Compare(a.lo, b.lo) })
	start := 0
	for i := range w.units {
		if i+1 == len(w.units) || w.units[i+1].lo/unitPages != w.units[i].lo/unitPages {
			w.groups = append(w.groups, w.units[start:i+1])
			start = i + 1
		}
	}
	return w.groups
}

// scan classifies the struct pages of the pfns [lo, hi) and clears the excluded pfns in dumpable, on workers
// goroutines; the spills past the units (or past hi) are returned, not
// applied. It also returns the workers' CPU time, each read on its own OS
// thread (the goroutines are locked to them) when it starts and ends.
func (k *Kernel) scan(ctx context.Context, level Level, dumpable *bitmap.Bitmap, workers int, lo, hi uint64, pool *scanners) (Counts, []spill, cpuclock.Usage, error) {
	// The units of this cycle's sections only: the memory of a cycle
	// does not grow with the machine.
	secs := k.MemMap.Sections
	first := sort.Search(len(secs), func(i int) bool { return secs[i].EndPFN > lo })
	last := sort.Search(len(secs), func(i int) bool { return secs[i].StartPFN >= hi })
	w := pool.units()
	defer pool.putUnits(w)
	blocks := w.cut(secs[first:max(first, last)])
	var (
		mu     sync.Mutex
		total  Counts
		spills []spill
		cpu    cpuclock.Counter
	)
	g, ctx := errgroup.WithContext(ctx)
	work := make(chan []unit)
	g.Go(func() error {
		defer close(work)
		for _, b := range blocks {
			select {
			case work <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	// More scan workers than the CPUs the process may use cannot run at
	// once (the scan reads memory: it never waits on a disk), and each
	// costs a struct-page buffer whose pages fault in on first use: with
	// 8 workers on one CPU the faults alone made the pass 3x dearer.
	for range max(min(workers, len(blocks), runtime.GOMAXPROCS(0)), 1) {
		g.Go(func() error {
			defer cpu.Measure()()
			s, err := pool.get(k, level, dumpable)
			if err != nil {
				return err
			}
			defer pool.put(s)
			for b := range work {
				for _, u := range b {
					ulo, uhi := max(u.lo, lo), min(u.hi, hi)
					if ulo >= uhi {
						continue
					}
					if err := s.unit(u.sec, ulo, uhi, u.hi); err != nil {
						return err
					}
				}
			}
			mu.Lock()
			total.add(s.counts)
			spills = append(spills, s.spills...)
			mu.Unlock()
			s.counts, s.spills = Counts{}, nil
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Counts{}, nil, cpu.Load(), err
	}
	return total, spills, cpu.Load(), nil
}

// scanners keeps the scan workers' state (page-table walk, reader,
// buffers) from one cycle to the next, so that a cycle allocates nothing
// the next must collect. nil keeps nothing.
type scanners struct {
	mu    sync.Mutex
	free  []*scanner
	spare *workUnits
}

// units is the pool's work units (new ones for a nil pool, or while
// another scan holds them); putUnits gives them back.
func (p *scanners) units() *workUnits {
	if p == nil {
		return new(workUnits)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.spare
	p.spare = nil
	if w == nil {
		w = new(workUnits)
	}
	return w
}

func (p *scanners) putUnits(w *workUnits) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.spare = w
	p.mu.Unlock()
}

func (p *scanners) get(k *Kernel, level Level, m *bitmap.Bitmap) (*scanner, error) {
	if p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if n := len(p.free); n > 0 {
			s := p.free[n-1]
			p.free = p.free[:n-1]
			s.m = m
			return s, nil
		}
	}
	tr, err := k.mem.Arch().NewTranslator(k.mem, k.VMCOREINFO)
	if err != nil {
		return nil, err
	}
	// pread, but for /proc/vmcore: see piecePages.
	r := k.mem.NewReader(k.MapSize, k.MapSize > 0)
	return &scanner{k: k, l: k.Layout, level: level, m: m, tr: tr, r: r, reader: r}, nil
}

func (p *scanners) put(s *scanner) {
	if p == nil {
		s.reader.Close()
		return
	}
	p.mu.Lock()
	p.free = append(p.free, s)
	p.mu.Unlock()
}

// clearCount clears [lo, hi) and returns how many pfns were set.
func clearCount(m *bitmap.Bitmap, lo, hi uint64) uint64 {
	n := m.Count(lo, hi)
	m.ClearRange(lo, hi)
	return n
}

// scanner is one worker's state.
type scanner struct {
	k      *Kernel
	l      *kernel.PageLayout
	level  Level
	m      *bitmap.Bitmap
	tr     *kernel.Translator
	r      kernel.PhysSlicer
	reader source.Reader // r, to close
	buf    []byte        // for struct pages that are not physically contiguous; made on first need
	counts Counts
	spills []spill
	hi     uint64 // end of the pfns of the current unit being scanned
	unitHi uint64 // end of the current unit (past hi when a cycle ends in it)
}

// unit classifies the pfns [lo, hi) of sec's unit ending at unitHi,
// reading their struct pages piecePages at a time. A head page's order and
// hugetlb mark are in the next struct page; a compound head is aligned to
// its size, so its next struct page is always in the same piece, as it is
// always in makedumpfile's 512-entry batch. When a cycle ends within the
// unit (hi < unitHi) the struct page past hi is read too, so that the
// last pfn is classified as it is without cycles.
func (s *scanner) unit(sec kernel.Section, lo, hi, unitHi uint64) error {
	s.hi, s.unitHi = hi, unitHi
	size := s.l.Size
	for p := lo; p < hi; p += piecePages {
		end := min(p+piecePages, hi)
		vaddr := sec.MemMap + (p-sec.StartPFN)*size
		n := int((min(end+1, unitHi) - p) * size)
		buf, err := s.tr.SliceVirt(s.r, vaddr, n, &s.buf)
		if err != nil {
			return fmt.Errorf("read struct pages of pfns %#x-%#x: %w", p, end-1, err)
		}
		// Only the pfns still set: the rest have no data or went with
		// their block (a free block's head takes 2^order pfns at once).
		for pfn := s.nextSet(p, end); pfn < end; pfn = s.nextSet(pfn+1, end) {
			i := (pfn - p) * size
			s.classify(pfn, buf[i:min(i+2*size, uint64(len(buf)))])
		}
	}
	return nil
}

// nextSet is the first pfn of [pfn, end) still set in the bitmap, or end,
// read a word at a time and never past end: in cycles the bitmap holds
// only the cycle's pfns while the scan makes them, as Test reads it.
func (s *scanner) nextSet(pfn, end uint64) uint64 {
	for pfn < end {
		if w := s.m.Word(pfn/64) >> (pfn % 64); w != 0 {
			return min(pfn+uint64(bits.TrailingZeros64(w)), end)
		}
		pfn = (pfn/64 + 1) * 64
	}
	return end
}

// classify applies makedumpfile's rules to one struct page (spec §6.5);
// the first that matches wins.
func (s *scanner) classify(pfn uint64, b []byte) {
	n, class := decide(s.l, s.level, pfn, b)
	if n == 0 {
		return
	}
	s.exclude(pfn, n, classCounters[class])
	if rec := s.k.Record; rec != nil && (class > classUser || n > 1) {
		rec.add(pfn, n, class > classUser)
	}
}

// The classes of excluded pages (decide); the first three a live dump
// revisits (Revisits).
const (
	classFree = iota
	classCache
	classCachePrivate
	classUser
	classHwpoison
	classOffline
)

var classCounters = [...]func(*Counts) *uint64{
	classFree:         freeCounter,
	classCache:        cacheCounter,
	classCachePrivate: cachePrivateCounter,
	classUser:         userCounter,
	classHwpoison:     hwpoisonCounter,
	classOffline:      offlineCounter,
}

// decide is makedumpfile's rules for one struct page b of pfn (and the
// next, for a compound head): how many pages from pfn it leaves out
// (0: none) and as what class.
func decide(l *kernel.PageLayout, level Level, pfn uint64, b []byte) (uint64, int) {
	d := l.Decode(b)
	if l.IsTail(d) {
		return 0, 0
	}
	pages := uint64(1)
	hugetlb := false
	if l.IsHead(d) {
		var order uint64
		order, hugetlb = l.Compound(d, b, pfn)
		pages = 1 << order
	}
	switch {
	case level.Has(ExcludeFree) && l.IsBuddy(d):
		if d.Private >= l.MaxOrder {
			return 0, 0 // an invalid free order: keep the page (makedumpfile warns)
		}
		return 1 << d.Private, classFree
	case level.Has(ExcludeFree) && l.IsUnaccepted(d):
		return 1 << (l.MaxOrder - 1), classFree
	case level.Has(ExcludeCache) && l.IsCache(d) && !l.IsPrivate(d) && !l.IsAnon(d):
		return pages, classCache
	case level.Has(ExcludeCachePri) && l.IsCache(d) && !l.IsAnon(d):
		if l.IsPrivate(d) {
			return pages, classCachePrivate
		}
		return pages, classCache
	case level.Has(ExcludeUser) && (l.IsAnon(d) || hugetlb):
		return pages, classUser
	case l.IsHwpoison(d):
		return 1, classHwpoison
	case l.IsOffline(d):
		return 1, classOffline
	}
	return 0, 0
}

func freeCounter(c *Counts) *uint64         { return &c.Free }
func cacheCounter(c *Counts) *uint64        { return &c.Cache }
func cachePrivateCounter(c *Counts) *uint64 { return &c.CachePrivate }
func userCounter(c *Counts) *uint64         { return &c.User }
func hwpoisonCounter(c *Counts) *uint64     { return &c.Hwpoison }
func offlineCounter(c *Counts) *uint64      { return &c.Offline }

// exclude leaves out [pfn, pfn+n): the part in the pfns being scanned at
// once, the rest as spills (an edge spill up to the unit's end, when a
// cycle ends within it).
func (s *scanner) exclude(pfn, n uint64, counter func(*Counts) *uint64) {
	end := pfn + n
	if end > s.hi {
		if s.hi < s.unitHi {
			s.spills = append(s.spills, spill{s.hi, min(end, s.unitHi), counter, true})
		}
		if end > s.unitHi {
			s.spills = append(s.spills, spill{s.unitHi, end, counter, false})
		}
		end = s.hi
	}
	*counter(&s.counts) += clearCount(s.m, pfn, end)
}
