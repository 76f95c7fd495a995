package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"pagepipe/chunk"
	"pagepipe/codec"
	"pagepipe/filter"
	"pagepipe/internal/cpuclock"
	"pagepipe/internal/cpuset"
	"pagepipe/kernel"
	"pagepipe/source"
)

// The roofline (pagepipe-bench roofline; docs/benchmarks.md, "The floor
// on one CPU"): a dump's run beside the parts no dump of that vmcore at
// that level can do without, each measured alone on the same CPU: reading
// the struct pages, reading the pages the copy pass reads, the zero check
// and the codec on exactly those pages, and writing the dump's bytes out.
// Their sum is the floor; the run's distance to it is what pagepipe's own
// work (classifying, cutting chunks, ordering, the runtime, start and
// exit) costs.

// Floor is the irreducible parts of one dump, seconds: CPU (the measuring
// thread's user + system time) and wall.
type Floor struct {
	StructPages, Pages, Codec, Write      float64 // CPU seconds
	StructPagesWall, PagesWall, CodecWall float64
	WriteWall                             float64
	// What they handled: bytes of struct pages, pages read, pages the
	// codec compressed (the rest were zero), bytes written.
	StructBytes, PagesRead, PagesCompressed, BytesWritten int64
}

// CPU is the floor's CPU seconds.
func (f Floor) CPU() float64 { return f.StructPages + f.Pages + f.Codec + f.Write }

// Wall is the floor's wall seconds.
func (f Floor) Wall() float64 {
	return f.StructPagesWall + f.PagesWall + f.CodecWall + f.WriteWall
}

// FloorJob is what MeasureFloor needs, made once per vmcore and level
// (FloorSetup): where the struct pages lie, which pages the copy pass reads.
type FloorJob struct {
	v      *source.Vmcore
	pieces [][2]uint64 // struct pages: physical address and length, ≤ 512 KiB each
	plan   *filter.Plan
}

// Close closes the vmcore.
func (j *FloorJob) Close() error { return j.v.Close() }

// FloorSetup opens vmcore and finds, untimed, the physical ranges of its
// struct pages (cut as the page scan cuts its reads, 512 KiB) and the pages
// the copy pass reads at level (the page scan's 2nd bitmap).
func FloorSetup(vmcore string, level int) (*FloorJob, error) {
	v, err := source.Open(vmcore)
	if err != nil {
		return nil, err
	}
	j := &FloorJob{v: v}
	vi, err := kernel.ParseVMCOREINFO(v.Vmcoreinfo())
	if err != nil {
		v.Close()
		return nil, fmt.Errorf("%s: %w", vmcore, err)
	}
	k, err := filter.OpenKernel(vi, v, v.Pfns())
	if err != nil {
		v.Close()
		return nil, err
	}
	tr, err := v.Arch().NewTranslator(v, vi)
	if err != nil {
		v.Close()
		return nil, err
	}
	const piece = 512 << 10
	for _, s := range k.MemMap.Sections {
		va, end := s.MemMap, s.MemMap+(s.EndPFN-s.StartPFN)*k.MemMap.PageSize
		for va < end {
			m, err := tr.Lookup(va)
			if err != nil {
				v.Close()
				return nil, fmt.Errorf("struct pages at %#x: %w", va, err)
			}
			n := min(m.PageSize-va&(m.PageSize-1), end-va)
			if last := len(j.pieces) - 1; last >= 0 && j.pieces[last][0]+j.pieces[last][1] == m.Paddr && j.pieces[last][1]+n <= piece {
				j.pieces[last][1] += n
			} else {
				for n > piece { // a 1 GiB or 2 MiB mapping: pieces of it
					j.pieces = append(j.pieces, [2]uint64{m.Paddr, piece})
					m.Paddr, va, n = m.Paddr+piece, va+piece, n-piece
				}
				j.pieces = append(j.pieces, [2]uint64{m.Paddr, n})
			}
			va += n
		}
	}
	if j.plan, err = filter.NewPlan(context.Background(), v, filter.Level(level), k, 1, source.PartialPages{}, 0); err != nil {
		v.Close()
		return nil, err
	}
	return j, nil
}

// MeasureFloor measures the parts on one thread pinned to cpus: pread of the struct pages in their pieces; pread of the
// pages the copy pass reads, 64 KiB at a time within runs of them (the
// copy pass's read-ahead); the zero check and the codec (a new
// compressor, one page at a time, as a copy worker) on those pages, as the
// same reads with them less the reads alone; writing the bytes of dump
// (the run's own file) into dir in 1 MiB writes, into a file removed
// after.
func (j *FloorJob) MeasureFloor(codecName string, dump, dir string, cpus []int) (Floor, error) {
	type result struct {
		f   Floor
		err error
	}
	done := make(chan result)
	go func() {
		// Locked and never unlocked: the pinned thread exits with the
		// goroutine instead of going back to the pool.
		runtime.LockOSThread()
		if err := cpuset.Pin(cpus); err != nil {
			done <- result{err: err}
			return
		}
		f, err := j.measure(codecName, dump, dir)
		done <- result{f, err}
	}()
	res := <-done
	return res.f, res.err
}

func (j *FloorJob) measure(codecName string, dump, dir string) (Floor, error) {
	var f Floor
	timed := func(cpu, wall *float64, body func() error) error {
		t0, u0 := time.Now(), cpuclock.ThreadTotal()
		err := body()
		*cpu += (cpuclock.ThreadTotal() - u0).Seconds()
		*wall += time.Since(t0).Seconds()
		return err
	}
	r := j.v.NewReader(0, false)
	defer r.Close()
	if err := timed(&f.StructPages, &f.StructPagesWall, func() error {
		for _, p := range j.pieces {
			if _, err := r.SlicePhys(p[0], int(p[1])); err != nil {
				return err
			}
			f.StructBytes += int64(p[1])
		}
		return nil
	}); err != nil {
		return f, err
	}

	ps := j.v.PageSize()
	const readPages = 64 << 10 >> 12
	// runs of the pages read, each at most readPages long
	var runs [][2]uint64
	d := j.plan.Dumpable
	for pfn := d.NextSet(0); pfn < d.Len(); {
		end := pfn + 1
		for end < d.Len() && end-pfn < readPages && d.Test(end) {
			end++
		}
		runs = append(runs, [2]uint64{pfn, end})
		pfn = d.NextSet(end)
	}
	if err := timed(&f.Pages, &f.PagesWall, func() error {
		for _, run := range runs {
			if _, err := r.SlicePhys(run[0]*ps, int((run[1]-run[0])*ps)); err != nil {
				return err
			}
			f.PagesRead += int64(run[1] - run[0])
		}
		return nil
	}); err != nil {
		return f, err
	}

	// The zero check and the codec: the same reads again with each page
	// checked and compressed as it comes, while it is in the cache, as a
	// copy worker does; less the reads alone.
	var comp codec.Compressor
	if codecName != "" && codecName != "none" {
		c, err := codecNamed(codecName)
		if err != nil {
			return f, err
		}
		comp = c.NewCompressor()
	}
	out := make([]byte, 0, 2*ps)
	var both, bothWall float64
	if err := timed(&both, &bothWall, func() error {
		for _, run := range runs {
			b, err := r.SlicePhys(run[0]*ps, int((run[1]-run[0])*ps))
			if err != nil {
				return err
			}
			for p := 0; p < len(b); p += int(ps) {
				page := b[p : p+int(ps)]
				if chunk.IsZero(page) {
					continue
				}
				f.PagesCompressed++
				if comp != nil {
					if _, err := comp.Compress(out, page); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}); err != nil {
		return f, err
	}
	f.Codec, f.CodecWall = max(both-f.Pages, 0), max(bothWall-f.PagesWall, 0)

	data, err := os.ReadFile(dump)
	if err != nil {
		return f, err
	}
	w, err := os.CreateTemp(dir, "pagepipe-floor-write")
	if err != nil {
		return f, err
	}
	defer os.Remove(w.Name())
	err = timed(&f.Write, &f.WriteWall, func() error {
		for off := 0; off < len(data); off += 1 << 20 {
			n, err := w.Write(data[off:min(off+1<<20, len(data))])
			f.BytesWritten += int64(n)
			if err != nil {
				return err
			}
		}
		return w.Close()
	})
	return f, err
}

// codecNamed is the codec of a -c/-l/-p/-z/--lz4 letter or a codec's name.
func codecNamed(name string) (*codec.Codec, error) {
	long := map[string]string{"c": "zlib", "l": "lzo", "p": "snappy", "z": "zstd", "lz4": "lz4"}
	if n, ok := long[name]; ok {
		name = n
	}
	for _, c := range codec.All() {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("no codec %q", name)
}

// RooflineRow is one codec's runs, round by round: pagepipe's, the peer's
// (when compared), the floor's.
type RooflineRow struct {
	Codec        string  `json:"codec"`
	Pagepipe     []Run   `json:"pagepipe"`
	Makedumpfile []Run   `json:"makedumpfile,omitempty"`
	Floors       []Floor `json:"floors"`
}

// Roofline is the study: each codec's runs on one CPU beside its floor.
type Roofline struct {
	Command      string        `json:"command"`
	Date         string        `json:"date"`
	Vmcore       string        `json:"vmcore"`
	Level        int           `json:"dump_level"`
	CPUs         []int         `json:"cpus"`
	Host         Host          `json:"host"`
	Pagepipe     string        `json:"pagepipe"`
	Makedumpfile string        `json:"makedumpfile_version,omitempty"`
	LoadBefore   string        `json:"loadavg_before"`
	LoadAfter    string        `json:"loadavg_after"`
	Rows         []RooflineRow `json:"rows"`
}

// RunRoofline runs, rounds times, each codec's pagepipe run (one worker),
// the peer's when r has one, and the floor, all pinned to cpus, in turns
// that change order from round to round.
func RunRoofline(ctx context.Context, r *Runner, job *FloorJob, rf *Roofline, codecs []string, rounds int) error {
	rf.LoadBefore = loadAvg()
	defer func() { rf.LoadAfter = loadAvg() }()
	for _, c := range codecs {
		rf.Rows = append(rf.Rows, RooflineRow{Codec: c})
	}
	var floorErr error
	for round := 0; round < rounds; round++ {
		for i := range rf.Rows {
			row := &rf.Rows[i]
			cfg := Config{Program: Pagepipe, Workers: 1, CPUs: rf.CPUs, Codec: row.Codec, Level: rf.Level}
			steps := []func() error{
				func() error {
					r.AfterRun = func(_ Config, dump string) error {
						f, err := job.MeasureFloor(row.Codec, dump, r.DumpDir, rf.CPUs)
						row.Floors = append(row.Floors, f)
						floorErr = err
						return err
					}
					defer func() { r.AfterRun = nil }()
					run, err := r.One(ctx, cfg)
					run.Round = round + 1
					row.Pagepipe = append(row.Pagepipe, run)
					return errors.Join(err, floorErr)
				},
			}
			if r.Makedumpfile != "" && row.Codec != "lz4" {
				steps = append(steps, func() error {
					m := cfg
					m.Program = Makedumpfile
					run, err := r.One(ctx, m)
					run.Round = round + 1
					row.Makedumpfile = append(row.Makedumpfile, run)
					return err
				})
			}
			for k := range steps {
				if err := steps[(k+round)%len(steps)](); err != nil {
					return err
				}
			}
			if r.Progress != nil {
				fmt.Fprintf(r.Progress, "roofline: round %d/%d, %s done\n", round+1, rounds, codecFlag(row.Codec))
			}
		}
	}
	return nil
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

// WriteRoofline prints the study: per codec, medians of pagepipe's CPU
// and wall time beside the floor's and the peer's.
func WriteRoofline(w io.Writer, rf *Roofline) error {
	p := &printer{w: w}
	p.f("pagepipe roofline: %s, -d %d, on CPUs %s, one worker\n", rf.Vmcore, rf.Level, cpuset.Format(rf.CPUs))
	p.f("host: %s\npagepipe: %s\n", rf.Host, rf.Pagepipe)
	if rf.Makedumpfile != "" {
		p.f("makedumpfile: %s\n", rf.Makedumpfile)
	}
	p.f("load average before: %s; after: %s\n", rf.LoadBefore, rf.LoadAfter)
	med := func(v []float64) float64 { return statOf(v).Median }
	col := func(runs []Run, f func(Run) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return med(v)
	}
	fcol := func(fs []Floor, f func(Floor) float64) float64 {
		v := make([]float64, len(fs))
		for i, x := range fs {
			v[i] = f(x)
		}
		return med(v)
	}
	runs := 0
	for _, row := range rf.Rows {
		runs = max(runs, len(row.Pagepipe))
	}
	p.f("\n[roofline] CPU seconds (user+sys; the floor's parts on their own thread), medians of %d alternating rounds; ratios are of the medians\n", runs)
	rows := [][]string{{"codec", "pagepipe CPU", "floor CPU", "struct pages", "pages read", "zero+codec", "write", "pagepipe / floor", "makedumpfile CPU", "pagepipe / makedumpfile", "pagepipe bytes", "makedumpfile bytes"}}
	for _, row := range rf.Rows {
		pp := col(row.Pagepipe, Run.CPU)
		fl := fcol(row.Floors, Floor.CPU)
		mdf, ratio, mb := "-", "-", "-"
		if len(row.Makedumpfile) > 0 {
			m := col(row.Makedumpfile, Run.CPU)
			mdf, ratio = sec(m), fmt.Sprintf("%.2f", pp/m)
			mb = strconv.FormatInt(row.Makedumpfile[len(row.Makedumpfile)-1].BytesOut, 10)
		}
		rows = append(rows, []string{codecFlag(row.Codec), sec(pp), sec(fl),
			sec(fcol(row.Floors, func(f Floor) float64 { return f.StructPages })), sec(fcol(row.Floors, func(f Floor) float64 { return f.Pages })),
			sec(fcol(row.Floors, func(f Floor) float64 { return f.Codec })), sec(fcol(row.Floors, func(f Floor) float64 { return f.Write })),
			fmt.Sprintf("%.2f", pp/fl), mdf, ratio, strconv.FormatInt(row.Pagepipe[len(row.Pagepipe)-1].BytesOut, 10), mb})
	}
	p.table(rows)
	p.f("\n[roofline] wall seconds, medians\n")
	rows = [][]string{{"codec", "pagepipe", "floor", "pagepipe / floor", "makedumpfile", "pagepipe / makedumpfile"}}
	for _, row := range rf.Rows {
		pp := col(row.Pagepipe, func(r Run) float64 { return r.Wall })
		fl := fcol(row.Floors, Floor.Wall)
		mdf, ratio := "-", "-"
		if len(row.Makedumpfile) > 0 {
			m := col(row.Makedumpfile, func(r Run) float64 { return r.Wall })
			mdf, ratio = sec(m), fmt.Sprintf("%.2f", pp/m)
		}
		rows = append(rows, []string{codecFlag(row.Codec), sec(pp), sec(fl), fmt.Sprintf("%.2f", pp/fl), mdf, ratio})
	}
	p.table(rows)
	if len(rf.Rows) > 0 && len(rf.Rows[0].Floors) > 0 {
		f := rf.Rows[0].Floors[0]
		p.f("(the floor handled %.1f MiB of struct pages, %d pages read, %d of them compressed; pagepipe's stages, CPU s: see the JSON)\n",
			float64(f.StructBytes)/(1<<20), f.PagesRead, f.PagesCompressed)
	}
	return p.err
}
