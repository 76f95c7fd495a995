package bench

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// The many-core study (pagepipe-bench cores, make bench-cores;
// docs/scaling.md, "Many cores") measures what the scaling model only
// predicts on the 2-vCPU build machines: the seeds' table 001 (threads ×
// throughput: every worker count on the widest CPU set) and table 003
// (#cpus × throughput per CPU: as many workers as CPUs) for each codec and
// dump level, each measurement beside the model fitted on the same job's
// one-CPU, one-worker run.

// CoresConfigs is the study's matrix: for each codec and level, every
// worker count on the widest of sets (table 001), then each narrower set
// with as many workers as it has CPUs (table 003; the widest set's row is
// 001's run with that many workers, measured when workers holds it).
func CoresConfigs(workers []int, sets [][]int, codecs []string, levels []int) []Config {
	if len(sets) == 0 {
		return nil
	}
	sets = slices.Clone(sets)
	slices.SortStableFunc(sets, func(a, b []int) int { return len(a) - len(b) })
	widest := sets[len(sets)-1]
	var cfgs []Config
	for _, cd := range codecs {
		for _, lv := range levels {
			for _, w := range workers {
				cfgs = append(cfgs, Config{Program: Pagepipe, Workers: w, CPUs: widest, Codec: cd, Level: lv})
			}
			for _, set := range sets[:len(sets)-1] {
				cfgs = append(cfgs, Config{Program: Pagepipe, Workers: len(set), CPUs: set, Codec: cd, Level: lv})
			}
		}
	}
	return cfgs
}

// Host names the machine a study ran on: the figures mean nothing without it.
type Host struct {
	CPUModel    string `json:"cpu_model"`
	OnlineCPUs  int    `json:"online_cpus"`
	MemTotalKiB int64  `json:"mem_total_kib"`
	Kernel      string `json:"kernel"`
	Hostname    string `json:"hostname"`
}

// DescribeHost reads the machine's CPU model, CPUs and memory from /proc.
func DescribeHost() Host {
	var h Host
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			switch k = strings.TrimSpace(k); {
			case !ok:
			case k == "processor":
				h.OnlineCPUs++
			case k == "model name" && h.CPUModel == "":
				h.CPUModel = strings.TrimSpace(v)
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				h.MemTotalKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				break
			}
		}
		f.Close()
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Machine[:])
	}
	h.Hostname, _ = os.Hostname()
	return h
}

func (h Host) String() string {
	return fmt.Sprintf("%s, %d CPUs online, %.1f GiB, Linux %s (%s)", h.CPUModel, h.OnlineCPUs, float64(h.MemTotalKiB)/(1<<20), h.Kernel, h.Hostname)
}

// coresJob is one codec and level of a cores study: its table 001 series
// (the widest set) and its table 003 rows (workers = #cpus).
type coresJob struct {
	codec  string
	level  int
	widest string
	// threads is the widest set's runs by worker count; perCPU each set's
	// run with as many workers as CPUs, by CPU count.
	threads map[int]Summary
	perCPU  map[int]Summary
	// model is fitted on the one-CPU, one-worker run (ok when there is one).
	model Model
	ok    bool
}

func (s *Study) coresJobs() []coresJob {
	widest := s.widestCPUs()
	var jobs []coresJob
	find := func(codec string, level int) *coresJob {
		for i := range jobs {
			if jobs[i].codec == codec && jobs[i].level == level {
				return &jobs[i]
			}
		}
		jobs = append(jobs, coresJob{codec: codec, level: level, widest: widest, threads: map[int]Summary{}, perCPU: map[int]Summary{}})
		return &jobs[len(jobs)-1]
	}
	for _, x := range s.Summaries {
		if x.Program != Pagepipe {
			continue
		}
		j := find(x.Codec, x.Level)
		if x.CPUList() == widest {
			j.threads[x.Workers] = x
		}
		if x.Workers == len(x.CPUs) {
			j.perCPU[len(x.CPUs)] = x
		}
	}
	for i := range jobs {
		if one, ok := jobs[i].perCPU[1]; ok {
			if md, err := Fit([]Summary{one}, s.Machine); err == nil {
				jobs[i].model, jobs[i].ok = md, true
			}
		}
	}
	return jobs
}

// WriteCoresTables prints a cores study: the machine, table 000 (every
// configuration), and per codec and level the seeds' 001 and 003 with the
// one-CPU model beside each measurement.
func WriteCoresTables(w io.Writer, s *Study) error {
	p := &printer{w: w}
	p.f("pagepipe cores: %s (%.0f MiB of memory), usable CPUs %s\n", s.Vmcore, float64(s.BytesIn)/(1<<20), s.UsableCPUs)
	if s.Host != nil {
		p.f("host: %s\n", s.Host)
	}
	if s.Pagepipe != "" {
		p.f("pagepipe: %s\n", s.Pagepipe)
	}
	p.f("machine: source reads %.0f MB/s, sink writes %.0f MB/s;", s.Machine.ReadRate/1e6, s.Machine.WriteRate/1e6)
	// Narrowest first: 0, 0-1, 0-3, 0-7, 0-15.
	sets := slices.Sorted(maps.Keys(s.Machine.Capacity))
	slices.SortStableFunc(sets, func(a, b string) int { return len(a) - len(b) })
	for _, k := range sets {
		p.f(" CPUs %s give %.2f cores;", k, s.Machine.Capacity[k])
	}
	p.f("\n")
	for _, n := range s.Notes {
		p.f("note: %s\n", n)
	}
	table000(p, s)
	for _, j := range s.coresJobs() {
		coresTable001(p, s, j)
		coresTable003(p, s, j)
	}
	return p.err
}

func coresTable001(p *printer, s *Study, j coresJob) {
	ws := sortedKeys(j.threads)
	if len(ws) == 0 {
		return
	}
	capa := s.Machine.Capacity[j.widest]
	p.f("\n[001] %s -d %d, CPUs %s (%.2f cores): throughput, MB of memory per wall second (median); CPU seconds (user+sys, median) below.\n", codecFlag(j.codec), j.level, j.widest, capa)
	head, pp, speed, model, cpu, ratio := []string{"threads:"}, []string{"pagepipe:"}, []string{"speed-up(times):"},
		[]string{"model (1-CPU run):"}, []string{"pagepipe CPU (s):"}, []string{"CPU / fewest threads:"}
	base := j.threads[ws[0]]
	for _, w := range ws {
		x := j.threads[w]
		head = append(head, strconv.Itoa(w))
		pp = append(pp, rate(x.Throughput.Median))
		speed = append(speed, fmt.Sprintf("%.2f", x.Throughput.Median/base.Throughput.Median))
		m := "-"
		if j.ok {
			m = rate(j.model.Throughput(w, capa))
		}
		model = append(model, m)
		cpu = append(cpu, sec(x.CPU.Median))
		ratio = append(ratio, fmt.Sprintf("%.3f", x.CPU.Median/base.CPU.Median))
	}
	p.table([][]string{head, pp, speed, model, cpu, ratio})
	p.f("(speed-up: throughput over the fewest threads'; model: the costs of the 1-CPU, 1-worker run, wall = serial + parallel / min(threads, cores))\n")
}

func coresTable003(p *printer, s *Study, j coresJob) {
	ns := sortedKeys(j.perCPU)
	if len(ns) == 0 {
		return
	}
	p.f("\n[003] %s -d %d: throughput per CPU, MB of memory per wall second per CPU (median; workers = #cpus)\n", codecFlag(j.codec), j.level)
	rows := [][]string{{"#cpus", "CPUs", "workers", "pagepipe", "total (MB/s)", "per CPU / 1 CPU's", "model (1-CPU run)", "capacity (cores)", "CPU (s)"}}
	base := j.perCPU[ns[0]]
	for _, n := range ns {
		x := j.perCPU[n]
		capa := s.Machine.Capacity[x.CPUList()]
		m := "-"
		if j.ok {
			m = rate(j.model.Throughput(n, capa) / float64(n))
		}
		per := x.Throughput.Median / float64(n)
		rows = append(rows, []string{strconv.Itoa(n), x.CPUList(), strconv.Itoa(x.Workers), rate(per), rate(x.Throughput.Median),
			fmt.Sprintf("%.2f", per/(base.Throughput.Median/float64(ns[0]))), m, fmt.Sprintf("%.2f", capa), sec(x.CPU.Median)})
	}
	p.table(rows)
}

// WriteCoresAll writes a cores study into dir: tables.txt, results.csv,
// results.json, threads.* (001: the speed-up over one worker against
// workers on the widest set, beside the model's), cpus.* (003: throughput
// per CPU against CPUs), as PNG and SVG.
func WriteCoresAll(dir string, s *Study) ([]string, error) {
	return writeStudy(dir, s, WriteCoresTables, writeCoresPlots)
}

func writeCoresPlots(dir string, s *Study) ([]string, error) {
	jobs := s.coresJobs()
	var paths []string
	for _, pl := range []struct {
		name, title, x, y string
		points            func(coresJob) (measured, model plotter.XYs)
	}{
		{"threads", "Speed-up over one worker, CPUs " + s.widestCPUs() + " (table 001)", "workers (--num-threads)", "throughput over 1 worker's (times)",
			func(j coresJob) (plotter.XYs, plotter.XYs) {
				var meas, mod plotter.XYs
				ws := sortedKeys(j.threads)
				if len(ws) == 0 {
					return nil, nil
				}
				base := j.threads[ws[0]].Throughput.Median
				capa := s.Machine.Capacity[j.widest]
				for _, w := range ws {
					meas = append(meas, plotter.XY{X: float64(w), Y: j.threads[w].Throughput.Median / base})
					if j.ok {
						mod = append(mod, plotter.XY{X: float64(w), Y: j.model.Throughput(w, capa) / j.model.Throughput(ws[0], capa)})
					}
				}
				return meas, mod
			}},
		{"cpus", "Throughput per CPU against CPUs, a worker per CPU (table 003)", "CPUs", "MB of memory per wall second per CPU",
			func(j coresJob) (plotter.XYs, plotter.XYs) {
				var meas, mod plotter.XYs
				for _, n := range sortedKeys(j.perCPU) {
					x := j.perCPU[n]
					meas = append(meas, plotter.XY{X: float64(n), Y: x.Throughput.Median / float64(n)})
					if j.ok {
						mod = append(mod, plotter.XY{X: float64(n), Y: j.model.Throughput(n, s.Machine.Capacity[x.CPUList()]) / float64(n)})
					}
				}
				return meas, mod
			}},
	} {
		p := plot.New()
		p.Title.Text = pl.title
		p.Y.Label.Text = pl.y
		p.Y.Min = 0
		var args []any
		ticks := map[int]bool{}
		for _, j := range jobs {
			meas, mod := pl.points(j)
			if len(meas) == 0 {
				continue
			}
			for _, pt := range meas {
				ticks[int(pt.X)] = true
			}
			name := fmt.Sprintf("%s -d %d", codecFlag(j.codec), j.level)
			args = append(args, name+" (measured)", meas)
			if len(mod) > 0 {
				args = append(args, name+" (model, 1-CPU run)", mod)
			}
		}
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return paths, err
		}
		p.Y.Max *= 1.3
		var xs []int
		for x := range ticks {
			xs = append(xs, x)
		}
		slices.Sort(xs)
		workerAxis(p, xs)
		p.X.Label.Text = pl.x
		p.Legend.Top = true
		p.Legend.Left = true
		for _, ext := range []string{".png", ".svg"} {
			path := filepath.Join(dir, pl.name+ext)
			if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
				return paths, fmt.Errorf("plot %s: %w", path, err)
			}
			paths = append(paths, path)
		}
	}
	return paths, nil
}

// widestCPUs is the largest CPU set the study ran on.
func (s *Study) widestCPUs() string {
	widest, n := "", 0
	for _, x := range s.Summaries {
		if len(x.CPUs) > n {
			n, widest = len(x.CPUs), x.CPUList()
		}
	}
	return widest
}
