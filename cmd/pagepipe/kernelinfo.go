package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"pagepipe/kdumpfmt"
	"pagepipe/kernel"
	"pagepipe/sink"
	"pagepipe/source"
)

// physBase is the crashed kernel's phys_base: NUMBER(phys_base) from
// VMCOREINFO (vi may be nil), else taken from the kernel-text PT_LOAD as
// makedumpfile takes it: p_paddr - (p_vaddr - __START_KERNEL_map). from
// says which, in makedumpfile's words.
func physBase(v *source.Vmcore, vi *kernel.VMCOREINFO) (pb uint64, from string, ok bool) {
	if vi != nil {
		if n, ok := vi.Number("phys_base"); ok {
			return uint64(n), "vmcoreinfo", true
		}
	}
	for _, l := range v.Loads {
		if l.Vaddr >= kernel.StartKernelMap {
			return l.Paddr - (l.Vaddr - kernel.StartKernelMap), "pt_load", true
		}
	}
	return 0, "", false
}

// fillKernelMeta takes what the dump header says about the crashed kernel
// from its VMCOREINFO: the crash time, phys_base, and utsname, read from
// init_uts_ns through the kernel's own page tables as makedumpfile does.
// When the kernel's memory cannot give utsname (a generated vmcore has no
// page tables), the header still gets "Linux", OSRELEASE and "x86_64", so
// that readers checking the machine accept it; the returned note says so.
func fillKernelMeta(v *source.Vmcore, vi *kernel.VMCOREINFO, m *sink.Meta) (note string) {
	if pb, _, ok := physBase(v, vi); ok {
		m.PhysBase = pb
	}
	if vi == nil {
		return ""
	}
	if t, ok := vi.CrashTime(); ok {
		m.CrashTime = t
	}
	err := readUtsname(v, vi, &m.Utsname)
	if err == nil {
		return ""
	}
	note = fmt.Sprintf("utsname not read from kernel memory (%v); using OSRELEASE", err)
	clear(m.Utsname[:])
	for i, s := range map[int]string{0: "Linux", 2: vi.OSRelease(), 4: "x86_64"} {
		copy(m.Utsname[i*kdumpfmt.UtsnameFieldSize:(i+1)*kdumpfmt.UtsnameFieldSize-1], s)
	}
	return note
}

// loadVMCOREINFO returns the crashed kernel's VMCOREINFO: the vmcore's own
// note, else the -i file's. With both, the note wins and the file's release
// must match it (makedumpfile exits 2 otherwise: errWrongRelease).
func loadVMCOREINFO(v source.Memory, file string) (*kernel.VMCOREINFO, error) {
	var fromFile *kernel.VMCOREINFO
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("-i: %w", err)
		}
		if fromFile, err = kernel.ParseVMCOREINFO(b); err != nil {
			return nil, fmt.Errorf("-i %s: %w", file, err)
		}
	}
	notes, _, off, size := v.Notes()
	if size == 0 {
		return fromFile, nil
	}
	raw := notes[off : off+size]
	vi, err := kernel.ParseVMCOREINFO(raw)
	if err != nil {
		return nil, fmt.Errorf("VMCOREINFO note: %w", err)
	}
	if fromFile != nil && fromFile.OSRelease() != vi.OSRelease() {
		return nil, fmt.Errorf("%w: %s is for %s, the dump is %s", errWrongRelease, file, fromFile.OSRelease(), vi.OSRelease())
	}
	return vi, nil
}

// printVMCOREINFO prints the VMCOREINFO lines at debug level (message
// level bit 8) as makedumpfile does: SUSE's kdump reads OSRELEASE= and
// CRASHTIME= from these lines.
func printVMCOREINFO(c *console, m source.Memory) {
	notes, _, off, size := m.Notes()
	if size == 0 {
		return
	}
	c.debug("VMCOREINFO   :\n")
	for _, line := range strings.Split(strings.TrimRight(string(notes[off:off+size]), "\x00\n"), "\n") {
		c.debug("  %s\n", line)
		if v, ok := strings.CutPrefix(line, "PAGESIZE="); ok {
			c.debug("page_size    : %s\n", v)
		}
	}
	c.debug("\n")
}

// errWrongRelease: the -i file does not belong to the dumped kernel.
var errWrongRelease = errors.New("the kernel version is not the same as the VMCOREINFO file's")

func readUtsname(v *source.Vmcore, vi *kernel.VMCOREINFO, dst *[kdumpfmt.UtsnameSize]byte) error {
	sym, err := vi.RequireSymbol("init_uts_ns")
	if err != nil {
		return err
	}
	off, err := vi.RequireOffset("uts_namespace.name")
	if err != nil {
		return err
	}
	tr, err := kernel.NewTranslator(v, vi)
	if err != nil {
		return err
	}
	if err := tr.ReadVirt(sym+uint64(off), dst[:]); err != nil {
		return fmt.Errorf("read init_uts_ns: %w", err)
	}
	return nil
}
