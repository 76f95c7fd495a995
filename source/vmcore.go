package source

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"pagepipe/bitmap"
)

// Vmcore is an open ELF vmcore. Its methods are safe for concurrent use;
// each worker reads pages through its own PageReader.
type Vmcore struct {
	*Info
	// Kcore is the layout of a /proc/kcore-shaped input (a live dump's),
	// nil for a vmcore; its Loads are then only the RAM segments.
	Kcore   *Kcore
	Path    string
	f       *os.File
	size    int64
	extents []extent
	maps    MapStats
	// shared, after MapReads, serves ReadPhys from mmap windows.
	shared *sharedReader
	// keep, after KeepWindows, is how many bytes of windows the readers
	// may hold mapped at once, all together; inUse how many they hold.
	keep, inUse atomic.Int64
	// fileEach: a kcore-shaped input, which every reader opens afresh
	// (readerFile), and whose reads through f take fMu in turn. The
	// kernel's read of /proc/kcore copies each page through one bounce
	// buffer per open file (fs/proc/kcore.c, file->private_data, since
	// 4.19's hardened-usercopy fix) holding only kclist_lock for
	// reading: two reads of one open file at once copy through the same
	// buffer, and one gets the other's page. A live dump saw it: the
	// kernel log's pages held the bytes of pages 74 pfns on.
	fileEach bool
	fMu      sync.Mutex
}

// sharedReader is a PageReader that ReadPhys's callers take turns at.
type sharedReader struct {
	mu sync.Mutex
	r  *PageReader
}

// MapStats counts how the readers' mmap windows fared: Windows mapped,
// and Failed maps, whose bytes were read with pread instead (that window
// only: the next one is mapped again). FirstError is the first failure.
// After KeepWindows, every mapped window's extent is kept too.
type MapStats struct {
	Windows, Failed atomic.Uint64
	firstErr        atomic.Pointer[error]
	keep            atomic.Bool
	mu              sync.Mutex
	spans           []Window
}

// Window is one mapped window: Len bytes of the vmcore file from Off.
type Window struct{ Off, Len uint64 }

// KeepWindows makes the readers keep the extent of every window they map
// from now on (16 bytes a window), for a debug report that shows, on the
// real /proc/vmcore, that no window crosses a PT_LOAD's end.
func (s *MapStats) KeepWindows() { s.keep.Store(true) }

// MappedWindows is every window mapped since KeepWindows, in the order
// they were mapped.
func (s *MapStats) MappedWindows() []Window {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Window(nil), s.spans...)
}

func (s *MapStats) mapped(off, n uint64) {
	s.Windows.Add(1)
	if s.keep.Load() {
		s.mu.Lock()
		s.spans = append(s.spans, Window{off, n})
		s.mu.Unlock()
	}
}

// FirstError is the first map failure, or nil.
func (s *MapStats) FirstError() error {
	if p := s.firstErr.Load(); p != nil {
		return *p
	}
	return nil
}

// MapStats is what the readers' mmap windows did so far.
func (v *Vmcore) MapStats() *MapStats { return &v.maps }

// extent is a run of pfns [start, end) whose pages lie whole and contiguous
// in the file from off on. Pages outside every extent (a partial last page,
// a page split between segments) are assembled byte range by byte range.
type extent struct{ start, end, off uint64 }

// Open opens and parses an ELF vmcore.
func Open(path string) (*Vmcore, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, denied(path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	in, err := ParseELF(f, st.Size())
	if err != nil {
		f.Close()
		if d := denied(path, err); d != err {
			return nil, d
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v := &Vmcore{Info: in, Path: path, f: f, size: st.Size()}
	if in.IsKcore() {
		if v.Kcore, err = TypeKcore(in); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	v.extents = buildExtents(in.Loads, in.pageSize)
	v.fileEach = v.Kcore != nil
	return v, nil
}

// readAt is pread of f, a reader's own file or v's; v's in turn when
// reads of one open file must not overlap (fileEach).
func (v *Vmcore) readAt(f *os.File, p []byte, off int64) error {
	if f == v.f && v.fileEach {
		v.fMu.Lock()
		defer v.fMu.Unlock()
	}
	_, err := f.ReadAt(p, off)
	return err
}

// readerFile is the file a new reader reads: v's, or for a kcore-shaped
// input one opened for it alone (fileEach), so that no two readers'
// reads share the kernel's bounce buffer. own says the reader closes it.
// Where the file cannot be opened again, the reader shares v's, whose
// reads take turns.
func (v *Vmcore) readerFile() (f *os.File, own bool) {
	if !v.fileEach {
		return v.f, false
	}
	f, err := os.Open(v.Path)
	if err != nil {
		return v.f, false
	}
	return f, true
}

// Close unmaps ReadPhys's windows and closes the file.
func (v *Vmcore) Close() error {
	if v.shared != nil {
		v.shared.r.Close()
	}
	return v.f.Close()
}

// KeepWindows lets the page readers keep the windows they have mapped,
// rather than unmap one to map the next, while all of them together hold
// at most bytes: they are unmapped when the vmcore is closed or the
// process exits. Unmapping a window of a process whose other threads run
// on other CPUs interrupts those CPUs to flush their TLBs and waits for
// them (a shootdown); a single-threaded makedumpfile never does. A
// mapped window costs the kernel 8 bytes of page table per 4 KiB page
// and no resident memory, so bytes / 512 is the memory it may take.
func (v *Vmcore) KeepWindows(bytes int64) { v.keep.Store(bytes) }

// MapReads makes ReadPhys read through mmap windows of mapSize bytes, up
// to windows of them mapped at once (the least recently used goes when
// another is needed), as the page readers made with useMmap read pages:
// for /proc/vmcore, where every read() call maps, copies and unmaps old
// memory a page at a time and a window is mapped once (see PreferMmap).
// The page-table walks, the mem_map's discovery and the priority search
// read the kernel's metadata through ReadPhys, a few bytes to a page at a
// time and mostly near what they read before. Call it before any reader
// is used concurrently.
func (v *Vmcore) MapReads(mapSize, windows int) {
	v.shared = &sharedReader{r: v.newReader(mapSize, true, windows)}
}

// Notes returns the PT_NOTE contents and what was found in them.
func (v *Vmcore) Notes() ([]byte, int, uint64, uint64) {
	return v.Info.Notes, v.NrCPUs, v.VmcoreinfoOff, v.VmcoreinfoSize
}

// Pfns is one past the highest pfn of any PT_LOAD.
func (v *Vmcore) Pfns() uint64 { return v.MaxMapnr }

// buildExtents finds, for every pfn (of ps-byte pages), the segment
// makedumpfile would read it from: the first PT_LOAD whose file data holds
// the address. Later segments only fill what earlier ones leave uncovered
// (a kernel-text PT_LOAD that aliases RAM comes first in /proc/vmcore and
// wins).
func buildExtents(loads []Load, ps uint64) []extent {
	var out []extent
	covered := []extent{} // byte ranges claimed so far, as [start,end) in start/end
	for _, l := range loads {
		lo, hi := l.Paddr, l.Paddr+l.FileSize
		for _, piece := range subtract(lo, hi, covered) {
			first := (piece[0] + ps - 1) / ps
			last := piece[1] / ps
			if first < last {
				out = append(out, extent{start: first, end: last, off: l.Offset + first*ps - l.Paddr})
			}
		}
		covered = append(covered, extent{start: lo, end: hi})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// subtract returns [lo, hi) minus the union of the byte ranges in cov.
func subtract(lo, hi uint64, cov []extent) [][2]uint64 {
	pieces := [][2]uint64{{lo, hi}}
	for _, c := range cov {
		var next [][2]uint64
		for _, p := range pieces {
			if c.end <= p[0] || c.start >= p[1] {
				next = append(next, p)
				continue
			}
			if p[0] < c.start {
				next = append(next, [2]uint64{p[0], c.start})
			}
			if c.end < p[1] {
				next = append(next, [2]uint64{c.end, p[1]})
			}
		}
		pieces = next
	}
	return pieces
}

// Bitmaps returns the 1st bitmap (pfns present in memory) and the start of
// the 2nd (pfns with data in the file), exactly as makedumpfile builds
// them:
//
//   - both take each PT_LOAD's pfns from the page holding p_paddr up to
//     the last whole page of p_paddr+p_memsz, and its partial last page
//     with pp.LastPresent (makedumpfile's one-cycle builder, whose 2nd
//     bitmap is a copy of the 1st);
//   - then, PT_LOAD by PT_LOAD, the 2nd bitmap leaves out the pages from
//     the one holding p_paddr+p_filesz (with pp.KeepData, from the next
//     page boundary) to the end of p_memsz, which have no data. Before
//     1.7.6 that takes out a partial last page even where p_filesz covers
//     it, and even where another PT_LOAD holds it.
//
// maxMapnr (at most in.MaxMapnr) cuts both bitmaps: makedumpfile lowers it
// to the end of the kernel's mem_map when it finds one.
func (in *Info) Bitmaps(maxMapnr uint64, pp PartialPages) (present, dumpable *bitmap.Bitmap) {
	maxMapnr = min(maxMapnr, in.MaxMapnr)
	ps := in.pageSize
	present, dumpable = bitmap.New(maxMapnr), bitmap.New(maxMapnr)
	for _, l := range in.Loads {
		start, end := l.Paddr/ps, (l.Paddr+l.MemSize)/ps
		if pp.LastPresent && (l.Paddr+l.MemSize)%ps != 0 {
			end++
		}
		present.SetRange(start, end)
		dumpable.SetRange(start, end)
	}
	for _, l := range in.Loads {
		from := (l.Paddr + l.FileSize) / ps
		if pp.KeepData {
			from = (l.Paddr + l.FileSize + ps - 1) / ps
		}
		dumpable.ClearRange(from, (l.Paddr+l.MemSize+ps-1)/ps)
	}
	return present, dumpable
}

// ReadPhys reads physical memory at paddr into p. Bytes that no PT_LOAD
// holds in the file read as zero, as makedumpfile's read path fills gaps.
// After MapReads it reads through mmap windows.
func (v *Vmcore) ReadPhys(paddr uint64, p []byte) error {
	if s := v.shared; s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		b, err := s.r.Slice(paddr, len(p))
		if err != nil {
			return err
		}
		copy(p, b)
		return nil
	}
	return v.readPhys(paddr, p)
}

// readPhys is ReadPhys with pread of v's file.
func (v *Vmcore) readPhys(paddr uint64, p []byte) error { return v.readPhysFrom(v.f, paddr, p) }

// readPhysFrom is readPhys with pread of f.
func (v *Vmcore) readPhysFrom(f *os.File, paddr uint64, p []byte) error {
	for len(p) > 0 {
		n, off, ok := v.locate(paddr, uint64(len(p)))
		if ok {
			if err := v.readAt(f, p[:n], int64(off)); err != nil {
				return fmt.Errorf("read physical %#x from %s offset %#x: %w", paddr, v.Path, off, err)
			}
		} else {
			clear(p[:n])
		}
		p, paddr = p[n:], paddr+n
	}
	return nil
}

// locate finds the first PT_LOAD holding file data for paddr and returns how
// many of the next want bytes it holds contiguously and their file offset;
// when none does, n bytes up to the next segment start read as zero.
func (v *Vmcore) locate(paddr, want uint64) (n, off uint64, ok bool) {
	for _, l := range v.Loads {
		if paddr >= l.Paddr && paddr-l.Paddr < l.FileSize {
			return min(want, l.FileSize-(paddr-l.Paddr)), l.Offset + paddr - l.Paddr, true
		}
	}
	n = want
	for _, l := range v.Loads {
		if l.FileSize > 0 && l.Paddr > paddr {
			n = min(n, l.Paddr-paddr)
		}
	}
	return n, 0, false
}

// findExtent returns the extent holding pfn, if any.
func (v *Vmcore) findExtent(pfn uint64) (extent, bool) {
	i := sort.Search(len(v.extents), func(i int) bool { return v.extents[i].end > pfn })
	if i < len(v.extents) && v.extents[i].start <= pfn {
		return v.extents[i], true
	}
	return extent{}, false
}

// PageReader serves pages to one worker. With mmap it keeps read-only
// windows of the file mapped (one for a worker, whose pfns advance; more
// for ReadPhys after MapReads) and maps another, in place of the least
// recently used, when a read falls outside them; the page slices it
// returns point into a window and stay valid only until the next call. Not
// safe for concurrent use.
type PageReader struct {
	v *Vmcore
	// f is the file it reads: v's, or its own (ownFile) for a kcore.
	f       *os.File
	ownFile bool
	mapSize uint64
	wins    []window // at most maxWins
	maxWins int
	tick    uint64
	useMmap bool
	buf     []byte
	// pread's read-ahead: ra holds the file bytes from raOff on.
	ra, raBuf []byte
	raOff     uint64
	ps        uint64 // the page size
}

// readAhead is how much one pread takes when not mapping: 64 KiB (or one
// page, when pages are larger), within the extent, so the next pages of a
// run come from the same read.
const readAhead = 64 << 10

// PreferMmap reports whether path is best read through mmap: /proc/vmcore
// is (its read() path maps and copies page by page, and mmap has served it
// since Linux 3.11), a file in the page cache is not — there one pread per
// 64 KiB costs less than faulting the pages of a mapping in (measured:
// docs/benchmarks.md).
func PreferMmap(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}

// DefaultMapSize is the mmap window, as makedumpfile's fixed MAP_REGION.
const DefaultMapSize = 4 << 20

// MetadataMapSize and MetadataWindows are ReadPhys's windows after
// MapReads, for the kernel's metadata.
const (
	MetadataMapSize = 1 << 20
	MetadataWindows = 8
)

// window is a mapped piece of the file: b holds its bytes from off on;
// used is when it last served a read (the reader's tick).
type window struct {
	b         []byte
	off, used uint64
}

// NewReader returns a page reader with mmap windows of mapSize bytes (a
// multiple of the page size), or plain pread when useMmap is false.
func (v *Vmcore) NewReader(mapSize int, useMmap bool) Reader {
	return v.newReader(mapSize, useMmap, 1)
}

func (v *Vmcore) newReader(mapSize int, useMmap bool, windows int) *PageReader {
	ps := v.pageSize
	if uint64(mapSize) < ps {
		mapSize = max(DefaultMapSize, int(ps))
	}
	f, own := v.readerFile()
	return &PageReader{v: v, f: f, ownFile: own, mapSize: uint64(mapSize), maxWins: max(windows, 1), useMmap: useMmap, buf: make([]byte, ps), ps: ps}
}

// Page returns the page of pfn (PageSize bytes).
func (r *PageReader) Page(pfn uint64) ([]byte, error) {
	b, err := r.Slice(pfn*r.ps, int(r.ps))
	if err != nil {
		return nil, fmt.Errorf("pfn %#x: %w", pfn, err)
	}
	return b, nil
}

// Slice returns n bytes of physical memory from paddr: straight from the
// mmap window when the range lies whole in one PT_LOAD's file data (no
// copy), else read into the reader's buffer, gaps as zeros. The slice is
// valid until the next call.
func (r *PageReader) Slice(paddr uint64, n int) ([]byte, error) {
	ps := r.ps
	e, ok := r.v.findExtent(paddr / ps)
	if !ok || paddr+uint64(n) > e.end*ps {
		return r.read(paddr, n)
	}
	off := e.off + paddr - e.start*ps
	if !r.useMmap {
		if uint64(n) <= ps {
			// Read ahead within the extent: one pread serves the next
			// pages too.
			if r.ra != nil && off >= r.raOff && off+uint64(n) <= r.raOff+uint64(len(r.ra)) {
				return r.ra[off-r.raOff : off-r.raOff+uint64(n)], nil
			}
			want := min(uint64(readAhead), e.end*ps-paddr)
			want = max(want, uint64(n))
			if cap(r.raBuf) < int(want) {
				r.raBuf = make([]byte, max(readAhead, want))
			}
			if err := r.v.readAt(r.f, r.raBuf[:want], int64(off)); err != nil {
				return nil, fmt.Errorf("read physical %#x at offset %#x of %s: %w", paddr, off, r.v.Path, err)
			}
			r.ra, r.raOff = r.raBuf[:want], off
			return r.ra[:n], nil
		}
		if err := r.v.readAt(r.f, r.buffer(n), int64(off)); err != nil {
			return nil, fmt.Errorf("read physical %#x at offset %#x of %s: %w", paddr, off, r.v.Path, err)
		}
		return r.buf[:n], nil
	}
	r.tick++
	for i := range r.wins {
		if w := &r.wins[i]; off >= w.off && off+uint64(n) <= w.off+uint64(len(w.b)) {
			w.used = r.tick
			return w.b[off-w.off : off-w.off+uint64(n)], nil
		}
	}
	w, err := r.remap(e, off, uint64(n))
	if err != nil {
		// Read what this window would have held; the next one is
		// mapped again (makedumpfile, too, falls back to read()).
		r.v.maps.Failed.Add(1)
		r.v.maps.firstErr.CompareAndSwap(nil, &err)
		if err := r.v.readAt(r.f, r.buffer(n), int64(off)); err != nil {
			return nil, fmt.Errorf("read physical %#x at offset %#x of %s: %w", paddr, off, r.v.Path, err)
		}
		return r.buf[:n], nil
	}
	return w.b[off-w.off : off-w.off+uint64(n)], nil
}

// SlicePhys is Slice, for the kernel package's readers.
func (r *PageReader) SlicePhys(paddr uint64, n int) ([]byte, error) { return r.Slice(paddr, n) }

func (r *PageReader) read(paddr uint64, n int) ([]byte, error) {
	b := r.buffer(n)
	if err := r.v.readPhysFrom(r.f, paddr, b); err != nil {
		return nil, err
	}
	return b, nil
}

func (r *PageReader) buffer(n int) []byte {
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	return r.buf
}

var errNoMap = errors.New("cannot map")

// remap maps a window of the file holding [off, off+n), which lies in
// extent e, in place of the least recently used one when maxWins are
// mapped: mapSize bytes from off's page, but never past the end of e's
// file data. A window that ran on into the next PT_LOAD's bytes would make
// the kernel's mmap_vmcore remap it piece by piece from different old
// memory, which fails (EAGAIN) when another worker maps the same memory
// with another memory type, or maps it uncached. If the window cannot be
// mapped, the smallest one that holds the range is tried before giving up.
func (r *PageReader) remap(e extent, off, n uint64) (*window, error) {
	// Within KeepWindows' budget a reader keeps what it mapped; past it,
	// or at its own count, it unmaps its least recently used window.
	for len(r.wins) > 0 && (len(r.wins) >= r.maxWins && r.v.keep.Load() == 0 ||
		r.v.keep.Load() > 0 && r.v.inUse.Load()+int64(max(r.mapSize, n)) > r.v.keep.Load()) {
		lru := 0
		for i, w := range r.wins {
			if w.used < r.wins[lru].used {
				lru = i
			}
		}
		r.drop(lru)
	}
	osPage := uint64(os.Getpagesize())
	start := off &^ (osPage - 1)
	end := e.off + (e.end-e.start)*r.ps // e's file data end
	end = min((end+osPage-1)&^(osPage-1), uint64(r.v.size))
	need := off + n
	if need > end {
		return nil, errNoMap
	}
	var err error
	for _, stop := range []uint64{min(start+max(r.mapSize, need-start), end), min((need+osPage-1)&^(osPage-1), end)} {
		var b []byte
		if b, err = unix.Mmap(int(r.f.Fd()), int64(start), int(stop-start), unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_POPULATE); err == nil {
			_ = unix.Madvise(b, unix.MADV_SEQUENTIAL)
			r.wins = append(r.wins, window{b: b, off: start, used: r.tick})
			r.v.inUse.Add(int64(len(b)))
			r.v.maps.mapped(start, stop-start)
			return &r.wins[len(r.wins)-1], nil
		}
	}
	return nil, err
}

// drop unmaps window i.
func (r *PageReader) drop(i int) {
	_ = unix.Munmap(r.wins[i].b)
	r.v.inUse.Add(-int64(len(r.wins[i].b)))
	r.wins[i] = r.wins[len(r.wins)-1]
	r.wins = r.wins[:len(r.wins)-1]
}

// Close unmaps the windows and closes the reader's own file.
func (r *PageReader) Close() {
	for len(r.wins) > 0 {
		r.drop(len(r.wins) - 1)
	}
	if r.ownFile {
		r.f.Close()
		r.f, r.ownFile = r.v.f, false
	}
}
