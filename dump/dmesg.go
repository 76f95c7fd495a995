package dump

import (
	"errors"
	"fmt"
	"io"
	"os"

	"pagepipe/kernel"
	"pagepipe/source"
)

// DmesgOptions are one --dump-dmesg.
type DmesgOptions struct {
	Input          string // the vmcore
	VMCOREINFOFile string // -i
	// Log is LOGFILE; unused with Stream, which gets the log instead (-F).
	Log     string
	Stream  io.Writer
	Force   bool // -f: overwrite Log
	Partial bool // --partial-dmesg: only what was logged after the last dmesg -c
	// CallerID adds the caller-id column makedumpfile 1.7.5 added
	// ("[    0.000000] [      T0] Linux version …"), for kernels that
	// export printk_info.caller_id; without it the log is 1.7.2's.
	CallerID bool
	Program  string
}

// Dmesg writes the crashed kernel's log in makedumpfile's --dump-dmesg
// format.
//
// As in makedumpfile, an existing log file is refused before any work unless
// Force is set, and the file is created only once the log has been read, so
// a dump whose log cannot be read leaves no empty file behind. A log that
// is corrupted part way is the exception: the records before the damage
// are written, since they are often what explains the crash, and Dmesg
// still fails.
//
// With Stream the log goes there (SUSE's kdump saves it from stdout).
func Dmesg(o DmesgOptions, ev Events) error {
	if ev == nil {
		ev = silent{}
	}
	if o.Program == "" {
		o.Program = "pagepipe"
	}
	flatten := o.Stream != nil
	vmcore, logfile := o.Input, o.Log
	if !flatten && !o.Force {
		if _, err := os.Lstat(logfile); err == nil {
			return fmt.Errorf("can't open the log file(%s): file exists (use -f to overwrite)", logfile)
		}
	}
	v, err := source.Open(vmcore)
	if err != nil {
		return fmt.Errorf("open vmcore: %w", err)
	}
	defer v.Close()
	noteLoads(ev, v)
	noteVMCOREINFO(ev, v)
	vi, err := loadVMCOREINFO(v, o.VMCOREINFOFile)
	if err != nil {
		return err
	}
	if vi == nil {
		return errors.New("dmesg: the vmcore has no VMCOREINFO note (give one with -i)")
	}
	if err := v.Arch().Check(vi); err != nil {
		return source.Unsupported(err)
	}
	if err := checkRelease(v, vi, o.VMCOREINFOFile); err != nil {
		return err
	}
	warnKernelVersion(ev, o.Program, vi.OSRelease())
	noteLayout(ev, v, vi)
	tr, err := v.Arch().NewTranslator(v, vi)
	if err != nil {
		return fmt.Errorf("dmesg: %w", err)
	}
	recs, readErr := kernel.ReadLog(vi, tr, o.Partial)
	if readErr != nil && len(recs) == 0 {
		return readErr
	}
	format := kernel.FormatOptions{CallerID: o.CallerID}
	if flatten {
		if err := kernel.FormatLog(o.Stream, recs, format); err != nil {
			return fmt.Errorf("write the log to stdout: %w", err)
		}
		return readErr
	}
	if err := writeLog(logfile, o.Force, recs, format); err != nil {
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

// noteLoads gives the vmcore's PT_LOADs as debug messages, in makedumpfile's
// table, and "Linux kdump" (the kind of dump makedumpfile found).
func noteLoads(ev Events, v *source.Vmcore) {
	ev.Notef(Debug, "               phys_start         phys_end       virt_start         virt_end\n")
	for i, l := range v.Loads {
		ev.Notef(Debug, "LOAD[%2d] %16x %16x %16x %16x\n", i, l.Paddr, l.Paddr+l.MemSize, l.Vaddr, l.Vaddr+l.MemSize)
	}
	ev.Notef(Debug, "Linux kdump\n")
}

// noteLayout gives, as debug messages, what makedumpfile prints after the
// VMCOREINFO lines about the kernel's layout: phys_base and where it came
// from, max_mapnr, and PAGE_OFFSET from the direct-map PT_LOAD.
func noteLayout(ev Events, v *source.Vmcore, vi *kernel.VMCOREINFO) {
	if pb, from, ok := v.Arch().PhysBase(vi, loadAddrs(v)); ok {
		ev.Notef(Debug, "phys_base    : %x (%s)\n\n", pb, from)
	}
	ev.Notef(Debug, "max_mapnr    : %x\n", v.MaxMapnr)
	if v.Arch() != kernel.X86_64 {
		return // the direct-map PT_LOAD rule below is x86_64's
	}
	for _, l := range v.Loads {
		if l.Vaddr < kernel.StartKernelMap && l.Vaddr >= l.Paddr {
			ev.Notef(Debug, "page_offset  : %x (pt_load)\n", l.Vaddr-l.Paddr)
			break
		}
	}
}
