package priority

import "pagepipe/bitmap"

// Order hands out the dumpable pfns in the copy pass's prioritised order
// (pipeline.Pfns): the priority set's first, class by class, each class
// in pfn order, then every other dumpable pfn in pfn order. A batch never
// mixes the two, so a chunk is all priority pages or none, and Priority
// says which (pipeline.PriorityPfns: the flag travels with the chunk).
type Order struct {
	first []uint64
	i     int
	// inFirst: the last batch was priority pages.
	inFirst bool
	set     *bitmap.Bitmap // the dumpable pfns of the priority set
	bulk    *bitmap.Cursor
}

// NewOrder orders dumpable with s's pages first.
func NewOrder(s *Set, dumpable *bitmap.Bitmap) *Order {
	o := &Order{set: bitmap.New(dumpable.Len()), bulk: dumpable.Cursor()}
	for _, c := range s.Classes {
		for _, p := range c.Pfns {
			if p < dumpable.Len() && dumpable.Test(p) && !o.set.Test(p) {
				o.set.Set(p)
				o.first = append(o.first, p)
			}
		}
	}
	return o
}

// Set is the dumpable pfns of the priority set.
func (o *Order) Set() *bitmap.Bitmap { return o.set }

// Len is the number of dumpable pfns of the priority set.
func (o *Order) Len() uint64 { return uint64(len(o.first)) }

// Next appends the next pfns to dst, as many as its capacity takes (fewer
// where the priority set ends); none appended: none are left.
func (o *Order) Next(dst []uint64) []uint64 {
	o.inFirst = o.i < len(o.first)
	if o.inFirst {
		n := copy(dst[len(dst):cap(dst)], o.first[o.i:])
		o.i += n
		return dst[:len(dst)+n]
	}
	for {
		from := len(dst)
		dst = o.bulk.Next(dst)
		if len(dst) == from {
			return dst
		}
		k := from
		for _, p := range dst[from:] {
			if !o.set.Test(p) {
				dst[k] = p
				k++
			}
		}
		dst = dst[:k]
		if len(dst) == cap(dst) {
			return dst
		}
	}
}

// Priority says whether the batch Next returned last is priority pages.
func (o *Order) Priority() bool { return o.inFirst }
