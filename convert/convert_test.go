package convert

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"pagepipe/kdumpfmt"
)

// memFile is an io.WriterAt in memory.
type memFile struct{ b []byte }

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(f.b) {
		f.b = append(f.b, make([]byte, end-len(f.b))...)
	}
	return copy(f.b[off:], p), nil
}

// stream is a flattened stream of two records and its end marker.
func stream() []byte {
	var s bytes.Buffer
	s.Write(kdumpfmt.FlatHeader())
	var h [kdumpfmt.FlatRecordSize]byte
	for _, r := range []struct {
		off  int64
		data string
	}{{5, "world"}, {0, "hello"}} {
		kdumpfmt.PutFlatRecord(h[:], r.off, int64(len(r.data)))
		s.Write(h[:])
		s.WriteString(r.data)
	}
	kdumpfmt.PutFlatRecord(h[:], -1, -1)
	s.Write(h[:])
	return s.Bytes()
}

// Rearrange writes each record at its offset; a stream cut short is a
// CutError whose complete records landed; a context that is done stops
// it with the context's error.
func TestRearrange(t *testing.T) {
	s := stream()
	var f memFile
	if n, err := Rearrange(context.Background(), bytes.NewReader(s), &f); err != nil || n != 10 || string(f.b) != "helloworld" {
		t.Fatalf("rearranged %d bytes %q, %v", n, f.b, err)
	}
	f = memFile{}
	_, err := Rearrange(context.Background(), bytes.NewReader(s[:len(s)-16-3]), &f)
	var cut *kdumpfmt.CutError
	if !errors.As(err, &cut) || cut.Records != 1 || cut.End != 10 || string(f.b) != "\x00\x00\x00\x00\x00world" {
		t.Fatalf("cut stream: %v, file %q", err, f.b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Rearrange(ctx, bytes.NewReader(s), &memFile{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
