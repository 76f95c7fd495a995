package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"pagepipe/sink"
)

// writeSplit writes the dump split over outs (--split): the pfn ranges
// balance the dumpable pages per file on splitblock boundaries, as
// makedumpfile chooses them, and one parallel copy pass writes every file
// (makedumpfile forks a serial writer per file instead, and refuses
// --num-threads with --split).
func (j *dumpJob) writeSplit(ctx context.Context, outs []string) error {
	o := j.opts
	if o.flatten {
		return errors.New("--split cannot be combined with -F: each split file needs its own output")
	}
	if o.sizeLimit > 0 {
		// A size limit on split files (each file's, or all of them
		// together?) is not built. Refused rather than ignored: -L guards
		// a disk.
		return errors.New("-L cannot be combined with --split in pagepipe yet")
	}
	kb := o.splitblockKB
	if kb == 0 {
		kb = 1 << 20 // makedumpfile: 0 means the default, 1 GiB
	}
	bs := j.meta.BlockSize
	if kb < 0 || uint64(kb)<<10%bs != 0 {
		return fmt.Errorf("--splitblock-size %d: the splitblock size must be a positive multiple of the page size (%d KiB)", o.splitblockKB, bs>>10)
	}
	bounds, err := sink.SplitBounds(j.plan.Dumpable, j.plan.MaxMapnr, uint64(kb)<<10/bs, len(outs))
	if err != nil {
		return err
	}
	for i, name := range outs {
		j.con.debug("%s: pfns [%#x, %#x), %d pages\n", name, bounds[i], bounds[i+1], j.plan.Dumpable.Count(bounds[i], bounds[i+1]))
	}

	if err := distinctFiles(append([]string{j.vmcore}, outs...)); err != nil {
		return err
	}
	outputs := make([]sink.Output, len(outs))
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for i, name := range outs {
		if o.dryRun {
			outputs[i] = discard{}
			continue
		}
		f, err := createOutput(name, o.force)
		if err != nil {
			// Leave nothing behind: the files created so far are empty.
			for k, f := range files {
				f.Close()
				os.Remove(outs[k])
			}
			files = nil
			return err
		}
		files = append(files, f)
		outputs[i] = f
	}
	m := *j.meta
	named := func(err error) error {
		var pe *sink.PartError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s: %w", outs[pe.Part], pe.Err)
		}
		return err
	}
	s, err := sink.NewSplit(outputs, &m, bounds)
	if err != nil {
		return named(err)
	}
	err = j.copyPass(ctx, s)
	if err != nil && ctx.Err() != nil {
		err = context.Cause(ctx) // the signal that stopped us
	}
	if err == nil {
		err = s.Close()
	}
	if err != nil {
		if o.dryRun {
			return named(err)
		}
		return j.abortSplit(s, outs, named(err))
	}
	for i, f := range files {
		if err := f.Close(); err != nil {
			return fmt.Errorf("%s: %w", outs[i], err)
		}
	}
	files = nil
	j.con.printReport(j.plan, j.stats.ZeroPages, nil, s.Written())
	return nil
}

// abortSplit finishes a split dump that failed on its way (a full disk, a
// signal) as a single dump is finished: every file that did not get all
// its pages is left valid and marked incomplete (see sink.Split.Abort),
// and the files that did stay complete.
func (j *dumpJob) abortSplit(s *sink.Split, outs []string, err error) error {
	parts, aerr := s.Abort()
	if aerr != nil {
		var pe *sink.PartError
		if errors.As(aerr, &pe) {
			aerr = fmt.Errorf("%s: %w", outs[pe.Part], pe.Err)
		}
		return fmt.Errorf("%w (and %v)", err, aerr)
	}
	var names []string
	for _, i := range parts {
		names = append(names, outs[i])
	}
	j.con.msg("Incomplete split files: %s.\n", strings.Join(names, ", "))
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w: %w: %v", errIncomplete, errNoSpace, err)
	}
	return fmt.Errorf("%w: %v", errIncomplete, err)
}

// distinctFiles refuses a command line that names one file twice among
// the vmcore and the outputs (with -f, a second open would truncate it).
func distinctFiles(paths []string) error {
	for i, a := range paths {
		sa, errA := os.Stat(a)
		for _, b := range paths[:i] {
			if filepath.Clean(a) == filepath.Clean(b) {
				return fmt.Errorf("%s is named twice", a)
			}
			if sb, errB := os.Stat(b); errA == nil && errB == nil && os.SameFile(sa, sb) {
				return fmt.Errorf("%s and %s are the same file", b, a)
			}
		}
	}
	return nil
}

// reassemble joins split dump files, pagepipe's or makedumpfile's, given
// in any order, into the one dump they were cut from (--reassemble).
func reassemble(parts []string, out string, force bool) error {
	set, err := sink.OpenSplitSet(parts)
	if err != nil {
		return err
	}
	if err := distinctFiles(append(slices.Clone(parts), out)); err != nil {
		return err
	}
	f, err := createOutput(out, force)
	if err != nil {
		return err
	}
	if _, err := set.Reassemble(f); err != nil {
		f.Close()
		os.Remove(out)
		return fmt.Errorf("reassemble into %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("reassemble into %s: %w", out, err)
	}
	if parts := set.Incomplete(); len(parts) > 0 {
		// Kept, valid and marked, as an incomplete dump is.
		return fmt.Errorf("%w: %s reassembled from incomplete split files (%s): %d pages lost", errIncomplete, out, strings.Join(parts, ", "), set.Lost)
	}
	return nil
}
