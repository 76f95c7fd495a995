package main

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
	"pagepipe/source"
)

// pagepipe runs the command in-process and returns its exit code and output.
func pagepipe(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	rc := run(args, strings.NewReader(""), &stdout, &stderr)
	return rc, stdout.String(), stderr.String()
}

func mustPagepipe(t *testing.T, args ...string) string {
	t.Helper()
	rc, stdout, stderr := pagepipe(t, args...)
	if rc != 0 {
		t.Fatalf("pagepipe %s: exit %d\n%s%s", strings.Join(args, " "), rc, stdout, stderr)
	}
	return stdout
}

// writeShape writes a generated vmcore into dir and returns its path.
func writeShape(t *testing.T, dir, name string, s synth.Spec) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := synth.WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	return path
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// expected returns the hash of every page the dump of s at a level without
// page classification must hold: the pages of source.Info.Bitmaps' 2nd
// bitmap, with the generator's contents.
func expected(t *testing.T, vmcore string, s synth.Spec) judge.Pages {
	t.Helper()
	v, err := source.Open(vmcore)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	_, dumpable := v.Bitmaps(v.MaxMapnr, source.PartialPages{})
	want := judge.Pages{}
	buf := make([]byte, synth.PageSize)
	for pfn := dumpable.NextSet(0); pfn < dumpable.Len(); pfn = dumpable.NextSet(pfn + 1) {
		synth.Page(s, pfn, buf)
		want[pfn] = judge.Hash(buf)
	}
	return want
}

// ownReader reads every dumped page back through pagepipe's reader.
func ownReader(t *testing.T, dump string) judge.Pages {
	t.Helper()
	d, err := source.OpenDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got := judge.Pages{}
	buf := make([]byte, d.PageSize())
	for pfn := d.Dumpable.NextSet(0); pfn < d.MaxMapnr; pfn = d.Dumpable.NextSet(pfn + 1) {
		if err := d.ReadPage(pfn, buf); err != nil {
			t.Fatal(err)
		}
		got[pfn] = judge.Hash(buf)
	}
	return got
}

// Acceptance: for every generated shape, every page of a -c -d 1 dump
// reads back equal to the generator's through pagepipe's own reader (and
// through libkdumpfile: TestZlibDumpReadByLibkdumpfile).
func TestZlibDumpReadsBack(t *testing.T) {
	dir := t.TempDir()
	for _, name := range slices.Sorted(maps.Keys(synth.Shapes())) {
		t.Run(name, func(t *testing.T) {
			s := synth.Shapes()[name]
			vmcore := writeShape(t, dir, name, s)
			dump := vmcore + ".c"
			mustPagepipe(t, "-c", "-d", "1", vmcore, dump)
			if d := expected(t, vmcore, s).Diff(ownReader(t, dump)); d != "" {
				t.Errorf("own reader:\n%s", d)
			}
		})
	}
}

// Acceptance: the output does not depend on the number of workers, the map
// size or the read method.
func TestOutputIndependentOfWorkersAndMapSize(t *testing.T) {
	dir := t.TempDir()
	s := synth.Default(24)
	vmcore := writeShape(t, dir, "default", s)
	ref := vmcore + ".ref"
	mustPagepipe(t, "-c", "-d", "1", "--num-threads", "1", vmcore, ref)
	want := readFile(t, ref)
	var runs [][]string
	for _, n := range []string{"1", "2", "3", "8"} {
		for _, m := range []string{"4", "1024", "10240"} {
			runs = append(runs, []string{"--num-threads", n, "--map-size", m})
		}
		runs = append(runs, []string{"--num-threads", n, "--non-mmap"})
	}
	for _, extra := range runs {
		t.Run(strings.Join(extra, " "), func(t *testing.T) {
			out := filepath.Join(dir, "out")
			args := append([]string{"-f", "-c", "-d", "1"}, extra...)
			mustPagepipe(t, append(args, vmcore, out)...)
			if got := readFile(t, out); !bytes.Equal(got, want) {
				t.Fatalf("differs from the 1-worker dump: %s", judge.FirstDiff(got, want))
			}
		})
	}
}

// An existing dump file is never clobbered without -f.
func TestNoClobberWithoutForce(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "v", synth.Shapes()["cpu1"])
	out := filepath.Join(dir, "out")
	if err := os.WriteFile(out, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	rc, _, stderr := pagepipe(t, "-d", "1", vmcore, out)
	if rc != 1 || !strings.Contains(stderr, "file exists") {
		t.Fatalf("exit %d, stderr %q; want 1 and \"file exists\"", rc, stderr)
	}
	if got := string(readFile(t, out)); got != "precious" {
		t.Fatalf("output clobbered: %q", got)
	}
	mustPagepipe(t, "-f", "-d", "1", vmcore, out)
	if _, err := source.OpenDump(out); err != nil {
		t.Fatalf("-f did not write a dump: %v", err)
	}
}

// Malformed input gets one line of error on stderr and exit 1, never a
// panic (the parser's own tests cover each structure in detail).
func TestMalformedVmcoreOneLineError(t *testing.T) {
	dir := t.TempDir()
	good := readFile(t, writeShape(t, dir, "good", synth.Shapes()["cpu1"]))
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"truncated header", good[:50]},
		{"truncated program headers", good[:100]},
		{"truncated notes", good[:1000]},
		{"truncated data", good[:len(good)-4096]},
		{"garbage", bytes.Repeat([]byte{0xa5}, 8192)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := filepath.Join(dir, "bad")
			if err := os.WriteFile(in, tc.b, 0o600); err != nil {
				t.Fatal(err)
			}
			rc, stdout, stderr := pagepipe(t, "-f", "-d", "1", in, filepath.Join(dir, "out"))
			if rc != 1 {
				t.Fatalf("exit %d, want 1", rc)
			}
			if n := strings.Count(stderr, "\n"); n != 1 || !strings.HasPrefix(stderr, "pagepipe: ") {
				t.Fatalf("stderr is not one error line: %q", stderr)
			}
			if !strings.Contains(stdout, "pagepipe Failed.") {
				t.Fatalf("stdout %q lacks the failure line", stdout)
			}
		})
	}
}
