package bench

import (
	"fmt"
	"math"
	"sort"
)

// Machine is what the bench measured of the machine itself, apart from
// the programs: the source's and the sink's byte rates and, per CPU set,
// how many cores of throughput it gives.
type Machine struct {
	ReadRate  float64 `json:"read_bytes_per_s"`  // sequential reads of the warm vmcore
	WriteRate float64 `json:"write_bytes_per_s"` // 1 MiB writes into the dump directory
	// Capacity maps a CPU list (0-3) to its cores of throughput.
	Capacity map[string]float64 `json:"capacity_cores"`
}

// Model is Amdahl's law with an I/O ceiling, over one job's measured CPU
// costs. The parallel part (the copy workers' reads, compression and
// stores, the filter's scan workers) is shared among min(workers, cores)
// cores; the
// serial part (reorder, writer, the filter's bitmaps and spills, setup and
// the runtime) is not:
//
//	wall(N) = max(Serial + Parallel / min(N, cores), BytesRead/ReadRate, BytesOut/WriteRate)
//	throughput(N) = BytesIn / wall(N)
//
// The costs are CPU seconds, which do not depend on the machine's cores,
// so a model fitted on one worker count predicts the others.
type Model struct {
	Series string `json:"series"`
	// FitWorkers are the worker counts of the runs the costs come from.
	FitWorkers []int `json:"fit_workers"`
	// Parallel and Serial are CPU seconds of the whole job.
	Parallel float64 `json:"parallel_cpu_s"`
	Serial   float64 `json:"serial_cpu_s"`
	// Fixed is the part of Serial outside the filter and copy passes
	// (start, setup, exit): the same for a small dump as for a large one.
	Fixed float64 `json:"fixed_cpu_s"`
	// Pages the copy pass handled, for the per-page costs.
	Dumped    uint64  `json:"pages_dumped"`
	BytesIn   int64   `json:"bytes_in"`
	BytesRead int64   `json:"bytes_read"`
	BytesOut  int64   `json:"bytes_out"`
	ReadRate  float64 `json:"read_bytes_per_s"`
	WriteRate float64 `json:"write_bytes_per_s"`
}

// Fit takes the costs from summaries (one series: same program, CPUs,
// map size, codec and level), averaging the median stage costs over them.
func Fit(sums []Summary, m Machine) (Model, error) {
	if len(sums) == 0 {
		return Model{}, fmt.Errorf("model: no runs to fit")
	}
	md := Model{Series: sums[0].Series(), ReadRate: m.ReadRate, WriteRate: m.WriteRate}
	for _, s := range sums {
		if s.Program != Pagepipe {
			return Model{}, fmt.Errorf("model: %s has no per-stage CPU times", s.Program)
		}
		if s.Series() != md.Series {
			return Model{}, fmt.Errorf("model: %q and %q are different series", md.Series, s.Series())
		}
		st := s.Stages
		md.Parallel += st.Read + st.Compress + st.Store + s.ScanCPU
		md.Serial += st.Reorder + st.Write + (st.Filter - s.ScanCPU) + st.Other
		md.Fixed += s.Fixed
		md.FitWorkers = append(md.FitWorkers, s.Workers)
		md.BytesIn, md.BytesRead, md.BytesOut = s.BytesIn, s.BytesRead, s.BytesOut
		md.Dumped = s.Dumped
	}
	n := float64(len(sums))
	md.Parallel /= n
	md.Serial /= n
	md.Fixed /= n
	sort.Ints(md.FitWorkers)
	return md, nil
}

// Wall is the predicted wall time of workers on a machine giving cores
// cores of throughput, and what bounds it: "cpu" or "io".
func (md Model) Wall(workers int, cores float64) (float64, string) {
	c := math.Max(math.Min(float64(workers), cores), 1e-9)
	cpu := md.Serial + md.Parallel/c
	if io := md.ioTime(); io > cpu {
		return io, "io"
	}
	return cpu, "cpu"
}

// SerialFraction is the serial part of the job's CPU time.
func (md Model) SerialFraction() float64 {
	if t := md.Serial + md.Parallel; t > 0 {
		return md.Serial / t
	}
	return 0
}

// SpeedUp is the predicted throughput of n workers, a core each, over one
// worker's on one core.
func (md Model) SpeedUp(n int) float64 {
	w1, _ := md.Wall(1, 1)
	wn, _ := md.Wall(n, float64(n))
	return w1 / wn
}

// CPUSpeedUp is SpeedUp on CPU alone (Amdahl's law: no I/O ceiling), the
// speed-up the serial part allows: serial + parallel over serial +
// parallel / n.
func (md Model) CPUSpeedUp(n int) float64 {
	t := md.Serial + md.Parallel
	if t <= 0 || n < 1 {
		return 1
	}
	return t / (md.Serial + md.Parallel/float64(n))
}

// Grown is the model of a dump so much larger than this one that the fixed
// cost no longer counts: every other cost grows with the pages dumped, so
// the fractions are the per-page ones. Its SerialFraction and CPUSpeedUp
// are the limits a growing dump approaches.
func (md Model) Grown() Model {
	g := md
	g.Serial, g.Fixed = md.Serial-md.Fixed, 0
	return g
}

// Throughput is the predicted memory MB per wall second.
func (md Model) Throughput(workers int, cores float64) float64 {
	w, _ := md.Wall(workers, cores)
	return mbps(md.BytesIn, w)
}

// ioTime is the least wall time the source and sink allow: the bytes read
// at the source's rate, or the dump at the sink's, whichever is longer.
func (md Model) ioTime() float64 {
	io := 0.0
	if md.ReadRate > 0 {
		io = float64(md.BytesRead) / md.ReadRate
	}
	if md.WriteRate > 0 {
		io = math.Max(io, float64(md.BytesOut)/md.WriteRate)
	}
	return io
}

// Ceiling is the I/O ceiling in memory MB per second: the most any number
// of cores could reach with this source and sink (+Inf when unmeasured).
func (md Model) Ceiling() float64 {
	io := md.ioTime()
	if io == 0 {
		return math.Inf(1)
	}
	return mbps(md.BytesIn, io)
}

// Check is one measured configuration beside the model's prediction for
// it, the model fitted without it.
type Check struct {
	Series     string  `json:"series"`
	Workers    int     `json:"workers"`
	CPUs       string  `json:"cpus"`
	Capacity   float64 `json:"capacity_cores"`
	FitWorkers []int   `json:"fit_workers"`
	// InSample: the series has one worker count, so the model could only
	// be fitted on the run it predicts (no check).
	InSample  bool    `json:"in_sample"`
	Measured  float64 `json:"measured_mbps"`
	Predicted float64 `json:"model_mbps"`
	ErrorPct  float64 `json:"error_pct"`
	Bound     string  `json:"bound"`
}

// Checks predicts every pagepipe configuration from a model fitted on the
// same series' other worker counts (leave one out), so that no prediction
// sees the run it predicts.
func Checks(sums []Summary, m Machine) ([]Check, error) {
	var out []Check
	for _, series := range seriesOf(sums) {
		for _, s := range series {
			var fit []Summary
			for _, o := range series {
				if o.Workers != s.Workers {
					fit = append(fit, o)
				}
			}
			inSample := len(fit) == 0
			if inSample {
				fit = []Summary{s}
			}
			md, err := Fit(fit, m)
			if err != nil {
				return nil, err
			}
			capa := m.Capacity[s.CPUList()]
			pred := md.Throughput(s.Workers, capa)
			_, bound := md.Wall(s.Workers, capa)
			meas := s.Throughput.Median
			out = append(out, Check{
				Series: s.Series(), Workers: s.Workers, CPUs: s.CPUList(), Capacity: capa,
				FitWorkers: md.FitWorkers, InSample: inSample,
				Measured: meas, Predicted: pred, ErrorPct: 100 * (pred - meas) / meas, Bound: bound,
			})
		}
	}
	return out, nil
}

// Curve is a model's prediction for 1 to 64 workers.
type Curve struct {
	Model    Model   `json:"model"`
	CPUs     string  `json:"cpus"`
	Capacity float64 `json:"capacity_cores"`
	Points   []Point `json:"points"`
}

// Point is one worker count of a Curve, in memory MB per wall second.
type Point struct {
	Workers int `json:"workers"`
	// Here: on the measured CPUs, cores = min(workers, capacity).
	Here float64 `json:"here_mbps"`
	// Cores: on a machine with a real core per worker.
	Cores float64 `json:"real_cores_mbps"`
	Bound string  `json:"bound_real_cores"`
}

// CurveWorkers are the worker counts the model is printed for.
var CurveWorkers = []int{1, 2, 4, 8, 16, 32, 64}

// Curves fits each pagepipe series on its runs with the most workers and
// predicts 1 to 64 workers.
func Curves(sums []Summary, m Machine) ([]Curve, error) {
	var out []Curve
	for _, series := range seriesOf(sums) {
		top := series[len(series)-1]
		md, err := Fit([]Summary{top}, m)
		if err != nil {
			return nil, err
		}
		capa := m.Capacity[top.CPUList()]
		c := Curve{Model: md, CPUs: top.CPUList(), Capacity: capa}
		for _, n := range CurveWorkers {
			_, bound := md.Wall(n, float64(n))
			c.Points = append(c.Points, Point{n, md.Throughput(n, capa), md.Throughput(n, float64(n)), bound})
		}
		out = append(out, c)
	}
	return out, nil
}

// seriesOf groups pagepipe's summaries by series, each sorted by workers,
// in the order the series first appear.
func seriesOf(sums []Summary) [][]Summary {
	var order []string
	by := map[string][]Summary{}
	for _, s := range sums {
		if s.Program != Pagepipe {
			continue
		}
		k := s.Series()
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], s)
	}
	var out [][]Summary
	for _, k := range order {
		ss := by[k]
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].Workers < ss[j].Workers })
		out = append(out, ss)
	}
	return out
}
