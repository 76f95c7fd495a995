package source

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"pagepipe/kdumpfmt"
	"pagepipe/kernel"
)

// ErrUnsupported is the root of every refusal of an input that pagepipe
// could read but not dump right: another architecture, another page size,
// an ELF header and a kernel that disagree. A caller tells it apart with
// errors.Is to refuse before any output exists; the message names what is
// not supported.
var ErrUnsupported = errors.New("not supported")

// ArchError says that a vmcore or dump comes from an architecture pagepipe
// does not dump (the supported ones are package kernel's Arch values):
// made with another architecture's page-table walk, header fields and
// note sizes, a dump would look valid and be wrong (readers take the
// architecture from the header's utsname machine), so such an input is
// refused, never dumped.
type ArchError struct {
	// Arch names the architecture as uname -m does ("ppc64le", "s390x").
	Arch string
	// From says what told it: the ELF header, VMCOREINFO, the kdump header.
	From string
}

func (e *ArchError) Error() string {
	return fmt.Sprintf("%s vmcores are not supported (%s); pagepipe dumps %s vmcores", e.Arch, e.From, supportedNames())
}

func (e *ArchError) Unwrap() error { return ErrUnsupported }

// supportedNames lists the supported architectures for messages.
func supportedNames() string {
	return kernel.X86_64.Name() + ", " + kernel.ARM64.Name() + ", " + kernel.PPC64LE.Name() + " and " + kernel.RISCV64.Name()
}

// Unsupported marks err, which says why an input cannot be dumped right
// (an arm64 VMCOREINFO without a key the walk needs, say), as a refusal:
// errors.Is(result, ErrUnsupported) holds and the message is err's.
func Unsupported(err error) error {
	if err == nil {
		return nil
	}
	return unsupported{err}
}

type unsupported struct{ err error }

func (u unsupported) Error() string   { return u.err.Error() }
func (u unsupported) Unwrap() []error { return []error{u.err, ErrUnsupported} }

// MixedArchError says that two parts of one input name different
// architectures (an x86_64 ELF header in front of an arm64 kernel's
// VMCOREINFO, say): whichever is believed, the dump would be wrong.
type MixedArchError struct {
	Arch, From   string // what the header says, and which header
	Other, Where string // what the other part says, and where
}

func (e *MixedArchError) Error() string {
	return fmt.Sprintf("the %s says %s but %s is %s's: a vmcore mixing architectures is not supported", e.From, e.Arch, e.Where, e.Other)
}

func (e *MixedArchError) Unwrap() error { return ErrUnsupported }

// PageSizes are the page sizes pagepipe dumps: the granules Linux kernels
// are built with on the supported architectures (4 KiB on x86_64; 4, 16 or
// 64 KiB on arm64; 64 KiB on ppc64le).
var PageSizes = [...]uint64{4 << 10, 16 << 10, 64 << 10}

// supportedPageSize says whether n is one of PageSizes.
func supportedPageSize(n uint64) bool {
	for _, s := range PageSizes {
		if n == s {
			return true
		}
	}
	return false
}

// PageSizeError says that the crashed kernel's pages are of a size
// pagepipe does not dump (none of PageSizes), or that two parts of the
// input disagree on it.
type PageSizeError struct {
	Size uint64
	From string
	// Other, when not 0, is the size another part says (Where).
	Other uint64
	Where string
}

func (e *PageSizeError) Error() string {
	if e.Other != 0 {
		return fmt.Sprintf("the %s says %d-byte pages but %s says %d: a vmcore mixing page sizes is not supported", e.From, e.Size, e.Where, e.Other)
	}
	return fmt.Sprintf("vmcores with %d-byte pages are not supported (%s); pagepipe dumps 4, 16 and 64 KiB pages", e.Size, e.From)
}

func (e *PageSizeError) Unwrap() error { return ErrUnsupported }

// The ELF e_machine values of the architectures kdump serves (elf(5)).
const (
	emI386    = 3
	emPPC     = 20
	emPPC64   = 21
	emS390    = 22
	emARM     = 40
	emX86_64  = 62
	emAArch64 = 183
	emRISCV   = 243
	emLoong   = 258
)

// elfArch names the architecture of an ELF header: its e_machine, read in
// the header's own class and byte order (an s390x core is big-endian, an
// i386 one ELFCLASS32; e_machine sits at offset 18 in both classes). ok is
// false for a machine it does not know.
func elfArch(eh []byte) (arch string, ok bool) {
	var order binary.ByteOrder = binary.LittleEndian
	if eh[5] == 2 { // ELFDATA2MSB
		order = binary.BigEndian
	}
	is64 := eh[4] == 2
	pick := func(name64, name32 string) string {
		if is64 {
			return name64
		}
		return name32
	}
	switch order.Uint16(eh[18:]) {
	case emX86_64:
		return "x86_64", true
	case emI386:
		return "i386", true
	case emAArch64:
		return "aarch64", true
	case emARM:
		return "arm", true
	case emPPC64:
		if order == binary.LittleEndian {
			return "ppc64le", true
		}
		return "ppc64", true
	case emPPC:
		return "ppc", true
	case emS390:
		return pick("s390x", "s390"), true
	case emRISCV:
		return pick("riscv64", "riscv32"), true
	case emLoong:
		return "loongarch64", true
	}
	return "", false
}

// checkELFArch returns the architecture of an ELF header, refusing one
// pagepipe does not dump. It is called only on a header with the ELF
// magic.
func checkELFArch(eh []byte) (kernel.Arch, error) {
	elf64le := eh[4] == 2 && eh[5] == 1
	name, known := elfArch(eh)
	if !known {
		if !elf64le {
			return nil, ErrNotELF
		}
		m := binary.LittleEndian.Uint16(eh[18:])
		return nil, &ArchError{Arch: fmt.Sprintf("e_machine %d", m), From: "ELF header"}
	}
	a, ok := kernel.ArchByName(name)
	if !ok {
		return nil, &ArchError{Arch: name, From: "ELF e_machine"}
	}
	if !elf64le {
		return nil, ErrNotELF // the supported architectures' cores are ELF64 little-endian
	}
	return a, nil
}

// checkVMCOREINFO refuses VMCOREINFO text that names another architecture
// than arch (its kernel's own keys: kernel.ArchClaimedBy) or a page size
// pagepipe does not dump, and returns the page size it says (0: it says
// none). It reads the keys as plain lines ("KEY=VALUE"), without package
// kernel's parser: the check must hold whatever else the text gets wrong.
func checkVMCOREINFO(text []byte, arch kernel.Arch, from string) (pageSize uint64, err error) {
	for len(text) > 0 {
		var line []byte
		line, text, _ = bytes.Cut(text, []byte("\n"))
		key, val, ok := bytes.Cut(line, []byte("="))
		if !ok {
			continue
		}
		if string(key) == "PAGESIZE" {
			n, err := strconv.ParseUint(string(bytes.TrimRight(val, "\x00")), 10, 64)
			if err != nil {
				continue // package kernel's parser says what is wrong
			}
			if !supportedPageSize(n) {
				return 0, &PageSizeError{Size: n, From: "VMCOREINFO PAGESIZE"}
			}
			pageSize = n
			continue
		}
		other := kernel.ArchClaimedBy(string(key))
		switch _, known := kernel.ArchByName(other); {
		case other == "" || other == arch.Name():
		case !known:
			return 0, &ArchError{Arch: other, From: "VMCOREINFO " + string(key)}
		default:
			return 0, &MixedArchError{Arch: arch.Name(), From: from, Other: other, Where: "VMCOREINFO " + string(key)}
		}
	}
	return pageSize, nil
}

// checkArch decides the architecture of a kdump-compressed dump to be
// dumped again, refusing another architecture or page size: its header's
// utsname machine (what crash, libkdumpfile and drgn go by; when empty,
// VMCOREINFO's keys decide), its block size, and the VMCOREINFO it
// carries.
func (d *Dump) checkArch() error {
	const machine = 4 // utsname fields: sysname, nodename, release, version, machine, domainname
	f := d.Header.Utsname[machine*kdumpfmt.UtsnameFieldSize : (machine+1)*kdumpfmt.UtsnameFieldSize]
	from := "kdump header utsname machine"
	if m, _, _ := bytes.Cut(f, []byte{0}); len(m) > 0 {
		a, ok := kernel.ArchByName(string(m))
		if !ok {
			return &ArchError{Arch: string(m), From: from}
		}
		d.arch = a
	} else {
		d.arch, from = kernel.X86_64, "kdump header (no utsname machine)"
		if vi, err := kernel.ParseVMCOREINFO(d.notes.Vmcoreinfo()); err == nil {
			d.arch = kernel.ArchOf(vi)
			from = "VMCOREINFO (no utsname machine)"
		}
	}
	bs := d.PageSize()
	if !supportedPageSize(bs) {
		return &PageSizeError{Size: bs, From: "kdump header block_size"}
	}
	if d.notes.VmcoreinfoSize == 0 {
		return nil
	}
	ps, err := checkVMCOREINFO(d.notes.Vmcoreinfo(), d.arch, from)
	if err == nil && ps != 0 && ps != bs {
		err = &PageSizeError{Size: bs, From: "kdump header block_size", Other: ps, Where: "VMCOREINFO PAGESIZE"}
	}
	return err
}

// PageSize is the dump's block size: the crashed kernel's page size, the
// unit of its pfns and bitmaps.
func (d *Dump) PageSize() uint64 { return uint64(d.Header.BlockSize) }

// DecideArch decides the dump's architecture as one to be dumped again
// would (checkArch), for a reader that walks its kernel's memory (inspect's
// priority set): OpenDump alone leaves it x86_64.
func (d *Dump) DecideArch() error { return d.checkArch() }

// Arch is the dump's architecture (checkArch decides it; x86_64 for a
// dump opened with OpenDump alone).
func (d *Dump) Arch() kernel.Arch {
	if d.arch == nil {
		return kernel.X86_64
	}
	return d.arch
}
