// Package source reads the memory image of a crashed kernel: an ELF64
// /proc/vmcore (or QEMU's dump-guest-memory ELF, which is shaped
// differently) and serves its pages by pfn from mmap'd windows.
package source

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"pagepipe/kernel"
)

// ELF constants used here (see elf(5)).
const (
	elfHeaderSize = 64
	phdrSize      = 56
	shdrSize      = 64
	ptLoad        = 1
	ptNote        = 4
	pnXnum        = 0xffff
	ntPrstatus    = 1
	ntTaskstruct  = 4

	// maxUnmapped bounds the PT_LOADs without a physical address kept
	// (kcore has a few: vmalloc, modules, one vmemmap range per RAM
	// range).
	maxUnmapped = 1 << 16

	// maxPhnum bounds the program headers we accept; real vmcores have a
	// few hundred at most (one per System RAM range), PN_XNUM ones more.
	maxPhnum = 1 << 20
	// maxMapnr bounds the physical address space we accept: 2^36 pages is
	// 256 TiB, beyond the largest machines kdump serves. A header claiming
	// more is taken as hostile rather than sized bitmaps for.
	maxMapnr = 1 << 36
	// maxNoteSize bounds the notes we copy (a CPU note is 336 bytes; a
	// machine with 8192 CPUs and device dumps stays far below this).
	maxNoteSize = 64 << 20
)

// Load is one PT_LOAD: physical memory [Paddr, Paddr+MemSize), of which the
// first FileSize bytes are in the file at Offset. Flags and Align are
// p_flags and p_align, which an ELF dump keeps.
type Load struct {
	Paddr, Vaddr      uint64
	Offset            uint64
	FileSize, MemSize uint64
	Flags             uint32
	Align             uint64
}

// Info is what pagepipe needs from the ELF headers and notes.
type Info struct {
	// Ehdr is the ELF header as read and NotePhdr the first PT_NOTE's
	// program header (zero when there is none): an ELF dump copies them.
	Ehdr     [elfHeaderSize]byte
	NotePhdr [phdrSize]byte
	Loads    []Load
	// Notes is the concatenated contents of every PT_NOTE, copied verbatim
	// into the dump; NoteOffset is the file offset of the first PT_NOTE.
	Notes      []byte
	NoteOffset uint64
	// NrCPUs counts NT_PRSTATUS notes named CORE.
	NrCPUs int
	// VmcoreinfoOff and VmcoreinfoSize locate the VMCOREINFO note's text
	// inside Notes; Size 0 means there is none.
	VmcoreinfoOff, VmcoreinfoSize uint64
	// Unmapped are the PT_LOADs without a physical address (p_paddr -1):
	// /proc/kcore's vmalloc, module and vmemmap ranges. Nothing reads
	// them; Kcore types them.
	Unmapped []Load
	// Tasks counts CORE NT_TASKSTRUCT notes: /proc/kcore has one, a
	// vmcore none.
	Tasks int
	// MaxMapnr is one past the highest pfn of any PT_LOAD.
	MaxMapnr uint64
	// pageSize is the crashed kernel's page size: VMCOREINFO's PAGESIZE,
	// else the architecture's default. Every pfn is counted in it.
	pageSize uint64
	// arch is the architecture e_machine names (nil for a dump's notes).
	arch kernel.Arch
	// prstatusSize is the first CORE NT_PRSTATUS descriptor size that
	// differs from the architecture's; 0 when all agree.
	prstatusSize int
}

// Arch is the architecture of the vmcore's kernel, from e_machine (and
// checked against VMCOREINFO and the CPU notes).
func (in *Info) Arch() kernel.Arch { return in.arch }

// PageSize is the crashed kernel's page size in bytes (4, 16 or 64 KiB):
// the unit of every pfn, bitmap bit, descriptor and block of the dump.
func (in *Info) PageSize() uint64 { return in.pageSize }

// Vmcoreinfo returns the VMCOREINFO text, or nil.
func (in *Info) Vmcoreinfo() []byte {
	if in.VmcoreinfoSize == 0 {
		return nil
	}
	return in.Notes[in.VmcoreinfoOff : in.VmcoreinfoOff+in.VmcoreinfoSize]
}

// ErrNotELF is returned for input that is not an ELF64 little-endian core.
var ErrNotELF = errors.New("not an ELF64 little-endian vmcore")

// ParseELF reads the ELF header, program headers (at e_phoff, with extended
// numbering) and every note of every PT_NOTE from r, a file of size bytes.
// A core of another architecture, or whose VMCOREINFO names another
// architecture or a page size pagepipe does not dump, gets an error
// wrapping ErrUnsupported.
// Every count and offset is checked against size before anything is
// allocated, so hostile headers give an error, not a panic or a huge
// allocation.
func ParseELF(r io.ReaderAt, size int64) (*Info, error) {
	var eh [elfHeaderSize]byte
	if _, err := r.ReadAt(eh[:], 0); err != nil {
		if size < elfHeaderSize {
			return nil, fmt.Errorf("elf header: file is %d bytes: %w", size, ErrNotELF)
		}
		return nil, fmt.Errorf("read elf header: %w", err)
	}
	if !bytes.Equal(eh[:4], []byte("\x7fELF")) {
		return nil, ErrNotELF
	}
	arch, err := checkELFArch(eh[:])
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	phoff := le.Uint64(eh[32:])
	shoff := le.Uint64(eh[40:])
	phentsize := le.Uint16(eh[54:])
	phnum := uint64(le.Uint16(eh[56:]))
	if phentsize != phdrSize {
		return nil, fmt.Errorf("elf header: e_phentsize %d, want %d", phentsize, phdrSize)
	}
	if phnum == pnXnum {
		// Extended numbering: the real count is section header 0's sh_info.
		if shoff == 0 || shoff > uint64(size) || uint64(size)-shoff < shdrSize {
			return nil, fmt.Errorf("elf header: PN_XNUM but section header 0 at %#x is outside the %d-byte file", shoff, size)
		}
		var sh [shdrSize]byte
		if _, err := r.ReadAt(sh[:], int64(shoff)); err != nil {
			return nil, fmt.Errorf("read section header 0: %w", err)
		}
		phnum = uint64(le.Uint32(sh[44:]))
	}
	if phnum == 0 || phnum > maxPhnum {
		return nil, fmt.Errorf("elf header: %d program headers", phnum)
	}
	if phoff > uint64(size) || (uint64(size)-phoff)/phdrSize < phnum {
		return nil, fmt.Errorf("elf header: %d program headers at %#x run past the end of the %d-byte file", phnum, phoff, size)
	}
	ph := make([]byte, phnum*phdrSize)
	if _, err := r.ReadAt(ph, int64(phoff)); err != nil {
		return nil, fmt.Errorf("read program headers: %w", err)
	}

	in := &Info{Ehdr: eh, arch: arch}
	var noteSegs [][2]uint64
	for i := uint64(0); i < phnum; i++ {
		p := ph[i*phdrSize:]
		typ := le.Uint32(p)
		off, vaddr, paddr := le.Uint64(p[8:]), le.Uint64(p[16:]), le.Uint64(p[24:])
		filesz, memsz := le.Uint64(p[32:]), le.Uint64(p[40:])
		if typ == ptLoad && paddr == ^uint64(0) {
			// No physical address: not RAM (kcore's vmalloc, vmemmap and
			// module ranges). Never read, so its data need not lie in
			// the file; kept for typing /proc/kcore's segments.
			if len(in.Unmapped) < maxUnmapped {
				in.Unmapped = append(in.Unmapped, Load{Paddr: paddr, Vaddr: vaddr, Offset: off, FileSize: filesz, MemSize: memsz,
					Flags: le.Uint32(p[4:]), Align: le.Uint64(p[48:])})
			}
			continue
		}
		if off > uint64(size) || filesz > uint64(size)-off {
			return nil, fmt.Errorf("program header %d: data [%#x, +%#x) runs past the end of the %d-byte file", i, off, filesz, size)
		}
		switch typ {
		case ptNote:
			if len(noteSegs) == 0 {
				copy(in.NotePhdr[:], p[:phdrSize])
			}
			noteSegs = append(noteSegs, [2]uint64{off, filesz})
		case ptLoad:
			if memsz < filesz {
				return nil, fmt.Errorf("program header %d: p_memsz %#x < p_filesz %#x", i, memsz, filesz)
			}
			if paddr+memsz < paddr || paddr+memsz > 1<<52 {
				return nil, fmt.Errorf("program header %d: physical range [%#x, +%#x) beyond 52 bits", i, paddr, memsz)
			}
			in.Loads = append(in.Loads, Load{Paddr: paddr, Vaddr: vaddr, Offset: off, FileSize: filesz, MemSize: memsz,
				Flags: le.Uint32(p[4:]), Align: le.Uint64(p[48:])})
		}
	}
	if len(in.Loads) == 0 {
		return nil, errors.New("elf: no PT_LOAD segment with memory")
	}
	var total uint64
	for _, s := range noteSegs {
		total += s[1]
	}
	if total > maxNoteSize {
		return nil, fmt.Errorf("elf: %d bytes of notes, more than %d", total, maxNoteSize)
	}
	in.Notes = make([]byte, 0, total)
	for i, s := range noteSegs {
		if i == 0 {
			in.NoteOffset = s[0]
		}
		start := len(in.Notes)
		in.Notes = in.Notes[:start+int(s[1])]
		if _, err := r.ReadAt(in.Notes[start:], int64(s[0])); err != nil {
			return nil, fmt.Errorf("read PT_NOTE at %#x: %w", s[0], err)
		}
		if err := in.walkNotes(start); err != nil {
			return nil, err
		}
	}
	if in.pageSize, err = checkVMCOREINFO(in.Vmcoreinfo(), arch, "ELF header"); err != nil {
		return nil, err
	}
	if in.pageSize == 0 {
		in.pageSize = arch.DefaultPageSize()
	}
	for _, l := range in.Loads {
		in.MaxMapnr = max(in.MaxMapnr, (l.Paddr+l.MemSize+in.pageSize-1)/in.pageSize)
	}
	if in.MaxMapnr > maxMapnr {
		return nil, fmt.Errorf("elf: physical memory reaches pfn %#x, beyond the supported %#x", in.MaxMapnr, uint64(maxMapnr))
	}
	if in.prstatusSize != 0 && in.prstatusSize != arch.PrstatusSize() {
		return nil, &MixedArchError{Arch: arch.Name(), From: "ELF header", Other: "another architecture",
			Where: fmt.Sprintf("a %d-byte NT_PRSTATUS note (%s: %d)", in.prstatusSize, arch.Name(), arch.PrstatusSize())}
	}
	return in, nil
}

// walkNotes walks the notes of one PT_NOTE, Notes[start:], counting CPU
// notes and finding VMCOREINFO. A note's name and desc are padded to 4
// bytes. Zero padding at the end of a segment ends the walk, as the kernel
// leaves it.
func (in *Info) walkNotes(start int) error {
	b := in.Notes[start:]
	le := binary.LittleEndian
	for off := uint64(0); off+12 <= uint64(len(b)); {
		namesz, descsz, typ := uint64(le.Uint32(b[off:])), uint64(le.Uint32(b[off+4:])), le.Uint32(b[off+8:])
		if namesz == 0 && descsz == 0 && typ == 0 {
			return nil
		}
		nameOff := off + 12
		descOff := nameOff + (namesz+3)&^3
		next := descOff + (descsz+3)&^3
		if namesz > uint64(len(b)) || descsz > uint64(len(b)) || descOff+descsz > uint64(len(b)) {
			return fmt.Errorf("elf note at %#x: name %d and desc %d bytes run past the %d-byte PT_NOTE", off, namesz, descsz, len(b))
		}
		name := string(bytes.TrimRight(b[nameOff:nameOff+namesz], "\x00"))
		switch {
		case name == "CORE" && typ == ntPrstatus:
			in.NrCPUs++
			if in.arch != nil && int(descsz) != in.arch.PrstatusSize() && in.prstatusSize == 0 {
				in.prstatusSize = int(descsz)
			}
		case name == "CORE" && typ == ntTaskstruct:
			in.Tasks++
		case name == "VMCOREINFO" && in.VmcoreinfoSize == 0:
			in.VmcoreinfoOff = uint64(start) + descOff
			in.VmcoreinfoSize = descsz
		}
		off = next
	}
	return nil
}
