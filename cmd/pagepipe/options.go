package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"pagepipe/dump"
)

// options are makedumpfile's command line, plus pagepipe's own.
type options struct {
	compress        string // the chosen codec's name; "" = none
	levels          []dump.Level
	force           bool
	threads         int
	mapSizeKiB      int
	nonMmap         bool
	msgLevel        int
	version         bool
	help            bool
	checkParams     bool
	vmcoreinfo      string
	vmlinux         string // -x
	filterConfig    string // --config
	genVMCOREINFO   string // -g
	moduleDebuginfo string // --module-debuginfo
	vtop            uint64 // --vtop
	cpuprofile      string
	heapprofile     string
	statsFile       string // pagepipe bench's: per-stage CPU and phase times
	dumpDmesg       bool
	flatten         bool
	elf             bool
	split           bool
	reassemble      bool
	splitblockKB    int

	blockOrder     int
	cyclicBufferKB int
	workDir        string
	excludeVmemmap bool // -e
	debug          bool
	showStats      bool
	dryRun         bool
	cpus           string
	sizeLimit      int64 // -L, bytes
	mapSizeSet     bool  // --map-size given: read through mmap windows
	zeroUnreadable bool
	priority       string   // --priority: "auto", "on" or "off"
	unsupported    []string // options pagepipe refuses
	rearrange      bool
	partialDmesg   bool
	dmesgFormat    string // --dmesg-format: "1.7.5" (caller id column) or "1.7.2"
	partialPages   string // --partial-pages: "1.7.2" or "1.7.6"
	args           []string
}

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

// The rules for a page a PT_LOAD holds in part, named after the
// makedumpfile release that brought them (source.PartialPages): 1.7.6
// dumps kexec-tools' partial page at the end of low RAM (0x9fc00) when it
// builds its bitmaps in one cycle, 1.7.2 leaves it out. Debian 12 runs
// 1.7.2; Debian 13, sid and Fedora run 1.7.6 or later. As with the dmesg
// format, the environment can choose for distribution scripts.
const (
	partialPagesClassic = "1.7.2"
	partialPagesKeep    = "1.7.6"
	partialPagesEnv     = "PAGEPIPE_PARTIAL_PAGES"
)

func partialPagesDefault() string {
	if f := os.Getenv(partialPagesEnv); f != "" {
		return f
	}
	return partialPagesClassic
}

// compressFlag is -c/-l/-p/-z/--lz4: each sets the codec when it is seen,
// so the one given last wins, as in makedumpfile.
type compressFlag struct {
	o     *options
	codec string
}

func (c compressFlag) String() string   { return "false" }
func (c compressFlag) Type() string     { return "bool" }
func (c compressFlag) IsBoolFlag() bool { return true }
func (c compressFlag) Set(v string) error {
	if v == "true" {
		c.o.compress = c.codec
	}
	return nil
}

// unsupportedFlag records a makedumpfile option that pagepipe does not
// implement, so that it is refused with a clear message.
type unsupportedFlag struct {
	o                  *options
	long, short, usage string
}

func (u unsupportedFlag) String() string { return "" }
func (u unsupportedFlag) Type() string   { return "string" }
func (u unsupportedFlag) Set(string) error {
	name := "--" + u.long
	if u.short != "" {
		name = "-" + u.short
	}
	u.o.unsupported = append(u.o.unsupported, fmt.Sprintf("%s (%s)", name, u.usage))
	return nil
}

// errUsage marks command-line errors (makedumpfile: "Commandline parameter
// is invalid.").
var errUsage = errors.New("commandline parameter is invalid")

// getoptError is an error getopt_long itself reports, on stderr, as
// "PROG: MESSAGE" (an unknown option, an ambiguous prefix, a missing
// argument); makedumpfile then says "Commandline parameter is invalid.".
type getoptError struct{ msg string }

func (e *getoptError) Error() string { return e.msg }
func (e *getoptError) Unwrap() error { return errUsage }

// levelError is a -d or --message-level value out of range; makedumpfile
// answers it with one common message, "Dump_level(N) is invalid." or
// "Message_level(N) is invalid.", and nothing else.
type levelError struct {
	what  string // "Dump_level" or "Message_level"
	value string
}

func (e *levelError) Error() string { return fmt.Sprintf("%s(%s) is invalid.", e.what, e.value) }

func newFlagSet(o *options) *pflag.FlagSet {
	fs := pflag.NewFlagSet("pagepipe", pflag.ContinueOnError)
	fs.SortFlags = false
	for _, c := range []struct {
		short, long string
		codec       string
		usage       string
	}{
		{"c", "", "zlib", "compress pages with zlib"},
		{"l", "", "lzo", "compress pages with lzo"},
		{"p", "", "snappy", "compress pages with snappy"},
		{"z", "", "zstd", "compress pages with zstd"},
		{"", "lz4", "lz4", "compress pages with lz4 (pagepipe extension)"},
	} {
		name := c.long
		if name == "" {
			name = "compress-" + c.short // pflag needs a long name; it stays hidden
		}
		f := fs.VarPF(compressFlag{o, c.codec}, name, c.short, c.usage)
		f.NoOptDefVal = "true"
		f.Hidden = c.long == ""
	}
	fs.StringP("dump-level", "d", "0", "dump level 0-31, or a comma-separated list")
	fs.BoolVarP(&o.force, "force", "f", false, "overwrite an existing dump file")
	fs.IntVar(&o.threads, "num-threads", 0, "compression workers (default: every usable CPU)")
	fs.IntVar(&o.mapSizeKiB, "map-size", 4096, "mmap window in KiB (a multiple of the page size)")
	fs.BoolVar(&o.nonMmap, "non-mmap", false, "read the vmcore with read() instead of mmap()")
	fs.IntVar(&o.msgLevel, "message-level", 7, "message level bitmask 0-31")
	fs.BoolVarP(&o.version, "version", "v", false, "print the version")
	fs.BoolVarP(&o.help, "help", "h", false, "print usage")
	fs.BoolVar(&o.checkParams, "check-params", false, "only check the parameters")
	fs.BoolVarP(&o.flatten, "flatten", "F", false, "write the dump as a flattened stream to stdout")
	fs.BoolVarP(&o.rearrange, "rearrange", "R", false, "rebuild DUMPFILE from a flattened stream on stdin")
	fs.BoolVarP(&o.elf, "elf-dumpfile", "E", false, "write an ELF dump instead of kdump-compressed")
	fs.BoolVar(&o.split, "split", false, "split the dump over DUMPFILE1 ... DUMPFILEn")
	fs.BoolVar(&o.reassemble, "reassemble", false, "join split files DUMPFILE1 ... DUMPFILEn into DUMPFILE")
	fs.IntVar(&o.splitblockKB, "splitblock-size", 1<<20, "split boundaries fall on multiples of this many KiB")
	fs.BoolVar(&o.dumpDmesg, "dump-dmesg", false, "write the kernel log of VMCORE to LOGFILE instead of a dump")
	fs.BoolVar(&o.partialDmesg, "partial-dmesg", false, "with --dump-dmesg: only the messages after the last dmesg -c")
	fs.StringVar(&o.partialPages, "partial-pages", partialPagesDefault(), "a page that a PT_LOAD of VMCORE holds in part as makedumpfile 1.7.2 takes it (1.7.2) or as 1.7.6 and later do (1.7.6: kept, and dumped when the bitmaps are built in one cycle); default $"+partialPagesEnv+" or 1.7.2")
	fs.StringVar(&o.dmesgFormat, "dmesg-format", dmesgFormatDefault(), "with --dump-dmesg: the log as makedumpfile 1.7.5 and later write it (1.7.5: a caller-id column) or as 1.7.2 does (1.7.2); default $"+dmesgFormatEnv+" or 1.7.5")
	fs.StringP("size-limit", "L", "", "stop at this output size (K, M, G suffixes); the dump is marked incomplete")
	fs.StringVar(&o.priority, "priority", "auto", "write the pages an analysis needs (kernel image, page tables, per-cpu areas, log, current tasks) first, so that a dump cut short still opens in crash: on, off, or auto (on with -L or an output that is a device or a pipe)")
	fs.Lookup("priority").NoOptDefVal = "on"
	fs.BoolVar(&o.zeroUnreadable, "zero-unreadable", false, "store vmcore pages that cannot be read as zeros, count them and warn, instead of failing")
	fs.StringVar(&o.cpus, "cpus", "", "confine pagepipe to N CPUs, or to a list such as 0,2-3 (mimics nr_cpus=N)")
	// Accepted for makedumpfile's command lines; pagepipe has no use for
	// them (said so at debug level).
	fs.IntVarP(&o.blockOrder, "block-order", "b", 4, "write-cache order (accepted; pagepipe writes in 1 MiB pieces)")
	fs.IntVar(&o.cyclicBufferKB, "cyclic-buffer", 0, "the 2nd bitmap's budget in KiB: it is made, written and consumed in cycles of 8 pfns per byte (default: a 32nd of the available memory, 4 to 16 MiB)")
	fs.StringVar(&o.workDir, "work-dir", "", "bitmap work directory (accepted; pagepipe writes no file there: its 2nd bitmap is made in cycles)")
	fs.BoolVarP(&o.excludeVmemmap, "exclude-vmemmap", "e", false, "exclude the vmemmap pages that describe only excluded pages (x86_64; makedumpfile needs --work-dir for it, pagepipe does not)")
	fs.BoolVarP(&o.debug, "debug", "D", false, "print debug messages (message level bit 8)")
	fs.BoolVar(&o.showStats, "show-stats", false, "print the report (message level bit 16)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "do everything but write the dump")
	// Refused with a clear message: features pagepipe does not have.
	for _, u := range []struct{ long, short, usage string }{
		{"exclude-xen-dom", "X", "exclude Xen domU pages"},
		{"mem-usage", "", "print the running kernel's page usage"},
		{"eppic", "", "erase filtering with eppic"},
		{"diskset", "", "read a sadump diskset"},
		{"xen-syms", "", "Xen hypervisor symbols"},
		{"xen-vmcoreinfo", "", "Xen VMCOREINFO"},
		{"xen_phys_start", "", "Xen physical start"},
	} {
		f := fs.VarPF(unsupportedFlag{o, u.long, u.short, u.usage}, u.long, u.short, u.usage)
		f.Hidden = true
		if u.long == "exclude-xen-dom" || u.long == "mem-usage" {
			f.NoOptDefVal = "true"
		}
	}
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a Go CPU profile (for developers)")
	_ = fs.MarkHidden("cpuprofile")
	fs.StringVar(&o.heapprofile, "heapprofile", "", "write a Go heap profile at the heap's peak (for developers)")
	_ = fs.MarkHidden("heapprofile")
	fs.StringVar(&o.statsFile, "stats-file", "", "write the run's stage CPU and phase times as JSON (for pagepipe bench)")
	_ = fs.MarkHidden("stats-file")
	fs.StringVarP(&o.vmcoreinfo, "vmcoreinfo", "i", "", "VMCOREINFO file (from makedumpfile -g) for a vmcore without the note")
	fs.StringVarP(&o.vmlinux, "vmlinux", "x", "", "the kernel's debug vmlinux: the types and symbols of --config, and -g's source")
	fs.StringVar(&o.filterConfig, "config", "", "erase the data a filter config names (makedumpfile.conf(5)) with 'X'; needs -x")
	fs.StringVarP(&o.genVMCOREINFO, "generate-vmcoreinfo", "g", "", "write the VMCOREINFO of -x VMLINUX to this file, for -i")
	fs.String("vtop", "", "print the translation of this kernel virtual address through the crashed kernel's page tables")
	fs.StringVar(&o.moduleDebuginfo, "module-debuginfo", "", "the directory holding the module debuginfo (NAME.ko) of --config's [module] sections (pagepipe extension; default /usr/lib/debug/lib/modules/RELEASE)")
	return fs
}

// parseOptions parses makedumpfile's command line: options before or after
// the positionals, clustered short options (-cd 31), --opt=N and --opt N,
// and unique prefixes of long options (--message 7), as getopt_long takes.
// On an error it still returns what it parsed (-F and --message-level say
// where and whether the error's common messages are printed).
func parseOptions(args []string) (*options, error) {
	o := &options{msgLevel: 7}
	o.flatten = hasShortFlag(args, 'F') || hasLongFlag(args, "flatten")
	fs := newFlagSet(o)
	fs.Usage = func() {}
	expanded, err := expandPrefixes(fs, args)
	if err != nil {
		// A message level on the line applies to the error's messages
		// (getopt takes the options before the bad one).
		for i, a := range args {
			v, ok := strings.CutPrefix(a, "--message-level=")
			if a == "--message-level" && i+1 < len(args) {
				v, ok = args[i+1], true
			}
			if n, err := strconv.Atoi(v); ok && err == nil && n >= 0 && n <= 31 {
				o.msgLevel = n
			}
		}
		return o, err
	}
	args = expanded
	if err := fs.Parse(args); err != nil {
		return o, pflagError(err)
	}
	o.args = fs.Args()
	if o.msgLevel < 0 || o.msgLevel > 31 {
		return o, &levelError{"Message_level", strconv.Itoa(o.msgLevel)}
	}
	d := fs.Lookup("dump-level").Value.String()
	if o.levels, err = dump.ParseLevels(d); err != nil {
		return o, &levelError{"Dump_level", d}
	}
	o.mapSizeSet = fs.Changed("map-size")
	if v := fs.Lookup("size-limit").Value.String(); v != "" {
		if o.sizeLimit, err = memparse(v); err != nil {
			return o, fmt.Errorf("%w: -L %s: %v", errUsage, v, err)
		}
	}
	if v := fs.Lookup("vtop").Value.String(); v != "" {
		// strtoul(optarg, NULL, 0), as makedumpfile reads it.
		if o.vtop, err = strconv.ParseUint(v, 0, 64); err != nil {
			return o, fmt.Errorf("%w: --vtop %s: not an address", errUsage, v)
		}
	}
	if len(o.unsupported) > 0 {
		return o, fmt.Errorf("%w: pagepipe does not support %s", errUsage, strings.Join(o.unsupported, ", "))
	}
	if o.mapSizeKiB <= 0 || o.mapSizeKiB%4 != 0 {
		return o, fmt.Errorf("%w: --map-size %d is not a positive multiple of the page size in KiB", errUsage, o.mapSizeKiB)
	}
	if o.threads < 0 {
		return o, fmt.Errorf("%w: --num-threads %d", errUsage, o.threads)
	}
	if o.dmesgFormat != dmesgCallerID && o.dmesgFormat != dmesgClassic {
		return o, fmt.Errorf("%w: --dmesg-format %q: want %s or %s", errUsage, o.dmesgFormat, dmesgCallerID, dmesgClassic)
	}
	if _, ok := priorities[o.priority]; !ok {
		return o, fmt.Errorf("%w: --priority %q: want on, off or auto", errUsage, o.priority)
	}
	if o.partialPages != partialPagesClassic && o.partialPages != partialPagesKeep {
		return o, fmt.Errorf("%w: --partial-pages %q: want %s or %s", errUsage, o.partialPages, partialPagesClassic, partialPagesKeep)
	}
	if o.debug {
		o.msgLevel |= 8
	}
	if o.showStats {
		o.msgLevel |= 16
	}
	if o.threads == 0 {
		o.threads = runtime.GOMAXPROCS(0)
	}
	if o.elf && o.split {
		return o, fmt.Errorf("%w: --split cannot be used with -E", errUsage)
	}
	if err := o.dumpOptions(nil).Check(); err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	return o, nil
}

// priorities are --priority's values.
var priorities = map[string]dump.Priority{"auto": dump.PriorityAuto, "on": dump.PriorityOn, "off": dump.PriorityOff}

// outName is the dump's output as the messages name it.
func (o *options) outName() string {
	if o.flatten {
		return "STDOUT"
	}
	return o.args[1]
}

// dumpOptions is the dump the command line asks for; stdout gets a
// flattened stream (-F).
func (o *options) dumpOptions(stdout io.Writer) dump.Options {
	d := dump.Options{
		VMCOREINFOFile:  o.vmcoreinfo,
		Vmlinux:         o.vmlinux,
		FilterConfig:    o.filterConfig,
		ModuleDebuginfo: o.moduleDebuginfo,
		Vtop:            o.vtop,
		Levels:          o.levels,
		Codec:           o.compress,
		Workers:         o.threads,
		MapSize:         o.mapSizeKiB << 10,
		ZeroUnreadable:  o.zeroUnreadable,
		Priority:        priorities[o.priority],
		WorkDir:         o.workDir != "",
		CyclicBufferKiB: o.cyclicBufferKB,
		ExcludeVmemmap:  o.excludeVmemmap,
		KeepPartialData: o.partialPages == partialPagesKeep,
		Program:         progName,
		Out: dump.Output{
			Force:         o.force,
			DryRun:        o.dryRun,
			SizeLimit:     o.sizeLimit,
			SplitBlockKiB: o.splitblockKB,
		},
	}
	switch {
	case o.nonMmap:
		d.Mmap = dump.MmapOff
	case o.mapSizeSet:
		d.Mmap = dump.MmapOn
	}
	switch {
	case o.elf:
		d.Out.Shape = dump.ELF
	case o.split:
		d.Out.Shape = dump.Split
	}
	if len(o.args) > 0 {
		d.Input = o.args[0]
	}
	switch {
	case o.flatten:
		d.Out.Stream = stdout
	case len(o.args) > 1:
		d.Out.Paths = o.args[1:]
	}
	return d
}

// memparse reads a size with an optional K, M or G suffix (powers of 1024),
// as makedumpfile's -L takes it.
func memparse(s string) (int64, error) {
	mult := int64(1)
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, errors.New("not a size")
	}
	return n * mult, nil
}

// expandPrefixes rewrites --abbrev[=v] to the one long option it is a
// unique prefix of; an ambiguous prefix is an error, as in getopt_long.
func expandPrefixes(fs *pflag.FlagSet, args []string) ([]string, error) {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...), nil
		}
		if !strings.HasPrefix(a, "--") || len(a) == 2 {
			out = append(out, a)
			continue
		}
		name, val, hasVal := strings.Cut(a[2:], "=")
		if fs.Lookup(name) == nil {
			var match []string
			fs.VisitAll(func(f *pflag.Flag) {
				if !f.Hidden && strings.HasPrefix(f.Name, name) {
					match = append(match, f.Name)
				}
			})
			switch len(match) {
			case 1:
				name = match[0]
			case 0:
				return nil, &getoptError{fmt.Sprintf("unrecognized option '--%s'", name)}
			default:
				return nil, &getoptError{fmt.Sprintf("option '--%s' is ambiguous; possibilities: '--%s'", name, strings.Join(match, "' '--"))}
			}
		}
		if hasVal {
			out = append(out, "--"+name+"="+val)
		} else {
			out = append(out, "--"+name)
		}
	}
	return out, nil
}

// pflagError turns pflag's parse errors into getopt_long's words where they
// have a counterpart: makedumpfile's stderr shows getopt's line.
func pflagError(err error) error {
	var unknown *pflag.NotExistError
	var noValue *pflag.ValueRequiredError
	switch {
	case errors.As(err, &unknown) && unknown.GetSpecifiedShortnames() != "":
		return &getoptError{fmt.Sprintf("invalid option -- '%c'", unknown.GetSpecifiedName()[0])}
	case errors.As(err, &unknown):
		return &getoptError{fmt.Sprintf("unrecognized option '--%s'", unknown.GetSpecifiedName())}
	case errors.As(err, &noValue) && noValue.GetSpecifiedShortnames() != "":
		return &getoptError{fmt.Sprintf("option requires an argument -- '%c'", noValue.GetSpecifiedName()[0])}
	case errors.As(err, &noValue):
		return &getoptError{fmt.Sprintf("option '--%s' requires an argument", noValue.GetSpecifiedName())}
	}
	return fmt.Errorf("%w: %v", errUsage, err)
}

// hasShortFlag tells whether a cluster of short options in args (before
// "--") holds c, as -F or -lF.
func hasShortFlag(args []string, c byte) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a[1:], c) >= 0 {
			// Stop at a short option that takes the rest as its value.
			for i := 1; i < len(a); i++ {
				if a[i] == c {
					return true
				}
				if strings.IndexByte("bdgiLx", a[i]) >= 0 {
					break
				}
			}
		}
	}
	return false
}

func hasLongFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--"+name {
			return true
		}
	}
	return false
}
