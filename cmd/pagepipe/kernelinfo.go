package main

import (
	"fmt"

	"pagepipe/kdumpfmt"
	"pagepipe/kernel"
	"pagepipe/sink"
	"pagepipe/source"
)

// fillKernelMeta takes what the dump header says about the crashed kernel
// from its VMCOREINFO: the crash time, phys_base, and utsname, read from
// init_uts_ns through the kernel's own page tables as makedumpfile does.
// When the kernel's memory cannot give utsname (a generated vmcore has no
// page tables), the header still gets "Linux", OSRELEASE and "x86_64", so
// that readers checking the machine accept it; the returned note says so.
//
// Without NUMBER(phys_base), phys_base comes from the kernel-text PT_LOAD
// as makedumpfile takes it: p_paddr - (p_vaddr - __START_KERNEL_map).
func fillKernelMeta(v *source.Vmcore, m *sink.Meta) (note string, err error) {
	for _, l := range v.Loads {
		if l.Vaddr >= kernel.StartKernelMap {
			m.PhysBase = l.Paddr - (l.Vaddr - kernel.StartKernelMap)
			break
		}
	}
	raw := v.Vmcoreinfo()
	if raw == nil {
		return "", nil
	}
	vi, err := kernel.ParseVMCOREINFO(raw)
	if err != nil {
		return "", fmt.Errorf("VMCOREINFO: %w", err)
	}
	if t, ok := vi.CrashTime(); ok {
		m.CrashTime = t
	}
	if pb, ok := vi.Number("phys_base"); ok {
		m.PhysBase = uint64(pb)
	}
	if err := readUtsname(v, vi, &m.Utsname); err == nil {
		return "", nil
	} else {
		note = fmt.Sprintf("utsname not read from kernel memory (%v); using OSRELEASE", err)
	}
	clear(m.Utsname[:])
	for i, s := range map[int]string{0: "Linux", 2: vi.OSRelease(), 4: "x86_64"} {
		copy(m.Utsname[i*kdumpfmt.UtsnameFieldSize:(i+1)*kdumpfmt.UtsnameFieldSize-1], s)
	}
	return note, nil
}

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
