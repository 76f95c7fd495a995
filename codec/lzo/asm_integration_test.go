//go:build integration

package lzo_test

import (
	"runtime/debug"
	"testing"

	"pagepipe/codec/lzo"
	"pagepipe/internal/realsample"
)

// TestAsmSameAsGoRealPages compares the two encoders on every page of the
// real-page sample that BenchmarkRealPages (package codec) times.
func TestAsmSameAsGoRealPages(t *testing.T) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	g := newGuarded(t, pageSize)
	var c lzo.Compressor
	for _, p := range realsample.Get(t).Pages {
		checkSameAsGo(t, &c, g, p)
	}
}
