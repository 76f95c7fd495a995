package fuzzcorpus

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// scripts/fuzz.sh, which make fuzz runs for every target, passes a run
// that kept executing, fails one whose execution count stood still for
// more than 10 s or that go test failed, except a run failed only by Go's
// deadline race (golang/go#75804). A stand-in for the go command replays
// go test's output.
func TestFuzzScript(t *testing.T) {
	steady := "fuzz: elapsed: 0s, gathering baseline coverage: 0/10 completed\n" +
		"fuzz: elapsed: 0s, gathering baseline coverage: 10/10 completed, now fuzzing with 1 workers\n" +
		"fuzz: elapsed: 3s, execs: 103 (34/sec), new interesting: 0 (total: 10)\n" +
		"fuzz: elapsed: 6s, execs: 200 (32/sec), new interesting: 1 (total: 11)\n" +
		"fuzz: elapsed: 9s, execs: 300 (33/sec), new interesting: 1 (total: 11)\n" +
		"fuzz: elapsed: 10s, execs: 300 (0/sec), new interesting: 1 (total: 11)\nPASS\n"
	stalled := "fuzz: elapsed: 0s, gathering baseline coverage: 10/10 completed, now fuzzing with 1 workers\n" +
		"fuzz: elapsed: 3s, execs: 103 (34/sec), new interesting: 0 (total: 10)\n" +
		"fuzz: elapsed: 6s, execs: 103 (0/sec), new interesting: 0 (total: 10)\n" +
		"fuzz: elapsed: 1m0s, execs: 103 (0/sec), new interesting: 0 (total: 10)\n" +
		"fuzz: elapsed: 1m3s, execs: 900 (265/sec), new interesting: 1 (total: 11)\nPASS\n"
	race := "fuzz: elapsed: 9s, execs: 22410 (56/sec), new interesting: 6 (total: 65)\n" +
		"fuzz: elapsed: 11s, execs: 44445 (10379/sec), new interesting: 9 (total: 68)\n" +
		"--- FAIL: FuzzX (11.41s)\n    context deadline exceeded\nFAIL\n"
	crash := "fuzz: elapsed: 3s, execs: 103 (34/sec), new interesting: 0 (total: 10)\n" +
		"--- FAIL: FuzzX (3.50s)\n    --- FAIL: FuzzX (0.00s)\n        x_test.go:9: context deadline exceeded\n\n" +
		"    Failing input written to testdata/fuzz/FuzzX/0123456789abcdef\nFAIL\n"
	tests := []struct {
		name string
		out  string // what go test prints
		rc   int    // and its exit status
		ok   bool
		say  string
	}{
		{"steady", steady, 0, true, "longest stretch with no new execution: 1s (execs 300, from 9s)"},
		{"stalled", stalled, 0, false, "longest stretch with no new execution: 57s (execs 103, from 3s)"},
		{"deadline race", race, 1, true, "failed only by golang/go#75804"},
		{"crash", crash, 1, false, "go test failed (exit 1)"},
		{"hung worker", "--- FAIL: FuzzX (1.00s)\n    fuzzing process hung or terminated unexpectedly: exit status 2\nFAIL\n", 1, false, "go test failed (exit 1)"},
		{"no progress lines", "PASS\n", 0, false, "no progress lines"},
	}
	script, err := filepath.Abs("../../scripts/fuzz.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fake := filepath.Join(dir, "go")
			body := "#!/bin/sh\ncat " + filepath.Join(dir, "out") + "\nexit " + strconv.Itoa(tt.rc) + "\n"
			if err := os.WriteFile(fake, []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "out"), []byte(tt.out), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", script, "pkg", "FuzzX", "10s")
			cmd.Env = append(os.Environ(), "GO="+fake)
			out, err := cmd.CombinedOutput()
			if (err == nil) != tt.ok {
				t.Errorf("exit %v, want success %v; output:\n%s", err, tt.ok, out)
			}
			if !strings.Contains(string(out), tt.say) {
				t.Errorf("output lacks %q:\n%s", tt.say, out)
			}
		})
	}
}
