package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestParseCPUSets(t *testing.T) {
	usable := []int{0, 1, 2, 3, 6}
	for _, tc := range []struct {
		in   string
		want [][]int
		err  string
	}{
		{"1", [][]int{{0}}, ""},
		{"1,2,4", [][]int{{0}, {0, 1}, {0, 1, 2, 3}}, ""},
		{"0-3", [][]int{{0, 1, 2, 3}}, ""},
		{"2-2,1", [][]int{{2}, {0}}, ""},
		{"1,0-0", [][]int{{0}}, ""}, // the same set twice is one
		{"6", nil, "6 CPUs asked for, this process may use 5"},
		{"4-6", nil, "CPU 4 is not available"},
		{"0", nil, "not a CPU count"},
		{"x", nil, "not a CPU count"},
		{"3-1", nil, "not a CPU count"},
	} {
		got, err := ParseCPUSets(tc.in, usable)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseLists(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func() (any, error)
		want  any
		err   string
	}{
		{"workers", func() (any, error) { return ParseInts("workers", "1,2,4,2", 1) }, []int{1, 2, 4}, ""},
		{"workers 0", func() (any, error) { return ParseInts("workers", "0,1", 1) }, nil, `"0" is not an integer ≥ 1`},
		{"map sizes", func() (any, error) { return ParseMapSizes("4,1024,default,10240") }, []int{4, 1024, 0, 10240}, ""},
		{"map size 6", func() (any, error) { return ParseMapSizes("6") }, nil, "multiple of 4"},
		{"codecs", func() (any, error) { return ParseCodecs("c,l,p,z,lz4,none,c") }, []string{"c", "l", "p", "z", "lz4", "none"}, ""},
		{"codec x", func() (any, error) { return ParseCodecs("c,x") }, nil, `"x" is not one of`},
		{"levels", func() (any, error) { return ParseLevels("1,31") }, []int{1, 31}, ""},
		{"level 32", func() (any, error) { return ParseLevels("32") }, nil, "not a dump level"},
	} {
		got, err := tc.parse()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestConfigs(t *testing.T) {
	m := Matrix{Workers: []int{1, 4}, CPUs: [][]int{{0}}, MapSizes: []int{0, 1024}, Codecs: []string{"c", "lz4"}, Levels: []int{31}, VsMakedumpfile: true}
	cfgs, notes := m.Configs()
	var got []string
	for _, c := range cfgs {
		got = append(got, c.Program+" "+strings.Join(c.Args(), " ")+" map="+c.MapSize())
	}
	want := []string{
		"pagepipe -c -d 31 --num-threads 1 map=pread",
		"pagepipe -c -d 31 --num-threads 4 map=pread",
		"pagepipe -c -d 31 --num-threads 1 --map-size 1024 map=1024",
		"pagepipe -c -d 31 --num-threads 4 --map-size 1024 map=1024",
		"makedumpfile -c -d 31 map=N/A", // serial at one worker
		"makedumpfile -c -d 31 --num-threads 4 map=N/A",
		"pagepipe --lz4 -d 31 --num-threads 1 map=pread",
		"pagepipe --lz4 -d 31 --num-threads 4 map=pread",
		"pagepipe --lz4 -d 31 --num-threads 1 --map-size 1024 map=1024",
		"pagepipe --lz4 -d 31 --num-threads 4 --map-size 1024 map=1024",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("configs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(notes) != 2 || !strings.Contains(notes[0], "lz4") || !strings.Contains(notes[1], "--map-size") {
		t.Errorf("notes %q", notes)
	}
}

func TestParseSteps(t *testing.T) {
	for _, tc := range []struct {
		name         string
		out          string
		filter, copy float64
		err          bool
	}{
		{"one cycle", "Copying data                                      : [100.0 %] /           eta: 0s\r" +
			"STEP [Checking for memory holes  ] : 0.002955 seconds\n" +
			"STEP [Excluding unnecessary pages] : 0.043982 seconds\n" +
			"STEP [Copying data               ] : 3.332507 seconds\n" +
			"STEP [Copying data               ] : 0.000055 seconds\n", 0.046937, 3.332562, false},
		// Two cycles: the mem_map is scanned twice, and both count.
		{"two scans", "STEP [Excluding unnecessary pages] : 0.6 seconds\n" +
			"STEP [Excluding unnecessary pages] : 0.5 seconds\n" +
			"STEP [Excluding free pages       ] : 0.1 seconds\n" +
			"STEP [Copying data               ] : 2 seconds\n", 1.2, 2, false},
		{"no steps", "makedumpfile Completed.\n", 0, 0, true},
	} {
		f, c, err := parseSteps(tc.out)
		if (err != nil) != tc.err {
			t.Errorf("%s: error %v", tc.name, err)
			continue
		}
		if math.Abs(f-tc.filter) > 1e-9 || math.Abs(c-tc.copy) > 1e-9 {
			t.Errorf("%s: filter %v copy %v, want %v %v", tc.name, f, c, tc.filter, tc.copy)
		}
	}
}

func TestStat(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want Stat
	}{
		{[]float64{3, 1, 2}, Stat{2, 1, 3}},
		{[]float64{4, 1, 2, 3}, Stat{2.5, 1, 4}},
		{[]float64{7}, Stat{7, 7, 7}},
		{nil, Stat{}},
	} {
		if got := statOf(tc.in); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.in, got, tc.want)
		}
	}
}

// fakeRun is a pagepipe run whose CPU costs follow the model exactly:
// serial s and parallel p CPU seconds, on cores cores.
func fakeRun(workers int, cpus []int, cores, s, p float64, round int) Run {
	wall := s + p/math.Min(float64(workers), cores)
	return Run{
		Config: Config{Program: Pagepipe, Workers: workers, CPUs: cpus, Codec: "c", Level: 31},
		Round:  round, Wall: wall, User: 0.9 * (s + p), Sys: 0.1 * (s + p), MaxRSSKiB: 40 << 10,
		FilterWall: 0.1, CopyWall: wall - 0.1,
		Stages:  Stages{Read: 0.2 * p, Compress: 0.7 * p, Filter: 0.1*p + 0.05*s, Reorder: 0.1 * s, Write: 0.5 * s, Other: 0.35 * s},
		ScanCPU: 0.1 * p, Fixed: 0.2 * s, BytesIn: 1 << 30, BytesOut: 50 << 20, BytesRead: 140 << 20, Dumped: 35840,
	}
}

func TestModel(t *testing.T) {
	md := Model{Parallel: 4, Serial: 1, BytesIn: 1e9, BytesRead: 1e9, BytesOut: 1e8, ReadRate: 1e9 / 0.5, WriteRate: 1e9}
	for _, tc := range []struct {
		workers int
		cores   float64
		wall    float64
		bound   string
	}{
		{1, 1, 5, "cpu"},
		{8, 1, 5, "cpu"}, // more workers than cores: no faster
		{2, 2, 3, "cpu"},
		{4, 8, 2, "cpu"},
		{64, 64, 1.0625, "cpu"},
		{64, 1000, 1.0625, "cpu"},
	} {
		w, b := md.Wall(tc.workers, tc.cores)
		if math.Abs(w-tc.wall) > 1e-9 || b != tc.bound {
			t.Errorf("%d workers on %v cores: %v %s, want %v %s", tc.workers, tc.cores, w, b, tc.wall, tc.bound)
		}
	}
	// A fifth of the CPU is serial: Amdahl's 4x at 16 workers, 1/(0.2+0.8/64) at 64.
	if f := md.SerialFraction(); math.Abs(f-0.2) > 1e-9 {
		t.Errorf("serial fraction %v, want 0.2", f)
	}
	if s16, s64 := md.SpeedUp(16), md.SpeedUp(64); math.Abs(s16-4) > 1e-9 || math.Abs(s64-1/(0.2+0.8/64)) > 1e-9 {
		t.Errorf("speed-ups %v at 16, %v at 64", s16, s64)
	}
	// On CPU alone the same, with the I/O ceiling out of the way; without
	// the fixed part (a tenth of the serial CPU) the serial fraction is
	// 0.9/4.9.
	md.Fixed = 0.1
	if s16 := md.CPUSpeedUp(16); math.Abs(s16-4) > 1e-9 {
		t.Errorf("CPU speed-up %v at 16", s16)
	}
	g := md.Grown()
	if f := g.SerialFraction(); math.Abs(f-0.9/4.9) > 1e-9 || g.Fixed != 0 {
		t.Errorf("grown: serial fraction %v, fixed %v", f, g.Fixed)
	}
	if s16 := g.CPUSpeedUp(16); math.Abs(s16-4.9/(0.9+4.0/16)) > 1e-9 {
		t.Errorf("grown: CPU speed-up %v at 16", s16)
	}
	md.Fixed = 0
	// The I/O ceiling: the source gives 1 GB in 0.5 s at best.
	md.Serial = 0.1
	if w, b := md.Wall(64, 64); w != 0.5 || b != "io" {
		t.Errorf("ceiling: %v %s", w, b)
	}
	if c := md.Ceiling(); math.Abs(c-2000) > 1e-9 {
		t.Errorf("ceiling %v MB/s, want 2000", c)
	}
}

func TestChecksLeaveOneOut(t *testing.T) {
	var runs []Run
	for round := 1; round <= 3; round++ {
		for _, w := range []int{1, 2, 8} {
			runs = append(runs, fakeRun(w, []int{0, 1}, 2, 0.5, 3, round))
		}
	}
	sums := Summarize(runs)
	m := Machine{Capacity: map[string]float64{"0-1": 2}}
	checks, err := Checks(sums, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) != 3 {
		t.Fatalf("%d checks", len(checks))
	}
	for _, c := range checks {
		if c.InSample || len(c.FitWorkers) != 2 {
			t.Errorf("%d workers fitted on %v (in-sample %v)", c.Workers, c.FitWorkers, c.InSample)
		}
		for _, w := range c.FitWorkers {
			if w == c.Workers {
				t.Errorf("%d workers: fitted on itself", c.Workers)
			}
		}
		if math.Abs(c.ErrorPct) > 1e-6 {
			t.Errorf("%d workers: error %v %% on costs that follow the model", c.Workers, c.ErrorPct)
		}
	}
	curves, err := Curves(sums, m)
	if err != nil || len(curves) != 1 {
		t.Fatal(curves, err)
	}
	c := curves[0]
	if !reflect.DeepEqual(c.Model.FitWorkers, []int{8}) {
		t.Errorf("curve fitted on %v, want the most workers", c.Model.FitWorkers)
	}
	if p := c.Points[len(c.Points)-1]; p.Workers != 64 || p.Here >= p.Cores {
		t.Errorf("64 workers: here %v, a core each %v", p.Here, p.Cores)
	}
}

func testStudy() *Study {
	s := &Study{Command: "pagepipe bench test", Vmcore: "/x/vmcore", BytesIn: 1 << 30, UsableCPUs: "0-1",
		Machine: Machine{ReadRate: 5e9, WriteRate: 2e9, Capacity: map[string]float64{"0": 1, "0-1": 1.05}}}
	for _, cpus := range [][]int{{0}, {0, 1}} {
		for _, w := range []int{1, 2} {
			r := fakeRun(w, cpus, float64(len(cpus)), 0.3, 2, 1)
			s.Runs = append(s.Runs, r)
			m := r
			m.Program, m.Stages, m.ScanCPU, m.Wall = Makedumpfile, Stages{}, 0, r.Wall*3
			s.Runs = append(s.Runs, m)
		}
	}
	return s
}

func TestTablesShapes(t *testing.T) {
	s := testStudy()
	if err := s.Analyze(); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteTables(&b, s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, re := range []string{
		`(?m)^\[000\].*\n\s*program\s+workers\s+CPUs\s+map-size \(KB\)\s+codec\s+level\s+Filter pages \(s\)\s+Copy data \(s\)\s+Total \(s\)`,
		`(?m)^\s*makedumpfile\s+2\s+0-1\s+N/A\s+-c\s+31(\s+[0-9.]+){3}`,
		`(?m)^\s*threads:\s+1\s+2\s*$`,
		`(?m)^\s*speed-up\(times\):\s+3\.00\s+3\.00\s*$`,
		`(?m)^\[003\].*\n\s*#cpus\s+CPUs\s+workers\s+pagepipe\s+makedumpfile\s+model \(pagepipe\)`,
		`(?m)^\s*1\s+0\s+1\s+\d+\s+\d+`,
		`(?m)^\s*2\s+0-1\s+2\s+\d+\s+\d+`,
		`(?m)^\[model\]`,
		`This is a model, not a measurement`,
		`(?m)^\s*64\s+\d+\s+\d+\s+cpu\s*$`,
		`(?m)^\[serial\].*\n\s*codec\s+level\s+CPUs\s+wall ratio\s+CPU ratio\s+serial \(CPU s\)\s+fixed \(CPU s\)\s+serial fraction\s+model 16\s+model 64\s+growing serial\s+grown 16\s+bound at 64`,
		`(?m)^\s*-c\s+31\s+0\s+0\.33\s+\S+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+ %\s+[0-9.]+x\s+[0-9.]+x\s+[0-9.]+ %\s+[0-9.]+x\s+cpu\s*$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no match for %s in:\n%s", re, out)
		}
	}
}

func TestWriteAll(t *testing.T) {
	s := testStudy()
	if err := s.Analyze(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths, err := WriteAll(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tables.txt", "results.csv", "results.json", "throughput.png", "throughput.svg", "cpu.png", "cpu.svg", "cpu-2.png"} {
		if !slices.Contains(paths, filepath.Join(dir, name)) {
			t.Errorf("%s not written (%v)", name, paths)
		}
	}
	f, err := os.Open(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+len(s.Summaries) || !reflect.DeepEqual(recs[0], CSVHeader) {
		t.Errorf("results.csv: %d rows, header %v", len(recs), recs[0])
	}
	var back Study
	b, _ := os.ReadFile(filepath.Join(dir, "results.json"))
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Runs) != len(s.Runs) || back.Runs[0].Stages != s.Runs[0].Stages || len(back.Curves) != 2 {
		t.Errorf("results.json does not hold the study back")
	}
	pf, err := os.Open(filepath.Join(dir, "throughput.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	img, err := png.Decode(pf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("plot %v", b)
	}
}

// A study of one worker count, with stages at 0 (no ordered writes), still
// gets its plots: the log worker axis once panicked on a single point.
func TestWriteAllOneWorkerCount(t *testing.T) {
	s := &Study{Command: "pagepipe bench test", Vmcore: "/x/vmcore", BytesIn: 1 << 30, UsableCPUs: "0",
		Machine: Machine{ReadRate: 5e9, WriteRate: 2e9, Capacity: map[string]float64{"0": 1}}}
	for round := 1; round <= 3; round++ {
		r := fakeRun(1, []int{0}, 1, 0.3, 2, round)
		r.Stages.Write = 0
		s.Runs = append(s.Runs, r)
	}
	if err := s.Analyze(); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteAll(t.TempDir(), s); err != nil {
		t.Fatal(err)
	}
}

func TestCoresConfigs(t *testing.T) {
	cfgs := CoresConfigs([]int{1, 2, 4}, [][]int{{0, 1, 2, 3}, {0}, {0, 1}}, []string{"l", "c"}, []int{31})
	var got []string
	for _, c := range cfgs {
		got = append(got, fmt.Sprintf("%s w%d cpus %s", codecFlag(c.Codec), c.Workers, c.CPUList()))
	}
	want := []string{
		// Table 001: every worker count on the widest set; 003: a worker
		// per CPU on each narrower one (the widest set's is 001's).
		"-l w1 cpus 0-3", "-l w2 cpus 0-3", "-l w4 cpus 0-3", "-l w1 cpus 0", "-l w2 cpus 0-1",
		"-c w1 cpus 0-3", "-c w2 cpus 0-3", "-c w4 cpus 0-3", "-c w1 cpus 0", "-c w2 cpus 0-1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("configs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A cores study's tables: 001 on the widest set, with the speed-up over one
// worker and the 1-CPU run's model; 003 a row per CPU set.
func TestCoresTables(t *testing.T) {
	s := &Study{Vmcore: "/x/vmcore", BytesIn: 1 << 30, UsableCPUs: "0-3", Host: &Host{CPUModel: "Test CPU", OnlineCPUs: 4, MemTotalKiB: 8 << 20},
		Machine: Machine{ReadRate: 5e9, WriteRate: 2e9, Capacity: map[string]float64{"0": 1, "0-1": 2, "0-3": 4}}}
	for round := 1; round <= 3; round++ {
		for _, c := range CoresConfigs([]int{1, 2, 4}, [][]int{{0}, {0, 1}, {0, 1, 2, 3}}, []string{"c"}, []int{31}) {
			s.Runs = append(s.Runs, fakeRun(c.Workers, c.CPUs, float64(len(c.CPUs)), 0.5, 4, round))
		}
	}
	if err := s.Analyze(); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteCoresTables(&b, s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, re := range []string{
		`(?m)^host: Test CPU, 4 CPUs online, 8\.0 GiB`,
		`(?m)^\[001\] -c -d 31, CPUs 0-3 \(4\.00 cores\)`,
		`(?m)^\s*threads:\s+1\s+2\s+4\s*$`,
		// wall 4.5, 2.5, 1.5 s: the costs follow the model, which says the same.
		`(?m)^\s*speed-up\(times\):\s+1\.00\s+1\.80\s+3\.00\s*$`,
		`(?m)^\s*model \(1-CPU run\):\s+239\s+429\s+716\s*$`,
		`(?m)^\s*pagepipe:\s+239\s+429\s+716\s*$`,
		`(?m)^\[003\] -c -d 31: .*\n\s*#cpus.*\n\s*1\s+0\s+1\s+239\s+239\s+1\.00\s+239\s+1\.00\s+4\.500\s*\n\s*2\s+0-1\s+2\s+215\s+429\s+0\.90\s+215\s+2\.00\s+4\.500\s*\n\s*4\s+0-3\s+4\s+179\s+716\s+0\.75\s+179\s+4\.00\s+4\.500\s*$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no match for %s in:\n%s", re, out)
		}
	}
	paths, err := WriteCoresAll(t.TempDir(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 7 {
		t.Errorf("wrote %v", paths)
	}
}

// Every operation of the CPU cost table runs and takes time.
func TestMeasureCPUCosts(t *testing.T) {
	costs, err := MeasureCPUCosts(8)
	if err != nil {
		t.Fatal(err)
	}
	if len(costs) < 8 {
		t.Fatalf("%d operations", len(costs))
	}
	var b bytes.Buffer
	if err := WriteCPUCosts(&b, costs); err != nil {
		t.Fatal(err)
	}
	for _, c := range costs {
		if c.Ops <= 0 || c.Wall <= 0 || !strings.Contains(b.String(), c.Name) {
			t.Errorf("%+v", c)
		}
	}
}
