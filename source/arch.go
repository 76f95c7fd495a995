package source

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"pagepipe/kdumpfmt"
)

// ErrUnsupported is the root of every refusal of an input that pagepipe
// could read but not dump right: another architecture, another page size.
// A caller tells it apart with errors.Is to refuse before any output
// exists; the message names what is not supported.
var ErrUnsupported = errors.New("not supported")

// ArchError says that a vmcore or dump comes from an architecture pagepipe
// does not dump. pagepipe's page-table walk, kernel address-space layout,
// header fields and note sizes are x86_64's: a dump of another
// architecture's memory made with them would look valid and be wrong
// (readers take the architecture from the header's utsname machine), so
// such an input is refused, never dumped.
type ArchError struct {
	// Arch names the architecture as uname -m does ("aarch64", "ppc64le").
	Arch string
	// From says what told it: the ELF header, VMCOREINFO, the kdump header.
	From string
}

func (e *ArchError) Error() string {
	return fmt.Sprintf("%s vmcores are not supported (%s); pagepipe dumps x86_64 vmcores only", e.Arch, e.From)
}

func (e *ArchError) Unwrap() error { return ErrUnsupported }

// PageSizeError says that the crashed kernel's pages are not PageSize
// bytes (ppc64le's and some arm64 kernels' are 64 KiB).
type PageSizeError struct {
	Size uint64
	From string
}

func (e *PageSizeError) Error() string {
	return fmt.Sprintf("vmcores with %d-byte pages are not supported (%s); pagepipe dumps %d-byte pages only", e.Size, e.From, PageSize)
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

// checkELFArch refuses an ELF whose header is not an x86_64 core's. It is
// called only on a header with the ELF magic.
func checkELFArch(eh []byte) error {
	elf64le := eh[4] == 2 && eh[5] == 1
	arch, known := elfArch(eh)
	switch {
	case known && arch != "x86_64":
		return &ArchError{Arch: arch, From: "ELF e_machine"}
	case !elf64le:
		return ErrNotELF // an x86_64 core is ELF64 little-endian
	case !known:
		m := binary.LittleEndian.Uint16(eh[18:])
		return &ArchError{Arch: fmt.Sprintf("e_machine %d", m), From: "ELF header"}
	}
	return nil
}

// foreignKeys are VMCOREINFO keys that each architecture's
// arch_crash_save_vmcoreinfo writes and x86_64's never does, so that a
// vmcore whose ELF header claims x86_64 but whose kernel was another's is
// caught too.
var foreignKeys = []struct{ key, arch string }{
	{"NUMBER(kimage_voffset)", "aarch64"},
	{"NUMBER(TCR_EL1_T1SZ)", "aarch64"},
	{"NUMBER(phys_ram_base)", "riscv64"},
	{"NUMBER(KERNEL_LINK_ADDR)", "riscv64"},
	{"SYMBOL(vmemmap_list)", "ppc64le"},
	{"SYMBOL(mmu_psize_defs)", "ppc64le"},
	{"SYMBOL(lowcore_ptr)", "s390x"},
	{"CONFIG_X86_PAE", "i386"},
}

// checkVMCOREINFO refuses VMCOREINFO text that names another
// architecture's kernel or another page size. It reads the keys as plain
// lines ("KEY=VALUE"), without package kernel's parser: the check must
// hold whatever else the text gets wrong.
func checkVMCOREINFO(text []byte) error {
	for len(text) > 0 {
		var line []byte
		line, text, _ = bytes.Cut(text, []byte("\n"))
		key, val, ok := bytes.Cut(line, []byte("="))
		if !ok {
			continue
		}
		if string(key) == "PAGESIZE" {
			n, err := strconv.ParseUint(string(bytes.TrimRight(val, "\x00")), 10, 64)
			if err == nil && n != PageSize {
				return &PageSizeError{Size: n, From: "VMCOREINFO PAGESIZE"}
			}
			continue
		}
		for _, f := range foreignKeys {
			if string(key) == f.key {
				return &ArchError{Arch: f.arch, From: "VMCOREINFO " + f.key}
			}
		}
	}
	return nil
}

// checkArch refuses a kdump-compressed dump of another architecture or
// page size: its header's utsname machine (what crash, libkdumpfile and
// drgn go by), its block size, and the VMCOREINFO it carries.
func (d *Dump) checkArch() error {
	const machine = 4 // utsname fields: sysname, nodename, release, version, machine, domainname
	f := d.Header.Utsname[machine*kdumpfmt.UtsnameFieldSize : (machine+1)*kdumpfmt.UtsnameFieldSize]
	if m, _, _ := bytes.Cut(f, []byte{0}); len(m) > 0 && string(m) != "x86_64" {
		return &ArchError{Arch: string(m), From: "kdump header utsname machine"}
	}
	if bs := uint64(d.Header.BlockSize); bs != PageSize {
		return &PageSizeError{Size: bs, From: "kdump header block_size"}
	}
	if d.notes.VmcoreinfoSize > 0 {
		return checkVMCOREINFO(d.notes.Vmcoreinfo())
	}
	return nil
}
