package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
)

// Acceptance (issue 16): every output shape is byte-identical for 1 to 64
// workers. GOMAXPROCS is raised to 64 for the test, so that 64 workers
// really run at once (the copy pass runs at most GOMAXPROCS of them): a
// kdump file (written by the workers at the places handed out in order)
// with each codec, its flattened stream (written in order), an ELF dump
// and split files; and prioritised (--priority) a file, its stream and
// split files.
func TestOutputIdenticalFor1To64Workers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(64))
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "v", synth.Default(24))
	kernelMachine := writeShape(t, dir, "k", synth.KernelMachine("6.1", 24))
	for _, tc := range []struct {
		name   string
		args   []string
		stream bool
		outs   int
		input  string // "": vmcore
	}{
		{"kdump -c", []string{"-c", "-d", "1"}, false, 1, ""},
		{"kdump -l", []string{"-l", "-d", "1"}, false, 1, ""},
		{"kdump -z", []string{"-z", "-d", "1"}, false, 1, ""},
		{"kdump raw", []string{"-d", "0"}, false, 1, ""},
		{"flattened -z", []string{"-F", "-z", "-d", "1"}, true, 0, ""},
		{"ELF", []string{"-E", "-d", "1"}, false, 1, ""},
		{"split -l", []string{"-l", "-d", "1", "--split"}, false, 3, ""},
		// Issue 21: a prioritised file, on a machine with page tables.
		{"kdump -l --priority", []string{"-l", "-d", "31", "--priority"}, false, 1, kernelMachine},
		// Its flattened stream, records and all, and split files.
		{"flattened -l --priority", []string{"-F", "-l", "-d", "31", "--priority"}, true, 0, kernelMachine},
		{"split -l --priority", []string{"-l", "-d", "31", "--splitblock-size", "1024", "--split", "--priority"}, false, 3, kernelMachine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := vmcore
			if tc.input != "" {
				in = tc.input
			}
			dump := func(workers int) [][]byte {
				args := append(append([]string{"-f"}, tc.args...), "--num-threads", fmt.Sprint(workers), in)
				if tc.stream {
					return [][]byte{[]byte(mustPagepipe(t, args...))}
				}
				var paths []string
				for i := range tc.outs {
					paths = append(paths, filepath.Join(dir, fmt.Sprintf("out%d", i)))
				}
				mustPagepipe(t, append(args, paths...)...)
				var got [][]byte
				for _, p := range paths {
					got = append(got, readFile(t, p))
				}
				return got
			}
			want := dump(1)
			for _, workers := range []int{2, 3, 8, 16, 64} {
				got := dump(workers)
				for i := range want {
					if !bytes.Equal(got[i], want[i]) {
						t.Fatalf("%d workers, output %d: %s", workers, i, judge.FirstDiff(got[i], want[i]))
					}
				}
			}
			if tc.stream && !strings.HasPrefix(string(want[0]), "makedumpfile") {
				t.Fatalf("not a flattened stream: %q", want[0][:16])
			}
		})
	}
}
