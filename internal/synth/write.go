package synth

import (
	"errors"
	"io"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
)

// chunkSize is the unit of work and of buffering: large enough that
// per-chunk costs vanish, small enough that workers × chunkSize is
// nothing next to the image; a multiple of every page size.
const chunkSize = 4 << 20

// Write writes the vmcore described by s to w, every byte of [0, Size)
// (zero pages and padding included), so any io.WriterAt will do, even one
// whose unwritten bytes are not zero. It streams: memory use is a few
// chunks per CPU, whatever the image size. Chunks are written
// concurrently at non-overlapping offsets, which io.WriterAt permits.
func Write(w io.WriterAt, s Spec) error {
	return write(w, s, false)
}

// WriteFile writes the vmcore described by s to a new regular file at
// path, replacing any regular file there, as a sparse file: zero pages
// and padding are left as holes, which makes mostly-empty multi-GiB
// images cheap. The bytes read back are the same as Write's. A path that
// exists and is not a regular file (a FIFO, a device) is written densely
// in place.
//
// An existing regular file is removed rather than truncated: on ext4,
// truncating a file and rewriting it (auto_da_alloc) forces its data to
// disk on close, which made regenerating an image 10x slower.
func WriteFile(path string, s Spec) (err error) {
	g, err := GeometryOf(s)
	if err != nil {
		return err
	}
	sparse := true
	if fi, lerr := os.Lstat(path); lerr == nil {
		if fi.Mode().IsRegular() {
			if err := os.Remove(path); err != nil {
				return err
			}
		} else {
			sparse = false
		}
	}
	var f *os.File
	if sparse {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	} else {
		f, err = os.OpenFile(path, os.O_WRONLY, 0)
	}
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if !sparse {
		return write(f, s, false)
	}
	if err := f.Truncate(g.Size); err != nil {
		return err
	}
	return write(f, s, true)
}

// chunk is a piece of one segment's file data: physical [lo, hi).
type chunk struct {
	seg    int
	lo, hi uint64
}

func write(w io.WriterAt, s Spec, sparse bool) error {
	g, err := GeometryOf(s)
	if err != nil {
		return err
	}
	s = kernelView(&s)
	hdr := headers(&s, &g)
	notes, _ := buildNotes(&s)
	fixed := []struct {
		off int64
		b   []byte
	}{{0, hdr}, {g.NoteOff, notes}}
	if s.Layout == QEMU {
		fixed = append(fixed, struct {
			off int64
			b   []byte
		}{g.StrtabOff, []byte(shstrtab)})
	}
	for _, f := range fixed {
		if _, err := w.WriteAt(f.b, f.off); err != nil {
			return err
		}
	}
	if !sparse {
		// Zero whatever no piece covers: gaps between header, notes and
		// segments, and around partial pages.
		covered := make([][2]int64, 0, len(fixed)+len(s.Segments))
		for _, f := range fixed {
			covered = append(covered, [2]int64{f.off, f.off + int64(len(f.b))})
		}
		for i, sg := range s.Segments {
			covered = append(covered, [2]int64{g.LoadOff[i], g.LoadOff[i] + int64(sg.FileSize)})
		}
		if err := zeroGaps(w, covered, g.Size); err != nil {
			return err
		}
	}

	var chunks []chunk
	for i, sg := range s.Segments {
		for lo := sg.Paddr; lo < sg.End(); {
			hi := min(lo&^(s.PageBytes()-1)+chunkSize, sg.End())
			chunks = append(chunks, chunk{i, lo, hi})
			lo = hi
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(chunks))
	var (
		next   atomic.Int64
		failed atomic.Bool
		wg     sync.WaitGroup
		errMu  sync.Mutex
		first  error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, chunkSize)
			pg := newPager(&s)
			for !failed.Load() {
				n := int(next.Add(1) - 1)
				if n >= len(chunks) {
					return
				}
				if err := writeChunk(w, &s, &g, chunks[n], buf, sparse, pg); err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// writeChunk generates the pages of c into buf through the worker's pager
// (page-aligned: buf[0] is the first byte of the page holding c.lo) and
// writes the part within the segment. When sparse, zero pages are neither generated nor written: the
// pending run of non-zero pages is flushed and the zero page stays a hole.
func writeChunk(w io.WriterAt, s *Spec, g *Geometry, c chunk, buf []byte, sparse bool, pg pager) error {
	sg := s.Segments[c.seg]
	ps := s.PageBytes()
	base := c.lo &^ (ps - 1)
	runLo := c.lo // start of the pending, not yet written range
	flush := func(hi uint64) error {
		if hi <= runLo {
			return nil
		}
		_, err := w.WriteAt(buf[runLo-base:hi-base], g.LoadOff[c.seg]+int64(runLo-sg.Paddr))
		return err
	}
	for addr := base; addr < c.hi; addr += ps {
		pfn := addr / ps
		k := pg.kind(pfn)
		if sparse && k == Zero {
			if err := flush(max(addr, c.lo)); err != nil {
				return err
			}
			runLo = min(addr+ps, c.hi)
			continue
		}
		pg.fill(buf[addr-base:addr-base+ps], pfn, k)
	}
	return flush(c.hi)
}

// zeroGaps writes zeros over [0, size) minus the covered ranges.
func zeroGaps(w io.WriterAt, covered [][2]int64, size int64) error {
	sort.Slice(covered, func(i, j int) bool { return covered[i][0] < covered[j][0] })
	var zeros []byte
	pos := int64(0)
	gap := func(lo, hi int64) error {
		for lo < hi {
			n := min(hi-lo, 1<<20)
			if int64(len(zeros)) < n {
				zeros = make([]byte, n)
			}
			if _, err := w.WriteAt(zeros[:n], lo); err != nil {
				return err
			}
			lo += n
		}
		return nil
	}
	for _, c := range covered {
		if c[0] > pos {
			if err := gap(pos, c[0]); err != nil {
				return err
			}
		}
		pos = max(pos, c[1])
	}
	if pos > size {
		return errors.New("synth: internal error: layout exceeds file size")
	}
	return gap(pos, size)
}
