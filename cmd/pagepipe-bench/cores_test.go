package main

import (
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"pagepipe/bench"
	"pagepipe/internal/cpuset"
)

func TestCoresCPUs(t *testing.T) {
	for usable, want := range map[int]string{
		1: "1", 2: "1,2", 3: "1,2,3", 4: "1,2,4", 12: "1,2,4,8,12", 16: "1,2,4,8,16", 64: "1,2,4,8,16",
	} {
		if got := coresCPUs(usable); got != want {
			t.Errorf("%d usable CPUs: %q, want %q", usable, got, want)
		}
	}
}

// TestMakeBenchCores runs make bench-cores as a machine without Go would
// (GO names no program): the carried static binaries, built here as make
// build builds them, a generated machine, small sizes, and a budget so
// short that one round of the three asked for is all it runs. It keeps
// the command that a many-core machine is lent for working.
func TestMakeBenchCores(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries and runs the study")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is needed (scripts/deps.sh installs it)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ out, pkg string }{{"pagepipe", "./cmd/pagepipe"}, {"pagepipe-bench", "./cmd/pagepipe-bench"}} {
		build := exec.Command(goTool, "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(bin, b.out), b.pkg)
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	usable, err := cpuset.Usable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "out")
	mk := exec.Command("make", "--no-print-directory", "-C", root, "bench-cores",
		"GO="+filepath.Join(tmp, "no-go"),
		"BIN="+filepath.Join(bin, "pagepipe"), "BENCHBIN="+filepath.Join(bin, "pagepipe-bench"),
		"CORES_OUT="+out, "CORES_BUDGET=1s",
		"CORES_ARGS=--size 96 --workers 1,2 --codec l --dump-level 31,1 --runs 3 --work-dir "+tmp+" --dump-dir "+tmp)
	log, err := mk.CombinedOutput()
	if err != nil {
		t.Fatalf("make bench-cores: %v\n%s", err, log)
	}
	if !strings.Contains(string(log), "measuring the carried") {
		t.Errorf("make bench-cores did not say it measured the carried binaries:\n%s", log)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "pagepipe-cores-*.vmcore")); len(left) > 0 {
		t.Errorf("the generated vmcore was left behind: %v", left)
	}

	tables, err := os.ReadFile(filepath.Join(out, "tables.txt"))
	if err != nil {
		t.Fatal(err)
	}
	widest := cpuset.Format(usable[:min(len(usable), 16)])
	res := []string{
		`(?m)^host: .*CPUs online`,
		`(?m)^pagepipe: pagepipe, sha256 [0-9a-f]{16} \(pagepipe: version `,
		`(?m)^note: the vmcore: pagepipe-bench gen-vmcore --profile 6\.1 --size 96 --used 0\.6`,
		`(?m)^note: 1 of 3 rounds: a round took \S+, and another would have ended past the time budget$`,
		`(?m)^note: the study took \S+ of a 1s budget`,
		`(?m)^\[001\] -l -d 31, CPUs ` + regexp.QuoteMeta(widest) + ` `,
		`(?m)^\[001\] -l -d 1, `,
		`(?m)^\s*threads:\s+1\s+2\s*$`,
		`(?m)^\s*speed-up\(times\):\s+1\.00\s+[0-9.]+\s*$`,
		`(?m)^\s*model \(1-CPU run\):\s+\d+\s+\d+\s*$`,
		`(?m)^\[003\] -l -d 31: .*\n\s*#cpus\s+CPUs\s+workers\s+pagepipe\s+total \(MB/s\)`,
		`(?m)^\s*1\s+` + regexp.QuoteMeta(cpuset.Format(usable[:1])) + `\s+1\s+\d+\s+\d+\s+1\.00\s+\d+\s+1\.00\s+[0-9.]+\s*$`,
	}
	if len(usable) > 1 {
		res = append(res, `(?m)^\s*2\s+`+regexp.QuoteMeta(cpuset.Format(usable[:2]))+`\s+2\s+\d+\s+\d+\s+[0-9.]+\s+\d+\s+[0-9.]+\s+[0-9.]+\s*$`)
	}
	for _, re := range res {
		if !regexp.MustCompile(re).Match(tables) {
			t.Errorf("tables.txt: no match for %s in:\n%s", re, tables)
		}
	}

	var st bench.Study
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Host == nil || st.Host.OnlineCPUs < 1 || st.Host.MemTotalKiB <= 0 {
		t.Errorf("results.json: host %+v", st.Host)
	}
	// Every configuration once: workers 1 and 2 on the widest set, and one
	// worker per CPU on each narrower set, for -d 31 and -d 1.
	sets := strings.Split(coresCPUs(len(usable)), ",")
	if want := 2 * (2 + len(sets) - 1); len(st.Runs) != want {
		t.Errorf("results.json: %d runs, want %d", len(st.Runs), want)
	}
	for _, r := range st.Runs {
		if r.Wall <= 0 || r.CPU() <= 0 || r.BytesOut <= 0 || r.Dumped == 0 || r.GOMAXPROCS != len(r.CPUs) {
			t.Errorf("run %s: %+v", r.Key(), r)
		}
	}
	for _, name := range []string{"threads.png", "cpus.png"} {
		f, err := os.Open(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
			t.Errorf("%s: %v", name, b)
		}
	}
	for _, name := range []string{"results.csv", "threads.svg", "cpus.svg"} {
		if st, err := os.Stat(filepath.Join(out, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}
