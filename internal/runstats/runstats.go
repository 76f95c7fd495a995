// Package runstats is what one dump says about itself for the bench, in
// one documented JSON shape, and the peak memory of a process: written by
// pagepipe's hidden --stats-file, read back by cmd/pagepipe-bench.
package runstats

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stats is what one dump says about itself for the bench, in one
// documented JSON shape: pagepipe's hidden --stats-file writes it (Write,
// from dump.Result.Stats), and cmd/pagepipe-bench, which runs every
// measured dump as a process of its own pinned to its CPUs (so that its
// rusage and peak RSS are the dump's alone), reads it back (Read). Times are seconds; the
// parent adds the process's total user and system time from wait4.
type Stats struct {
	GOMAXPROCS int    `json:"gomaxprocs"`
	Workers    int    `json:"workers"`
	Pfns       uint64 `json:"pfns"`         // max_mapnr: struct pages scanned
	PageSize   uint64 `json:"page_size"`    // bytes of each of them
	Dumped     uint64 `json:"pages_dumped"` // pages the copy pass handled
	ZeroPages  uint64 `json:"zero_pages"`
	DataBytes  uint64 `json:"data_bytes"`
	// MaxRSSKiB is the process's peak resident set (VmHWM), read as it
	// finishes.
	MaxRSSKiB int64 `json:"max_rss_kib"`
	// MinorFaults is the process's minor page faults, read as it
	// finishes, and CopyFaults those of the copy pass: counts that do not
	// depend on the machine's load, where a fault's cost does.
	MinorFaults int64 `json:"minor_faults"`
	CopyFaults  int64 `json:"copy_faults"`

	// The filter pass (filter.NewPlan): wall, the process's CPU over it,
	// and the scan workers' part of that.
	FilterWall float64 `json:"filter_wall_s"`
	FilterCPU  float64 `json:"filter_cpu_s"`
	ScanCPU    float64 `json:"filter_scan_cpu_s"`
	// Cycles is how many cycles the 2nd bitmap was made in (1: whole),
	// ScanWall the page scan's wall time in all of them, every time one
	// was made (the filter pass's count and the copy pass's).
	Cycles   int     `json:"cycles"`
	ScanWall float64 `json:"scan_wall_s"`

	// The copy pass (pipeline.Run): wall, the process's CPU over it, and
	// each stage's (pipeline.StageCPU).
	CopyWall    float64 `json:"copy_wall_s"`
	CopyCPU     float64 `json:"copy_cpu_s"`
	ReadCPU     float64 `json:"read_cpu_s"`
	CompressCPU float64 `json:"compress_cpu_s"`
	ReorderCPU  float64 `json:"reorder_cpu_s"`
	WriteCPU    float64 `json:"write_cpu_s"`
	StoreCPU    float64 `json:"store_cpu_s"`
}

// Write writes s to path as JSON.
func Write(path string, s Stats) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("stats file: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("stats file: %w", err)
	}
	return nil
}

// Read reads what Write wrote.
func Read(path string) (Stats, error) {
	var s Stats
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("stats file: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("stats file %s: %w", path, err)
	}
	return s, nil
}

// PeakRSSKiB reads VmHWM, in KiB, from a /proc/PID/status file
// ("/proc/self/status" for this process); 0 when it is gone.
func PeakRSSKiB(statusPath string) int64 {
	b, err := os.ReadFile(statusPath)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
