package dump

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
	"pagepipe/kdumpfmt"
	"pagepipe/source"
)

// These tests call Run directly, one per output shape, and check what the
// files hold against the generated machine, and what Result and Events say
// against the files.

// machine writes a generated vmcore (no VMCOREINFO: levels 0 and 1 only)
// and returns its path and spec.
func machine(t *testing.T, mix synth.Mix) (string, synth.Spec) {
	t.Helper()
	s := synth.Default(12)
	s.VMCOREINFO = ""
	s.Mix = mix
	path := filepath.Join(t.TempDir(), "vmcore")
	if err := synth.WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	return path, s
}

func run(t *testing.T, o Options) (Result, *notes) {
	t.Helper()
	ev := &notes{}
	res, err := Run(context.Background(), o, ev)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, ev.String())
	}
	return res, ev
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// near says whether Written (the bytes of every write) is about a file's
// size: the file may have holes, and an ELF dump rewrites its headers.
func near(written, size uint64) bool { return written > size/2 && written < size*2 }

func size(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(st.Size())
}

// checkDump reads every page of a kdump file back and compares it with the
// generator's, and returns how many pages it holds.
func checkDump(t *testing.T, path string, s synth.Spec) (pages uint64) {
	t.Helper()
	d, err := source.OpenDump(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, want := make([]byte, synth.PageSize), make([]byte, synth.PageSize)
	for pfn := d.Dumpable.NextSet(0); pfn < d.MaxMapnr; pfn = d.Dumpable.NextSet(pfn + 1) {
		err := d.ReadPage(pfn, got)
		if errors.Is(err, source.ErrNotDumped) {
			continue // another part's page
		}
		if err != nil {
			t.Fatalf("pfn %#x: %v", pfn, err)
		}
		synth.Page(s, pfn, want)
		if !bytes.Equal(got, want) {
			t.Fatalf("pfn %#x differs from the vmcore", pfn)
		}
		pages++
	}
	return pages
}

func TestRunKdump(t *testing.T) {
	vmcore, s := machine(t, synth.DefaultMix)
	out := filepath.Join(t.TempDir(), "dump")
	res, ev := run(t, Options{Input: vmcore, Levels: []Level{1}, Codec: "zlib", Workers: 3, Out: Output{Paths: []string{out}}})
	if n := checkDump(t, out, s); n != res.Copy.Pages {
		t.Errorf("the dump holds %d pages, Result says %d", n, res.Copy.Pages)
	}
	if !near(res.Written, size(t, out)) {
		t.Errorf("Written %d, the file has %d bytes", res.Written, size(t, out))
	}
	if res.Pages.Excluded.Zero == 0 || res.Pages.Excluded.Zero != res.Copy.ZeroPages {
		t.Errorf("zero pages: report %d, copy pass %d", res.Pages.Excluded.Zero, res.Copy.ZeroPages)
	}
	if want := s.DataBytes() / synth.PageSize; res.Pages.Original != want {
		t.Errorf("original pages %d, the machine has %d", res.Pages.Original, want)
	}
	if res.Copy.Compressed == 0 || res.Level != 1 || res.Workers != 3 {
		t.Errorf("Result %+v", res)
	}
	if want := []string{"Checking for memory holes", "Excluding unnecessary pages", "Copying data timed"}; !slices.Equal(ev.steps, want) {
		t.Errorf("steps %q, want %q", ev.steps, want)
	}
	if st := res.Stats(); st.Dumped != res.Copy.Pages || st.CopyWall <= 0 || st.Workers != 3 {
		t.Errorf("Stats %+v", st)
	}
}

// A flattened stream rebuilds into the same bytes as the file.
func TestRunFlattened(t *testing.T) {
	vmcore, _ := machine(t, synth.DefaultMix)
	dir := t.TempDir()
	plain, rebuilt := filepath.Join(dir, "plain"), filepath.Join(dir, "rebuilt")
	o := Options{Input: vmcore, Levels: []Level{1}, Codec: "lzo", Out: Output{Paths: []string{plain}}}
	run(t, o)
	var stream bytes.Buffer
	o.Out = Output{Stream: &stream}
	run(t, o)
	if err := Rearrange(context.Background(), RearrangeOptions{Stream: &stream, Path: rebuilt}); err != nil {
		t.Fatal(err)
	}
	if a, b := readFile(t, plain), readFile(t, rebuilt); !bytes.Equal(a, b) {
		t.Fatalf("the rebuilt stream differs: %s", judge.FirstDiff(a, b))
	}
}

// An ELF dump holds every page of the vmcore but the runs of zero pages it
// leaves out, each at its PT_LOAD's place.
func TestRunELF(t *testing.T) {
	vmcore, s := machine(t, synth.Mix{Zero: 0.9, Text: 0.05, Random: 0.05})
	out := filepath.Join(t.TempDir(), "elf")
	res, ev := run(t, Options{Input: vmcore, Levels: []Level{1}, Out: Output{Shape: ELF, Paths: []string{out}}})
	if want := []string{"Checking for memory holes", "Excluding unnecessary pages", "Excluding zero pages timed", "Copying data timed"}; !slices.Equal(ev.steps, want) {
		t.Errorf("steps %q, want %q", ev.steps, want)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var inFile uint64
	got, want := make([]byte, synth.PageSize), make([]byte, synth.PageSize)
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		for off := uint64(0); off+synth.PageSize <= p.Filesz; off += synth.PageSize {
			if _, err := p.ReadAt(got, int64(off)); err != nil {
				t.Fatal(err)
			}
			synth.Page(s, (p.Paddr+off)/synth.PageSize, want)
			if !bytes.Equal(got, want) {
				t.Fatalf("paddr %#x differs from the vmcore", p.Paddr+off)
			}
			inFile++
		}
	}
	if res.ELF == nil || res.ELF.InFile != inFile || res.ELF.Excluded == 0 {
		t.Errorf("ELF counts %+v, the file holds %d pages", res.ELF, inFile)
	}
	if res.Pages.Excluded.Zero == 0 || !near(res.Written, size(t, out)) {
		t.Errorf("zero pages %d, written %d of %d", res.Pages.Excluded.Zero, res.Written, size(t, out))
	}
}

// Split files hold every page once between them, and reassemble into the
// unsplit dump.
func TestRunSplit(t *testing.T) {
	vmcore, s := machine(t, synth.DefaultMix)
	dir := t.TempDir()
	parts := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")}
	whole, joined := filepath.Join(dir, "whole"), filepath.Join(dir, "joined")
	res, _ := run(t, Options{Input: vmcore, Levels: []Level{1}, Codec: "zstd", Out: Output{Shape: Split, Paths: parts, SplitBlockKiB: 64}})
	var pages, written uint64
	for _, p := range parts {
		n := checkDump(t, p, s)
		if n == 0 {
			t.Errorf("%s holds no page", p)
		}
		pages += n
		written += size(t, p)
	}
	if pages != res.Copy.Pages || !near(res.Written, written) {
		t.Errorf("the parts hold %d pages, %d bytes; Result says %d, %d", pages, written, res.Copy.Pages, res.Written)
	}
	run(t, Options{Input: vmcore, Levels: []Level{1}, Codec: "zstd", Out: Output{Paths: []string{whole}}})
	if err := Reassemble(context.Background(), ReassembleOptions{Parts: parts, Path: joined}); err != nil {
		t.Fatal(err)
	}
	if a, b := readFile(t, whole), readFile(t, joined); !bytes.Equal(a, b) {
		t.Fatalf("reassembled split files differ from the unsplit dump: %s", judge.FirstDiff(a, b))
	}
}

// A dump cut short by -L is left valid, marked incomplete, its pages the
// vmcore's; with a second level listed, Run starts over there and fits.
func TestRunIncomplete(t *testing.T) {
	vmcore, s := machine(t, synth.Mix{Zero: 0.6, Text: 0.2, Random: 0.2})
	out := filepath.Join(t.TempDir(), "dump")
	o := Options{Input: vmcore, Levels: []Level{0}, Out: Output{Paths: []string{out}, SizeLimit: 6 << 20}}
	ev := &notes{}
	res, err := Run(context.Background(), o, ev)
	var ie *IncompleteError
	if !errors.As(err, &ie) || !errors.Is(err, ErrIncomplete) || !errors.Is(err, ErrOutputFull) {
		t.Fatalf("Run: %v, want an incomplete dump for a full output", err)
	}
	d, err := source.OpenDump(out)
	if err != nil {
		t.Fatal(err)
	}
	incomplete := d.Header.Status&kdumpfmt.StatusIncomplete != 0
	d.Close()
	if !incomplete {
		t.Error("the header is not marked INCOMPLETE")
	}
	if n := checkDump(t, out, s); n == 0 || n >= s.DataBytes()/synth.PageSize {
		t.Errorf("the cut dump holds %d pages", n)
	}
	if !near(res.Written, size(t, out)) {
		t.Errorf("Written %d, the cut file has %d bytes", res.Written, size(t, out))
	}

	// Level 0 does not fit in 6 MiB; level 1 leaves the zero pages out.
	o.Levels = []Level{0, 1}
	o.Out.Force = true
	res, ev = run(t, o)
	if res.Level != 1 || !bytes.Contains([]byte(ev.String()), []byte("Retry to create a dumpfile by dump_level(1).\n")) {
		t.Errorf("level %d; messages:\n%s", res.Level, ev.String())
	}
	checkDump(t, out, s)
}

// An input that cannot be dumped as asked is refused before any file
// exists.
func TestRunUnsupported(t *testing.T) {
	vmcore, _ := machine(t, synth.DefaultMix)
	dir := t.TempDir()
	kdump, out := filepath.Join(dir, "kdump"), filepath.Join(dir, "elf")
	run(t, Options{Input: vmcore, Levels: []Level{1}, Out: Output{Paths: []string{kdump}}})
	_, err := Run(context.Background(), Options{Input: kdump, Out: Output{Shape: ELF, Paths: []string{out}}}, nil)
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Run: %v, want ErrUnsupported", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s exists (%v)", out, err)
	}
	for _, a := range synth.Archs()[1:] {
		foreign := filepath.Join(dir, a.String())
		if err := synth.WriteFile(foreign, synth.ForeignMachine(a, 8)); err != nil {
			t.Fatal(err)
		}
		out := foreign + ".dump"
		_, err := Run(context.Background(), Options{Input: foreign, Levels: []Level{1}, Out: Output{Paths: []string{out}}}, nil)
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", a, err)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s exists (%v)", out, err)
		}
	}
}
