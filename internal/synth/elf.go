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
	var off int64
	switch s.Layout {
	case ProcVmcore:
		g.PhOff = ehdrSize
		off = ehdrSize + int64(g.PhNum)*phdrSize
		if g.Xnum {
			g.ShOff, g.ShNum = off, 1
			off += shdrSize
		}
		g.NoteOff = roundUp(off, PageSize)
		off = roundUp(g.NoteOff+g.NoteSize, PageSize)
		g.Size = g.NoteOff + g.NoteSize
		for i, sg := range s.Segments {
			if sg.FileSize == 0 {
				g.LoadOff[i] = off
				continue
			}
			// The kernel's page-granular chunk [rounddown(start),
			// roundup(end)); p_offset points at the start byte in it.
			head := int64(sg.Paddr % PageSize)
			g.LoadOff[i] = off + head
			g.Size = max(g.Size, g.LoadOff[i]+int64(sg.FileSize))
			off += roundUp(head+int64(sg.FileSize), PageSize)
		}
	case QEMU:
		g.ShOff, g.ShNum = ehdrSize, 2
		g.PhOff = ehdrSize + 2*shdrSize
		g.NoteOff = g.PhOff + int64(g.PhNum)*phdrSize
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
// and program headers, with whatever padding lies between them.
func headers(s *Spec, g *Geometry) []byte {
	end := g.PhOff + int64(g.PhNum)*phdrSize
	if g.ShNum > 0 {
		end = max(end, g.ShOff+int64(g.ShNum)*shdrSize)
	}
	b := make([]byte, end)
	le := binary.LittleEndian

	copy(b, "\x7fELF")
	b[4] = 2 // ELFCLASS64
	b[5] = 1 // ELFDATA2LSB
	b[6] = 1 // EV_CURRENT
	le.PutUint16(b[16:], etCore)
	le.PutUint16(b[18:], emX86_64)
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[32:], uint64(g.PhOff))
	le.PutUint64(b[40:], uint64(g.ShOff))
	ehsize := uint16(ehdrSize)
	if s.Layout == QEMU {
		ehsize = 8 // QEMU 7.2 stores sizeof a pointer here
	}
	le.PutUint16(b[52:], ehsize)
	le.PutUint16(b[54:], phdrSize)
	phnum := uint16(g.PhNum)
	if g.Xnum {
		phnum = pnXnum
	}
	le.PutUint16(b[56:], phnum)
	if g.ShNum > 0 {
		le.PutUint16(b[58:], shdrSize)
	}
	le.PutUint16(b[60:], uint16(g.ShNum))
	if s.Layout == QEMU {
		le.PutUint16(b[62:], 1) // e_shstrndx
	}

	if g.ShNum > 0 {
		// Section header 0: all zero but sh_info (and, as the kernel's
		// fill_extnum_info does, sh_size = e_shnum and sh_link =
		// e_shstrndx when numbering is extended).
		sh := b[g.ShOff:]
		if g.Xnum {
			le.PutUint64(sh[32:], uint64(g.ShNum))
			le.PutUint32(sh[40:], uint32(le.Uint16(b[62:])))
			le.PutUint32(sh[44:], uint32(g.PhNum))
		}
		if s.Layout == QEMU {
			sh = sh[shdrSize:]
			le.PutUint32(sh[0:], 1) // sh_name: ".shstrtab" at 1
			le.PutUint32(sh[4:], shtStrab)
			le.PutUint64(sh[24:], uint64(g.StrtabOff))
			le.PutUint64(sh[32:], uint64(len(shstrtab)))
			le.PutUint64(sh[48:], 1) // sh_addralign
		}
	}

	ph := b[g.PhOff:]
	le.PutUint32(ph[0:], ptNote)
	le.PutUint64(ph[8:], uint64(g.NoteOff))
	le.PutUint64(ph[32:], uint64(g.NoteSize))
	le.PutUint64(ph[40:], uint64(g.NoteSize))
	var flags uint32 = 7 // RWX, as kexec-tools writes; QEMU leaves 0
	if s.Layout == QEMU {
		flags = 0
	}
	for i, sg := range s.Segments {
		ph = ph[phdrSize:]
		le.PutUint32(ph[0:], ptLoad)
		le.PutUint32(ph[4:], flags)
		le.PutUint64(ph[8:], uint64(g.LoadOff[i]))
		le.PutUint64(ph[16:], sg.Vaddr)
		le.PutUint64(ph[24:], sg.Paddr)
		le.PutUint64(ph[32:], sg.FileSize)
		le.PutUint64(ph[40:], sg.MemSize)
	}
	return b
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
	n := s.CPUs * (12 + 8 + PrstatusSize)
	if s.ExtraNotes {
		n += s.CPUs * (12 + 8 + QEMUCPUStateSize)
	}
	vmci := vmcoreinfoOf(s)
	n += 12 + 12 + len(vmci) + 3
	b := make([]byte, 0, n)
	for cpu := 0; cpu < s.CPUs; cpu++ {
		b = appendNote(b, "CORE", NtPrstatus, prstatus(s.Seed, cpu))
	}
	if s.ExtraNotes {
		for cpu := 0; cpu < s.CPUs; cpu++ {
			b = appendNote(b, "QEMU", 0, qemuCPUState(s.Seed, cpu))
		}
	}
	off := -1
	if vmci != "" {
		b = appendNote(b, "VMCOREINFO", 0, []byte(vmci))
		off = len(b) - pad4(len(vmci))
	}
	return b, off
}

func pad4(n int) int { return (n + 3) &^ 3 }

// appendNote appends an Elf64_Nhdr, the NUL-terminated name and the desc,
// each padded to 4 bytes (b's length is a multiple of 4 on entry).
func appendNote(b []byte, name string, typ uint32, desc []byte) []byte {
	le := binary.LittleEndian
	b = le.AppendUint32(b, uint32(len(name)+1))
	b = le.AppendUint32(b, uint32(len(desc)))
	b = le.AppendUint32(b, typ)
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
