package synth

import (
	"encoding/binary"
)

// ELF constants used here (debug/elf has them too, but as typed values;
// plain numbers keep the encoder a flat list of stores).
const (
	ehdrSize = 64
	phdrSize = 56
	shdrSize = 64

	etCore   = 4
	emX86_64 = 62
	ptLoad   = 1
	ptNote   = 4
	shtStrab = 3
	pnXnum   = 0xffff

	// NtPrstatus is the note type of the per-CPU register notes.
	NtPrstatus = 1
	// PrstatusSize is sizeof(struct elf_prstatus) on x86_64.
	PrstatusSize = 336
	// QEMUCPUStateSize is sizeof(QEMUCPUState), the desc of QEMU's
	// per-CPU "QEMU" note.
	QEMUCPUStateSize = 440
)

// shstrtab is the string data of the QEMU layout's .shstrtab section.
const shstrtab = "\x00.shstrtab\x00"

// Geometry is where things are in the file that Write produces for a
// spec: what tests need to find the pieces without an ELF parser.
type Geometry struct {
	Size  int64 // file size in bytes
	PhOff int64 // e_phoff
	PhNum int   // real number of program headers: 1 PT_NOTE + the PT_LOADs
	// Xnum reports extended numbering: e_phnum is 0xffff and PhNum is in
	// section header 0's sh_info.
	Xnum     bool
	ShOff    int64 // e_shoff; 0 when there are no section headers
	ShNum    int   // e_shnum
	NoteOff  int64 // p_offset of the PT_NOTE
	NoteSize int64 // its p_filesz
	// LoadOff[i] is p_offset of Segments[i].
	LoadOff []int64
	// VMCOREINFOOff is the file offset of the VMCOREINFO note's desc (-1
	// when there is none); VMCOREINFOOff-NoteOff is its offset within
	// NoteBytes.
	VMCOREINFOOff  int64
	VMCOREINFOSize int64
	// StrtabOff is the offset of the .shstrtab data (QEMU layout), else 0.
	StrtabOff int64
}

func roundUp(x, a int64) int64 { return (x + a - 1) / a * a }

// GeometryOf lays out the file for s.
//
// For a kernel machine the geometry is that of FileSegments.
func GeometryOf(s Spec) (Geometry, error) {
	if err := s.Validate(); err != nil {
		return Geometry{}, err
	}
	s = kernelView(&s)
	notes, vmciOff := buildNotes(&s)
	g := Geometry{
		PhNum:         1 + len(s.Segments),
		NoteSize:      int64(len(notes)),
		LoadOff:       make([]int64, len(s.Segments)),
		VMCOREINFOOff: -1,
	}
	g.Xnum = s.PNXnum || g.PhNum >= pnXnum
	ehsz, phsz := s.Arch.elfSizes()
	var off int64
	switch s.Layout {
	case ProcVmcore:
		g.PhOff = ehsz
		off = ehsz + int64(g.PhNum)*phsz
		if g.Xnum {
			g.ShOff, g.ShNum = off, 1
			off += shdrSize
		}
		ps := int64(s.PageBytes())
		g.NoteOff = roundUp(off, ps)
		off = roundUp(g.NoteOff+g.NoteSize, ps)
		g.Size = g.NoteOff + g.NoteSize
		for i, sg := range s.Segments {
			if sg.FileSize == 0 {
				g.LoadOff[i] = off
				continue
			}
			// The kernel's page-granular chunk [rounddown(start),
			// roundup(end)); p_offset points at the start byte in it.
			head := int64(sg.Paddr) % ps
			g.LoadOff[i] = off + head
			g.Size = max(g.Size, g.LoadOff[i]+int64(sg.FileSize))
			off += roundUp(head+int64(sg.FileSize), ps)
		}
	case QEMU:
		g.ShOff, g.ShNum = ehdrSize, 2
		g.PhOff = ehdrSize + 2*shdrSize
		g.NoteOff = g.PhOff + int64(g.PhNum)*phsz
		off = g.NoteOff + g.NoteSize
		for i, sg := range s.Segments {
			g.LoadOff[i] = off
			off += int64(sg.FileSize)
		}
		g.StrtabOff = off
		g.Size = off + int64(len(shstrtab))
	}
	if vmciOff >= 0 {
		g.VMCOREINFOOff = g.NoteOff + int64(vmciOff)
		g.VMCOREINFOSize = int64(len(vmcoreinfoOf(&s)))
	}
	return g, nil
}

// headers returns bytes [0, n) of the file: ELF header, section headers
// and program headers, with whatever padding lies between them, in the
// class and byte order of the spec's architecture.
func headers(s *Spec, g *Geometry) []byte {
	e := newELFEncoder(s.Arch)
	end := g.PhOff + int64(g.PhNum)*e.phsz
	if g.ShNum > 0 {
		end = max(end, g.ShOff+int64(g.ShNum)*e.shsz)
	}
	b := make([]byte, end)
	o := e.order

	copy(b, "\x7fELF")
	b[4] = 2 // ELFCLASS64
	if e.class32 {
		b[4] = 1 // ELFCLASS32
	}
	b[5] = 1 // ELFDATA2LSB
	if o.String() == binary.BigEndian.String() {
		b[5] = 2 // ELFDATA2MSB
	}
	b[6] = 1 // EV_CURRENT
	o.PutUint16(b[16:], etCore)
	o.PutUint16(b[18:], s.Arch.info().machine)
	o.PutUint32(b[20:], 1)
	// The fields after e_version: e_entry, e_phoff and e_shoff are words
	// of the class, the rest the same in both classes.
	h := b[24:]
	h = e.putWord(h[e.word():], uint64(g.PhOff)) // e_entry (0) skipped
	h = e.putWord(h, uint64(g.ShOff))
	h = h[4:] // e_flags
	ehsize := uint16(e.ehsz)
	if s.Layout == QEMU {
		ehsize = 8 // QEMU 7.2 stores sizeof a pointer here
	}
	o.PutUint16(h[0:], ehsize)
	o.PutUint16(h[2:], uint16(e.phsz))
	phnum := uint16(g.PhNum)
	if g.Xnum {
		phnum = pnXnum
	}
	o.PutUint16(h[4:], phnum)
	if g.ShNum > 0 {
		o.PutUint16(h[6:], uint16(e.shsz))
	}
	o.PutUint16(h[8:], uint16(g.ShNum))
	var shstrndx uint16
	if s.Layout == QEMU {
		shstrndx = 1
	}
	o.PutUint16(h[10:], shstrndx)

	if g.ShNum > 0 {
		// Section header 0: all zero but sh_info (and, as the kernel's
		// fill_extnum_info does, sh_size = e_shnum and sh_link =
		// e_shstrndx when numbering is extended).
		sh := b[g.ShOff:]
		if g.Xnum {
			e.shdr(sh, 0, 0, 0, uint64(g.ShNum), uint32(shstrndx), uint32(g.PhNum), 0)
		}
		if s.Layout == QEMU {
			// sh_name: ".shstrtab" at 1
			e.shdr(sh[e.shsz:], 1, shtStrab, uint64(g.StrtabOff), uint64(len(shstrtab)), 0, 0, 1)
		}
	}

	ph := b[g.PhOff:]
	e.phdr(ph, ptNote, 0, uint64(g.NoteOff), 0, 0, uint64(g.NoteSize), uint64(g.NoteSize))
	var flags uint32 = 7 // RWX, as kexec-tools writes; QEMU leaves 0
	if s.Layout == QEMU {
		flags = 0
	}
	for i, sg := range s.Segments {
		ph = ph[e.phsz:]
		e.phdr(ph, ptLoad, flags, uint64(g.LoadOff[i]), sg.Vaddr, sg.Paddr, sg.FileSize, sg.MemSize)
	}
	return b
}

// elfEncoder writes ELF structures in one class and byte order.
type elfEncoder struct {
	order            byteOrder
	class32          bool
	ehsz, phsz, shsz int64
}

func newELFEncoder(a Arch) elfEncoder {
	e := elfEncoder{order: a.byteOrder(), class32: a.info().class32, shsz: shdrSize}
	e.ehsz, e.phsz = a.elfSizes()
	if e.class32 {
		e.shsz = 40
	}
	return e
}

// word is the size of an address or offset in the class.
func (e elfEncoder) word() int {
	if e.class32 {
		return 4
	}
	return 8
}

// putWord stores v as a word of the class at b and returns what follows.
func (e elfEncoder) putWord(b []byte, v uint64) []byte {
	if e.class32 {
		e.order.PutUint32(b, uint32(v))
		return b[4:]
	}
	e.order.PutUint64(b, v)
	return b[8:]
}

// phdr writes a program header: Elf64_Phdr puts p_flags second,
// Elf32_Phdr second to last.
func (e elfEncoder) phdr(b []byte, typ, flags uint32, off, vaddr, paddr, filesz, memsz uint64) {
	e.order.PutUint32(b, typ)
	if e.class32 {
		r := e.putWord(b[4:], off)
		r = e.putWord(r, vaddr)
		r = e.putWord(r, paddr)
		r = e.putWord(r, filesz)
		r = e.putWord(r, memsz)
		e.order.PutUint32(r, flags)
		return
	}
	e.order.PutUint32(b[4:], flags)
	r := e.putWord(b[8:], off)
	r = e.putWord(r, vaddr)
	r = e.putWord(r, paddr)
	r = e.putWord(r, filesz)
	e.putWord(r, memsz)
}

// shdr writes the section header fields the generator uses (sh_flags and
// sh_addr stay 0, sh_entsize too).
func (e elfEncoder) shdr(b []byte, name, typ uint32, off, size uint64, link, info uint32, align uint64) {
	e.order.PutUint32(b[0:], name)
	e.order.PutUint32(b[4:], typ)
	r := b[8+2*e.word():] // past sh_flags, sh_addr
	r = e.putWord(r, off)
	r = e.putWord(r, size)
	e.order.PutUint32(r, link)
	e.order.PutUint32(r[4:], info)
	e.putWord(r[8:], align)
}

// NoteBytes returns the contents of the PT_NOTE segment: one NT_PRSTATUS
// "CORE" note per CPU, then (with ExtraNotes) one "QEMU" note per CPU, as
// QEMU orders them, then the VMCOREINFO note (name "VMCOREINFO", type 0,
// desc the text without a NUL). Names and descs are padded to 4 bytes.
func NoteBytes(s Spec) []byte {
	b, _ := buildNotes(&s)
	return b
}

// buildNotes returns the note bytes and the offset of the VMCOREINFO
// desc in them (-1 when there is none).
func buildNotes(s *Spec) ([]byte, int) {
	prsz := s.Arch.info().prstatus
	n := s.CPUs * (12 + 8 + prsz)
	if s.ExtraNotes {
		n += s.CPUs * (12 + 8 + QEMUCPUStateSize)
	}
	vmci := vmcoreinfoOf(s)
	n += 12 + 12 + len(vmci) + 3
	b := make([]byte, 0, n)
	o := s.Arch.byteOrder()
	for cpu := 0; cpu < s.CPUs; cpu++ {
		desc := prstatus(s.Seed, cpu)
		if s.Arch != X86_64 {
			// Another architecture's registers: only the size is its own.
			desc = make([]byte, prsz)
			r := rng(key(s.Seed, uint64(cpu), saltNote))
			for i := 0; i+8 <= len(desc); i += 8 {
				o.PutUint64(desc[i:], r.next())
			}
		}
		b = appendNote(b, o, "CORE", NtPrstatus, desc)
	}
	if s.ExtraNotes {
		for cpu := 0; cpu < s.CPUs; cpu++ {
			b = appendNote(b, o, "QEMU", 0, qemuCPUState(s.Seed, cpu))
		}
	}
	off := -1
	if vmci != "" {
		b = appendNote(b, o, "VMCOREINFO", 0, []byte(vmci))
		off = len(b) - pad4(len(vmci))
	}
	return b, off
}

func pad4(n int) int { return (n + 3) &^ 3 }

// appendNote appends a note header (Elf64_Nhdr and Elf32_Nhdr are alike)
// in byte order o, the NUL-terminated name and the desc, each padded to 4
// bytes (b's length is a multiple of 4 on entry).
func appendNote(b []byte, o binary.AppendByteOrder, name string, typ uint32, desc []byte) []byte {
	b = o.AppendUint32(b, uint32(len(name)+1))
	b = o.AppendUint32(b, uint32(len(desc)))
	b = o.AppendUint32(b, typ)
	b = append(b, name...)
	for len(b)%4 != 0 || b[len(b)-1] != 0 {
		b = append(b, 0)
	}
	b = append(b, desc...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// prstatus builds an x86_64 struct elf_prstatus as crash_save_cpu leaves
// it: zeroed except pr_pid and pr_reg. CPU 0 is the panicking task, the
// others idle (pid 0), as after a typical panic.
func prstatus(seed uint64, cpu int) []byte {
	b := make([]byte, PrstatusSize)
	le := binary.LittleEndian
	r := rng(key(seed, uint64(cpu), saltNote))
	if cpu == 0 {
		le.PutUint32(b[32:], uint32(1000+r.next()%30000)) // pr_pid
	}
	// pr_reg at 112: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx
	// rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs.
	regs := b[112 : 112+27*8]
	for i := 0; i < 27; i++ {
		le.PutUint64(regs[i*8:], r.next())
	}
	stack := 0xffffc90000000000 + (r.next()&0xffffff)<<4
	le.PutUint64(regs[4*8:], stack+0x80)                            // rbp
	le.PutUint64(regs[15*8:], 0xffffffffffffffff)                   // orig_rax
	le.PutUint64(regs[16*8:], 0xffffffff81000000+r.next()%(16<<20)) // rip
	le.PutUint64(regs[17*8:], 0x10)                                 // cs
	le.PutUint64(regs[18*8:], 0x246)                                // eflags
	le.PutUint64(regs[19*8:], stack)                                // rsp
	le.PutUint64(regs[20*8:], 0x18)                                 // ss
	for i := 23; i < 27; i++ {
		le.PutUint64(regs[i*8:], 0) // ds es fs gs
	}
	return b
}

// qemuCPUState builds QEMU's QEMUCPUState (version 1): version, size,
// 18 general registers, 8 segments, gdt, idt (24 bytes each), cr[5],
// kernel_gs_base.
func qemuCPUState(seed uint64, cpu int) []byte {
	b := make([]byte, QEMUCPUStateSize)
	le := binary.LittleEndian
	r := rng(key(seed, uint64(cpu)+1<<32, saltNote))
	le.PutUint32(b[0:], 1)
	le.PutUint32(b[4:], QEMUCPUStateSize)
	for i := 8; i+8 <= len(b); i += 8 {
		le.PutUint64(b[i:], r.next())
	}
	return b
}
