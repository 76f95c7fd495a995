package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"pagepipe/kernel"
	"pagepipe/source"
)

// The --dump-dmesg formats, named after the makedumpfile release that
// writes them: 1.7.5 added a caller-id column ("[    0.000000] [      T0]
// Linux version …") for kernels that export printk_info.caller_id (every
// 5.10+ kernel), which Debian 13, sid, Fedora and RHEL ship; Debian 12's
// kdump-tools still runs 1.7.2. The default can be set in the environment
// (for instance exported from /etc/default/kdump-tools), since distribution
// scripts call --dump-dmesg with no options of their own.
const (
	dmesgCallerID  = "1.7.5"
	dmesgClassic   = "1.7.2"
	dmesgFormatEnv = "PAGEPIPE_DMESG_FORMAT"
)

func dmesgFormatDefault() string {
	if f := os.Getenv(dmesgFormatEnv); f != "" {
		return f
	}
	return dmesgCallerID
}

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
	printLoads(c, v)
	printVMCOREINFO(c, v)
	vi, err := loadVMCOREINFO(v, o.vmcoreinfo)
	if err != nil {
		return err
	}
	if vi == nil {
		return errors.New("dmesg: the vmcore has no VMCOREINFO note (give one with -i)")
	}
	warnKernelVersion(c, vi.OSRelease())
	printLayout(c, v, vi)
	tr, err := kernel.NewTranslator(v, vi)
	if err != nil {
		return fmt.Errorf("dmesg: %w", err)
	}
	recs, readErr := kernel.ReadLog(vi, tr, o.partialDmesg)
	if readErr != nil && len(recs) == 0 {
		return readErr
	}
	format := kernel.FormatOptions{CallerID: o.dmesgFormat == dmesgCallerID}
	if o.flatten {
		if err := kernel.FormatLog(stdout, recs, format); err != nil {
			return fmt.Errorf("write the log to stdout: %w", err)
		}
		return readErr
	}
	if err := writeLog(logfile, o.force, recs, format); err != nil {
		return err
	}
	return readErr
}

// writeLog creates the log file, refusing to clobber one that appeared
// since the check unless force, and writes recs to it.
func writeLog(path string, force bool, recs []kernel.Record, format kernel.FormatOptions) error {
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
	if err := kernel.FormatLog(f, recs, format); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// printLoads prints the vmcore's PT_LOADs at debug level, in makedumpfile's
// table, and "Linux kdump" (the kind of dump makedumpfile found).
func printLoads(c *console, v *source.Vmcore) {
	c.debug("               phys_start         phys_end       virt_start         virt_end\n")
	for i, l := range v.Loads {
		c.debug("LOAD[%2d] %16x %16x %16x %16x\n", i, l.Paddr, l.Paddr+l.MemSize, l.Vaddr, l.Vaddr+l.MemSize)
	}
	c.debug("Linux kdump\n")
}

// printLayout prints, at debug level, what makedumpfile prints after the
// VMCOREINFO lines about the kernel's layout: phys_base and where it came
// from, max_mapnr, and PAGE_OFFSET from the direct-map PT_LOAD.
func printLayout(c *console, v *source.Vmcore, vi *kernel.VMCOREINFO) {
	if pb, from, ok := physBase(v, vi); ok {
		c.debug("phys_base    : %x (%s)\n\n", pb, from)
	}
	c.debug("max_mapnr    : %x\n", v.MaxMapnr)
	for _, l := range v.Loads {
		if l.Vaddr < kernel.StartKernelMap && l.Vaddr >= l.Paddr {
			c.debug("page_offset  : %x (pt_load)\n", l.Vaddr-l.Paddr)
			break
		}
	}
}
