package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pagepipe/internal/synth"
	"pagepipe/kdumpfmt"
)

// A vmcore of an architecture pagepipe does not dump, or a dump of one to
// be refiltered, is refused at every dump level and in every output shape
// with one line naming the architecture and exit 1, before any output
// file exists (issue 14: an arm64 vmcore used to give a dump whose header
// said x86_64, which no reader could use). So is an arm64 vmcore whose
// VMCOREINFO lacks a key the page-table walk needs (the generated one has
// no SYMBOL(swapper_pg_dir)), as is a riscv64 one without
// va_kernel_pa_offset, and a dump whose header was made to say aarch64 or
// riscv64 over an x86_64 kernel's VMCOREINFO (issues 19, 36).
func TestOtherArchitecturesRefused(t *testing.T) {
	dir := t.TempDir()
	// An x86_64 dump whose header is then made to say another machine:
	// a kdump file of that architecture as makedumpfile would write it.
	x86 := writeShape(t, dir, "x86_64", synth.ForeignMachine(synth.X86_64, 8))
	x86dump := filepath.Join(dir, "x86_64.dump")
	mustPagepipe(t, "-d", "1", x86, x86dump)

	for _, a := range synth.Archs()[1:] {
		want := map[bool]string{true: a.String() + " vmcores are not supported"}
		want[false] = want[true]
		if a == synth.AArch64 {
			want[true] = "aarch64 vmcore: vmcoreinfo: missing SYMBOL(swapper_pg_dir), which the arm64 page-table walk needs"
			// The x86_64 machine's VMCOREINFO has none of x86_64's own keys.
			want[false] = "aarch64 vmcore: vmcoreinfo: missing NUMBER(VA_BITS), which the arm64 page-table walk needs"
		}
		if a == synth.PPC64LE {
			// The generated ppc64le machine's VMCOREINFO has no
			// swapper_pg_dir either; the x86_64 one's none of its keys.
			want[true] = "ppc64le vmcore: vmcoreinfo: missing SYMBOL(swapper_pg_dir), which the ppc64 page-table walk needs"
			want[false] = want[true]
		}
		if a == synth.RISCV64 {
			// The generated riscv64 machine's VMCOREINFO is a 6.1 kernel's
			// before va_kernel_pa_offset, without swapper_pg_dir.
			want[true] = "riscv64 vmcore: vmcoreinfo: missing NUMBER(va_kernel_pa_offset), which the riscv64 page-table walk needs"
			want[false] = "riscv64 vmcore: vmcoreinfo: missing NUMBER(VA_BITS), which the riscv64 page-table walk needs"
		}
		vmcore := writeShape(t, dir, a.String(), synth.ForeignMachine(a, 8))
		dump := filepath.Join(dir, a.String()+".dump")
		writeWithMachine(t, x86dump, dump, a.String())
		for _, tc := range []struct {
			name string
			args []string // OUT stands for the output file(s)
		}{
			{"d0", []string{"-d", "0", vmcore, "OUT"}},
			{"d1", []string{"-l", "-d", "1", vmcore, "OUT"}},
			{"d31", []string{"-c", "-d", "31", vmcore, "OUT"}},
			{"elf", []string{"-E", "-d", "1", vmcore, "OUT"}},
			{"flat", []string{"-F", "-d", "1", vmcore}},
			{"split", []string{"--split", "-d", "1", vmcore, "OUT1", "OUT2"}},
			{"dmesg", []string{"--dump-dmesg", vmcore, "OUT"}},
			{"refilter", []string{"-d", "31", dump, "OUT"}},
			{"flat-dump", []string{"-F", "-d", "1", dump}},
		} {
			t.Run(a.String()+"/"+tc.name, func(t *testing.T) {
				refusedInOneLine(t, tc.args, want[!strings.HasSuffix(tc.name, "dump") && tc.name != "refilter"],
					tc.name == "flat" || tc.name == "flat-dump")
			})
		}
	}
}

// writeWithMachine copies the kdump file src to dst with the header's
// utsname machine set to machine.
func writeWithMachine(t *testing.T, src, dst, machine string) {
	t.Helper()
	b := readFile(t, src)
	h, err := kdumpfmt.UnmarshalHeader(b[:kdumpfmt.HeaderSize])
	if err != nil {
		t.Fatal(err)
	}
	f := h.Utsname[4*kdumpfmt.UtsnameFieldSize : 5*kdumpfmt.UtsnameFieldSize]
	clear(f)
	copy(f, machine)
	copy(b, h.Marshal())
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A vmcore whose pages are of a size pagepipe does not dump (8 KiB here;
// 4, 16 and 64 KiB are dumped), an x86_64 one that claims other pages
// than 4 KiB, a kdump file whose block size and VMCOREINFO PAGESIZE
// disagree, and an arm64 vmcore whose -i VMCOREINFO says another page
// size than the one it is read in, are refused with one line and exit 1
// before any output file exists.
func TestOtherPageSizesRefused(t *testing.T) {
	dir := t.TempDir()
	x86 := func(ps uint64) synth.Spec { return synth.WithPageSize(synth.ForeignMachine(synth.X86_64, 8), ps) }
	v8k := writeShape(t, dir, "8k", x86(8192))
	v16k := writeShape(t, dir, "x86-16k", x86(16384))

	// A 16 KiB arm64 dump whose VMCOREINFO is made to say 4 KiB pages.
	arm := arm64Machine(synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 47}, 64, 16<<10)
	armCore := writeShape(t, dir, "arm16k", arm)
	armDump := filepath.Join(dir, "arm16k.dump")
	mustPagepipe(t, "-d", "1", armCore, armDump)
	b := readFile(t, armDump)
	if n := bytes.Count(b, []byte("\nPAGESIZE=16384\n")); n != 1 {
		t.Fatalf("%d PAGESIZE lines in the dump's notes", n)
	}
	mixed := filepath.Join(dir, "mixed.dump")
	if err := os.WriteFile(mixed, bytes.Replace(b, []byte("\nPAGESIZE=16384\n"), []byte("\nPAGESIZE=04096\n"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	// The same arm64 vmcore without its note (renamed), with -i saying
	// 16 KiB pages: the vmcore is read in the architecture's 4 KiB.
	text, err := synth.KernelVMCOREINFO(arm)
	if err != nil {
		t.Fatal(err)
	}
	viFile := filepath.Join(dir, "vmcoreinfo")
	if err := os.WriteFile(viFile, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	core := readFile(t, armCore)
	if n := bytes.Count(core, []byte("VMCOREINFO\x00")); n != 1 {
		t.Fatalf("%d VMCOREINFO note names", n)
	}
	noNote := filepath.Join(dir, "arm16k-nonote")
	if err := os.WriteFile(noNote, bytes.Replace(core, []byte("VMCOREINFO\x00"), []byte("VMCOREINFX\x00"), 1), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		args []string // OUT stands for the output file(s)
		want string
	}{
		{"8k/d0", []string{"-d", "0", v8k, "OUT"}, "8192-byte pages are not supported (VMCOREINFO PAGESIZE)"},
		{"8k/d31", []string{"-c", "-d", "31", v8k, "OUT"}, "8192-byte pages are not supported"},
		{"8k/elf", []string{"-E", "-d", "1", v8k, "OUT"}, "8192-byte pages are not supported"},
		{"8k/flat", []string{"-F", "-d", "1", v8k}, "8192-byte pages are not supported"},
		{"8k/split", []string{"--split", "-d", "1", v8k, "OUT1", "OUT2"}, "8192-byte pages are not supported"},
		{"8k/dmesg", []string{"--dump-dmesg", v8k, "OUT"}, "8192-byte pages are not supported"},
		{"x86-16k/d1", []string{"-d", "1", v16k, "OUT"}, "x86_64 vmcore: VMCOREINFO says 16384-byte pages"},
		{"x86-16k/elf", []string{"-E", "-d", "0", v16k, "OUT"}, "x86_64 vmcore: VMCOREINFO says 16384-byte pages"},
		{"mixed/refilter", []string{"-d", "31", mixed, "OUT"}, "block_size says 16384-byte pages but VMCOREINFO PAGESIZE says 4096"},
		{"mixed/flat", []string{"-F", "-d", "1", mixed}, "block_size says 16384-byte pages but VMCOREINFO PAGESIZE says 4096"},
		{"arm-i/d1", []string{"-i", viFile, "-d", "1", noNote, "OUT"}, "VMCOREINFO says 16384-byte pages, the input's are 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedInOneLine(t, tc.args, tc.want, strings.Contains(tc.name, "flat"))
		})
	}
}

// refusedInOneLine runs pagepipe with args (an argument starting "OUT"
// names a file in a fresh output directory) and wants exit 1, exactly one
// "pagepipe: " line, saying want, nothing left in the output directory
// and, for -F (flat), no stream on stdout.
func refusedInOneLine(t *testing.T, template []string, want string, flat bool) {
	t.Helper()
	out := t.TempDir()
	args := make([]string, len(template))
	for i, s := range template {
		if strings.HasPrefix(s, "OUT") {
			s = filepath.Join(out, s)
		}
		args[i] = s
	}
	rc, stdout, stderr := pagepipe(t, args...)
	if rc != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", rc, stdout, stderr)
	}
	var errs []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "pagepipe: ") {
			errs = append(errs, l)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], want) {
		t.Fatalf("error lines %q, want one saying %q", errs, want)
	}
	if flat && stdout != "" {
		t.Fatalf("-F wrote %d bytes of stream", len(stdout))
	}
	if left, _ := os.ReadDir(out); len(left) != 0 {
		t.Fatalf("left %v in the output directory", left)
	}
}
