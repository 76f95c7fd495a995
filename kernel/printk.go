package kernel

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// This file reads the crashed kernel's log buffer (what dmesg shows) for
// --dump-dmesg, and prints it the way makedumpfile 1.7.2 does, so that the
// two tools' log files are byte-identical.
//
// Two layouts are supported, picked as makedumpfile picks them:
//   - the lockless ringbuffer of 5.10+ (SYMBOL(prb)): a ring of descriptors,
//     a parallel ring of printk_info (timestamp, text length, caller) and a
//     ring of text blocks;
//   - the variable-length records of 3.5-5.9 (SYMBOL(log_first_idx)): one
//     byte buffer of struct printk_log headers, each followed by its text.
//
// Kernels before 3.5 keep a plain character ring (SYMBOL(log_end)); they are
// refused with ErrLogUnsupported.
//
// All layout facts come from VMCOREINFO, and everything read from the dump is
// hostile: sizes are capped, every index is checked against the buffer it
// indexes, and walks that could loop are bounded.

// Record is one kernel log message.
type Record struct {
	// TsNsec is the message's timestamp (the kernel's local_clock) in
	// nanoseconds since boot.
	TsNsec uint64
	// CallerID identifies the writer: a task id, or with bit 31 set a CPU
	// number. It is meaningful only when HasCallerID is set (the kernel
	// exports OFFSET(printk_info.caller_id) or OFFSET(printk_log.caller_id)).
	CallerID    uint32
	HasCallerID bool
	// Text is the message as the kernel stored it: printk drops the final
	// newline, but the text may hold more (a multi-line message) and any
	// byte value. It may share memory with other records' Text.
	Text []byte
}

// Errors ReadLog wraps, so that callers can tell a damaged log from a dump
// that cannot be read at all.
var (
	// ErrLogCycle: following the records' lengths leads back to a record
	// already printed without reaching the end of the log.
	ErrLogCycle = errors.New("cycle when parsing dmesg detected")
	// ErrLogIndex: a record index points outside the log buffer.
	ErrLogIndex = errors.New("index outside log_buf detected")
	// ErrLogCorrupt: other impossible values in the log's metadata.
	ErrLogCorrupt = errors.New("the printk log buffer is corrupted")
	// ErrLogUnsupported: the kernel keeps its log in a layout pagepipe does
	// not read (the plain ring of kernels before 3.5).
	ErrLogUnsupported = errors.New("unsupported printk log layout")
)

// Bounds on what a hostile dump can make ReadLog allocate. Real kernels use
// at most a few MiB (CONFIG_LOG_BUF_SHIFT <= 25; log_buf_len= is capped at
// 2 GiB but nobody boots with that).
const (
	// maxLogBytes caps the log buffer, the text data ring, and the
	// descriptor plus info arrays taken together.
	maxLogBytes = 1 << 30
	// maxRingBits caps count_bits and size_bits.
	maxRingBits = 30
	// maxLogStruct caps SIZE(...) of the printk structures: all of them
	// are well under 256 bytes.
	maxLogStruct = 4096
)

// prbIDMask keeps the id part of a descriptor's state_var (and of head_id
// and tail_id): the top two bits of the 64-bit word hold the state.
const prbIDMask = 1<<62 - 1

// Descriptor states, the top two bits of state_var
// (kernel/printk/printk_ringbuffer.h, enum desc_state). Only committed and
// finalized records hold complete text; reserved ones are being written and
// reusable ones are free.
const (
	descReserved  = 0
	descCommitted = 1
	descFinalized = 2
	descReusable  = 3
)

// ReadLog reads the kernel log of the dumped kernel through r, oldest record
// first. With partial, it starts where the kernel's log was last cleared
// (dmesg -c: clear_seq on 5.10+, clear_idx before), as makedumpfile's
// --partial-dmesg does; when the kernel does not export the clear position
// the whole log is read.
//
// When the 3.5-5.9 log turns out to be corrupted part way (ErrLogCycle,
// ErrLogIndex, ErrLogCorrupt), ReadLog returns the records before the damage
// together with the error, because that is what makedumpfile writes before it
// fails; otherwise a non-nil error comes with no records.
func ReadLog(vi *VMCOREINFO, r VirtReader, partial bool) ([]Record, error) {
	switch {
	case vi.Has(symbolKey("prb")):
		recs, err := readRingbuffer(vi, r, partial)
		if err != nil {
			return nil, fmt.Errorf("dmesg (lockless ringbuffer): %w", err)
		}
		return recs, nil
	case vi.Has(symbolKey("log_first_idx")) && vi.Has(symbolKey("log_next_idx")):
		recs, err := readLogBuf(vi, r, partial)
		if err != nil {
			err = fmt.Errorf("dmesg (log_buf): %w", err)
		}
		return recs, err
	case vi.Has(symbolKey("log_end")):
		return nil, fmt.Errorf("dmesg: %w: the character ring of kernels before 3.5 (SYMBOL(log_end))", ErrLogUnsupported)
	}
	return nil, fmt.Errorf("dmesg: vmcoreinfo: %w SYMBOL(prb) and SYMBOL(log_first_idx)/SYMBOL(log_next_idx): no kernel log to read", ErrMissingKey)
}

// layout collects VMCOREINFO sizes and offsets, remembering the first
// missing or implausible one so that a long list of lookups needs a single
// error check.
type layout struct {
	vi  *VMCOREINFO
	err error
}

// size returns SIZE(name), which must lie in (0, maxLogStruct].
func (l *layout) size(name string) int {
	if l.err != nil {
		return 0
	}
	v, err := l.vi.RequireSize(name)
	if err == nil && (v <= 0 || v > maxLogStruct) {
		err = fmt.Errorf("%w: SIZE(%s)=%d is not plausible", ErrLogCorrupt, name, v)
	}
	l.err = err
	return int(v)
}

// offset returns OFFSET(name), which must lie in [0, maxLogStruct].
func (l *layout) offset(name string) int {
	if l.err != nil {
		return 0
	}
	v, err := l.vi.RequireOffset(name)
	if err == nil && (v < 0 || v > maxLogStruct) {
		err = fmt.Errorf("%w: OFFSET(%s)=%d is not plausible", ErrLogCorrupt, name, v)
	}
	l.err = err
	return int(v)
}

// field checks that a width-byte member at off lies inside a structure of
// size bytes, so that decoding it cannot index past the buffer.
func (l *layout) field(what string, off, width, size int) {
	if l.err == nil && off+width > size {
		l.err = fmt.Errorf("%w: %s at offset %d (%d bytes) does not fit in %d bytes", ErrLogCorrupt, what, off, width, size)
	}
}

// readU64 reads one little-endian 64-bit word of kernel memory.
func readU64(r VirtReader, vaddr uint64, what string) (uint64, error) {
	var b [8]byte
	if err := r.ReadVirt(vaddr, b[:]); err != nil {
		return 0, fmt.Errorf("read %s at %#x: %w", what, vaddr, err)
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// readU32 reads one little-endian 32-bit word of kernel memory.
func readU32(r VirtReader, vaddr uint64, what string) (uint32, error) {
	var b [4]byte
	if err := r.ReadVirt(vaddr, b[:]); err != nil {
		return 0, fmt.Errorf("read %s at %#x: %w", what, vaddr, err)
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

// readChunk is how much of a buffer readBuf reads at a time.
const readChunk = 1 << 20

// readBuf reads n bytes of kernel memory. It reads a chunk at a time,
// growing the result as it goes, so that a corrupted size paired with a
// pointer to unmapped memory fails at the first chunk instead of first
// allocating up to maxLogBytes.
func readBuf(r VirtReader, vaddr uint64, n int, what string) ([]byte, error) {
	b := make([]byte, 0, min(n, readChunk))
	for len(b) < n {
		k := min(n-len(b), readChunk)
		b = append(b, make([]byte, k)...)
		if err := r.ReadVirt(vaddr+uint64(len(b)-k), b[len(b)-k:]); err != nil {
			return nil, fmt.Errorf("read %s (%d bytes at %#x): %w", what, n, vaddr, err)
		}
	}
	return b, nil
}

// prbLayout is where the lockless ringbuffer keeps what ReadLog needs, from
// VMCOREINFO. Offsets of nested members are already summed: headID is
// OFFSET(printk_ringbuffer.desc_ring) + OFFSET(prb_desc_ring.head_id) +
// OFFSET(atomic_long_t.counter), and so on.
type prbLayout struct {
	rbSize                            int
	countBits, descs, infos, headID   int
	tailID, sizeBits, data            int
	descSize, stateVar, begin, next   int
	infoSize, tsNsec, textLen, caller int // caller < 0: not exported
}

func prbLayoutOf(vi *VMCOREINFO) (prbLayout, error) {
	l := layout{vi: vi}
	var p prbLayout
	p.rbSize = l.size("printk_ringbuffer")
	descRing := l.offset("printk_ringbuffer.desc_ring")
	textRing := l.offset("printk_ringbuffer.text_data_ring")
	counter := l.offset("atomic_long_t.counter")
	p.countBits = descRing + l.offset("prb_desc_ring.count_bits")
	p.descs = descRing + l.offset("prb_desc_ring.descs")
	p.infos = descRing + l.offset("prb_desc_ring.infos")
	p.headID = descRing + l.offset("prb_desc_ring.head_id") + counter
	p.tailID = descRing + l.offset("prb_desc_ring.tail_id") + counter
	p.sizeBits = textRing + l.offset("prb_data_ring.size_bits")
	p.data = textRing + l.offset("prb_data_ring.data")

	p.descSize = l.size("prb_desc")
	p.stateVar = l.offset("prb_desc.state_var") + counter
	lpos := l.offset("prb_desc.text_blk_lpos")
	p.begin = lpos + l.offset("prb_data_blk_lpos.begin")
	p.next = lpos + l.offset("prb_data_blk_lpos.next")

	p.infoSize = l.size("printk_info")
	p.tsNsec = l.offset("printk_info.ts_nsec")
	p.textLen = l.offset("printk_info.text_len")
	p.caller = -1
	if vi.Has("OFFSET(printk_info.caller_id)") {
		p.caller = l.offset("printk_info.caller_id")
		l.field("printk_info.caller_id", p.caller, 4, p.infoSize)
	}

	l.field("prb_desc_ring.count_bits", p.countBits, 4, p.rbSize)
	l.field("prb_desc_ring.descs", p.descs, 8, p.rbSize)
	l.field("prb_desc_ring.infos", p.infos, 8, p.rbSize)
	l.field("prb_desc_ring.head_id", p.headID, 8, p.rbSize)
	l.field("prb_desc_ring.tail_id", p.tailID, 8, p.rbSize)
	l.field("prb_data_ring.size_bits", p.sizeBits, 4, p.rbSize)
	l.field("prb_data_ring.data", p.data, 8, p.rbSize)
	l.field("prb_desc.state_var", p.stateVar, 8, p.descSize)
	l.field("prb_data_blk_lpos.begin", p.begin, 8, p.descSize)
	l.field("prb_data_blk_lpos.next", p.next, 8, p.descSize)
	l.field("printk_info.ts_nsec", p.tsNsec, 8, p.infoSize)
	l.field("printk_info.text_len", p.textLen, 2, p.infoSize)
	return p, l.err
}

// readRingbuffer reads the 5.10+ lockless ringbuffer: *prb is a struct
// printk_ringbuffer whose desc_ring holds 1<<count_bits descriptors (state
// and text block position) and as many printk_info, and whose text_data_ring
// holds 1<<size_bits bytes of text blocks.
func readRingbuffer(vi *VMCOREINFO, r VirtReader, partial bool) ([]Record, error) {
	lay, err := prbLayoutOf(vi)
	if err != nil {
		return nil, err
	}
	sym, err := vi.RequireSymbol("prb")
	if err != nil {
		return nil, err
	}
	prb, err := readU64(r, sym, "prb")
	if err != nil {
		return nil, err
	}
	rb, err := readBuf(r, prb, lay.rbSize, "printk_ringbuffer")
	if err != nil {
		return nil, err
	}
	u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(rb[off:]) }
	countBits := binary.LittleEndian.Uint32(rb[lay.countBits:])
	sizeBits := binary.LittleEndian.Uint32(rb[lay.sizeBits:])
	// A text block starts with the descriptor id (an unsigned long), so a
	// ring smaller than that cannot hold any text.
	if countBits > maxRingBits || sizeBits > maxRingBits || sizeBits < 3 {
		return nil, fmt.Errorf("%w: count_bits %d, size_bits %d", ErrLogCorrupt, countBits, sizeBits)
	}
	count := uint64(1) << countBits
	ringSize := uint64(1) << sizeBits
	if count*uint64(lay.descSize+lay.infoSize) > maxLogBytes {
		return nil, fmt.Errorf("%w: %d descriptors of %d+%d bytes is more than %d bytes", ErrLogCorrupt, count, lay.descSize, lay.infoSize, maxLogBytes)
	}
	descs, err := readBuf(r, u64(lay.descs), int(count)*lay.descSize, "prb descriptors")
	if err != nil {
		return nil, err
	}
	infos, err := readBuf(r, u64(lay.infos), int(count)*lay.infoSize, "prb infos")
	if err != nil {
		return nil, err
	}
	text, err := readBuf(r, u64(lay.data), int(ringSize), "prb text data ring")
	if err != nil {
		return nil, err
	}

	// head_id and tail_id are ids, but mask them anyway: a stray state bit
	// would otherwise keep the masked walk from ever meeting head.
	head := u64(lay.headID) & prbIDMask
	tail := u64(lay.tailID) & prbIDMask
	if partial && vi.Has(symbolKey("clear_seq")) {
		seq, err := clearSeq(vi, r)
		if err != nil {
			return nil, err
		}
		// The record with sequence number s lives in descriptor s % count,
		// as does every id congruent to it. Like makedumpfile, start at the
		// id with clear_seq's index in head's lap of the ring; when that id
		// would come after head, the record is in the lap before
		// (makedumpfile would instead walk the whole 2^62 id space).
		tail = (head - head%count + seq%count) & prbIDMask
		if seq%count > head%count {
			tail = (tail - count) & prbIDMask
		}
	}
	// The kernel keeps head and tail less than a ring apart. Ids older than
	// head's last lap cannot have a live descriptor (their slot has been
	// reused), so a corrupted tail is clamped rather than walked for up to
	// 2^62 ids.
	if (head-tail)&prbIDMask >= count {
		tail = (head - count + 1) & prbIDMask
	}

	var recs []Record
	for id := tail; ; id = (id + 1) & prbIDMask {
		if rec, ok := prbRecord(&lay, descs, infos, text, count, id); ok {
			recs = append(recs, rec)
		}
		if id == head {
			return recs, nil
		}
	}
}

// clearSeq reads the sequence number of the first record after the last
// clear. From 5.13 clear_seq is a struct latched_seq, whose current value is
// val[sequence & 1]; before, it is a plain u64.
func clearSeq(vi *VMCOREINFO, r VirtReader) (uint64, error) {
	sym, err := vi.RequireSymbol("clear_seq")
	if err != nil {
		return 0, err
	}
	seq, err := readU64(r, sym, "clear_seq")
	if err != nil {
		return 0, err
	}
	if !vi.Has("SIZE(latched_seq)") {
		return seq, nil
	}
	off, err := vi.RequireOffset("latched_seq.val")
	if err != nil {
		return 0, err
	}
	if off < 0 || off > maxLogStruct {
		return 0, fmt.Errorf("%w: OFFSET(latched_seq.val)=%d is not plausible", ErrLogCorrupt, off)
	}
	return readU64(r, sym+uint64(off)+(seq&1)*8, "latched clear_seq")
}

// prbRecord decodes the record with the given id, reporting false when its
// descriptor does not hold a complete record with that id (a reserved,
// reusable or recycled slot) or the record has no text block.
func prbRecord(lay *prbLayout, descs, infos, text []byte, count, id uint64) (Record, bool) {
	idx := id & (count - 1)
	desc := descs[idx*uint64(lay.descSize):]
	sv := binary.LittleEndian.Uint64(desc[lay.stateVar:])
	if sv&prbIDMask != id {
		return Record{}, false
	}
	if st := sv >> 62; st != descCommitted && st != descFinalized {
		return Record{}, false
	}
	size := uint64(len(text))
	begin := binary.LittleEndian.Uint64(desc[lay.begin:]) % size
	next := binary.LittleEndian.Uint64(desc[lay.next:]) % size
	// Equal positions mark a data-less record (the kernel's FAILED_LPOS or
	// NO_LPOS, or an empty block).
	if begin == next {
		return Record{}, false
	}
	// A block that does not fit before the end of the ring is stored whole
	// at its start, its logical begin pointing at the unused tail.
	if begin > next {
		begin = 0
	}
	begin += 8 // the block starts with its descriptor's id
	info := infos[idx*uint64(lay.infoSize):]
	n := uint64(binary.LittleEndian.Uint16(info[lay.textLen:]))
	// text_len may exceed the block (the kernel truncated the message to
	// fit); never read past the block, nor past the ring when the block is
	// too small to hold even its id.
	avail := uint64(0)
	switch {
	case next >= begin:
		avail = next - begin
	case begin < size:
		avail = size - begin
	}
	n = min(n, avail)
	rec := Record{TsNsec: binary.LittleEndian.Uint64(info[lay.tsNsec:])}
	if n > 0 {
		rec.Text = text[begin : begin+n]
	}
	if lay.caller >= 0 {
		rec.CallerID = binary.LittleEndian.Uint32(info[lay.caller:])
		rec.HasCallerID = true
	}
	return rec, true
}

// logLayout is struct printk_log (struct log on 3.5-3.10): a header before
// each record's text in log_buf.
type logLayout struct {
	size, tsNsec, len, textLen, caller int // caller < 0: not exported
}

func logLayoutOf(vi *VMCOREINFO) (logLayout, error) {
	name := "printk_log"
	if !vi.Has("SIZE(printk_log)") && vi.Has("SIZE(log)") {
		name = "log"
	}
	l := layout{vi: vi}
	var p logLayout
	p.size = l.size(name)
	p.tsNsec = l.offset(name + ".ts_nsec")
	p.len = l.offset(name + ".len")
	p.textLen = l.offset(name + ".text_len")
	p.caller = -1
	if vi.Has("OFFSET(" + name + ".caller_id)") {
		p.caller = l.offset(name + ".caller_id")
		l.field(name+".caller_id", p.caller, 4, p.size)
	}
	l.field(name+".ts_nsec", p.tsNsec, 8, p.size)
	l.field(name+".len", p.len, 2, p.size)
	l.field(name+".text_len", p.textLen, 2, p.size)
	return p, l.err
}

// readLogBuf reads the 3.5-5.9 log: log_buf is a byte buffer of records,
// each a printk_log header (whose len covers header, text, dictionary and
// padding) followed by its text. Records run from log_first_idx to
// log_next_idx; a header with len 0 marks the end of the used part of the
// buffer and means the next record is at index 0.
func readLogBuf(vi *VMCOREINFO, r VirtReader, partial bool) ([]Record, error) {
	lay, err := logLayoutOf(vi)
	if err != nil {
		return nil, err
	}
	syms := map[string]uint64{}
	for _, s := range []string{"log_buf", "log_buf_len", "log_first_idx", "log_next_idx"} {
		if syms[s], err = vi.RequireSymbol(s); err != nil {
			return nil, err
		}
	}
	firstSym := syms["log_first_idx"]
	if partial {
		if s, ok := vi.Symbol("clear_idx"); ok {
			firstSym = s
		}
	}
	logBuf, err := readU64(r, syms["log_buf"], "log_buf")
	if err != nil {
		return nil, err
	}
	bufLen, err := readU32(r, syms["log_buf_len"], "log_buf_len")
	if err != nil {
		return nil, err
	}
	first, err := readU32(r, firstSym, "first record index")
	if err != nil {
		return nil, err
	}
	end, err := readU32(r, syms["log_next_idx"], "log_next_idx")
	if err != nil {
		return nil, err
	}
	if bufLen > maxLogBytes || int(bufLen) < lay.size {
		return nil, fmt.Errorf("%w: log_buf_len %d", ErrLogCorrupt, bufLen)
	}
	buf, err := readBuf(r, logBuf, int(bufLen), "log_buf")
	if err != nil {
		return nil, err
	}
	return walkLogBuf(&lay, buf, logBuf, first, end)
}

// walkLogBuf follows the records from first to end. Hostile lengths can send
// the walk outside the buffer or round in circles; either stops it with the
// records so far and ErrLogIndex or ErrLogCycle, as makedumpfile stops (it
// also prints each record of a cycle once before giving up). Every index the
// walk visits is remembered, so it takes at most len(buf) steps.
func walkLogBuf(lay *logLayout, buf []byte, logBuf uint64, first, end uint32) ([]Record, error) {
	size := uint32(len(buf))
	last := size - uint32(lay.size) // the highest index a header fits at
	u16 := func(at uint32, off int) uint32 { return uint32(binary.LittleEndian.Uint16(buf[int(at)+off:])) }
	fail := func(err error, idx uint32, format string, a ...any) error {
		return fmt.Errorf("%w: log_buf %#x, index %#x: %s", err, logBuf, idx, fmt.Sprintf(format, a...))
	}
	if first > last {
		return nil, fail(ErrLogIndex, first, "first record outside the %d-byte buffer", size)
	}
	visited := make([]uint64, (size+63)/64)
	var recs []Record
	for idx := first; idx != end; {
		if visited[idx/64]&(1<<(idx%64)) != 0 {
			return recs, fail(ErrLogCycle, idx, "record reached again before log_next_idx %#x", end)
		}
		visited[idx/64] |= 1 << (idx % 64)
		at, recLen := idx, u16(idx, lay.len)
		if recLen == 0 {
			at, recLen = 0, u16(0, lay.len)
		}
		if recLen != 0 && recLen < uint32(lay.size) {
			return recs, fail(ErrLogCorrupt, at, "record length %d is shorter than its %d-byte header", recLen, lay.size)
		}
		recs = append(recs, logRecord(lay, buf, at, recLen))
		next := at + recLen
		if next > last {
			return recs, fail(ErrLogIndex, next, "next record outside the %d-byte buffer", size)
		}
		idx = next
	}
	return recs, nil
}

// logRecord decodes the record whose header is at buf[at:], recLen being its
// len field (0 for a record at the start whose len is also 0). The text
// never extends past the record or the buffer.
func logRecord(lay *logLayout, buf []byte, at, recLen uint32) Record {
	h := buf[at:]
	rec := Record{TsNsec: binary.LittleEndian.Uint64(h[lay.tsNsec:])}
	if lay.caller >= 0 {
		rec.CallerID = binary.LittleEndian.Uint32(h[lay.caller:])
		rec.HasCallerID = true
	}
	n := uint32(binary.LittleEndian.Uint16(h[lay.textLen:]))
	start := at + uint32(lay.size)
	n = min(n, uint32(len(buf))-start)
	if recLen != 0 {
		n = min(n, recLen-uint32(lay.size))
	}
	if n > 0 {
		rec.Text = buf[start : start+n]
	}
	return rec
}

// FormatOptions selects variations of makedumpfile's log format.
type FormatOptions struct {
	// CallerID adds makedumpfile 1.7.5's second prefix, "[%8s] " holding
	// T<pid> or C<cpu>, to records that carry a caller id. makedumpfile
	// 1.7.2 never prints it.
	CallerID bool
}

// callerCPU marks a caller id that is a CPU number rather than a task id
// (the kernel's printk_caller_id()).
const callerCPU = 0x80000000

// FormatLog writes recs as makedumpfile --dump-dmesg does: each record is
// "[%5d.%06d] " (seconds and microseconds of its timestamp) and its text,
// then a newline. A newline inside the text starts a new line indented by
// the prefix's width, so continuation lines line up with the message. Bytes
// other than printable ASCII and the C locale's white space are written as
// \xNN; like makedumpfile, which passes a signed char to printf("%02x"),
// bytes from 0x80 up come out sign-extended, as \xffffffNN.
func FormatLog(w io.Writer, recs []Record, opt FormatOptions) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var line []byte
	for _, rec := range recs {
		line = appendRecord(line[:0], rec, opt)
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func appendRecord(b []byte, rec Record, opt FormatOptions) []byte {
	start := len(b)
	b = append(b, '[')
	b = appendPadded(b, rec.TsNsec/1e9, 5, ' ')
	b = append(b, '.')
	b = appendPadded(b, rec.TsNsec%1e9/1e3, 6, '0')
	b = append(b, "] "...)
	if opt.CallerID && rec.HasCallerID {
		kind, id := byte('T'), rec.CallerID
		if id&callerCPU != 0 {
			kind, id = 'C', id&^callerCPU
		}
		cid := strconv.AppendUint([]byte{kind}, uint64(id), 10)
		b = append(b, '[')
		for range 8 - len(cid) {
			b = append(b, ' ')
		}
		b = append(b, cid...)
		b = append(b, "] "...)
	}
	indent := len(b) - start
	const hex = "0123456789abcdef"
	for _, c := range rec.Text {
		switch {
		case c == '\n':
			b = append(b, '\n')
			for range indent {
				b = append(b, ' ')
			}
		case c >= 0x20 && c < 0x7f, c >= '\t' && c <= '\r':
			b = append(b, c)
		case c >= 0x80:
			b = append(b, `\xffffff`...)
			b = append(b, hex[c>>4], hex[c&15])
		default:
			b = append(b, '\\', 'x', hex[c>>4], hex[c&15])
		}
	}
	return append(b, '\n')
}

// appendPadded appends v in decimal, padded on the left with pad to width.
func appendPadded(b []byte, v uint64, width int, pad byte) []byte {
	var d [20]byte
	s := strconv.AppendUint(d[:0], v, 10)
	for range width - len(s) {
		b = append(b, pad)
	}
	return append(b, s...)
}
