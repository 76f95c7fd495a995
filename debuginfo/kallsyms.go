package debuginfo

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Kallsyms is the crashed kernel's own symbol table, read from its
// kallsyms tables, which VMCOREINFO points at since Linux 6.0
// (SYMBOL(kallsyms_names) and the rest, put there for tools that have no
// vmlinux): the first address of each name.
type Kallsyms map[string]uint64

// Symbol is the address of the symbol name.
func (k Kallsyms) Symbol(name string) (uint64, error) {
	if v, ok := k[name]; ok {
		return v, nil
	}
	return 0, notFound("kallsyms symbol", name)
}

// ErrNoKallsyms: the kernel does not export its kallsyms tables in
// VMCOREINFO (before 6.0, or built without CONFIG_KALLSYMS).
var ErrNoKallsyms = errors.New("VMCOREINFO has no kallsyms tables (kernels before 6.0): a vmlinux would give the symbols")

// MaxSymbols bounds a symbol count read from the dump (a 6.12 distribution
// kernel has about 200 000).
const MaxSymbols = 1 << 22

// ReadKallsyms decodes the symbols named in want (only those, to keep
// nothing else; every one when want is empty) through r; vmcoreinfo gives
// VMCOREINFO's SYMBOL() values. The layout is the kernel's scripts/kallsyms
// output: kallsyms_num_syms (u32); kallsyms_names, per symbol a length
// (one byte, or two with the high bit set) and that many token indexes;
// kallsyms_token_table, NUL-terminated tokens at kallsyms_token_index's
// u16 offsets; kallsyms_offsets (s32) from kallsyms_relative_base. A
// decoded name starts with its type letter.
func ReadKallsyms(vmcoreinfo func(string) (uint64, bool), r VirtReader, want ...string) (Kallsyms, error) {
	addr := map[string]uint64{}
	for _, k := range []string{"kallsyms_num_syms", "kallsyms_names", "kallsyms_token_table", "kallsyms_token_index", "kallsyms_offsets", "kallsyms_relative_base"} {
		a, ok := vmcoreinfo(k)
		if !ok {
			return nil, ErrNoKallsyms
		}
		addr[k] = a
	}
	var b4 [4]byte
	if err := r.ReadVirt(addr["kallsyms_num_syms"], b4[:]); err != nil {
		return nil, fmt.Errorf("kallsyms_num_syms: %w", err)
	}
	n := int(binary.LittleEndian.Uint32(b4[:]))
	if n == 0 || n > MaxSymbols {
		return nil, fmt.Errorf("kallsyms_num_syms %d: implausible", n)
	}
	var b8 [8]byte
	if err := r.ReadVirt(addr["kallsyms_relative_base"], b8[:]); err != nil {
		return nil, fmt.Errorf("kallsyms_relative_base: %w", err)
	}
	base := binary.LittleEndian.Uint64(b8[:])
	index := make([]byte, 256*2)
	if err := r.ReadVirt(addr["kallsyms_token_index"], index); err != nil {
		return nil, fmt.Errorf("kallsyms_token_index: %w", err)
	}
	var maxIdx uint16
	for i := range 256 {
		maxIdx = max(maxIdx, binary.LittleEndian.Uint16(index[2*i:]))
	}
	// The last token is short: 256 bytes past the highest offset hold it.
	table := make([]byte, int(maxIdx)+256)
	if err := r.ReadVirt(addr["kallsyms_token_table"], table); err != nil {
		return nil, fmt.Errorf("kallsyms_token_table: %w", err)
	}
	tokens := make([]string, 256)
	for i := range 256 {
		t := table[binary.LittleEndian.Uint16(index[2*i:]):]
		end := 0
		for end < len(t) && t[end] != 0 {
			end++
		}
		tokens[i] = string(t[:end])
	}
	// With CONFIG_KALLSYMS_ABSOLUTE_PERCPU (x86_64 SMP before 6.15) a
	// non-negative offset is an absolute value (a per-cpu symbol's offset
	// in the per-cpu area) and a negative one encodes base-1-offset; every
	// text symbol is then negative. Without it every offset is relative.
	// The offsets are read a page at a time, not kept: once to tell the
	// encoding, again beside the names.
	absPercpu := false
	offs := &virtStream{r: r, at: addr["kallsyms_offsets"]}
	for range n {
		o, err := offs.uint32()
		if err != nil {
			return nil, fmt.Errorf("kallsyms_offsets: %w", err)
		}
		if int32(o) < 0 {
			absPercpu = true
			break
		}
	}
	offs = &virtStream{r: r, at: addr["kallsyms_offsets"]}
	// wantLen: the lengths of the wanted names, type letter included, so
	// that a symbol of another length is never spelt out.
	wanted := map[string]bool{}
	var wantLen [1 << 16]bool
	for _, w := range want {
		wanted[w] = true
		if len(w)+1 < len(wantLen) {
			wantLen[len(w)+1] = true
		}
	}
	var tokenLen [256]int
	for i, t := range tokens {
		tokenLen[i] = len(t)
	}
	syms := Kallsyms{}
	names := &virtStream{r: r, at: addr["kallsyms_names"]}
	var name []byte
	for range n {
		o, err := offs.uint32()
		if err != nil {
			return nil, fmt.Errorf("kallsyms_offsets: %w", err)
		}
		l, err := names.byte()
		if err != nil {
			return nil, fmt.Errorf("kallsyms_names: %w", err)
		}
		length := int(l)
		if l&0x80 != 0 {
			hi, err := names.byte()
			if err != nil {
				return nil, fmt.Errorf("kallsyms_names: %w", err)
			}
			length = int(l&0x7f) | int(hi)<<7
		}
		toks, err := names.next(length)
		if err != nil {
			return nil, fmt.Errorf("kallsyms_names: %w", err)
		}
		spelt := 0
		for _, t := range toks {
			spelt += tokenLen[t]
		}
		if len(wanted) > 0 && (spelt >= len(wantLen) || !wantLen[spelt]) {
			continue
		}
		name = name[:0]
		for _, t := range toks {
			name = append(name, tokens[t]...)
		}
		if len(name) < 2 || len(wanted) > 0 && !wanted[string(name[1:])] {
			continue
		}
		if _, seen := syms[string(name[1:])]; seen {
			continue
		}
		off := int32(o)
		var a uint64
		switch {
		case !absPercpu:
			a = base + uint64(uint32(off))
		case off >= 0:
			a = uint64(off)
		default:
			a = base - 1 - uint64(int64(off))
		}
		syms[string(name[1:])] = a
		if len(wanted) > 0 && len(syms) == len(wanted) {
			break
		}
	}
	return syms, nil
}

// uint32 reads a little-endian 32-bit value.
func (s *virtStream) uint32() (uint32, error) {
	b, err := s.next(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

// next reads n bytes: a slice of the stream's buffer, or of its spare one
// where they cross a page, valid until the next read.
func (s *virtStream) next(n int) ([]byte, error) {
	if n <= s.n {
		at := len(s.buf) - s.n
		s.n -= n
		s.at += uint64(n)
		return s.buf[at : at+n], nil
	}
	s.spare = s.spare[:0]
	for range n {
		b, err := s.byte()
		if err != nil {
			return nil, err
		}
		s.spare = append(s.spare, b)
	}
	return s.spare, nil
}

// virtStream reads kernel virtual memory byte by byte, a page at a time.
type virtStream struct {
	r     VirtReader
	at    uint64
	buf   [4096]byte
	n     int // bytes of buf left
	spare []byte
}

func (s *virtStream) byte() (byte, error) {
	if s.n == 0 {
		chunk := len(s.buf) - int(s.at%uint64(len(s.buf)))
		if err := s.r.ReadVirt(s.at, s.buf[:chunk]); err != nil {
			return 0, err
		}
		copy(s.buf[len(s.buf)-chunk:], s.buf[:chunk])
		s.n = chunk
	}
	b := s.buf[len(s.buf)-s.n]
	s.n--
	s.at++
	return b, nil
}
