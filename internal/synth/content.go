package synth

import (
	"encoding/binary"
	"math/bits"
	"sort"
)

// Salts keep the hash streams for different decisions independent.
const (
	saltRun uint64 = iota + 1
	saltKind
	saltPage
	saltNote
)

// mix64 is the splitmix64 finaliser: a cheap bijection with good
// avalanche, enough to turn (seed, pfn) into independent-looking keys.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// key hashes (seed, n, salt) to 64 bits.
func key(seed, n, salt uint64) uint64 {
	return mix64(mix64(seed^salt*0x9e3779b97f4a7c15) ^ n*0xd1b54a32d192ed03)
}

// rng is wyrand: one 64x64->128 multiply per 8 bytes of output, cheap
// enough that generating pages costs little next to writing them
// (fillRandom is the unrolled form for whole pages).
type rng uint64

func (r *rng) next() uint64 {
	*r += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(uint64(*r), uint64(*r)^0xe7037ed1a0b428db)
	return hi ^ lo
}

// runMax caps the length of a run of same-kind pages. Kinds come in runs
// (real memory has stretches of free or cached pages, and sparse output
// needs holes larger than one page to be worth it), and the cap keeps
// KindOf a bounded look-back.
const runMax = 16

// runStart returns the first pfn of the run holding pfn: a run begins at
// every multiple of runMax and, in between, where a hash says so (1 in 4),
// giving runs of 1..16 pages, about 3.5 on average.
func runStart(seed, pfn uint64) uint64 {
	for pfn%runMax != 0 && key(seed, pfn, saltRun)&3 != 0 {
		pfn--
	}
	return pfn
}

// contentKind is the kind of the page the generator makes for pfn,
// before any clipping to the segments.
func contentKind(s *Spec, pfn uint64) Kind {
	u := float64(key(s.Seed, runStart(s.Seed, pfn), saltKind)>>11) * (1.0 / (1 << 53))
	m := s.Mix
	switch {
	case u < m.Zero:
		return Zero
	case u < m.Zero+m.Text:
		return Text
	case u < m.Zero+m.Text+m.Repetitive:
		return Repetitive
	case u < m.Zero+m.Text+m.Repetitive+m.Random:
		return Random
	}
	return Text
}

// fill writes the full, unclipped page of the given kind for pfn into b,
// which is one page (a multiple of 16 bytes).
func fill(b []byte, k Kind, seed, pfn uint64) {
	r := rng(key(seed, pfn, saltPage))
	switch k {
	case Zero:
		clear(b)
	case Text:
		fillText(b, r)
	case Repetitive:
		fillRepetitive(b, r)
		nonZeroEnds(b)
	case Random:
		fillRandom(b, uint64(r))
		nonZeroEnds(b)
	}
}

// fillRandom is rng.next unrolled with the state in a register: wyrand's
// n-th output depends only on seed+n*increment, so the multiplies are
// independent and the loop runs at about one multiply per 8 bytes.
func fillRandom(b []byte, s uint64) {
	const inc, k = 0xa0761d6478bd642f, 0xe7037ed1a0b428db
	for i := 0; i+16 <= len(b); i += 16 {
		s0 := s + inc
		s1 := s0 + inc
		s = s1
		h0, l0 := bits.Mul64(s0, s0^k)
		h1, l1 := bits.Mul64(s1, s1^k)
		binary.LittleEndian.PutUint64(b[i:i+8], h0^l0)
		binary.LittleEndian.PutUint64(b[i+8:i+16], h1^l1)
	}
}

// nonZeroEnds makes the first and last byte non-zero. A page clipped by a
// segment boundary keeps its first byte (partial last page) or its last
// byte (unaligned start), so a non-zero kind stays non-zero after
// clipping, and KindOf need not look at the bytes in the common cases.
func nonZeroEnds(b []byte) {
	if b[0] == 0 {
		b[0] = 0x5a
	}
	if b[len(b)-1] == 0 {
		b[len(b)-1] = 0xa5
	}
}

// fillRepetitive repeats a pattern of 1..64 random bytes over the page.
func fillRepetitive(b []byte, r rng) {
	x := r.next()
	n := 1 + int(x%64)
	for i := 0; i < n; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.next())
		copy(b[i:n], w[:])
	}
	for n < len(b) {
		n += copy(b[n:], b[:n])
	}
}

// Text pages are built from phrases: short runs of words drawn from a
// fixed table, mixed with single words and hexadecimal numbers. Uniformly
// drawn single words compress only about 2x with zlib on a 4 KiB page;
// phrases that recur within a page (as log lines and prose repeat their
// fragments) give LZ77 the matches that bring real text to about 3x.
const (
	nWords     = 1024
	nPhrases   = 512
	maxPhrase  = 64 // bytes, separator included
	textMargin = maxPhrase + 16
)

var (
	words [nWords]string
	// Each phrase sits zero-padded in a fixed slot so that it is copied
	// with one fixed-size array assignment (inlined vector moves) rather
	// than a memmove call; the page pointer then advances by its length.
	phraseSlot [nPhrases][maxPhrase]byte
	phraseLen  [nPhrases]uint8
	// wordSlot does the same for single words.
	wordSlot [nWords][16]byte
	wordLen  [nWords]uint8
)

// seedWords give text pages a kernel-log flavour and are the most
// frequent words; the rest of the vocabulary is pronounceable syllables.
var seedWords = []string{
	"the", "of", "to", "and", "a", "in", "is", "for", "on", "at", "by", "with",
	"kernel", "page", "memory", "cpu", "task", "irq", "device", "driver",
	"module", "node", "zone", "free", "cache", "buffer", "queue", "lock",
	"error", "failed", "ready", "init", "mount", "write", "read", "block",
	"usb", "pci", "acpi", "eth0", "sda", "ext4", "tcp", "net", "mm", "swap",
	"timer", "clock", "thread", "signal", "process", "user", "root", "bus",
	"power", "link", "up", "down", "reset", "enabled", "disabled", "found",
	"registered", "loaded", "mapped", "range", "reserved", "available",
}

func init() {
	r := rng(0x746578742d766f63) // "text-voc": fixed, so contents are stable
	const cons, vows = "bcdfghklmnprstvwz", "aeiou"
	for i := range words {
		if i < len(seedWords) {
			words[i] = seedWords[i]
			continue
		}
		var w []byte
		for syl := 1 + r.next()%3; syl > 0; syl-- {
			x := r.next()
			w = append(w, cons[x%uint64(len(cons))], vows[(x>>8)%uint64(len(vows))])
			if (x>>16)%3 == 0 {
				w = append(w, cons[(x>>24)%uint64(len(cons))])
			}
		}
		words[i] = string(w)
	}
	for i, w := range words {
		copy(wordSlot[i][:], w)
		wordLen[i] = uint8(len(w))
	}
	for i := range phraseSlot {
		var ph []byte
		for n := 2 + r.next()%4; n > 0; n-- {
			w := words[skewedWord(r.next())]
			if len(ph)+len(w)+1 > maxPhrase {
				break
			}
			ph = append(ph, w...)
			ph = append(ph, ' ')
		}
		if r.next()%3 == 0 {
			ph[len(ph)-1] = '\n'
		}
		copy(phraseSlot[i][:], ph)
		phraseLen[i] = uint8(len(ph))
	}
}

// skewedWord picks a word index with a roughly Zipf-like bias towards
// the start of the vocabulary: the common words.
func skewedWord(x uint64) uint64 {
	masks := [4]uint64{15, 63, 255, nWords - 1}
	return (x >> 2) & masks[x&3]
}

// phraseMask skews the choice of phrase towards the first ones.
var phraseMask = [4]uint64{15, 31, 127, nPhrases - 1}

// fillText writes a page of text: mostly phrases (a skewed choice among
// nPhrases), some single words, and a few hexadecimal numbers; the page
// ends mid-word, as text that spans pages does.
func fillText(b []byte, r rng) {
	const hexdig = "0123456789abcdef"
	p := 0
	for p+textMargin <= len(b) {
		x := r.next()
		switch x & 15 {
		case 0: // a number, as in addresses and counters in logs
			for i := 0; i < 8; i++ {
				x >>= 4
				b[p+i] = hexdig[x&15]
			}
			b[p+8] = ' '
			p += 9
		case 1: // a single, possibly rare word
			w := (x >> 4) % nWords
			*(*[16]byte)(b[p:]) = wordSlot[w]
			p += int(wordLen[w])
			b[p] = ' '
			p++
		default:
			i := (x >> 4) & phraseMask[(x>>20)&3]
			*(*[maxPhrase]byte)(b[p:]) = phraseSlot[i]
			p += int(phraseLen[i])
		}
	}
	for p < len(b) {
		i := r.next() % nPhrases
		p += copy(b[p:], phraseSlot[i][:phraseLen[i]])
	}
}

// span is a half-open byte range [lo, hi) within a page.
type span struct{ lo, hi int }

// coverage returns the parts of page pfn that lie in some segment's file
// data, merged and sorted; full reports whether that is the whole page.
func coverage(s *Spec, pfn uint64) (spans []span, full bool) {
	ps := s.PageBytes()
	base := pfn * ps
	for _, g := range s.Segments {
		lo, hi := max(g.Paddr, base), min(g.End(), base+ps)
		if lo >= hi {
			continue
		}
		if lo == base && hi == base+ps {
			return nil, true
		}
		spans = append(spans, span{int(lo - base), int(hi - base)})
	}
	if len(spans) < 2 {
		return spans, false
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	out := spans[:1]
	for _, sp := range spans[1:] {
		last := &out[len(out)-1]
		if sp.lo <= last.hi {
			last.hi = max(last.hi, sp.hi)
		} else {
			out = append(out, sp)
		}
	}
	if len(out) == 1 && out[0].lo == 0 && out[0].hi == int(ps) {
		return nil, true
	}
	return out, false
}

// Page fills buf[:s.PageBytes()] with page pfn (of the spec's page size)
// as the generated file holds it: the generator's bytes where the page
// lies within some segment's FileSize, zeros elsewhere (holes, MemSize
// tails, the outside of a partial page). buf must hold at least a page.
//
// For a kernel machine the page is the kernel's: its structures where they
// are, otherwise contents by class (free pages zero unless stale).
func Page(s Spec, pfn uint64, buf []byte) {
	b := buf[:s.PageBytes()]
	if s.Kernel != nil {
		if k, err := kernelOf(&s); err == nil {
			n := k.partialPage(pfn)
			if n == 0 && !k.inRAM(pfn, pfn+1) {
				clear(b)
				return
			}
			p := k.newPager(&s)
			p.fill(b, pfn, p.kind(pfn))
			if n != 0 {
				clear(b[n:])
			}
			return
		}
	}
	spans, full := coverage(&s, pfn)
	if !full && len(spans) == 0 {
		clear(b)
		return
	}
	fill(b, contentKind(&s, pfn), s.Seed, pfn)
	if full {
		return
	}
	prev := 0
	for _, sp := range spans {
		clear(b[prev:sp.lo])
		prev = sp.hi
	}
	clear(b[prev:])
}

// KindOf returns the kind of page pfn as Page returns it: Zero when no
// byte of it is in the file, otherwise the kind generated (a non-zero
// kind is never all zero, even when clipped by a segment boundary).
//
// For a kernel machine, pages of kernel structures are reported as
// Repetitive, or Zero when they hold nothing (unused mem_section roots).
func KindOf(s Spec, pfn uint64) Kind {
	if s.Kernel != nil {
		if km, err := kernelOf(&s); err == nil {
			if !km.inRAM(pfn, pfn+1) {
				return Zero
			}
			if k := km.newPager(&s).kind(pfn); k != kindStruct {
				return k
			}
			return Repetitive
		}
	}
	k := contentKind(&s, pfn)
	if k == Zero {
		return Zero
	}
	spans, full := coverage(&s, pfn)
	switch {
	case full:
		return k
	case len(spans) == 0:
		return Zero
	case k == Text:
		return k // every text byte is printable
	}
	for _, sp := range spans {
		if sp.lo == 0 || sp.hi == int(s.PageBytes()) {
			return k // nonZeroEnds
		}
	}
	// A sliver in the middle of a page: look.
	b := make([]byte, s.PageBytes())
	fill(b, k, s.Seed, pfn)
	for _, sp := range spans {
		for _, c := range b[sp.lo:sp.hi] {
			if c != 0 {
				return k
			}
		}
	}
	return Zero
}
