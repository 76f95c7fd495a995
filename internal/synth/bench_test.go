package synth

import (
	"path/filepath"
	"testing"
)

// discardAt is an io.WriterAt that drops everything: generation speed
// without the page cache.
type discardAt struct{}

func (discardAt) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }

// BenchmarkWrite reports MB/s of memory (segment data) written.
func BenchmarkWrite(b *testing.B) {
	s := Default(256)
	b.Run("file-sparse", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "vmcore")
		b.SetBytes(int64(s.DataBytes()))
		for b.Loop() {
			if err := WriteFile(path, s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("discard-dense", func(b *testing.B) {
		b.SetBytes(int64(s.DataBytes()))
		for b.Loop() {
			if err := Write(discardAt{}, s); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPage reports the generation cost of one page of each kind.
func BenchmarkPage(b *testing.B) {
	buf := make([]byte, PageSize)
	for _, k := range []Kind{Zero, Text, Repetitive, Random} {
		b.Run(k.String(), func(b *testing.B) {
			b.SetBytes(PageSize)
			pfn := uint64(0)
			for b.Loop() {
				fill(buf, k, 1, pfn)
				pfn++
			}
		})
	}
}
