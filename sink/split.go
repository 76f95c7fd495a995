package sink

import (
	"errors"
	"fmt"
	"sort"

	"pagepipe/bitmap"
	"pagepipe/chunk"
)

// SplitBounds chooses the pfn ranges of an n-way split dump (--split), as
// makedumpfile does: the pfns are cut into splitblocks of blockPfns pfns
// (aligned at multiples of blockPfns), and each file but the last takes
// whole splitblocks until it holds at least num_dumpable/n dumpable pages;
// the last file takes the rest, up to maxMapnr. File i holds the pfns
// [b[i], b[i+1]) of the returned n+1 boundaries. A file can be empty (when
// the splitblocks before it already hold everything): it still gets the
// headers and bitmaps.
func SplitBounds(dumpable *bitmap.Bitmap, maxMapnr, blockPfns uint64, n int) ([]uint64, error) {
	if n < 1 {
		return nil, fmt.Errorf("split into %d files", n)
	}
	if blockPfns == 0 {
		return nil, errors.New("split: splitblock of 0 pages")
	}
	per := dumpable.Count(0, maxMapnr) / uint64(n)
	b := make([]uint64, n+1)
	end := uint64(0)
	for i := 1; i < n; i++ {
		for got := uint64(0); end < maxMapnr && got < per; {
			next := min((end/blockPfns+1)*blockPfns, maxMapnr)
			got += dumpable.Count(end, next)
			end = next
		}
		b[i] = end
	}
	b[n] = maxMapnr
	return b, nil
}

// PartError is an error writing split file Part (0-based).
type PartError struct {
	Part int
	Err  error
}

func (e *PartError) Error() string { return fmt.Sprintf("split file %d: %v", e.Part+1, e.Err) }
func (e *PartError) Unwrap() error { return e.Err }

// Split writes one dump over several kdump files (--split): it takes the
// ordered page stream of the whole dump, as the pipeline produces it, and
// hands each part's pages to that part's Kdump writer, moving on to the
// next file where the pfn range ends. So one parallel copy pass writes
// every part. Each part is a Kdump with Meta.Split set: the same main
// header, the whole machine's bitmaps, the descriptor area reserved for
// every dumpable page of the dump, its own zero page, and only its own
// descriptors and data. Every part's headers and bitmaps are written at
// the start (so that a dump stopped early leaves every file valid, see
// Abort), but only the part being filled holds buffers.
type Split struct {
	ks     []*Kdump
	bounds []uint64 // part i holds the pfns [bounds[i], bounds[i+1])
	left   []uint64 // dumpable pages each part still takes
	cur    int      // the part the bulk is being written to
	prio   bool     // SetPriority was called
	// incomplete are the parts Abort left incomplete.
	incomplete []int
}

// NewSplit starts a split dump over outs, part i holding the pfns
// [bounds[i], bounds[i+1]) (see SplitBounds); m describes the whole dump.
func NewSplit(outs []Output, m *Meta, bounds []uint64) (*Split, error) {
	if len(outs) == 0 || len(bounds) != len(outs)+1 || bounds[0] != 0 || bounds[len(outs)] != m.MaxMapnr {
		return nil, fmt.Errorf("split: %d boundaries for %d files of %d pfns", len(bounds), len(outs), m.MaxMapnr)
	}
	s := &Split{bounds: bounds, left: make([]uint64, len(outs))}
	var total uint64
	for i := range outs {
		if bounds[i] > bounds[i+1] {
			return nil, fmt.Errorf("split: file %d ends at pfn %d before it starts at %d", i+1, bounds[i+1], bounds[i])
		}
		s.left[i] = m.Dumpable.Count(bounds[i], bounds[i+1])
		total += s.left[i]
	}
	if total != m.NumDumpable {
		return nil, fmt.Errorf("split: the bitmap holds %d dumpable pages, the dump %d", total, m.NumDumpable)
	}
	for i, out := range outs {
		pm := *m
		pm.Split = &SplitRange{Start: bounds[i], End: bounds[i+1]}
		k, err := NewKdump(out, &pm)
		if err != nil {
			return nil, &PartError{i, err}
		}
		s.ks = append(s.ks, k)
	}
	return s, nil
}

// SetPriority prioritises every part (Kdump.SetPriority): the copy pass
// hands over the priority pages of the whole dump first, and each goes to
// the part its pfn falls in, data and descriptor at once; then the bulk,
// in pfn order. A split dump stopped early so keeps, in each part, the
// priority pages that landed. Call it before the first chunk.
func (s *Split) SetPriority(set *bitmap.Bitmap) error {
	for i, k := range s.ks {
		if err := k.SetPriority(set); err != nil {
			return &PartError{i, err}
		}
	}
	s.prio = true
	return nil
}

// Written returns the bytes written to all parts so far.
func (s *Split) Written() uint64 {
	var n uint64
	for _, k := range s.ks {
		n += k.Written()
	}
	return n
}

// next closes the part the bulk is being written to and moves on to the
// next one.
func (s *Split) next() error {
	if err := s.ks[s.cur].Close(); err != nil {
		return &PartError{s.cur, err}
	}
	s.cur++
	return nil
}

// WriteChunk takes the next chunk of the whole dump, in order (see
// Kdump.WriteChunk), and writes each of its pages to its part: a priority
// chunk's pages each to the part that holds its pfn, the bulk's in pfn
// order, moving on to the next part where one is full.
func (s *Split) WriteChunk(c chunk.Chunk) error {
	if s.prio && c.Priority {
		return s.writePriority(c)
	}
	for len(c.Pages) > 0 {
		for s.left[s.cur] == 0 {
			if s.cur == len(s.ks)-1 {
				return fmt.Errorf("split: %d pages more than the bitmap holds", len(c.Pages))
			}
			if err := s.next(); err != nil {
				return err
			}
		}
		n := min(uint64(len(c.Pages)), s.left[s.cur])
		part, rest, err := cut(c, int(n))
		if err != nil {
			return err
		}
		if err := s.ks[s.cur].WriteChunk(part); err != nil {
			return &PartError{s.cur, err}
		}
		c = rest
		s.left[s.cur] -= n
	}
	return nil
}

// writePriority writes a priority chunk, each run of its pages that falls
// in one part to that part (Kdump.WriteChunk, which needs no buffers for
// it: the parts are not filled one at a time here).
func (s *Split) writePriority(c chunk.Chunk) error {
	for len(c.Pages) > 0 {
		pfns := c.Pfns
		i := sort.Search(len(s.ks), func(i int) bool { return s.bounds[i+1] > pfns[0] })
		if i == len(s.ks) {
			return fmt.Errorf("split: pfn %#x past the last part", pfns[0])
		}
		n := 1
		for n < len(pfns) && pfns[n] >= s.bounds[i] && pfns[n] < s.bounds[i+1] {
			n++
		}
		if uint64(n) > s.left[i] {
			return fmt.Errorf("split: %d pages more than part %d holds", n, i+1)
		}
		part, rest, err := cut(c, n)
		if err != nil {
			return err
		}
		if err := s.ks[i].WriteChunk(part); err != nil {
			return &PartError{i, err}
		}
		c = rest
		s.left[i] -= uint64(n)
	}
	return nil
}

// cut splits c after its first n pages (its pfns too, where it has them).
func cut(c chunk.Chunk, n int) (head, rest chunk.Chunk, err error) {
	size := chunk.DataLen(c.Pages[:n])
	if size > len(c.Data) {
		return head, rest, fmt.Errorf("split: pages of %d bytes with %d bytes of data", size, len(c.Data))
	}
	head, rest = c, c
	head.Pages, rest.Pages = c.Pages[:n], c.Pages[n:]
	head.Data, rest.Data = c.Data[:size], c.Data[size:]
	if c.Pfns != nil {
		head.Pfns, rest.Pfns = c.Pfns[:n], c.Pfns[n:]
	}
	return head, rest, nil
}

// Close finishes the part being written and the parts after it that hold
// no pages. It fails if the stream ended before every dumpable page was
// written.
func (s *Split) Close() error {
	for s.cur < len(s.ks) {
		if s.left[s.cur] != 0 {
			return &PartError{s.cur, fmt.Errorf("%d pages were never written", s.left[s.cur])}
		}
		if err := s.next(); err != nil {
			return err
		}
	}
	return nil
}

// Abort finishes a split dump that cannot be completed (disk full, a
// signal) so that every file stays valid: the parts already closed stay
// as they are, complete; so does a later part that got all its pages (or
// holds none) if it can still be closed; every other part is finished as
// Kdump.Abort finishes a dump, its lost pages taken out of its 2nd bitmap
// within its own pfn range and its header marked INCOMPLETE (a
// prioritised part keeps the priority pages that landed in it). It
// returns the first error that stopped it from finishing one; Incomplete
// then names the parts left incomplete.
func (s *Split) Abort() (err error) {
	for i := s.cur; i < len(s.ks); i++ {
		k := s.ks[i]
		if s.left[i] == 0 && k.Close() == nil {
			continue
		}
		s.incomplete = append(s.incomplete, i)
		if aerr := k.Abort(); aerr != nil && err == nil {
			err = &PartError{i, aerr}
		}
	}
	s.cur = len(s.ks)
	return err
}

// Incomplete returns the indexes of the parts Abort left incomplete.
func (s *Split) Incomplete() []int { return s.incomplete }
