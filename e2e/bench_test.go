//go:build integration

package e2e

import (
	"encoding/csv"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"pagepipe/bench"
)

// pagepipe-bench --vs makedumpfile on the real fixture prints the seed
// studies' three table shapes (000, 001, 003) and the model, with numbers
// that hang together, and writes CSV, JSON and PNG that parse back. No
// timing is asserted: this machine's speed is not the code's.
func TestBenchVsMakedumpfile(t *testing.T) {
	fx := realVmcore(t)
	out := t.TempDir()
	// makedumpfile's --num-threads busy-waits: on one CPU its 2-thread run
	// takes half a minute, so the threads share both CPUs.
	cmd := exec.Command(benchBin, "--vs", "makedumpfile", "--workers", "1,2", "--cpus", "2",
		"--codec", "l", "--dump-level", "31", "--runs", "1", "--out", out, fx.Vmcore)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, b, stderr.String())
	}
	tables := string(b)
	t.Logf("\n%s", tables)

	// Progress: one line per run on a non-terminal.
	if n := strings.Count(stderr.String(), "bench: run "); n != 4 {
		t.Errorf("%d progress lines, want 4:\n%s", n, stderr.String())
	}
	num := `([0-9]+(?:\.[0-9]+)?)`
	for _, re := range []string{
		// 000: a row per configuration, Filter pages, Copy data, Total.
		`(?m)^\[000\].*\n\s*program\s+workers\s+CPUs\s+map-size \(KB\)\s+codec\s+level\s+Filter pages \(s\)\s+Copy data \(s\)\s+Total \(s\)`,
		`(?m)^\s*pagepipe\s+1\s+0-1\s+pread\s+-l\s+31\s+` + num + `\s+` + num + `\s+` + num,
		`(?m)^\s*pagepipe\s+2\s+0-1\s+pread\s+-l\s+31\s+` + num + `\s+` + num + `\s+` + num,
		`(?m)^\s*makedumpfile\s+1\s+0-1\s+N/A\s+-l\s+31\s+` + num + `\s+` + num + `\s+` + num,
		`(?m)^\s*makedumpfile\s+2\s+0-1\s+N/A\s+-l\s+31\s+` + num + `\s+` + num + `\s+` + num,
		// 001: threads, a row per program, speed-up(times).
		`(?m)^\s*threads:\s+1\s+2\s*$`,
		`(?m)^\s*pagepipe:\s+\d+\s+\d+\s*$`,
		`(?m)^\s*makedumpfile:\s+\d+\s+\d+\s*$`,
		`(?m)^\s*speed-up\(times\):\s+` + num + `\s+` + num + `\s*$`,
		`(?m)^\s*model \(pagepipe\):\s+\d+\s+\d+\s*$`,
		`(?m)^\s*pagepipe CPU \(s\):\s+` + num + `\s+` + num + `\s*$`,
		// 003: a row per CPU count, throughput per CPU.
		`(?m)^\[003\].*\n\s*#cpus\s+CPUs\s+workers\s+pagepipe\s+makedumpfile\s+model \(pagepipe\)`,
		`(?m)^\s*2\s+0-1\s+2\s+\d+\s+\d+\s+\d+`,
		// The model, labelled as one.
		`This is a model, not a measurement`,
		`(?m)^\s*64\s+\d+\s+\d+\s+(cpu|io)\s*$`,
	} {
		if !regexp.MustCompile(re).MatchString(tables) {
			t.Errorf("no match for %s", re)
		}
	}

	// results.json: the runs, consistent with each other and the dump.
	var st bench.Study
	jb, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(jb, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Runs) != 4 || len(st.Summaries) != 4 || len(st.Checks) != 2 || len(st.Curves) != 1 {
		t.Fatalf("results.json: %d runs, %d summaries, %d checks, %d curves", len(st.Runs), len(st.Summaries), len(st.Checks), len(st.Curves))
	}
	fi, err := os.Stat(fx.Vmcore)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Runs {
		name := r.Program + " " + strconv.Itoa(r.Workers)
		if r.Wall <= 0 || r.CPU() <= 0 || r.MaxRSSKiB <= 0 || r.FilterWall <= 0 || r.CopyWall <= 0 {
			t.Errorf("%s: a zero measurement: %+v", name, r)
		}
		if r.FilterWall+r.CopyWall > r.Wall {
			t.Errorf("%s: filter %.3f + copy %.3f s > the process's %.3f s", name, r.FilterWall, r.CopyWall, r.Wall)
		}
		if r.BytesIn <= 0 || r.BytesIn > fi.Size() || r.BytesOut <= 0 || r.BytesOut > r.BytesIn/4 {
			t.Errorf("%s: bytes in %d, out %d (vmcore %d)", name, r.BytesIn, r.BytesOut, fi.Size())
		}
		if r.Program != bench.Pagepipe {
			continue
		}
		if r.GOMAXPROCS != 2 {
			t.Errorf("%s: GOMAXPROCS %d on 2 CPUs", name, r.GOMAXPROCS)
		}
		var sum float64
		for i, v := range r.Stages.Values() {
			if v < 0 && bench.StageNames[i] != "other" {
				t.Errorf("%s: stage %s %.3f s", name, bench.StageNames[i], v)
			}
			sum += v
		}
		// The stages account for the process's CPU time, other included.
		if d := sum - r.CPU(); d > 1e-6 || d < -1e-6 {
			t.Errorf("%s: stages add up to %.6f s, the process used %.6f s", name, sum, r.CPU())
		}
		if r.Stages.Compress <= 0 || r.Stages.Filter <= 0 || r.ScanCPU > r.Stages.Filter {
			t.Errorf("%s: stages %+v, scan %.3f", name, r.Stages, r.ScanCPU)
		}
	}
	// The uncompressed-identical LZO dumps are the same size.
	if a, b := st.Summaries[0].BytesOut, st.Summaries[2].BytesOut; a != b {
		t.Errorf("LZO dump sizes: pagepipe %d, makedumpfile %d", a, b)
	}

	// results.csv: a header and a row per configuration.
	f, err := os.Open(filepath.Join(out, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 || strings.Join(recs[0], ",") != strings.Join(bench.CSVHeader, ",") {
		t.Errorf("results.csv: %d rows, header %v", len(recs), recs[0])
	}

	// The plots: PNG that decodes, SVG beside it.
	for _, name := range []string{"throughput.png", "cpu.png"} {
		pf, err := os.Open(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(pf)
		pf.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() < 200 || b.Dy() < 200 {
			t.Errorf("%s: %v", name, b.Size())
		}
		if _, err := os.Stat(filepath.Join(out, strings.TrimSuffix(name, ".png")+".svg")); err != nil {
			t.Error(err)
		}
	}
}

// Bad bench input gets one clear line and exit status 1.
func TestBenchBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "0", "x"}, `--workers "0": "0" is not an integer ≥ 1`},
		{[]string{"--codec", "q", "x"}, `is not one of c, l, p, z, lz4, none`},
		{[]string{"--cpus", "999", "x"}, `999 CPUs asked for`},
		{[]string{"--vs", "crash", "x"}, `--vs "crash": only makedumpfile`},
		{[]string{}, `need VMCORE or --gen-size MIB`},
		{[]string{"/nonexistent/vmcore"}, `open vmcore`},
	} {
		cmd := exec.Command(benchBin, append([]string{"--runs", "1"}, tc.args...)...)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Errorf("%v: %v, want exit status 1\n%s", tc.args, err, out)
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "pagepipe-bench bench: ") || !strings.Contains(lines[0], tc.want) {
			t.Errorf("%v: %q, want one line with %q", tc.args, out, tc.want)
		}
	}
}
