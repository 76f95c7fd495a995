package main

import (
	"bytes"
	"debug/elf"
	"path/filepath"
	"strings"
	"testing"

	"pagepipe/internal/synth"
)

// elfShape is a generated vmcore with zero runs shorter and longer than
// 256 pages and the kernel-text alias.
func elfShape() synth.Spec {
	s := synth.Shapes()["alias"]
	s.VMCOREINFO = ""
	s.Mix = synth.Mix{Zero: 0.97, Text: 0.01, Repetitive: 0.01, Random: 0.01}
	return s
}

// An ELF dump is the same for any number of threads and any mmap window,
// and its flattened stream rebuilds into it.
func TestELFIndependentOfWorkersAndFlattened(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "v", elfShape())
	ref := filepath.Join(dir, "ref")
	mustPagepipe(t, "-E", "-d", "1", "--num-threads", "1", vmcore, ref)
	want := readFile(t, ref)
	for i, args := range [][]string{
		{"--num-threads", "4"},
		{"--num-threads", "3", "--map-size", "8"},
		{"--num-threads", "2", "--non-mmap"},
	} {
		out := filepath.Join(dir, "o"+string(rune('a'+i)))
		mustPagepipe(t, append(append([]string{"-E", "-d", "1"}, args...), vmcore, out)...)
		if got := readFile(t, out); !bytes.Equal(got, want) {
			t.Errorf("%v: dump differs from one thread's", args)
		}
	}

	flat := mustPagepipe(t, "-F", "-E", "-d", "1", vmcore)
	rebuilt := filepath.Join(dir, "rebuilt")
	var stdout, stderr bytes.Buffer
	if rc := run([]string{"-R", rebuilt}, strings.NewReader(flat), &stdout, &stderr); rc != 0 {
		t.Fatalf("-R: exit %d\n%s%s", rc, stdout.String(), stderr.String())
	}
	if !bytes.Equal(readFile(t, rebuilt), want) {
		t.Error("the flattened ELF dump rebuilds into another file")
	}

	if rc, _, stderr := pagepipe(t, "-E", "-d", "1", "--dry-run", vmcore, filepath.Join(dir, "dry")); rc != 0 {
		t.Errorf("--dry-run: exit %d: %s", rc, stderr)
	}
}

// -E refuses compression, --split and a kdump-compressed input, with a
// clear error (makedumpfile's own message for --split, on stdout).
func TestELFRefusals(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "v", synth.Shapes()["cpu1"])
	kdump := filepath.Join(dir, "kdump")
	mustPagepipe(t, "-d", "1", vmcore, kdump)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-E", "-c", vmcore, filepath.Join(dir, "a")}, "cannot be used with -c"},
		{[]string{"-E", "-l", vmcore, filepath.Join(dir, "b")}, "cannot be used with -c"},
		{[]string{"-E", "--split", vmcore, filepath.Join(dir, "c1"), filepath.Join(dir, "c2")}, "Options for splitting dumpfile cannot be used with Elf format."},
		{[]string{"-E", kdump, filepath.Join(dir, "d")}, "kdump-compressed"},
	} {
		rc, stdout, stderr := pagepipe(t, tc.args...)
		if rc == 0 || !strings.Contains(stdout+stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want a failure saying %q", tc.args, rc, stdout+stderr, tc.want)
		}
	}
}

// An ELF dump of QEMU's ELF (program headers after two section headers)
// has the layout and bytes of one of /proc/vmcore's shape, with its
// program headers at 64 and none of QEMU's section headers.
func TestELFOfQEMULayout(t *testing.T) {
	dir := t.TempDir()
	s := synth.Shapes()["qemu"]
	s.VMCOREINFO = ""
	s.Mix = elfShape().Mix
	qemu := writeShape(t, dir, "qemu", s)
	s.Layout = synth.ProcVmcore
	proc := writeShape(t, dir, "proc", s)
	mustPagepipe(t, "-E", "-d", "1", qemu, qemu+".elf")
	mustPagepipe(t, "-E", "-d", "1", proc, proc+".elf")
	a, b := readFile(t, qemu+".elf"), readFile(t, proc+".elf")
	fa, err := elf.NewFile(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	fb, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(fa.Sections) != 0 || len(fa.Progs) != len(fb.Progs) || len(fa.Progs) < 3 {
		t.Fatalf("%d sections, %d and %d program headers", len(fa.Sections), len(fa.Progs), len(fb.Progs))
	}
	for i, p := range fa.Progs {
		q := fb.Progs[i]
		if p.Type != q.Type || p.Off != q.Off || p.Paddr != q.Paddr || p.Filesz != q.Filesz || p.Memsz != q.Memsz {
			t.Errorf("program header %d: %+v, from /proc/vmcore's shape %+v", i, p.ProgHeader, q.ProgHeader)
		}
	}
	if data := fa.Progs[0].Off; !bytes.Equal(a[data:], b[data:]) {
		t.Error("notes and data differ")
	}
}
