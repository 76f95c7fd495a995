//go:build integration

package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// --cpus 1 confines the running process and every one of its threads to
// one CPU (read back from /proc/self/task/*/status by pagepipe itself) and
// sets GOMAXPROCS to 1, even with more workers asked for.
func TestCPUsConfinesEveryThread(t *testing.T) {
	dir := t.TempDir()
	vmcore := filepath.Join(dir, "vmcore")
	if out, err := exec.Command(benchBin, "gen-vmcore", "--size", "32", vmcore).CombinedOutput(); err != nil {
		t.Fatalf("gen-vmcore: %v\n%s", err, out)
	}
	for _, tc := range []struct{ cpus, maxprocs, list string }{
		{"1", "1", `^0$`},   // a count: the first usable CPU
		{"0-0", "1", `^0$`}, // a list
	} {
		args := []string{"--cpus", tc.cpus, "--num-threads", "4", "-f", "-c", "-d", "1", "--message-level", "15", vmcore, filepath.Join(dir, "out")}
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		m := regexp.MustCompile(`cpus: GOMAXPROCS (\d+); (.*)`).FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("no cpus report in:\n%s", out)
		}
		if m[1] != tc.maxprocs {
			t.Errorf("GOMAXPROCS %s, want %s", m[1], tc.maxprocs)
		}
		for _, g := range regexp.MustCompile(`(\d+) threads on CPUs ([0-9,-]+)`).FindAllStringSubmatch(m[2], -1) {
			if !regexp.MustCompile(tc.list).MatchString(g[2]) {
				t.Errorf("%s threads may run on CPUs %s", g[1], g[2])
			}
		}
	}
}
