// Package fuzzcorpus keeps the committed seed corpora of pagepipe's fuzz
// targets: testdata/fuzz/FuzzName/seed-* in each package, in Go's corpus
// file format ("go test fuzz v1"), which `go test` runs as regression
// inputs and `go test -fuzz` starts from.
//
// Each package with fuzz targets has a TestFuzzSeedCorpus that builds the
// seeds (small valid inputs from the package's generators, truncations,
// edge cases) and calls Check: it fails when a committed file is missing,
// differs or is stale, and with -update-fuzz-corpus rewrites them:
//
//	go test ./source/ -run TestFuzzSeedCorpus -update-fuzz-corpus
//
// (make fuzz-corpus does it for every package). Files not named seed-*,
// such as the inputs the fuzzer found and saved there, are left alone.
//
// The package's own tests also cover scripts/fuzz.sh, which make fuzz runs
// for every target.
package fuzzcorpus

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update-fuzz-corpus", false, "rewrite the committed fuzz seed corpora (testdata/fuzz/*/seed-*) instead of checking them")

// maxTarget is the most bytes of seed files one target's corpus may hold.
const maxTarget = 256 << 10

// Seed is one corpus entry: the fuzz function's arguments, in order.
type Seed struct {
	Name string // the file is seed-Name
	Args []any
}

// encode writes args in Go's corpus file format.
func encode(args ...any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case string:
			fmt.Fprintf(&b, "string(%q)\n", v)
		case bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
			fmt.Fprintf(&b, "%T(%v)\n", v, v)
		default:
			return nil, fmt.Errorf("fuzz corpus: cannot encode a %T", a)
		}
	}
	return b.Bytes(), nil
}

// Check compares the seed files of target under testdata/fuzz with seeds,
// or with -update-fuzz-corpus writes them (and removes stale seed-*
// files).
func Check(t *testing.T, target string, seeds []Seed) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	want := map[string][]byte{}
	total := 0
	for _, s := range seeds {
		b, err := encode(s.Args...)
		if err != nil {
			t.Fatalf("%s %s: %v", target, s.Name, err)
		}
		name := "seed-" + s.Name
		if _, dup := want[name]; dup || strings.ContainsAny(s.Name, "/ ") {
			t.Fatalf("%s: seed name %q repeated or not a plain file name", target, s.Name)
		}
		want[name] = b
		total += len(b)
	}
	if total > maxTarget {
		t.Errorf("%s: %d bytes of seeds, more than the %d a corpus may hold", target, total, maxTarget)
	}
	old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range old {
			if _, ok := want[filepath.Base(p)]; !ok {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for _, p := range old {
		if _, ok := want[filepath.Base(p)]; !ok {
			t.Errorf("%s is stale: no seed makes it (rerun with -update-fuzz-corpus)", p)
		}
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := filepath.Join(dir, name)
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want[name]) {
			t.Errorf("%s is missing or out of date (rerun with -update-fuzz-corpus): %v", p, err)
		}
	}
}

// Truncations returns b cut at each of the given lengths (those within b).
func Truncations(name string, b []byte, lengths ...int) []Seed {
	var out []Seed
	for _, n := range lengths {
		if n >= 0 && n < len(b) {
			out = append(out, Seed{fmt.Sprintf("%s-cut%d", name, n), []any{b[:n]}})
		}
	}
	return out
}
