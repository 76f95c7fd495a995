package bench

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTables prints the study as kernel engineers post such results, in
// the seed studies' shapes (../shared/seeds): 000, one row per
// configuration with Filter pages, Copy data and Total seconds; 001, a
// threads row, a throughput row per program and a speed-up(times) row;
// 003, one row per CPU count with the throughput per CPU; then the model.
// Every column says whether it is wall time or CPU time.
func WriteTables(w io.Writer, s *Study) error {
	p := &printer{w: w}
	p.f("pagepipe bench: %s (%.0f MiB of memory), usable CPUs %s\n", s.Vmcore, float64(s.BytesIn)/(1<<20), s.UsableCPUs)
	if s.Makedumpfile != "" {
		p.f("makedumpfile: %s\n", s.Makedumpfile)
	}
	p.f("machine: source reads %.0f MB/s, sink writes %.0f MB/s;", s.Machine.ReadRate/1e6, s.Machine.WriteRate/1e6)
	var sets []string
	for k := range s.Machine.Capacity {
		sets = append(sets, k)
	}
	sort.Strings(sets)
	for _, k := range sets {
		p.f(" CPUs %s give %.2f cores;", k, s.Machine.Capacity[k])
	}
	p.f("\n")
	for _, n := range s.Notes {
		p.f("note: %s\n", n)
	}
	table000(p, s)
	table001(p, s)
	table003(p, s)
	tableModel(p, s)
	tableSerial(p, s)
	return p.err
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

// table prints rows of cells aligned in columns.
func (p *printer) table(rows [][]string) {
	if p.err != nil {
		return
	}
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	p.err = tw.Flush()
}

func sec(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
func rate(v float64) string {
	if v <= 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func table000(p *printer, s *Study) {
	runs := 0
	for _, x := range s.Summaries {
		runs = max(runs, x.Runs)
	}
	p.f("\n[000] one row per configuration. Filter pages, Copy data, Total: wall seconds, median of %d runs (Total: the whole process; model: leave-one-out prediction, labelled model). CPU: user+sys seconds, median.\n", runs)
	rows := [][]string{{"program", "workers", "CPUs", "map-size (KB)", "codec", "level", "Filter pages (s)", "Copy data (s)", "Total (s)", "Total min-max (s)", "model Total (s)", "CPU (s)", "peak RSS (MiB)", "dump (MB)"}}
	for _, x := range s.Summaries {
		model := "-"
		if c, ok := s.checkFor(x); ok && !c.InSample && c.Predicted > 0 {
			model = sec(float64(x.BytesIn) / 1e6 / c.Predicted)
		}
		rows = append(rows, []string{x.Program, strconv.Itoa(x.Workers), x.CPUList(), x.MapSize(), codecFlag(x.Codec), strconv.Itoa(x.Level),
			sec(x.FilterWall.Median), sec(x.CopyWall.Median), sec(x.Wall.Median), sec(x.Wall.Min) + "-" + sec(x.Wall.Max), model,
			sec(x.CPU.Median), fmt.Sprintf("%.1f", x.MaxRSSKiB.Median/1024), fmt.Sprintf("%.1f", float64(x.BytesOut)/1e6)})
	}
	p.table(rows)
}

func table001(p *printer, s *Study) {
	for _, g := range s.blocks() {
		ws := sortedKeys(g.pp)
		for _, w := range sortedKeys(g.mdf) {
			if _, ok := g.pp[w]; !ok {
				ws = append(ws, w)
			}
		}
		sort.Ints(ws)
		p.f("\n[001] %s: throughput, MB of memory per wall second (median); CPU seconds (user+sys, median) below.\n", g.title)
		head := []string{"threads:"}
		pp, mdf, model, speed := []string{"pagepipe:"}, []string{"makedumpfile:"}, []string{"model (pagepipe):"}, []string{"speed-up(times):"}
		cpuPP, cpuMDF, ratio := []string{"pagepipe CPU (s):"}, []string{"makedumpfile CPU (s):"}, []string{"pagepipe CPU / fewest threads:"}
		var base float64
		for _, w := range ws {
			head = append(head, strconv.Itoa(w))
			a, okA := g.pp[w]
			b, okB := g.mdf[w]
			pp = append(pp, cell(okA, rate(a.Throughput.Median)))
			mdf = append(mdf, cell(okB, rate(b.Throughput.Median)))
			m := "-"
			if c, ok := s.checkFor(a); okA && ok && !c.InSample {
				m = rate(c.Predicted)
			}
			model = append(model, m)
			sp := "-"
			if okA && okB && b.Throughput.Median > 0 {
				sp = fmt.Sprintf("%.2f", a.Throughput.Median/b.Throughput.Median)
			}
			speed = append(speed, sp)
			cpuPP = append(cpuPP, cell(okA, sec(a.CPU.Median)))
			cpuMDF = append(cpuMDF, cell(okB, sec(b.CPU.Median)))
			r := "-"
			if okA {
				if base == 0 {
					base = a.CPU.Median
				}
				r = fmt.Sprintf("%.3f", a.CPU.Median/base)
			}
			ratio = append(ratio, r)
		}
		p.table([][]string{head, pp, mdf, model, speed, cpuPP, cpuMDF, ratio})
		p.f("(speed-up: pagepipe's throughput over makedumpfile's at the same threads; model: fitted without that column's runs)\n")
	}
}

func cell(ok bool, v string) string {
	if !ok {
		return "-"
	}
	return v
}

func table003(p *printer, s *Study) {
	type key struct {
		mapSize, codec string
		level          int
	}
	var keys []key
	rows := map[key][][]string{}
	// Blocks are one per CPU set, map size, codec and level: each gives
	// its table one row.
	for _, g := range s.blocks() {
		ws := sortedKeys(g.pp)
		first := g.pp[ws[0]]
		k := key{first.MapSize(), first.Codec, first.Level}
		if _, ok := rows[k]; !ok {
			keys = append(keys, k)
		}
		n := len(first.CPUs)
		// workers = #cpus where that was measured, else the most workers.
		w := n
		if _, ok := g.pp[w]; !ok {
			w = ws[len(ws)-1]
		}
		a := g.pp[w]
		b, okB := g.mdf[w]
		m := "-"
		if c, ok := s.checkFor(a); ok && !c.InSample {
			m = rate(c.Predicted / float64(n))
		}
		rows[k] = append(rows[k], []string{strconv.Itoa(n), first.CPUList(), strconv.Itoa(w),
			rate(a.Throughput.Median / float64(n)), cell(okB, rate(b.Throughput.Median/float64(n))), m,
			fmt.Sprintf("%.2f", s.Machine.Capacity[first.CPUList()])})
	}
	for _, k := range keys {
		p.f("\n[003] %s -d %d, map-size %s: throughput per CPU, MB of memory per wall second per CPU (median; workers = #cpus where measured, else the most)\n", codecFlag(k.codec), k.level, k.mapSize)
		p.table(append([][]string{{"#cpus", "CPUs", "workers", "pagepipe", "makedumpfile", "model (pagepipe)", "capacity (cores)"}}, rows[k]...))
	}
}

func tableModel(p *printer, s *Study) {
	for _, c := range s.Curves {
		md := c.Model
		perPage := func(v float64) string {
			if md.Dumped == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f ns/page", v/float64(md.Dumped)*1e9)
		}
		p.f("\n[model] %s, fitted on the %s-worker runs: parallel %.3f CPU s (read, compress, store, filter scan; %s dumped), serial %.3f CPU s (reorder, write, filter bitmaps, setup, runtime; %s; of it %.3f CPU s fixed: start, setup, exit; %s without it); I/O ceiling %s MB/s; CPUs %s give %.2f cores.\n",
			md.Series, JoinInts(md.FitWorkers), md.Parallel, perPage(md.Parallel), md.Serial, perPage(md.Serial), md.Fixed, perPage(md.Serial-md.Fixed), rate(md.Ceiling()), c.CPUs, c.Capacity)
		p.f("wall(N) = max(serial + parallel/min(N, cores), I/O); MB of memory per wall second. This is a model, not a measurement.\n")
		rows := [][]string{{"workers", "model, CPUs " + c.CPUs, "model, a core per worker", "bound"}}
		for _, pt := range c.Points {
			rows = append(rows, []string{strconv.Itoa(pt.Workers), rate(pt.Here), rate(pt.Cores), pt.Bound})
		}
		p.table(rows)
		p.f("check, each measured configuration predicted by the model fitted on the series' other worker counts:\n")
		rows = [][]string{{"workers", "CPUs", "measured (MB/s)", "model (MB/s)", "error", "fitted on workers"}}
		for _, ch := range s.Checks {
			if ch.Series != md.Series {
				continue
			}
			e := fmt.Sprintf("%+.1f %%", ch.ErrorPct)
			if ch.InSample {
				e = "in-sample"
			}
			rows = append(rows, []string{strconv.Itoa(ch.Workers), ch.CPUs, rate(ch.Measured), rate(ch.Predicted), e, JoinInts(ch.FitWorkers)})
		}
		p.table(rows)
	}
}

// tableSerial is the summary per codec: on the series' CPUs with one
// worker, pagepipe's wall and CPU time over makedumpfile's (when the study
// ran it), the serial fraction of pagepipe's CPU time and what the model
// predicts at 16 and 64 workers on a machine with a core per worker, on
// CPU alone (the I/O ceiling measured here is this machine's, not that
// one's: the last column says where it would bind). The fixed part of the
// serial CPU (start, setup, exit) is split out, and the fraction and the
// speed-up at 16 are given again without it: what a larger dump of the
// same kind approaches.
func tableSerial(p *printer, s *Study) {
	if len(s.Curves) == 0 {
		return
	}
	p.f("\n[serial] per series: pagepipe / makedumpfile at 1 worker on the same CPUs (wall and CPU seconds, medians); the serial part of pagepipe's CPU (model), of it the fixed part outside both passes (start, setup, exit), and its fraction of the run's CPU; the model's speed-up over 1 worker on CPU alone at 16 and 64 workers with a core per worker; the serial fraction and the speed-up at 16 without the fixed part (the limits for a larger dump); what bounds 64 workers with this machine's I/O. The speed-ups are a model, not a measurement.\n")
	rows := [][]string{{"codec", "level", "CPUs", "wall ratio", "CPU ratio", "serial (CPU s)", "fixed (CPU s)", "serial fraction", "model 16", "model 64", "growing serial", "grown 16", "bound at 64"}}
	for _, c := range s.Curves {
		md := c.Model
		var pp, mdf *Summary
		for i, x := range s.Summaries {
			if x.Program == Pagepipe && x.Series() == md.Series && x.Workers == 1 {
				pp = &s.Summaries[i]
			}
		}
		if pp == nil {
			continue // no 1-worker run to compare or to name the series
		}
		for i, x := range s.Summaries {
			if x.Program == Makedumpfile && x.Workers == 1 && x.CPUList() == c.CPUs && x.Codec == pp.Codec && x.Level == pp.Level {
				mdf = &s.Summaries[i]
			}
		}
		wall, cpu := "-", "-"
		if mdf != nil {
			wall = fmt.Sprintf("%.2f", pp.Wall.Median/mdf.Wall.Median)
			cpu = fmt.Sprintf("%.2f", pp.CPU.Median/mdf.CPU.Median)
		}
		_, bound := md.Wall(64, 64)
		g := md.Grown()
		rows = append(rows, []string{codecFlag(pp.Codec), strconv.Itoa(pp.Level), c.CPUs, wall, cpu, sec(md.Serial), sec(md.Fixed),
			fmt.Sprintf("%.1f %%", 100*md.SerialFraction()), fmt.Sprintf("%.1fx", md.CPUSpeedUp(16)), fmt.Sprintf("%.1fx", md.CPUSpeedUp(64)),
			fmt.Sprintf("%.1f %%", 100*g.SerialFraction()), fmt.Sprintf("%.1fx", g.CPUSpeedUp(16)), bound})
	}
	p.table(rows)
}

// JoinInts writes v comma-separated.
func JoinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
