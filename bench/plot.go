package bench

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlots draws, as PNG and SVG: throughput.* (memory MB per wall
// second against workers: each program measured, and the model on the
// measured CPUs and with a core per worker) and, per pagepipe series,
// cpu*.* (CPU seconds per stage against workers: what the code costs,
// whatever the machine gives). It returns the paths written.
func WritePlots(dir string, s *Study) ([]string, error) {
	var paths []string
	save := func(p *plot.Plot, name string) error {
		for _, ext := range []string{".png", ".svg"} {
			path := filepath.Join(dir, name+ext)
			if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
				return fmt.Errorf("plot %s: %w", path, err)
			}
			paths = append(paths, path)
		}
		return nil
	}
	tp, err := throughputPlot(s)
	if err != nil {
		return nil, err
	}
	if err := save(tp, "throughput"); err != nil {
		return paths, err
	}
	for i, series := range seriesOf(s.Summaries) {
		cp, err := cpuPlot(series)
		if err != nil {
			return paths, err
		}
		name := "cpu"
		if i > 0 {
			name += "-" + strconv.Itoa(i+1)
		}
		if err := save(cp, name); err != nil {
			return paths, err
		}
	}
	return paths, nil
}

// workerAxis puts workers on a log-2 axis with a tick at each count.
func workerAxis(p *plot.Plot, ws []int) {
	p.X.Label.Text = "workers (--num-threads)"
	p.X.Scale = plot.LogScale{}
	var ticks plot.ConstantTicks
	for _, w := range ws {
		ticks = append(ticks, plot.Tick{Value: float64(w), Label: strconv.Itoa(w)})
	}
	p.X.Tick.Marker = ticks
	// A log axis needs a range above 0, also for one worker count.
	if len(ws) > 0 {
		p.X.Min, p.X.Max = float64(slices.Min(ws))/1.25, float64(slices.Max(ws))*1.25
	}
}

func throughputPlot(s *Study) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Throughput (MB of memory per wall second)"
	p.Y.Label.Text = "MB/s"
	p.Y.Min = 0
	var args []any
	ticks := map[int]bool{}
	for _, g := range s.blocks() {
		for _, prog := range []struct {
			name string
			m    map[int]Summary
		}{{Pagepipe, g.pp}, {Makedumpfile, g.mdf}} {
			name, m := prog.name, prog.m
			if len(m) == 0 {
				continue
			}
			var xy plotter.XYs
			for _, w := range sortedKeys(m) {
				xy = append(xy, plotter.XY{X: float64(w), Y: m[w].Throughput.Median})
				ticks[w] = true
			}
			args = append(args, fmt.Sprintf("%s, %s (measured)", name, g.title), xy)
		}
	}
	for _, c := range s.Curves {
		here, cores := plotter.XYs{}, plotter.XYs{}
		for _, pt := range c.Points {
			here = append(here, plotter.XY{X: float64(pt.Workers), Y: pt.Here})
			cores = append(cores, plotter.XY{X: float64(pt.Workers), Y: pt.Cores})
			ticks[pt.Workers] = true
		}
		args = append(args, "model, CPUs "+c.CPUs+" ("+c.Model.Series+")", here, "model, a core per worker", cores)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, err
	}
	p.Y.Max *= 1.3
	var ws []int
	for w := range ticks {
		ws = append(ws, w)
	}
	sort.Ints(ws)
	workerAxis(p, ws)
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
}

func cpuPlot(series []Summary) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "CPU seconds per stage (user+sys), " + series[0].Series()
	p.Y.Label.Text = "CPU seconds (median)"
	p.Y.Min = 0
	var args []any
	var ws []int
	for _, x := range series {
		ws = append(ws, x.Workers)
	}
	for i, name := range StageNames {
		var xy plotter.XYs
		for _, x := range series {
			xy = append(xy, plotter.XY{X: float64(x.Workers), Y: x.Stages.Values()[i]})
		}
		args = append(args, name, xy)
	}
	var total plotter.XYs
	for _, x := range series {
		total = append(total, plotter.XY{X: float64(x.Workers), Y: x.CPU.Median})
	}
	args = append(args, "total (process)", total)
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, err
	}
	// Room above the lines for the legend.
	p.Y.Max *= 1.5
	workerAxis(p, ws)
	p.Legend.Top = true
	return p, nil
}
