package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// CSVHeader is results.csv's first row: one row per configuration,
// seconds and MB/s, medians with the minimum and maximum of the wall time.
var CSVHeader = []string{
	"program", "workers", "cpus", "ncpus", "map_size_kb", "codec", "dump_level", "runs",
	"wall_s", "wall_min_s", "wall_max_s", "filter_wall_s", "copy_wall_s",
	"cpu_s", "user_s", "sys_s",
	"read_cpu_s", "filter_cpu_s", "compress_cpu_s", "reorder_cpu_s", "write_cpu_s", "store_cpu_s", "other_cpu_s",
	"throughput_mbps", "model_mbps", "max_rss_kib", "bytes_in", "bytes_out",
}

// WriteCSV writes results.csv.
func WriteCSV(w io.Writer, s *Study) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
	for _, x := range s.Summaries {
		model := ""
		if c, ok := s.checkFor(x); ok && !c.InSample {
			model = f(c.Predicted)
		}
		ms := strconv.Itoa(x.MapSizeKB)
		if x.Program == Makedumpfile {
			ms = ""
		}
		st := x.Stages
		if err := cw.Write([]string{
			x.Program, strconv.Itoa(x.Workers), x.CPUList(), strconv.Itoa(len(x.CPUs)), ms, x.Codec, strconv.Itoa(x.Level), strconv.Itoa(x.Runs),
			f(x.Wall.Median), f(x.Wall.Min), f(x.Wall.Max), f(x.FilterWall.Median), f(x.CopyWall.Median),
			f(x.CPU.Median), f(x.User.Median), f(x.Sys.Median),
			f(st.Read), f(st.Filter), f(st.Compress), f(st.Reorder), f(st.Write), f(st.Store), f(st.Other),
			f(x.Throughput.Median), model, strconv.FormatInt(int64(x.MaxRSSKiB.Median), 10),
			strconv.FormatInt(x.BytesIn, 10), strconv.FormatInt(x.BytesOut, 10),
		}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes results.json: the whole Study.
func WriteJSON(w io.Writer, s *Study) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(s)
}

// WriteAll writes the study into dir: tables.txt, results.csv,
// results.json, and the plots as PNG and SVG. It returns the paths
// written.
func WriteAll(dir string, s *Study) ([]string, error) {
	return writeStudy(dir, s, WriteTables, WritePlots)
}

// writeStudy writes tables.txt with tables, results.csv, results.json
// and the plots that plots draws into dir.
func writeStudy(dir string, s *Study, tables func(io.Writer, *Study) error, plots func(string, *Study) ([]string, error)) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	var paths []string
	for _, f := range []struct {
		name  string
		write func(io.Writer, *Study) error
	}{
		{"tables.txt", tables},
		{"results.csv", WriteCSV},
		{"results.json", WriteJSON},
	} {
		path := filepath.Join(dir, f.name)
		if err := writeFile(path, func(w io.Writer) error { return f.write(w, s) }); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	drawn, err := plots(dir, s)
	return append(paths, drawn...), err
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
