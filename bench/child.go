package bench

import (
	"encoding/json"
	"fmt"
	"os"
)

// ChildStats is what a pagepipe run writes about itself for the bench
// (the hidden --stats-file option): its phases' wall and CPU time and each
// stage's CPU time, all in seconds. The parent adds the process's total
// user and system time and peak RSS from wait4.
type ChildStats struct {
	GOMAXPROCS int    `json:"gomaxprocs"`
	Workers    int    `json:"workers"`
	Pfns       uint64 `json:"pfns"`         // max_mapnr: struct pages scanned
	Dumped     uint64 `json:"pages_dumped"` // pages the copy pass handled
	ZeroPages  uint64 `json:"zero_pages"`
	DataBytes  uint64 `json:"data_bytes"`
	// MaxRSSKiB is the process's peak resident set (VmHWM), read as it
	// finishes.
	MaxRSSKiB int64 `json:"max_rss_kib"`

	// The filter pass (filter.NewPlan): wall, the process's CPU over it,
	// and the scan workers' part of that.
	FilterWall float64 `json:"filter_wall_s"`
	FilterCPU  float64 `json:"filter_cpu_s"`
	ScanCPU    float64 `json:"filter_scan_cpu_s"`

	// The copy pass (pipeline.Run): wall, the process's CPU over it, and
	// each stage's (pipeline.StageCPU).
	CopyWall    float64 `json:"copy_wall_s"`
	CopyCPU     float64 `json:"copy_cpu_s"`
	ReadCPU     float64 `json:"read_cpu_s"`
	CompressCPU float64 `json:"compress_cpu_s"`
	ReorderCPU  float64 `json:"reorder_cpu_s"`
	WriteCPU    float64 `json:"write_cpu_s"`
}

// PeakRSS is the calling process's VmHWM in KiB (0 if unreadable).
func PeakRSS() int64 { return readHWM("/proc/self/status") }

// WriteChildStats writes s to path as JSON.
func WriteChildStats(path string, s ChildStats) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("stats file: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("stats file: %w", err)
	}
	return nil
}

// ReadChildStats reads what WriteChildStats wrote.
func ReadChildStats(path string) (ChildStats, error) {
	var s ChildStats
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("stats file: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("stats file %s: %w", path, err)
	}
	return s, nil
}
