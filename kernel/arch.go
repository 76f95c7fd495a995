package kernel

// Arch is what pagepipe needs of one architecture's kernel to dump its
// memory right: the page-table walk (every virtual read goes through it),
// what VMCOREINFO must hold for a right dump, the header fields readers
// decode the dump by (utsname machine, phys_base), and the sizes and ids
// of its ELF cores. The architecture is chosen at run time from the input
// (ELF e_machine, a dump's utsname machine, VMCOREINFO keys), never from
// the build: an x86_64 pagepipe dumps arm64 vmcores and the other way
// round. Another architecture is one more file implementing this.
type Arch interface {
	// Name is the architecture as uname -m names it and as the kdump
	// header's utsname machine says it ("x86_64", "aarch64").
	Name() string
	// ELFMachine is e_machine of its cores (and of an -E dump).
	ELFMachine() uint16
	// PrstatusSize is sizeof(struct elf_prstatus): the descriptor size of
	// a CPU's CORE NT_PRSTATUS note.
	PrstatusSize() int
	// DefaultPageSize is the page size of a vmcore of this architecture
	// that does not say its own (no VMCOREINFO PAGESIZE): the size
	// distributions' kernels use.
	DefaultPageSize() uint64
	// Check refuses the VMCOREINFO (nil: the input has none) when a dump
	// made with it would be wrong: a key the walk or the header needs is
	// missing or malformed.
	Check(vi *VMCOREINFO) error
	// NewTranslator builds the kernel's page-table walk from VMCOREINFO.
	NewTranslator(r PhysReader, vi *VMCOREINFO) (*Translator, error)
	// PhysBase is the kdump sub-header's phys_base, as makedumpfile finds
	// it (vi may be nil), and where it came from in makedumpfile's words
	// ("vmcoreinfo", "pt_load").
	PhysBase(vi *VMCOREINFO, loads []Load) (pb uint64, from string, ok bool)
	// FallbackUtsname says whether, when utsname cannot be read from the
	// kernel's memory, the header may still be written with "Linux",
	// OSRELEASE and Name (generated x86_64 vmcores have no page tables);
	// otherwise the dump is refused.
	FallbackUtsname() bool
}

// Load is a PT_LOAD's physical and virtual start, as the architectures'
// phys_base rules read them.
type Load struct{ Paddr, Vaddr uint64 }

// supported lists the architectures pagepipe dumps.
var supported = []Arch{X86_64, ARM64, PPC64LE, RISCV64}

// ArchByName returns the supported architecture uname -m calls name.
func ArchByName(name string) (Arch, bool) {
	for _, a := range supported {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}

// archKeys are VMCOREINFO keys only one architecture's
// arch_crash_save_vmcoreinfo writes, supported or not, so that a vmcore
// whose ELF header names one architecture and whose kernel was another's
// is caught.
var archKeys = []struct{ key, arch string }{
	{"SYMBOL(init_top_pgt)", "x86_64"},
	{"NUMBER(phys_base)", "x86_64"},
	{"NUMBER(kimage_voffset)", "aarch64"},
	{"NUMBER(TCR_EL1_T1SZ)", "aarch64"},
	{"NUMBER(phys_ram_base)", "riscv64"},
	{"NUMBER(KERNEL_LINK_ADDR)", "riscv64"},
	{"SYMBOL(vmemmap_list)", "ppc64le"},
	{"SYMBOL(mmu_psize_defs)", "ppc64le"},
	{"SYMBOL(lowcore_ptr)", "s390x"},
	{"CONFIG_X86_PAE", "i386"},
}

// ArchClaimedBy names the architecture whose kernels alone write the
// VMCOREINFO key, or "" for a key of no one architecture.
func ArchClaimedBy(key string) string {
	for _, k := range archKeys {
		if k.key == key {
			return k.arch
		}
	}
	return ""
}

// ArchOf is the supported architecture whose kernel wrote vi: the first
// whose own keys it holds, x86_64 when it holds none (older x86_64 kernels
// wrote none of them).
func ArchOf(vi *VMCOREINFO) Arch {
	if vi != nil {
		for _, k := range vi.keys {
			if a, ok := ArchByName(ArchClaimedBy(k)); ok {
				return a
			}
		}
	}
	return X86_64
}
