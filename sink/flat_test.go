package sink

import (
	"bytes"
	"testing"

	"pagepipe/kdumpfmt"
)

// Records small and large (written past the buffer) come out in order,
// each header before its bytes, and the stream ends with the end marker.
func TestFlatRecordsInOrder(t *testing.T) {
	var buf bytes.Buffer
	f, err := NewFlat(&buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		off  int64
		data []byte
	}
	var recs []rec
	for i, n := range []int{10, directWrite, 20, 1<<20 + 3, 7, directWrite - 1} {
		r := rec{int64(i) << 30, bytes.Repeat([]byte{byte(i + 1)}, n)}
		recs = append(recs, r)
		if _, err := f.WriteAt(r.data, r.off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if !bytes.Equal(b[:len(kdumpfmt.FlatHeader())], kdumpfmt.FlatHeader()) {
		t.Fatal("no flattened header")
	}
	b = b[len(kdumpfmt.FlatHeader()):]
	for i, r := range recs {
		off, size, end := kdumpfmt.FlatRecord(b)
		if end || off != r.off || size != int64(len(r.data)) {
			t.Fatalf("record %d: offset %d size %d end %v, want %d %d", i, off, size, end, r.off, len(r.data))
		}
		b = b[kdumpfmt.FlatRecordSize:]
		if !bytes.Equal(b[:size], r.data) {
			t.Fatalf("record %d: bytes differ", i)
		}
		b = b[size:]
	}
	if _, _, end := kdumpfmt.FlatRecord(b); !end || len(b) != kdumpfmt.FlatRecordSize {
		t.Errorf("the stream ends with %d bytes, not the end marker", len(b))
	}
}
