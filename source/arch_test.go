package source

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pagepipe/internal/synth"
	"pagepipe/kdumpfmt"
)

// Every architecture but x86_64, aarch64, ppc64le and riscv64 is refused by its
// ELF header, whatever its class and byte order, with an error naming it;
// the supported ones open with their architecture.
func TestParseELFRefusesOtherArchitectures(t *testing.T) {
	for _, a := range synth.Archs() {
		t.Run(a.String(), func(t *testing.T) {
			s := synth.ForeignMachine(a, 4)
			path := filepath.Join(t.TempDir(), "vmcore")
			if err := synth.WriteFile(path, s); err != nil {
				t.Fatal(err)
			}
			v, err := Open(path)
			if a == synth.X86_64 || a == synth.AArch64 || a == synth.PPC64LE || a == synth.RISCV64 {
				if err != nil {
					t.Fatalf("%s: %v", a, err)
				}
				defer v.Close()
				if v.Arch().Name() != a.String() {
					t.Fatalf("Arch = %s, want %s", v.Arch().Name(), a)
				}
				return
			}
			var ae *ArchError
			if !errors.As(err, &ae) || ae.Arch != a.String() || !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Open = %v, want an ArchError for %s", err, a)
			}
			if !strings.Contains(err.Error(), a.String()+" vmcores are not supported") {
				t.Errorf("message %q does not name %s", err, a)
			}
		})
	}
}

// An x86_64 ELF header in front of another kernel's VMCOREINFO, or of a
// kernel with pages of a size pagepipe does not dump, is refused too; 4,
// 16 and 64 KiB pages are taken, and the vmcore's page size is PAGESIZE's
// (the architecture's default without it).
func TestParseELFRefusesForeignVMCOREINFO(t *testing.T) {
	for _, tc := range []struct {
		name, vmcoreinfo string
		want             string // "" accepts
		pageSize         uint64 // when accepted
	}{
		{"x86_64", synth.DefaultVMCOREINFO, "", 4096},
		{"none", "", "", 4096},
		{"arm64 keys", "OSRELEASE=6.1.0-57-arm64\nPAGESIZE=4096\nNUMBER(VA_BITS)=48\nNUMBER(kimage_voffset)=0xffffb03beb800000\n", "the ELF header says x86_64 but VMCOREINFO NUMBER(kimage_voffset) is aarch64's", 0},
		{"riscv keys", "OSRELEASE=6.1\nNUMBER(phys_ram_base)=0x80000000\n", "the ELF header says x86_64 but VMCOREINFO NUMBER(phys_ram_base) is riscv64's", 0},
		{"ppc64 keys", "OSRELEASE=6.1\nSYMBOL(vmemmap_list)=c0000000029b6b88\n", "the ELF header says x86_64 but VMCOREINFO SYMBOL(vmemmap_list) is ppc64le's", 0},
		{"s390 keys", "OSRELEASE=6.1\nSYMBOL(lowcore_ptr)=1c0c8a8\n", "s390x vmcores", 0},
		{"16k pages", "OSRELEASE=6.1\nPAGESIZE=16384\n", "", 16384},
		{"64k pages", "OSRELEASE=6.1\nPAGESIZE=65536\n", "", 65536},
		{"8k pages", "OSRELEASE=6.1\nPAGESIZE=8192\n", "8192-byte pages are not supported", 0},
		{"2k pages", "OSRELEASE=6.1\nPAGESIZE=2048\n", "2048-byte pages are not supported", 0},
		{"1m pages", "OSRELEASE=6.1\nPAGESIZE=1048576\n", "1048576-byte pages are not supported", 0},
		// A key's name as a value is no claim.
		{"key as value", "OSRELEASE=NUMBER(kimage_voffset)\nPAGESIZE=4096\n", "", 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := smallVmcore(t, func(s *synth.Spec) { s.VMCOREINFO = tc.vmcoreinfo })
			in, err := parse(b)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && in.PageSize() != tc.pageSize:
				t.Fatalf("page size %d, want %d", in.PageSize(), tc.pageSize)
			case tc.want != "" && (err == nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("ParseELF = %v, want %q", err, tc.want)
			}
		})
	}
}

// A kdump file to be dumped again is refused when its header says another
// machine or block size, or its VMCOREINFO another kernel; OpenDump alone
// (inspect, the reassembler) still opens it.
func TestOpenMemoryRefusesForeignDumps(t *testing.T) {
	setMachine := func(m string) func([]byte) {
		return func(b []byte) {
			h, err := kdumpfmt.UnmarshalHeader(b[:kdumpfmt.HeaderSize])
			if err != nil {
				panic(err)
			}
			clear(h.Utsname[4*kdumpfmt.UtsnameFieldSize : 5*kdumpfmt.UtsnameFieldSize])
			copy(h.Utsname[4*kdumpfmt.UtsnameFieldSize:], m)
			copy(b, h.Marshal())
		}
	}
	for _, tc := range []struct {
		name   string
		bs     uint64
		mutate func([]byte)
		want   string
	}{
		{"x86_64", 4096, setMachine("x86_64"), ""},
		{"no utsname", 4096, nil, ""},
		{"aarch64", 4096, setMachine("aarch64"), ""}, // supported: its VMCOREINFO decides the rest (dump.prepare)
		{"ppc64le", 4096, setMachine("ppc64le"), ""}, // as aarch64
		{"s390x", 4096, setMachine("s390x"), "s390x vmcores are not supported"},
		{"16k blocks", 16384, nil, ""},
		{"64k blocks", 65536, nil, ""},
		{"8k blocks", 8192, nil, "8192-byte pages are not supported"},
		{"512-byte blocks", 512, nil, "512-byte pages are not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := rawDump(tc.bs, 2, func(uint64, []byte) {})
			if tc.mutate != nil {
				tc.mutate(b)
			}
			path := filepath.Join(t.TempDir(), "dump")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			d, err := OpenDump(path)
			if err != nil {
				t.Fatalf("OpenDump: %v", err)
			}
			d.Close()
			m, err := OpenMemory(path)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("OpenMemory: %v", err)
				}
				defer m.Close()
				if m.PageSize() != tc.bs {
					t.Fatalf("page size %d, want the block size %d", m.PageSize(), tc.bs)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("OpenMemory = %v, want %q", err, tc.want)
			}
		})
	}
}

// An ELF header saying one supported architecture in front of another's
// kernel is refused, whichever way round: by VMCOREINFO's keys, or by the
// CPU notes' NT_PRSTATUS size.
func TestParseELFRefusesMixedArchitectures(t *testing.T) {
	arm := synth.ForeignMachine(synth.AArch64, 4)
	armVI := arm.VMCOREINFO
	for _, tc := range []struct {
		name    string
		spec    func() synth.Spec
		machine uint16 // e_machine written over the header's; 0 keeps it
		want    string
	}{
		{"aarch64 ELF, x86_64 VMCOREINFO", func() synth.Spec {
			s := arm
			s.VMCOREINFO = synth.DefaultVMCOREINFO
			return s
		}, 0, "the ELF header says aarch64 but VMCOREINFO"},
		{"x86_64 ELF, aarch64 VMCOREINFO", func() synth.Spec {
			s := synth.ForeignMachine(synth.X86_64, 4)
			s.VMCOREINFO = armVI
			return s
		}, 0, "the ELF header says x86_64 but VMCOREINFO NUMBER(kimage_voffset) is aarch64's"},
		{"x86_64 ELF, aarch64 CPU notes", func() synth.Spec {
			s := arm
			s.VMCOREINFO = ""
			return s
		}, 62, "the ELF header says x86_64 but a 392-byte NT_PRSTATUS note (x86_64: 336)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "vmcore")
			if err := synth.WriteFile(path, tc.spec()); err != nil {
				t.Fatal(err)
			}
			if tc.machine != 0 {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				binary.LittleEndian.PutUint16(b[18:], tc.machine)
				if err := os.WriteFile(path, b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Open(path)
			var me *MixedArchError
			if !errors.As(err, &me) || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, want a MixedArchError saying %q", err, tc.want)
			}
		})
	}
}
