package bench

import (
	"sort"
)

// Stages is CPU seconds (user + system) per stage of one run.
type Stages struct {
	// Read: the copy workers' system time (pread copies, page faults).
	Read float64 `json:"read"`
	// Filter: the filter pass, the whole process over it (the scan
	// workers and the serial part: bitmaps, spills).
	Filter float64 `json:"filter"`
	// Compress: the copy workers' user time (zero check, codec).
	Compress float64 `json:"compress"`
	// Reorder: the copy pass's serial sections (cutting chunks, handing
	// them on in order, their places).
	Reorder float64 `json:"reorder"`
	// Write: an ordered writer's descriptors, buffers and writes (a
	// flattened stream, ELF, split files): serial.
	Write float64 `json:"write"`
	// Store: a kdump file's writes, done by the workers at the places
	// handed out in order: parallel work, which the kernel serializes per
	// file (the model's I/O ceiling bounds it).
	Store float64 `json:"store"`
	// Other: the rest of the process's CPU time: opening the vmcore, the
	// page-table walk, the Go runtime during the copy, the report, exit.
	Other float64 `json:"other"`
}

// StageNames are the stages in pipeline order, as the tables and plots list
// them.
var StageNames = []string{"read", "filter", "compress", "reorder", "write", "store", "other"}

// Values are the stages in the order of StageNames.
func (s Stages) Values() []float64 {
	return []float64{s.Read, s.Filter, s.Compress, s.Reorder, s.Write, s.Store, s.Other}
}

// Run is one measured run. Times are seconds.
type Run struct {
	Config
	Round int `json:"round"` // 1 … --runs

	// Wall is the child process's wall time, start to exit.
	Wall float64 `json:"wall_s"`
	// User and Sys are the child's CPU time (wait4's rusage).
	User float64 `json:"user_s"`
	Sys  float64 `json:"sys_s"`
	// MaxRSSKiB is the child's peak resident set (VmHWM): pagepipe's own
	// reading as it finishes, makedumpfile's sampled every 5 ms.
	MaxRSSKiB int64 `json:"max_rss_kib"`
	// FilterWall and CopyWall are the filter and copy phases' wall time:
	// pagepipe's own measurement, makedumpfile's STEP lines.
	FilterWall float64 `json:"filter_wall_s"`
	CopyWall   float64 `json:"copy_wall_s"`
	// CPU per stage: pagepipe only (makedumpfile's are zero).
	Stages  Stages  `json:"stage_cpu_s"`
	ScanCPU float64 `json:"filter_scan_cpu_s"` // the parallel part of Stages.Filter
	// Fixed is the part of Stages.Other outside the filter and copy
	// passes: process and runtime start, options, opening the vmcore,
	// headers and bitmaps, the report, exit. It does not grow with the
	// dump, where the rest of the serial part does.
	Fixed float64 `json:"fixed_cpu_s"`
	// BytesIn is the crashed machine's memory (pages with data × page size),
	// the same for both programs; BytesOut is the dump's size.
	BytesIn  int64 `json:"bytes_in"`
	BytesOut int64 `json:"bytes_out"`
	// BytesRead is what the copy pass reads of the vmcore: the dumped
	// pages (pagepipe's count; 0 for makedumpfile).
	BytesRead int64  `json:"bytes_read"`
	Dumped    uint64 `json:"pages_dumped"`
	// GOMAXPROCS is what the pagepipe child ran with: the number of CPUs it
	// was pinned to.
	GOMAXPROCS int `json:"gomaxprocs,omitempty"`
}

// CPU is the run's user plus system time.
func (r Run) CPU() float64 { return r.User + r.Sys }

// Throughput is the crashed machine's memory per wall second, MB/s.
func (r Run) Throughput() float64 { return mbps(r.BytesIn, r.Wall) }

func mbps(bytes int64, s float64) float64 {
	if s <= 0 {
		return 0
	}
	return float64(bytes) / s / 1e6
}

// Stat is the median, minimum and maximum of one quantity over runs.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func statOf(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// Summary is one configuration over its runs: each quantity's median,
// minimum and maximum, taken separately.
type Summary struct {
	Config
	Runs       int     `json:"runs"`
	Wall       Stat    `json:"wall_s"`
	CPU        Stat    `json:"cpu_s"` // user + sys
	User       Stat    `json:"user_s"`
	Sys        Stat    `json:"sys_s"`
	FilterWall Stat    `json:"filter_wall_s"`
	CopyWall   Stat    `json:"copy_wall_s"`
	MaxRSSKiB  Stat    `json:"max_rss_kib"`
	Throughput Stat    `json:"throughput_mbps"` // memory MB per wall second
	Stages     Stages  `json:"stage_cpu_s"`     // medians
	ScanCPU    float64 `json:"filter_scan_cpu_s"`
	Fixed      float64 `json:"fixed_cpu_s"`
	BytesIn    int64   `json:"bytes_in"`
	BytesOut   int64   `json:"bytes_out"`
	BytesRead  int64   `json:"bytes_read"`
	Dumped     uint64  `json:"pages_dumped"`
}

// Summarize groups runs by configuration, in the order they first appear.
func Summarize(runs []Run) []Summary {
	var order []string
	by := map[string][]Run{}
	for _, r := range runs {
		k := r.Key()
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	var out []Summary
	for _, k := range order {
		rs := by[k]
		col := func(f func(Run) float64) Stat {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			return statOf(v)
		}
		stage := func(i int) float64 {
			return col(func(r Run) float64 { return r.Stages.Values()[i] }).Median
		}
		last := rs[len(rs)-1]
		out = append(out, Summary{
			Config:     rs[0].Config,
			Runs:       len(rs),
			Wall:       col(func(r Run) float64 { return r.Wall }),
			CPU:        col(Run.CPU),
			User:       col(func(r Run) float64 { return r.User }),
			Sys:        col(func(r Run) float64 { return r.Sys }),
			FilterWall: col(func(r Run) float64 { return r.FilterWall }),
			CopyWall:   col(func(r Run) float64 { return r.CopyWall }),
			MaxRSSKiB:  col(func(r Run) float64 { return float64(r.MaxRSSKiB) }),
			Throughput: col(Run.Throughput),
			Stages:     Stages{stage(0), stage(1), stage(2), stage(3), stage(4), stage(5), stage(6)},
			ScanCPU:    col(func(r Run) float64 { return r.ScanCPU }).Median,
			Fixed:      col(func(r Run) float64 { return r.Fixed }).Median,
			BytesIn:    last.BytesIn,
			BytesOut:   last.BytesOut,
			BytesRead:  last.BytesRead,
			Dumped:     last.Dumped,
		})
	}
	return out
}
