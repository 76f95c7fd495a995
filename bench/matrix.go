// Package bench is pagepipe's scaling study (cmd/pagepipe-bench): it runs
// pagepipe, and makedumpfile beside it, over a matrix of worker counts,
// CPU sets, map sizes, codecs and dump levels, each run a child process
// pinned to its CPUs; it separates what the code costs (CPU seconds per
// stage) from what the machine gives (wall time), fits a scaling model to
// the costs, and prints the results in the shapes of the seed studies, as
// CSV, JSON and plots. See docs/scaling.md.
package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"pagepipe/internal/cpuset"
)

// The programs a configuration runs.
const (
	Pagepipe     = "pagepipe"
	Makedumpfile = "makedumpfile"
)

// Config is one cell of the matrix: one program's command line.
type Config struct {
	Program string `json:"program"`
	// Workers is pagepipe's --num-threads; for makedumpfile, 1 is its
	// serial mode (no --num-threads) and N > 1 is --num-threads N.
	Workers int `json:"workers"`
	// CPUs are the CPU numbers the run is pinned to.
	CPUs []int `json:"cpus"`
	// MapSizeKB is pagepipe's --map-size (mmap windows of that size); 0
	// is the default (pread for an ordinary file). makedumpfile 1.7.2 has
	// no such option: its rows say N/A.
	MapSizeKB int `json:"map_size_kb"`
	// Codec is c, l, p, z, lz4 or none.
	Codec string `json:"codec"`
	Level int    `json:"dump_level"`
}

// Args is the program's command line for this configuration, without the
// input and output files.
func (c Config) Args() []string {
	var a []string
	if c.Codec != "none" {
		a = append(a, codecFlag(c.Codec))
	}
	a = append(a, "-d", strconv.Itoa(c.Level))
	switch {
	case c.Program == Pagepipe:
		a = append(a, "--num-threads", strconv.Itoa(c.Workers))
		if c.MapSizeKB > 0 {
			a = append(a, "--map-size", strconv.Itoa(c.MapSizeKB))
		}
	case c.Workers > 1:
		a = append(a, "--num-threads", strconv.Itoa(c.Workers))
	}
	return a
}

// CPUList is the CPUs in the kernel's list syntax (0-3,6).
func (c Config) CPUList() string { return cpuset.Format(c.CPUs) }

// MapSize is the map-size column: N/A for makedumpfile, "pread" for
// pagepipe's default on an ordinary file.
func (c Config) MapSize() string {
	switch {
	case c.Program == Makedumpfile:
		return "N/A"
	case c.MapSizeKB == 0:
		return "pread"
	}
	return strconv.Itoa(c.MapSizeKB)
}

// Key names the configuration uniquely.
func (c Config) Key() string {
	return fmt.Sprintf("%s w%d cpus%s map%s %s d%d", c.Program, c.Workers, c.CPUList(), c.MapSize(), c.Codec, c.Level)
}

// Series names the configuration without its worker count: the runs the
// scaling model fits together.
func (c Config) Series() string {
	return fmt.Sprintf("%s cpus %s, map %s, %s, -d %d", c.Program, c.CPUList(), c.MapSize(), codecFlag(c.Codec), c.Level)
}

func codecFlag(c string) string {
	switch c {
	case "none":
		return "no codec"
	case "lz4":
		return "--lz4"
	}
	return "-" + c
}

// Matrix is every dimension of a study.
type Matrix struct {
	Workers  []int
	CPUs     [][]int
	MapSizes []int // 0: the default
	Codecs   []string
	Levels   []int
	// VsMakedumpfile adds makedumpfile's runs of the same jobs.
	VsMakedumpfile bool
}

// Configs expands the matrix: pagepipe's configurations, then
// makedumpfile's (one per map size, which it lacks; none for lz4, which it
// cannot write). notes say what was left out and why.
func (m Matrix) Configs() (cfgs []Config, notes []string) {
	for _, cpus := range m.CPUs {
		for _, cd := range m.Codecs {
			for _, lv := range m.Levels {
				for _, ms := range m.MapSizes {
					for _, w := range m.Workers {
						cfgs = append(cfgs, Config{Pagepipe, w, cpus, ms, cd, lv})
					}
				}
				if !m.VsMakedumpfile {
					continue
				}
				if cd == "lz4" {
					notes = appendOnce(notes, "makedumpfile cannot write lz4 (a pagepipe extension): lz4 rows are pagepipe's only")
					continue
				}
				for _, w := range m.Workers {
					cfgs = append(cfgs, Config{Makedumpfile, w, cpus, 0, cd, lv})
				}
			}
		}
	}
	if m.VsMakedumpfile && (len(m.MapSizes) > 1 || m.MapSizes[0] != 0) {
		notes = appendOnce(notes, "makedumpfile 1.7.2 has no --map-size (it maps 4 MiB windows): its rows say N/A and run once per other setting")
	}
	return cfgs, notes
}

// appendOnce appends v unless s holds it: lists keep their first order.
func appendOnce[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// ParseInts reads a comma-separated list of integers, each at least lo.
func ParseInts(flag, s string, lo int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo {
			return nil, fmt.Errorf("--%s %q: %q is not an integer ≥ %d", flag, s, f, lo)
		}
		out = appendOnce(out, n)
	}
	return out, nil
}

// ParseMapSizes reads --map-size: KiB, multiples of the 4 KiB page, or
// "default" (pread on an ordinary file).
func ParseMapSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "default" {
			out = appendOnce(out, 0)
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 || n%4 != 0 {
			return nil, fmt.Errorf("--map-size %q: %q is not a positive multiple of 4 (KiB) or \"default\"", s, f)
		}
		out = appendOnce(out, n)
	}
	return out, nil
}

// ParseCodecs reads --codec: c, l, p, z, lz4 or none.
func ParseCodecs(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "c", "l", "p", "z", "lz4", "none":
			out = appendOnce(out, f)
		default:
			return nil, fmt.Errorf("--codec %q: %q is not one of c, l, p, z, lz4, none", s, f)
		}
	}
	return out, nil
}

// ParseLevels reads --dump-level: levels 0-31.
func ParseLevels(s string) ([]int, error) {
	out, err := ParseInts("dump-level", s, 0)
	if err != nil {
		return nil, err
	}
	for _, l := range out {
		if l > 31 {
			return nil, fmt.Errorf("--dump-level %q: %d is not a dump level (0 to 31)", s, l)
		}
	}
	return out, nil
}

// ParseCPUSets reads --cpus: each comma-separated item is a count N (the
// first N CPUs of usable) or a range A-B of CPU numbers, one CPU set per
// item: "1,2" is one CPU, then two; "0-3" is CPUs 0 to 3.
func ParseCPUSets(s string, usable []int) ([][]int, error) {
	ok := map[int]bool{}
	for _, c := range usable {
		ok[c] = true
	}
	var out [][]int
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		var set []int
		if lo, hi, isRange := strings.Cut(f, "-"); isRange {
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || a < 0 || b < a {
				return nil, fmt.Errorf("--cpus %q: %q is not a CPU count or a range A-B", s, f)
			}
			for c := a; c <= b; c++ {
				if !ok[c] {
					return nil, fmt.Errorf("--cpus %q: CPU %d is not available to this process (it may use %s)", s, c, cpuset.Format(usable))
				}
				set = append(set, c)
			}
		} else {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("--cpus %q: %q is not a CPU count or a range A-B", s, f)
			}
			if n > len(usable) {
				return nil, fmt.Errorf("--cpus %q: %d CPUs asked for, this process may use %d", s, n, len(usable))
			}
			set = append(set, usable[:n]...)
		}
		if k := cpuset.Format(set); !seen[k] {
			seen[k] = true
			out = append(out, set)
		}
	}
	return out, nil
}
