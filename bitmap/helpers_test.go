package bitmap

// Test-only operations: the tests build expected bitmaps with them; the
// engine never needs them.

// And clears every pfn that is not set in o (which must have the same length).
func (m *Bitmap) And(o *Bitmap) {
	for i, b := range m.blocks {
		switch ob := o.blocks[i]; {
		case b == nil || ob == full:
		case ob == nil:
			m.blocks[i] = nil
		case b == full:
			cp := *ob
			m.blocks[i] = &cp
		default:
			for w := range b {
				b[w] &= ob[w]
			}
		}
	}
}

// ByteLen is the length of the on-disk form: ceil(Len()/8).
func (m *Bitmap) ByteLen() uint64 { return (m.n + 7) / 8 }
