package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"pagepipe/codec"
	"pagepipe/filter"
	"pagepipe/pipeline"
	"pagepipe/sink"
	"pagepipe/source"
)

// dumpJob is one run of the main command: VMCORE in, DUMPFILE out.
type dumpJob struct {
	opts        *options
	con         *console
	vmcore, out string
	stdout      io.Writer // the flattened stream's destination (-F)
	stats       pipeline.Stats
	plan        *filter.Plan
}

func (j *dumpJob) run(ctx context.Context) error {
	o := j.opts
	v, err := source.OpenMemory(j.vmcore)
	if err != nil {
		return fmt.Errorf("open vmcore: %w", err)
	}
	defer v.Close()

	level := o.levels[0]
	input, isDump := v.(*source.Dump)
	if isDump {
		// Refiltering: what the dump left out stays out.
		level |= filter.Level(input.Sub.DumpLevel)
	}
	vi, err := loadVMCOREINFO(v, o.vmcoreinfo)
	if err != nil {
		return err
	}
	var kern *filter.Kernel
	if vi != nil {
		kern, err = filter.OpenKernel(vi, v, v.Pfns())
		if err != nil {
			if level.NeedsPageScan() {
				return fmt.Errorf("dump level %d: %w", level, err)
			}
			j.con.debug("mem_map not found (%v): dumping every page with data\n", err)
			kern = nil
		}
	}
	scanStart := time.Now()
	plan, err := filter.NewPlan(ctx, v, level, kern, o.threads)
	if err != nil {
		return err
	}
	if plan.Scanned {
		j.con.step("Excluding unnecessary pages", time.Since(scanStart))
	}
	j.plan = plan
	var cd *codec.Codec
	if o.compress != 0 {
		if cd, err = codec.ByFlag(o.compress); err != nil {
			return err
		}
		if !cd.Standard {
			j.con.msg("WARNING: %s compression is a pagepipe extension that crash, libkdumpfile and makedumpfile cannot read; convert the dump with pagepipe before sharing it.\n", cd.Name)
		}
	}

	out, finish, err := j.output()
	if err != nil {
		return err
	}

	notes, nrCPUs, viOff, viSize := v.Notes()
	meta := &sink.Meta{
		BlockSize:      source.PageSize,
		NrCPUs:         int32(nrCPUs),
		DumpLevel:      int32(level),
		Notes:          notes,
		VmcoreinfoOff:  viOff,
		VmcoreinfoSize: viSize,
		MaxMapnr:       plan.MaxMapnr,
		Present:        plan.Present,
		Dumpable:       plan.Dumpable,
		NumDumpable:    plan.NumDumpable,
		ZeroPage:       level.Has(filter.ExcludeZero),
	}
	if cd != nil {
		meta.Status = cd.Flag
	}
	if isDump {
		// The header describes the same crash: keep what the input says.
		meta.Utsname, meta.CrashTime, meta.PhysBase = input.Header.Utsname, input.Header.TimestampSec, input.Sub.PhysBase
		meta.NrCPUs = input.Header.NrCPUs
	} else if note := fillKernelMeta(v.(*source.Vmcore), vi, meta); note != "" {
		j.con.debug("%s\n", note)
	}
	k, err := sink.NewKdump(out, meta)
	if err != nil {
		return fmt.Errorf("%s: %w", j.out, err)
	}
	start := time.Now()
	prog := j.con.newProgress("Copying data", plan.NumDumpable)
	j.stats, err = pipeline.Run(ctx, pipeline.Config{
		Workers: o.threads,
		NewReader: func() pipeline.PageReader {
			return v.NewReader(o.mapSizeKiB<<10, !o.nonMmap)
		},
		Dumpable:    plan.Dumpable,
		Total:       plan.NumDumpable,
		ExcludeZero: meta.ZeroPage,
		Codec:       cd,
		Writer:      k,
		Progress:    prog.update,
	})
	if err != nil {
		return err
	}
	if err := k.Close(); err != nil {
		return fmt.Errorf("%s: %w", j.out, err)
	}
	prog.finish()
	j.con.step("Copying data", time.Since(start))
	if err := finish(); err != nil {
		return fmt.Errorf("%s: %w", j.out, err)
	}
	j.con.printReport(plan, j.stats, k.Written())
	return nil
}

// output opens where the dump goes: the dump file, or with -F a flattened
// stream on stdout. finish completes it (for -F, the end marker).
func (j *dumpJob) output() (out sink.Output, finish func() error, err error) {
	if j.opts.flatten {
		fl, err := sink.NewFlat(j.stdout)
		if err != nil {
			return nil, nil, err
		}
		return fl, fl.Close, nil
	}
	f, err := createOutput(j.out, j.opts.force)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

// createOutput creates an output file, refusing to clobber an existing one
// unless force (-f).
func createOutput(path string, force bool) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if os.IsExist(err) {
		return nil, fmt.Errorf("can't open the dump file(%s): file exists (use -f to overwrite)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("can't open the dump file: %w", err)
	}
	return f, nil
}

func codecNames() []string {
	var names []string
	for _, c := range codec.All() {
		names = append(names, c.Name)
	}
	return names
}
