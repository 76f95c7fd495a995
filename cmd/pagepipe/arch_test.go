package main

import (
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
// no SYMBOL(swapper_pg_dir)), and a dump whose header was made to say
// aarch64 over an x86_64 kernel's VMCOREINFO (issue 19).
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
				out := t.TempDir()
				args := make([]string, len(tc.args))
				for i, s := range tc.args {
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
				want := want[!strings.HasSuffix(tc.name, "dump") && tc.name != "refilter"]
				if len(errs) != 1 || !strings.Contains(errs[0], want) {
					t.Fatalf("error lines %q, want one saying %q", errs, want)
				}
				if tc.name == "flat" || tc.name == "flat-dump" {
					if stdout != "" {
						t.Fatalf("-F wrote %d bytes of stream", len(stdout))
					}
				}
				if left, _ := os.ReadDir(out); len(left) != 0 {
					t.Fatalf("left %v in the output directory", left)
				}
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
