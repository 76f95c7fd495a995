package kernel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// memBase is where the synthetic kernel memory of these tests starts.
const memBase = 0xffff888000100000

// regionMem is kernel virtual memory made of one region at base; reads
// outside it fail, as an unmapped address would.
type regionMem struct {
	base uint64
	b    []byte
}

func (m regionMem) ReadVirt(vaddr uint64, p []byte) error {
	off := vaddr - m.base
	if vaddr < m.base || off > uint64(len(m.b)) || uint64(len(p)) > uint64(len(m.b))-off {
		return fmt.Errorf("virtual %#x (+%d) not mapped", vaddr, len(p))
	}
	copy(p, m.b[off:])
	return nil
}

func mustVMCOREINFO(t testing.TB, text string) *VMCOREINFO {
	t.Helper()
	vi, err := ParseVMCOREINFO([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return vi
}

// Where the synthetic lockless ringbuffer lies in its memory image: the prb
// pointer, clear_seq (a latched_seq: sequence, val[2]), the
// printk_ringbuffer, then the descriptor, info and text arrays.
const (
	ringPrbOff   = 0
	ringClearOff = 16
	ringRBOff    = 64
	ringDescsOff = 256
)

// ringVMCOREINFO is the lockless ringbuffer part of a Debian 6.1 kernel's
// VMCOREINFO, with the symbols pointing into the test image.
func ringVMCOREINFO(latched, clearSeq, caller bool) string {
	var s strings.Builder
	fmt.Fprintf(&s, "OSRELEASE=6.1.0-test\nPAGESIZE=4096\nSYMBOL(prb)=%x\n", uint64(memBase+ringPrbOff))
	if clearSeq {
		fmt.Fprintf(&s, "SYMBOL(clear_seq)=%x\n", uint64(memBase+ringClearOff))
	}
	s.WriteString(`SIZE(printk_ringbuffer)=88
OFFSET(printk_ringbuffer.desc_ring)=0
OFFSET(printk_ringbuffer.text_data_ring)=48
SIZE(prb_desc_ring)=48
OFFSET(prb_desc_ring.count_bits)=0
OFFSET(prb_desc_ring.descs)=8
OFFSET(prb_desc_ring.infos)=16
OFFSET(prb_desc_ring.head_id)=24
OFFSET(prb_desc_ring.tail_id)=32
SIZE(prb_desc)=24
OFFSET(prb_desc.state_var)=0
OFFSET(prb_desc.text_blk_lpos)=8
OFFSET(prb_data_blk_lpos.begin)=0
OFFSET(prb_data_blk_lpos.next)=8
SIZE(printk_info)=88
OFFSET(printk_info.seq)=0
OFFSET(printk_info.ts_nsec)=8
OFFSET(printk_info.text_len)=16
OFFSET(prb_data_ring.size_bits)=0
OFFSET(prb_data_ring.data)=8
OFFSET(atomic_long_t.counter)=0
`)
	if caller {
		s.WriteString("OFFSET(printk_info.caller_id)=20\n")
	}
	if latched {
		s.WriteString("SIZE(latched_seq)=24\nOFFSET(latched_seq.val)=8\n")
	}
	return s.String()
}

// ring builds a lockless printk ringbuffer the way the kernel fills it:
// ids count up from an initial id whose descriptor is reusable, text
// blocks are id + text rounded up to 8 bytes, a block that does not fit
// before the end of the data ring is stored at its start, and records whose
// text is overwritten are made reusable and leave the tail.
type ring struct {
	count, size uint64
	mem         []byte
	head, tail  uint64
	dataHead    uint64 // logical position of the next text block
	seq         uint64
	blocks      map[uint64][2]uint64
}

func newRing(countBits, sizeBits uint32, startID uint64) *ring {
	r := &ring{count: 1 << countBits, size: 1 << sizeBits, head: startID, tail: startID, blocks: map[uint64][2]uint64{}}
	r.mem = make([]byte, ringDescsOff+r.count*(24+88)+r.size)
	le := binary.LittleEndian
	le.PutUint64(r.mem[ringPrbOff:], memBase+ringRBOff)
	rb := r.mem[ringRBOff:]
	le.PutUint32(rb[0:], countBits)
	le.PutUint64(rb[8:], memBase+ringDescsOff)
	le.PutUint64(rb[16:], memBase+r.infosOff())
	le.PutUint32(rb[48:], sizeBits)
	le.PutUint64(rb[56:], memBase+r.textOff())
	r.setState(startID, descReusable, startID)
	r.sync()
	return r
}

func (r *ring) infosOff() uint64 { return ringDescsOff + r.count*24 }
func (r *ring) textOff() uint64  { return r.infosOff() + r.count*88 }
func (r *ring) desc(id uint64) []byte {
	return r.mem[ringDescsOff+(id%r.count)*24:][:24]
}
func (r *ring) info(id uint64) []byte {
	return r.mem[r.infosOff()+(id%r.count)*88:][:88]
}
func (r *ring) text() []byte { return r.mem[r.textOff():][:r.size] }

// sync writes head and tail into the printk_ringbuffer.
func (r *ring) sync() {
	binary.LittleEndian.PutUint64(r.mem[ringRBOff+24:], r.head)
	binary.LittleEndian.PutUint64(r.mem[ringRBOff+32:], r.tail)
}

// setState gives the descriptor of slot id the state and id in its
// state_var.
func (r *ring) setState(slot, state, id uint64) {
	binary.LittleEndian.PutUint64(r.desc(slot), state<<62|id&prbIDMask)
}

func (r *ring) setLpos(id, begin, next uint64) {
	binary.LittleEndian.PutUint64(r.desc(id)[8:], begin)
	binary.LittleEndian.PutUint64(r.desc(id)[16:], next)
}

// push appends a finalized record and returns its id.
// pushN pushes records 0 to n-1, each at timestamp i with text prefix+i.
func (r *ring) pushN(n int, prefix string) {
	for i := range n {
		r.push(uint64(i), 1, fmt.Sprintf("%s%d", prefix, i))
	}
}

func (r *ring) push(tsNsec uint64, caller uint32, msg string) uint64 {
	le := binary.LittleEndian
	id := (r.head + 1) & prbIDMask
	blk := (8 + uint64(len(msg)) + 7) &^ 7
	begin := r.dataHead
	at := begin % r.size
	next := begin + blk
	if at+blk > r.size {
		next = begin + (r.size - at) + blk
		at = 0
	}
	le.PutUint64(r.text()[at:], id)
	copy(r.text()[at+8:], msg)
	r.dataHead = next
	// Records whose text the new block overwrote, and the record whose
	// descriptor slot the new one takes, are gone.
	for r.tail != r.head {
		old := (r.tail + 1) & prbIDMask
		b, ok := r.blocks[old]
		if ok && (next <= r.size || b[0] >= next-r.size) && old%r.count != id%r.count {
			break
		}
		r.setState(old, descReusable, old)
		delete(r.blocks, old)
		r.tail = old
	}
	r.setState(id, descFinalized, id)
	r.setLpos(id, begin, next)
	r.blocks[id] = [2]uint64{begin, next}
	in := r.info(id)
	le.PutUint64(in[0:], r.seq)
	le.PutUint64(in[8:], tsNsec)
	le.PutUint16(in[16:], uint16(len(msg)))
	le.PutUint32(in[20:], caller)
	r.seq++
	r.head = id
	r.sync()
	return id
}

// setClear stores clear_seq: as a latched_seq whose sequence picks val[1]
// when latched (with a decoy in val[0]), else as a plain u64.
func (r *ring) setClear(seq uint64, latched bool) {
	c := r.mem[ringClearOff:]
	if latched {
		binary.LittleEndian.PutUint64(c[0:], 7)
		binary.LittleEndian.PutUint64(c[8:], 1<<40)
		binary.LittleEndian.PutUint64(c[16:], seq)
		return
	}
	binary.LittleEndian.PutUint64(c, seq)
}

func formatted(t testing.TB, recs []Record, opt FormatOptions) string {
	t.Helper()
	var b bytes.Buffer
	if err := FormatLog(&b, recs, opt); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// msgs returns the records' texts, for compact expectations.
func msgs(recs []Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Text))
	}
	return out
}

func TestReadLogRingbuffer(t *testing.T) {
	type tc struct {
		name    string
		build   func() *ring
		vi      string
		partial bool
		want    []string
	}
	std := ringVMCOREINFO(true, true, true)
	// Debian 6.1's first id: DESC0_ID computed in 32 bits.
	const id0 = 0xffffefff & prbIDMask
	cases := []tc{
		{
			name: "in order, initial reusable descriptor skipped",
			build: func() *ring {
				r := newRing(4, 9, (-(16 + 1))&prbIDMask)
				r.push(1, 1, "one")
				r.push(2, 1, "two")
				r.push(3, 1, "three")
				return r
			},
			vi:   std,
			want: []string{"one", "two", "three"},
		},
		{
			name: "text block wraps to the start of the data ring",
			build: func() *ring {
				r := newRing(4, 6, id0)                 // 64-byte data ring
				r.push(1, 1, "0123456789abcdef")        // block 0-24
				r.push(2, 1, "wrapping record text!!!") // block 24-56
				r.push(3, 1, "third, wrapped")          // 24 bytes: stored at 0-24, overwriting the first
				return r
			},
			vi:   std,
			want: []string{"wrapping record text!!!", "third, wrapped"},
		},
		{
			name: "more records than descriptors: the oldest are gone",
			build: func() *ring {
				r := newRing(2, 10, id0)
				r.pushN(7, "m")
				return r
			},
			vi:   std,
			want: []string{"m3", "m4", "m5", "m6"},
		},
		{
			name: "ids wrap past 2^62",
			build: func() *ring {
				r := newRing(2, 10, prbIDMask-2)
				r.pushN(6, "w")
				return r
			},
			vi:   std,
			want: []string{"w2", "w3", "w4", "w5"},
		},
		{
			name: "reserved, reusable, stale-id and data-less records are skipped",
			build: func() *ring {
				r := newRing(3, 10, id0)
				a := r.push(1, 1, "kept")
				b := r.push(2, 1, "reserved")
				c := r.push(3, 1, "reusable")
				d := r.push(4, 1, "stale")
				e := r.push(5, 1, "dataless")
				r.push(6, 1, "committed")
				f := r.push(7, 1, "last")
				r.setState(b, descReserved, b)
				r.setState(c, descReusable, c)
				r.setState(d, descFinalized, d-8) // the previous lap's id
				r.setLpos(e, 1, 1)                // FAILED_LPOS
				r.setState(f-1, descCommitted, f-1)
				_ = a
				return r
			},
			vi:   std,
			want: []string{"kept", "committed", "last"},
		},
		{
			name: "text_len longer than the block is clipped",
			build: func() *ring {
				r := newRing(3, 10, id0)
				id := r.push(1, 1, "short")
				binary.LittleEndian.PutUint16(r.info(id)[16:], 60000)
				return r
			},
			vi:   std,
			want: []string{"short\x00\x00\x00"},
		},
		{
			name: "partial: latched clear_seq",
			build: func() *ring {
				r := newRing(3, 10, id0)
				r.pushN(5, "p")
				r.setClear(3, true)
				return r
			},
			vi:      std,
			partial: true,
			want:    []string{"p3", "p4"},
		},
		{
			name: "partial: plain clear_seq (5.10-5.12)",
			build: func() *ring {
				r := newRing(3, 10, id0)
				r.pushN(5, "p")
				r.setClear(2, false)
				return r
			},
			vi:      ringVMCOREINFO(false, true, true),
			partial: true,
			want:    []string{"p2", "p3", "p4"},
		},
		{
			name: "partial: clear_seq's slot is past head's, so a lap back",
			build: func() *ring {
				r := newRing(2, 10, id0)
				r.pushN(6, "p")     // seqs 0-5; head is seq 5 in slot 1
				r.setClear(3, true) // slot 3
				return r
			},
			vi:      std,
			partial: true,
			want:    []string{"p3", "p4", "p5"},
		},
		{
			name: "partial without SYMBOL(clear_seq) reads everything",
			build: func() *ring {
				r := newRing(3, 10, id0)
				r.push(1, 1, "a")
				r.push(2, 1, "b")
				r.setClear(1, true)
				return r
			},
			vi:      ringVMCOREINFO(true, false, true),
			partial: true,
			want:    []string{"a", "b"},
		},
		{
			name: "corrupted tail far behind head is clamped to one lap",
			build: func() *ring {
				r := newRing(2, 10, id0)
				r.pushN(3, "c")
				r.tail = (r.head + 5) & prbIDMask // "after" head: 2^62 ids behind
				r.sync()
				return r
			},
			vi:   std,
			want: []string{"c0", "c1", "c2"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.build()
			recs, err := ReadLog(mustVMCOREINFO(t, c.vi), regionMem{memBase, r.mem}, c.partial)
			if err != nil {
				t.Fatal(err)
			}
			if got := msgs(recs); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestReadLogRingbufferFields(t *testing.T) {
	r := newRing(3, 10, 0)
	r.push(12_345_678_901, 0x80000002, "cpu")
	r.push(5, 4242, "task")
	recs, err := ReadLog(mustVMCOREINFO(t, ringVMCOREINFO(true, true, true)), regionMem{memBase, r.mem}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{
		{TsNsec: 12_345_678_901, CallerID: 0x80000002, HasCallerID: true, Text: []byte("cpu")},
		{TsNsec: 5, CallerID: 4242, HasCallerID: true, Text: []byte("task")},
	}
	if fmt.Sprint(recs) != fmt.Sprint(want) {
		t.Errorf("got %+v, want %+v", recs, want)
	}
	recs, err = ReadLog(mustVMCOREINFO(t, ringVMCOREINFO(true, true, false)), regionMem{memBase, r.mem}, false)
	if err != nil || recs[0].HasCallerID {
		t.Errorf("without OFFSET(printk_info.caller_id): %+v, %v", recs, err)
	}
}

func TestReadLogRingbufferErrors(t *testing.T) {
	std := ringVMCOREINFO(true, true, true)
	cases := []struct {
		name   string
		vi     string
		mutate func(r *ring)
		want   error // matched with errors.Is when non-nil
		substr string
	}{
		{"huge count_bits", std, func(r *ring) { binary.LittleEndian.PutUint32(r.mem[ringRBOff:], 40) }, ErrLogCorrupt, "count_bits 40"},
		{"huge size_bits", std, func(r *ring) { binary.LittleEndian.PutUint32(r.mem[ringRBOff+48:], 63) }, ErrLogCorrupt, "size_bits 63"},
		{"descriptors too big together", std, func(r *ring) { binary.LittleEndian.PutUint32(r.mem[ringRBOff:], 30) }, ErrLogCorrupt, "descriptors"},
		{"prb points nowhere", std, func(r *ring) { binary.LittleEndian.PutUint64(r.mem[ringPrbOff:], 0x1000) }, nil, "printk_ringbuffer"},
		{"descs unreadable", std, func(r *ring) { binary.LittleEndian.PutUint64(r.mem[ringRBOff+8:], memBase+uint64(len(r.mem))-8) }, nil, "prb descriptors"},
		{"text ring unreadable", std, func(r *ring) { binary.LittleEndian.PutUint64(r.mem[ringRBOff+56:], 0) }, nil, "text data ring"},
		{"missing offset", strings.Replace(std, "OFFSET(prb_desc.state_var)=0\n", "", 1), nil, ErrMissingKey, "OFFSET(prb_desc.state_var)"},
		{"offset outside its struct", strings.Replace(std, "OFFSET(printk_info.text_len)=16", "OFFSET(printk_info.text_len)=87", 1), nil, ErrLogCorrupt, "printk_info.text_len"},
		{"negative offset", strings.Replace(std, "OFFSET(prb_desc_ring.head_id)=24", "OFFSET(prb_desc_ring.head_id)=-8", 1), nil, ErrLogCorrupt, "head_id"},
		{"struct size zero", strings.Replace(std, "SIZE(prb_desc)=24", "SIZE(prb_desc)=0", 1), nil, ErrLogCorrupt, "SIZE(prb_desc)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRing(3, 10, 0)
			r.push(1, 1, "x")
			if c.mutate != nil {
				c.mutate(r)
			}
			recs, err := ReadLog(mustVMCOREINFO(t, c.vi), regionMem{memBase, r.mem}, false)
			if err == nil || recs != nil {
				t.Fatalf("got %d records, error %v; want an error", len(recs), err)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("error %v does not wrap %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.substr) {
				t.Errorf("error %q does not mention %q", err, c.substr)
			}
		})
	}
}

func TestReadLogNoLog(t *testing.T) {
	_, err := ReadLog(mustVMCOREINFO(t, "OSRELEASE=x\nPAGESIZE=4096\n"), regionMem{}, false)
	if !errors.Is(err, ErrMissingKey) {
		t.Errorf("no log symbols: %v", err)
	}
	_, err = ReadLog(mustVMCOREINFO(t, "OSRELEASE=2.6.32\nPAGESIZE=4096\nSYMBOL(log_buf)=1\nSYMBOL(log_end)=2\n"), regionMem{}, false)
	if !errors.Is(err, ErrLogUnsupported) {
		t.Errorf("pre-3.5 log: %v", err)
	}
}

// Where the synthetic 3.5-5.9 log lies in its memory image.
const (
	logBufPtrOff = 0
	logLenOff    = 8
	logFirstOff  = 12
	logNextOff   = 16
	logClearOff  = 20
	logBufOff    = 64
)

// logVMCOREINFO describes a 5.x printk_log of 16 bytes, plus caller_id (20
// bytes) when caller; old names it as 3.5-3.10 did, struct log.
func logVMCOREINFO(old, caller, clearIdx bool) string {
	var s strings.Builder
	fmt.Fprintf(&s, "OSRELEASE=5.4.0\nPAGESIZE=4096\nSYMBOL(log_buf)=%x\nSYMBOL(log_buf_len)=%x\nSYMBOL(log_first_idx)=%x\nSYMBOL(log_next_idx)=%x\n",
		uint64(memBase+logBufPtrOff), uint64(memBase+logLenOff), uint64(memBase+logFirstOff), uint64(memBase+logNextOff))
	if clearIdx {
		fmt.Fprintf(&s, "SYMBOL(clear_idx)=%x\n", uint64(memBase+logClearOff))
	}
	name, size := "printk_log", 16
	if old {
		name = "log"
	}
	if caller {
		size = 20
	}
	fmt.Fprintf(&s, "SIZE(%[1]s)=%[2]d\nOFFSET(%[1]s.ts_nsec)=0\nOFFSET(%[1]s.len)=8\nOFFSET(%[1]s.text_len)=10\n", name, size)
	if caller {
		fmt.Fprintf(&s, "OFFSET(%s.caller_id)=16\n", name)
	}
	return s.String()
}

// logImage is a 3.5-5.9 log buffer in its memory image.
type logImage struct {
	mem  []byte
	hdr  uint32
	size uint32
}

func newLogImage(size, hdr uint32) *logImage {
	l := &logImage{mem: make([]byte, logBufOff+int(size)), hdr: hdr, size: size}
	binary.LittleEndian.PutUint64(l.mem[logBufPtrOff:], memBase+logBufOff)
	binary.LittleEndian.PutUint32(l.mem[logLenOff:], size)
	return l
}

func (l *logImage) buf() []byte { return l.mem[logBufOff:] }

// put writes a record at index at and returns the index after it, records
// being 4-byte aligned as on x86_64.
func (l *logImage) put(at uint32, ts uint64, caller uint32, msg string) uint32 {
	n := (l.hdr + uint32(len(msg)) + 3) &^ 3
	h := l.buf()[at:]
	binary.LittleEndian.PutUint64(h[0:], ts)
	binary.LittleEndian.PutUint16(h[8:], uint16(n))
	binary.LittleEndian.PutUint16(h[10:], uint16(len(msg)))
	if l.hdr >= 20 {
		binary.LittleEndian.PutUint32(h[16:], caller)
	}
	copy(h[l.hdr:], msg)
	return at + n
}

// setLen overwrites the len field of the record at index at.
func (l *logImage) setLen(at uint32, n uint16) {
	binary.LittleEndian.PutUint16(l.buf()[at+8:], n)
}

func (l *logImage) setIdx(first, next, clear uint32) {
	binary.LittleEndian.PutUint32(l.mem[logFirstOff:], first)
	binary.LittleEndian.PutUint32(l.mem[logNextOff:], next)
	binary.LittleEndian.PutUint32(l.mem[logClearOff:], clear)
}

func TestReadLogLogBuf(t *testing.T) {
	// A wrapped buffer: the oldest records at the end, a len-0 marker, the
	// newest at the start.
	wrapped := func() *logImage {
		l := newLogImage(136, 20)
		a := l.put(0, 5e9, 1, "new1")  // 0-24
		b := l.put(a, 6e9, 1, "new2")  // 24-48
		o := l.put(64, 1e9, 1, "old1") // 64-88
		m := l.put(o, 2e9, 1, "old2")  // 88-112
		l.setLen(m, 0)                 // end marker at 112
		l.setIdx(64, b, a)             // clear_idx: at new2
		return l
	}
	cases := []struct {
		name    string
		img     func() *logImage
		vi      string
		partial bool
		want    []string
	}{
		{"wrap marker", wrapped, logVMCOREINFO(false, true, true), false, []string{"old1", "old2", "new1", "new2"}},
		{"partial from clear_idx", wrapped, logVMCOREINFO(false, true, true), true, []string{"new2"}},
		{"partial without clear_idx", wrapped, logVMCOREINFO(false, true, false), true, []string{"old1", "old2", "new1", "new2"}},
		{"struct log of 3.5-3.10", func() *logImage {
			l := newLogImage(64, 16)
			n := l.put(0, 1, 0, "a")
			n = l.put(n, 2, 0, "bb")
			l.setIdx(0, n, 0)
			return l
		}, logVMCOREINFO(true, false, false), false, []string{"a", "bb"}},
		{"empty log", func() *logImage {
			l := newLogImage(64, 16)
			l.setIdx(8, 8, 0)
			return l
		}, logVMCOREINFO(false, false, false), false, nil},
		{"text_len past its record is clipped", func() *logImage {
			l := newLogImage(64, 16)
			n := l.put(0, 1, 0, "abc")
			binary.LittleEndian.PutUint16(l.buf()[10:], 999)
			l.put(n, 2, 0, "next")
			l.setIdx(0, n, 0)
			return l
		}, logVMCOREINFO(false, false, false), false, []string{"abc\x00"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recs, err := ReadLog(mustVMCOREINFO(t, c.vi), regionMem{memBase, c.img().mem}, c.partial)
			if err != nil {
				t.Fatal(err)
			}
			if got := msgs(recs); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}

	recs, err := ReadLog(mustVMCOREINFO(t, logVMCOREINFO(false, true, false)), regionMem{memBase, wrapped().mem}, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := recs[0]; r.TsNsec != 1e9 || !r.HasCallerID || r.CallerID != 1 {
		t.Errorf("first record %+v", r)
	}
}

func TestReadLogLogBufCorrupt(t *testing.T) {
	vi := logVMCOREINFO(false, false, false)
	cases := []struct {
		name  string
		img   func() *logImage
		want  error
		texts []string // records returned with the error
	}{
		{"cycle", func() *logImage {
			l := newLogImage(128, 16)
			a := l.put(0, 1, 0, "a")
			b := l.put(a, 2, 0, "b")
			c := l.put(b, 3, 0, "c")
			l.setLen(c, 0)      // wraps to 0...
			l.setIdx(a, 100, 0) // ...but log_next_idx is never reached
			return l
		}, ErrLogCycle, []string{"b", "c", "a"}},
		{"cycle through a marker at the start", func() *logImage {
			l := newLogImage(64, 16)
			l.put(16, 1, 0, "x")
			l.setLen(16, 0)
			l.setIdx(16, 40, 0)
			return l
		}, ErrLogCycle, []string{"", ""}},
		{"next record outside the buffer", func() *logImage {
			l := newLogImage(64, 16)
			a := l.put(0, 1, 0, "a")
			l.put(a, 2, 0, "b")
			l.setLen(a, 40) // a+40 = 60 > 64-16
			l.setIdx(0, 48, 0)
			return l
		}, ErrLogIndex, []string{"a", "b"}},
		{"first record outside the buffer", func() *logImage {
			l := newLogImage(64, 16)
			l.setIdx(60, 0, 0)
			return l
		}, ErrLogIndex, nil},
		{"record shorter than its header", func() *logImage {
			l := newLogImage(64, 16)
			a := l.put(0, 1, 0, "a")
			l.put(a, 2, 0, "b")
			l.setLen(a, 4)
			l.setIdx(0, 48, 0)
			return l
		}, ErrLogCorrupt, []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recs, err := ReadLog(mustVMCOREINFO(t, vi), regionMem{memBase, c.img().mem}, false)
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
			if got := msgs(recs); fmt.Sprint(got) != fmt.Sprint(c.texts) {
				t.Errorf("records %q, want %q", got, c.texts)
			}
		})
	}

	for name, mutate := range map[string]func(l *logImage){
		"log_buf_len huge":    func(l *logImage) { binary.LittleEndian.PutUint32(l.mem[logLenOff:], 1<<31) },
		"log_buf_len tiny":    func(l *logImage) { binary.LittleEndian.PutUint32(l.mem[logLenOff:], 8) },
		"log_buf unreadable":  func(l *logImage) { binary.LittleEndian.PutUint64(l.mem[logBufPtrOff:], 0) },
		"log_buf half mapped": func(l *logImage) { binary.LittleEndian.PutUint32(l.mem[logLenOff:], 1<<20) },
	} {
		t.Run(name, func(t *testing.T) {
			l := newLogImage(64, 16)
			l.setIdx(0, 0, 0)
			mutate(l)
			recs, err := ReadLog(mustVMCOREINFO(t, vi), regionMem{memBase, l.mem}, false)
			if err == nil || recs != nil {
				t.Fatalf("got %d records, %v; want an error", len(recs), err)
			}
		})
	}
}

func TestFormatLog(t *testing.T) {
	recs := []Record{
		{TsNsec: 0, Text: []byte("Linux version 6.1")},
		{TsNsec: 1_234_567_891, Text: []byte("first line\nsecond line\n  indented")},
		{TsNsec: 123_456_789_012_345, Text: []byte("ctl \x01\x7f\x1b tab\tcr\rvt\vff\f nul\x00 hi \x80\xc3\xa9\xff")},
		{TsNsec: 999_999, Text: nil},
		{TsNsec: 42e9, Text: []byte("trailing newline\n")},
	}
	want := "" +
		"[    0.000000] Linux version 6.1\n" +
		"[    1.234567] first line\n" +
		"               second line\n" +
		"                 indented\n" +
		"[123456.789012] ctl \\x01\\x7f\\x1b tab\tcr\rvt\vff\f nul\\x00 hi \\xffffff80\\xffffffc3\\xffffffa9\\xffffffff\n" +
		"[    0.000999] \n" +
		"[   42.000000] trailing newline\n" +
		"               \n"
	if got := formatted(t, recs, FormatOptions{}); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	withCaller := []Record{
		{TsNsec: 1e6, CallerID: 123, HasCallerID: true, Text: []byte("task\nmore")},
		{TsNsec: 2e6, CallerID: 0x80000003, HasCallerID: true, Text: []byte("cpu")},
		{TsNsec: 3e6, Text: []byte("none")},
	}
	want = "" +
		"[    0.001000] [    T123] task\n" +
		"                          more\n" +
		"[    0.002000] [      C3] cpu\n" +
		"[    0.003000] none\n"
	if got := formatted(t, withCaller, FormatOptions{CallerID: true}); got != want {
		t.Errorf("caller ids: got\n%s\nwant\n%s", got, want)
	}
	if got := formatted(t, withCaller[:1], FormatOptions{}); got != "[    0.001000] task\n               more\n" {
		t.Errorf("caller ids off: got %q", got)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestFormatLogWriteError(t *testing.T) {
	recs := []Record{{Text: bytes.Repeat([]byte("x"), 100<<10)}}
	if err := FormatLog(failWriter{}, recs, FormatOptions{}); err == nil {
		t.Error("write error not reported")
	}
}

// FuzzReadLog feeds hostile kernel memory to both log readers: the image
// holds every pointer, index, length and state ReadLog reads, and is seeded
// with well-formed logs. ReadLog must return, without panicking, and the
// records it returns must format.
func FuzzReadLog(f *testing.F) {
	r := newRing(3, 8, (-(8 + 1))&prbIDMask)
	for i := range 12 {
		r.push(uint64(i)*1e6, uint32(i), fmt.Sprintf("message %d\nline 2 \xff", i))
	}
	r.setClear(9, true)
	f.Add(false, true, r.mem)
	r = newRing(2, 6, prbIDMask-1)
	r.push(1, 1, "abc")
	f.Add(true, true, r.mem)

	l := newLogImage(128, 16)
	a := l.put(0, 5e9, 0, "new1")
	o := l.put(64, 1e9, 0, "old1")
	l.setLen(o, 0)
	l.setIdx(64, a, 0)
	f.Add(false, false, l.mem)
	l.setIdx(0, 100, 0)
	f.Add(true, false, l.mem)

	ringVI := mustVMCOREINFO(f, ringVMCOREINFO(true, true, true))
	logVI := mustVMCOREINFO(f, logVMCOREINFO(false, true, true))
	f.Fuzz(func(t *testing.T, partial, lockless bool, mem []byte) {
		if len(mem) > 1<<16 {
			return
		}
		vi := logVI
		if lockless {
			vi = ringVI
		}
		recs, err := ReadLog(vi, regionMem{memBase, mem}, partial)
		if lockless && err != nil && recs != nil {
			t.Fatalf("records with error %v from the lockless reader", err)
		}
		var n int
		for _, rec := range recs {
			n += len(rec.Text)
		}
		var out bytes.Buffer
		if err := FormatLog(&out, recs, FormatOptions{CallerID: true}); err != nil {
			t.Fatal(err)
		}
		if out.Len() < n {
			t.Fatalf("formatted %d bytes from %d bytes of text", out.Len(), n)
		}
	})
}
