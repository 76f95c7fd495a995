//go:build !purego

package lzo

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestAsmOutputBound gives the assembly block encoder every output length
// from 0 up to what a block needs: it must write the Go encoder's bytes
// when they fit, report newOp = -1 when they do not, and never write a
// byte past len(dst) (the canaries after it, within cap(dst), stay).
func TestAsmOutputBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	text := bytes.Repeat([]byte("crash> bt\nPID: 1 TASK: ffff8880 CPU: 0\n"), 60)
	mixed := make([]byte, 3000)
	for i := range mixed {
		if i%700 < 300 {
			mixed[i] = byte(rng.Uint32())
		}
	}
	long := append(bytes.Repeat([]byte{7}, 1000), make([]byte, 600)...) // long matches
	lits := make([]byte, 2000)                                          // a long literal run first
	for i := range 1500 {
		lits[i] = byte(rng.Uint32())
	}
	copy(lits[1500:], lits[:500])
	var words []byte // short matches at short distances (the two-byte form)
	vocab := []string{"the ", "page ", "frame ", "of ", "kernel ", "dump ", "pfn ", "zone ", "slab ", "cache "}
	for len(words) < 3000 {
		words = append(words, vocab[rng.IntN(len(vocab))]...)
		words = append(words, byte(rng.Uint32()))
	}
	const canary = 0xa5
	var c Compressor
	for _, in := range [][]byte{text, mixed, long, lits, words} {
		clear(c.dict[:])
		want := make([]byte, MaxCompressedLen(len(in)))
		wantOp, wantPending := c.compressBlock(want, 0, in, 0, len(in), 0)
		want = want[:wantOp]
		for k := 0; k <= wantOp+20; k++ {
			buf := bytes.Repeat([]byte{canary}, k+64)
			clear(c.dict[:])
			op, pending := compressBlockAMD64(&c.dict, buf[:k], 0, in, 0)
			switch {
			case k < wantOp && op != -1:
				t.Fatalf("%d-byte input, dst of %d bytes (%d needed): newOp %d, want -1", len(in), k, wantOp, op)
			case k >= wantOp && (op != wantOp || pending != wantPending || !bytes.Equal(buf[:op], want)):
				t.Fatalf("%d-byte input, dst of %d bytes: newOp %d pending %d, want %d %d (bytes equal: %v)", len(in), k, op, pending, wantOp, wantPending, op == wantOp && bytes.Equal(buf[:op], want))
			}
			for i, b := range buf[k:] {
				if b != canary {
					t.Fatalf("%d-byte input, dst of %d bytes: wrote dst[%d], past its end", len(in), k, k+i)
				}
			}
		}
	}
}
