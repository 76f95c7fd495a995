package synth

import (
	"encoding/binary"
	"fmt"
)

// Arch is the architecture a generated vmcore says it was taken on: the
// ELF header's class, byte order and e_machine, the size of its CPU notes,
// and the lines its kernel's arch_crash_save_vmcoreinfo writes. Only
// X86_64 machines have kernel structures behind them (Spec.Kernel); the
// others exist so that tests can show that pagepipe refuses what it
// cannot dump.
type Arch int

// The architectures kdump serves, as uname -m names them.
const (
	X86_64 Arch = iota // the zero value: every spec is x86_64 unless it says otherwise
	AArch64
	PPC64LE
	S390X
	RISCV64
	I386
)

// archInfo is what the ELF writer and ForeignMachine need of an
// architecture.
type archInfo struct {
	name      string
	machine   uint16 // e_machine
	class32   bool   // ELFCLASS32 (kexec-tools' i386 default)
	bigEndian bool   // ELFDATA2MSB
	prstatus  int    // sizeof(struct elf_prstatus)
	ramBase   uint64 // where the board's RAM starts
	pageSize  int    // PAGESIZE= of a distribution kernel
	osrelease string
	// vmcoreinfo is arch_crash_save_vmcoreinfo's text for a 6.1 kernel,
	// with made-up but well-formed addresses (KASLR'd where the
	// architecture randomises).
	vmcoreinfo string
}

var archs = map[Arch]archInfo{
	X86_64: {name: "x86_64", machine: emX86_64, prstatus: PrstatusSize, pageSize: 4096, osrelease: "6.1.0-57-amd64"},
	AArch64: {name: "aarch64", machine: 183, prstatus: 392, ramBase: 0x40000000, pageSize: 4096, osrelease: "6.1.0-57-arm64",
		vmcoreinfo: "NUMBER(VA_BITS)=48\n" +
			"NUMBER(kimage_voffset)=0xffffb03beb800000\n" +
			"NUMBER(PHYS_OFFSET)=0xffffb1a200000000\n" +
			"KERNELOFFSET=303c23a00000\n" +
			"NUMBER(KERNELPACMASK)=0x0\n" +
			"NUMBER(TCR_EL1_T1SZ)=0x10\n"},
	PPC64LE: {name: "ppc64le", machine: 21, prstatus: 504, pageSize: 65536, osrelease: "6.1.0-57-powerpc64le",
		vmcoreinfo: "SYMBOL(node_data)=c000000002a5d800\n" +
			"LENGTH(node_data)=256\n" +
			"SYMBOL(vmemmap_list)=c0000000029b6b88\n" +
			"SYMBOL(mmu_vmemmap_psize)=c0000000026a8a30\n" +
			"SYMBOL(mmu_psize_defs)=c0000000026a8aa8\n" +
			"SIZE(vmemmap_backing)=24\n" + // Debian's 6.1 (the shared notes' ppc64le.md)
			"OFFSET(vmemmap_backing.list)=0\n" +
			"OFFSET(vmemmap_backing.phys)=8\n" +
			"OFFSET(vmemmap_backing.virt_addr)=16\n" +
			"SIZE(mmu_psize_def)=96\n" +
			"OFFSET(mmu_psize_def.shift)=0\n" +
			"KERNELOFFSET=0\n"},
	S390X: {name: "s390x", machine: 22, bigEndian: true, prstatus: 336, pageSize: 4096, osrelease: "6.1.0-57-s390x",
		vmcoreinfo: "SYMBOL(lowcore_ptr)=1c0c8a8\n" +
			"SYMBOL(high_memory)=1c4c3b8\n" +
			"LENGTH(lowcore_ptr)=512\n" +
			"SDMA=1000000\n" +
			"EDMA=1400000\n" +
			"KERNELOFFSET=0\n"},
	RISCV64: {name: "riscv64", machine: 243, prstatus: 376, ramBase: 0x80000000, pageSize: 4096, osrelease: "6.1.0-57-riscv64",
		vmcoreinfo: "NUMBER(VA_BITS)=57\n" +
			"NUMBER(phys_ram_base)=0x80000000\n" +
			"NUMBER(PAGE_OFFSET)=0xff60000000000000\n" +
			"NUMBER(VMALLOC_START)=0xff20000000000000\n" +
			"NUMBER(VMALLOC_END)=0xff5fffffffffffff\n" +
			"NUMBER(VMEMMAP_START)=0xff1c000000000000\n" +
			"NUMBER(VMEMMAP_END)=0xff1fffffffffffff\n" +
			"NUMBER(MODULES_VADDR)=0xffffffff01a6d000\n" +
			"NUMBER(MODULES_END)=0xffffffff80000000\n" +
			"NUMBER(KERNEL_LINK_ADDR)=0xffffffff80000000\n"},
	I386: {name: "i386", machine: 3, class32: true, prstatus: 144, pageSize: 4096, osrelease: "6.1.0-57-686-pae",
		vmcoreinfo: "CONFIG_X86_PAE=y\n"},
}

func (a Arch) info() archInfo {
	if in, ok := archs[a]; ok {
		return in
	}
	return archs[X86_64]
}

// String is the architecture's uname -m name.
func (a Arch) String() string {
	if in, ok := archs[a]; ok {
		return in.name
	}
	return fmt.Sprintf("Arch(%d)", int(a))
}

// Archs lists every architecture the generator knows, x86_64 first.
func Archs() []Arch { return []Arch{X86_64, AArch64, PPC64LE, S390X, RISCV64, I386} }

// byteOrder is binary.LittleEndian or binary.BigEndian.
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// byteOrder is the ELF header's, notes' and CPU notes' byte order.
func (a Arch) byteOrder() byteOrder {
	if a.info().bigEndian {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// elfSizes are e_ehsize and e_phentsize of the architecture's ELF class.
func (a Arch) elfSizes() (ehdr, phdr int64) {
	if a.info().class32 {
		return 52, 32
	}
	return ehdrSize, phdrSize
}

// ForeignMachine returns a small machine of architecture a as its kexec'd
// capture kernel's /proc/vmcore shows it: sizeMiB MiB of RAM (at least 4)
// in two PT_LOADs from the board's RAM base, 2 CPUs, and the VMCOREINFO a
// distribution's 6.1 kernel for a writes (OSRELEASE, PAGESIZE, then the
// common keys pagepipe's x86_64 filter would look for, then the
// architecture's own). The memory holds no kernel structures.
func ForeignMachine(a Arch, sizeMiB int) Spec {
	in := a.info()
	size := uint64(max(sizeMiB, 4)) << 20
	half := size / 2 &^ (1<<20 - 1)
	seg := func(p, n uint64) Segment { return Segment{Paddr: p, FileSize: n, MemSize: n} }
	vi := fmt.Sprintf("OSRELEASE=%s\nBUILD-ID=5c4be1d9c8e2a1d0f1e3b6a7c9d8e0f1a2b3c4d5\nPAGESIZE=%d\n", in.osrelease, in.pageSize) +
		"SYMBOL(init_uts_ns)=1c4f380\nOFFSET(uts_namespace.name)=0\n" +
		"SYMBOL(mem_section)=1c4e000\nLENGTH(mem_section)=16384\nSIZE(mem_section)=16\n" +
		"OFFSET(mem_section.section_mem_map)=0\nNUMBER(SECTION_SIZE_BITS)=27\n" +
		in.vmcoreinfo + "CRASHTIME=1733000000\n"
	return Spec{
		Arch:       a,
		PageSize:   uint64(in.pageSize),
		Segments:   []Segment{seg(in.ramBase, half), seg(in.ramBase+half+64<<20, size-half)},
		CPUs:       2,
		VMCOREINFO: vi,
		Seed:       DefaultSeed,
		Mix:        DefaultMix,
		Layout:     ProcVmcore,
	}
}
