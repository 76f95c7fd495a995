// Package reorder puts back in order what is numbered in order but
// arrives in any order: the copy pass's chunks on their way to the writer
// (pipeline) and a placed kdump file's descriptors on their way to the
// disk (sink.PlacedKdump).
package reorder

// Buffer holds items numbered 0, 1, 2, … that arrive in any order and
// hands them back in that order. Its ring holds the items put and not yet
// taken, at their number modulo its size; it grows (doubling) only when
// an item comes further ahead of the next one than it reaches, so a
// buffer sized for the items in flight (New) never allocates again. The
// zero Buffer is ready to use. It is not safe for concurrent use.
type Buffer[T any] struct {
	next uint64 // the number of the item Next hands back next
	ring []slot[T]
}

type slot[T any] struct {
	v   T
	seq uint64
	ok  bool
}

// New returns a Buffer whose ring holds n items.
func New[T any](n int) *Buffer[T] {
	return &Buffer[T]{ring: make([]slot[T], max(n, 1))}
}

// Put holds item seq, which must be neither taken nor held already.
func (b *Buffer[T]) Put(seq uint64, v T) {
	if seq < b.next {
		panic("reorder: an item put again after it was taken")
	}
	for seq-b.next >= uint64(len(b.ring)) {
		b.grow()
	}
	s := &b.ring[seq%uint64(len(b.ring))]
	if s.ok {
		panic("reorder: an item put twice")
	}
	*s = slot[T]{v: v, seq: seq, ok: true}
}

// Next takes the next item in order, if it arrived.
func (b *Buffer[T]) Next() (v T, ok bool) {
	if len(b.ring) == 0 {
		return v, false
	}
	s := &b.ring[b.next%uint64(len(b.ring))]
	if !s.ok || s.seq != b.next {
		return v, false
	}
	v = s.v
	*s = slot[T]{}
	b.next++
	return v, true
}

// grow doubles the ring, moving each item held to its new place.
func (b *Buffer[T]) grow() {
	ring := make([]slot[T], max(2*len(b.ring), 8))
	for _, s := range b.ring {
		if s.ok {
			ring[s.seq%uint64(len(ring))] = s
		}
	}
	b.ring = ring
}
