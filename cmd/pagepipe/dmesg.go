package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"pagepipe/kernel"
	"pagepipe/source"
)

// dumpDmesg writes the crashed kernel's log (VMCORE = o.args[0]) to
// LOGFILE (o.args[1]) in makedumpfile's --dump-dmesg format; with
// --partial-dmesg, only what was logged after the last dmesg -c.
//
// As in makedumpfile, an existing LOGFILE is refused before any work unless
// -f is given, and the file is created only once the log has been read, so a
// dump whose log cannot be read leaves no empty file behind. A log that is
// corrupted part way is the exception: the records before the damage are
// written, since they are often what explains the crash, and the run still
// fails.
//
// With -F the log goes to stdout (SUSE's kdump saves it that way).
func dumpDmesg(o *options, c *console, stdout io.Writer) error {
	vmcore, logfile := o.args[0], ""
	if !o.flatten {
		logfile = o.args[1]
	}
	if !o.flatten && !o.force {
		if _, err := os.Lstat(logfile); err == nil {
			return fmt.Errorf("can't open the log file(%s): file exists (use -f to overwrite)", logfile)
		}
	}
	v, err := source.Open(vmcore)
	if err != nil {
		return fmt.Errorf("open vmcore: %w", err)
	}
	defer v.Close()
	printVMCOREINFO(c, v)
	vi, err := loadVMCOREINFO(v, o.vmcoreinfo)
	if err != nil {
		return err
	}
	if vi == nil {
		return errors.New("dmesg: the vmcore has no VMCOREINFO note (give one with -i)")
	}
	tr, err := kernel.NewTranslator(v, vi)
	if err != nil {
		return fmt.Errorf("dmesg: %w", err)
	}
	recs, readErr := kernel.ReadLog(vi, tr, o.partialDmesg)
	if readErr != nil && len(recs) == 0 {
		return readErr
	}
	c.debug("dmesg: %d records\n", len(recs))
	if o.flatten {
		if err := kernel.FormatLog(stdout, recs, kernel.FormatOptions{}); err != nil {
			return fmt.Errorf("write the log to stdout: %w", err)
		}
		return readErr
	}
	if err := writeLog(logfile, o.force, recs); err != nil {
		return err
	}
	return readErr
}

// writeLog creates the log file, refusing to clobber one that appeared
// since the check unless force, and writes recs to it.
func writeLog(path string, force bool, recs []kernel.Record) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if os.IsExist(err) {
		return fmt.Errorf("can't open the log file(%s): file exists (use -f to overwrite)", path)
	}
	if err != nil {
		return fmt.Errorf("can't open the log file: %w", err)
	}
	// makedumpfile 1.7.2 prints no caller id.
	if err := kernel.FormatLog(f, recs, kernel.FormatOptions{}); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
