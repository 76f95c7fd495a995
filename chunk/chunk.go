// Package chunk is what the copy pass hands its writers: a run of pages in
// the pass's order, each stored compressed, raw or as the shared zero page,
// with the flag that says whether they are priority pages. The pipeline
// makes chunks and the sinks write them; neither imports the other, both
// import this leaf.
package chunk

import "encoding/binary"

// Page is one page as a worker stored it: its descriptor before the file
// gives it an offset.
type Page struct {
	Size  uint32 // bytes of data for this page in the chunk's data
	Flags uint32 // compression flag, 0 raw
	Zero  bool   // use the shared zero page; no data
}

// Chunk is consecutive pages of the copy pass's order: Pfns[i] is the pfn
// of Pages[i], whose data, if any, comes next in Data.
type Chunk struct {
	Pfns  []uint64
	Pages []Page
	Data  []byte
	// Priority says every page of the chunk is a priority page
	// (--priority), handed over before the bulk; false, none is. A chunk
	// never mixes the two (priority.Order cuts its batches so), and the
	// flag travels with it so that no writer has to find it out again.
	Priority bool
}

// DataLen is the bytes of data of pages (the zero pages have none).
func DataLen(pages []Page) int {
	n := 0
	for _, p := range pages {
		if !p.Zero {
			n += int(p.Size)
		}
	}
	return n
}

// Place is where a chunk goes in a file whose chunks the workers write
// themselves (a kdump file, sink.PlacedKdump): its number in order and the
// file offsets of its first descriptor and first data byte, handed out in
// order.
type Place struct {
	Seq     uint64
	DescOff uint64
	DataOff uint64
}

// IsZero reports whether page is all zero bytes. It ORs 64-bit words, four
// at a time: the check runs on every copied page, so it must run at memory
// speed.
func IsZero(page []byte) bool {
	le := binary.LittleEndian
	for len(page) >= 32 {
		if le.Uint64(page)|le.Uint64(page[8:])|le.Uint64(page[16:])|le.Uint64(page[24:]) != 0 {
			return false
		}
		page = page[32:]
	}
	for _, c := range page {
		if c != 0 {
			return false
		}
	}
	return true
}
