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

// options are makedumpfile's command line, plus pagepipe's own. Reading
// one is in stages, each refusing what it should and no more, so that a
// line makedumpfile would run goes to it whatever pagepipe would make of
// it: parseOptions is getopt's part (which options, their values as
// given); mdfValues refuses the values makedumpfile itself refuses while
// reading its command line; handOverReason names the options pagepipe
// hands over (fallback.go); values reads the rest as pagepipe takes it;
// check is makedumpfile's check of the whole line and pagepipe's own.
type options struct {
	given map[string]bool // the options on the line, by long name

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
	memUsage        bool
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
	priority       string // --priority: "auto", "on" or "off"
	rearrange      bool
	partialDmesg   bool
	dmesgFormat    string // --dmesg-format: "1.7.5" (caller id column) or "1.7.2"
	partialPages   string // --partial-pages: "1.7.2" or "1.7.6"
	args           []string

	// raw are the values as given, by long name, read by mdfValues and
	// values.
	raw map[string]*string
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

// errUsage marks command-line errors (makedumpfile: "Commandline parameter
// is invalid.").
var errUsage = errors.New("commandline parameter is invalid")

// getoptError is an error getopt_long itself reports, on stderr, as
// "PROG: MESSAGE" (an unknown option, an ambiguous prefix, a missing
// argument); makedumpfile then says "Commandline parameter is invalid.".
type getoptError struct{ msg string }

func (e *getoptError) Error() string { return e.msg }
func (e *getoptError) Unwrap() error { return errUsage }

// valueError is a value makedumpfile refuses while it reads its command
// line, with its one common message and nothing else: "Dump_level(N) is
// invalid.", "Message_level(N) is invalid.", "Limit size(S) is invalid.".
type valueError struct{ msg string }

func (e *valueError) Error() string { return e.msg }

// mdfError is a command line makedumpfile's check refuses with a message
// of its own ("--dry-run cannot be used with --dump-dmesg."), printed as
// a common message before "Commandline parameter is invalid.".
type mdfError struct{ msg string }

func (e *mdfError) Error() string { return e.msg }
func (e *mdfError) Unwrap() error { return errUsage }

// usagef is a command line refused where makedumpfile gives no reason:
// pagepipe gives one, in one line on stderr.
func usagef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// The options whose values are read after parsing (mdfValues, values),
// with their defaults: makedumpfile reads numbers with atoi, so getopt's
// stage must take any text.
var rawDefaults = map[string]string{
	"dump-level":      "0",
	"size-limit":      "",
	"message-level":   "7",
	"num-threads":     "0",
	"map-size":        "4096",
	"block-order":     "4",
	"cyclic-buffer":   "0",
	"splitblock-size": strconv.Itoa(1 << 20),
}

func newFlagSet(o *options) *pflag.FlagSet {
	fs := pflag.NewFlagSet("pagepipe", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.Usage = func() {}
	o.raw = map[string]*string{}
	str := func(long string) {
		s := optionByLong(long)
		o.raw[long] = fs.StringP(long, shortName(s), rawDefaults[long], s.help)
	}
	for _, c := range []struct{ long, codec string }{
		{"compress-c", "zlib"}, {"compress-l", "lzo"}, {"compress-p", "snappy"}, {"compress-z", "zstd"}, {"lz4", "lz4"},
	} {
		s := optionByLong(c.long)
		fs.VarPF(compressFlag{o, c.codec}, c.long, shortName(s), s.help).NoOptDefVal = "true"
	}
	boolean := func(p *bool, long string) {
		s := optionByLong(long)
		fs.BoolVarP(p, long, shortName(s), false, s.help)
	}
	text := func(p *string, long, def string) {
		s := optionByLong(long)
		fs.StringVarP(p, long, shortName(s), def, s.help)
	}
	boolean(&o.elf, "elf-dumpfile")
	boolean(&o.flatten, "flatten")
	boolean(&o.rearrange, "rearrange")
	boolean(&o.split, "split")
	boolean(&o.reassemble, "reassemble")
	str("splitblock-size")
	str("size-limit")
	text(&o.priority, "priority", "auto")
	fs.Lookup("priority").NoOptDefVal = "on"
	boolean(&o.force, "force")
	boolean(&o.dryRun, "dry-run")
	str("dump-level")
	boolean(&o.excludeVmemmap, "exclude-vmemmap")
	text(&o.vmcoreinfo, "vmcoreinfo", "")
	text(&o.vmlinux, "vmlinux", "")
	text(&o.filterConfig, "config", "")
	text(&o.moduleDebuginfo, "module-debuginfo", "")
	text(&o.genVMCOREINFO, "generate-vmcoreinfo", "")
	str("vtop")
	text(&o.partialPages, "partial-pages", partialPagesDefault())
	boolean(&o.zeroUnreadable, "zero-unreadable")
	boolean(&o.dumpDmesg, "dump-dmesg")
	boolean(&o.memUsage, "mem-usage")
	boolean(&o.partialDmesg, "partial-dmesg")
	text(&o.dmesgFormat, "dmesg-format", dmesgFormatDefault())
	str("num-threads")
	text(&o.cpus, "cpus", "")
	str("map-size")
	boolean(&o.nonMmap, "non-mmap")
	str("cyclic-buffer")
	text(&o.workDir, "work-dir", "")
	str("block-order")
	str("message-level")
	boolean(&o.debug, "debug")
	boolean(&o.showStats, "show-stats")
	boolean(&o.checkParams, "check-params")
	boolean(&o.version, "version")
	boolean(&o.help, "help")
	text(&o.cpuprofile, "cpuprofile", "")
	text(&o.heapprofile, "heapprofile", "")
	text(&o.statsFile, "stats-file", "")
	// makedumpfile's options pagepipe hands over: only whether they are
	// given matters (handOverOptions).
	for _, s := range optionTable {
		if s.status != handOver {
			continue
		}
		f := fs.VarPF(new(handedValue), s.long, shortName(&s), s.help)
		if s.arg == "" {
			f.NoOptDefVal = "true"
		}
	}
	return fs
}

// handedValue takes the value of an option pagepipe hands over.
type handedValue string

func (v *handedValue) String() string     { return string(*v) }
func (v *handedValue) Type() string       { return "string" }
func (v *handedValue) Set(s string) error { *v = handedValue(s); return nil }

func shortName(s *optSpec) string {
	if s.short == 0 {
		return ""
	}
	return string(s.short)
}

// parseOptions is getopt_long's part of reading makedumpfile's command
// line: options before or after the positionals, clustered short options
// (-cd 31), --opt=N and --opt N, and unique prefixes of long options
// (--message 7). It refuses only what getopt refuses (an unknown option,
// an ambiguous prefix, a missing value). On an error it still returns
// what it parsed (-F and --message-level say where and whether the
// error's common messages are printed).
func parseOptions(args []string) (*options, error) {
	o := &options{msgLevel: 7, given: map[string]bool{}}
	o.flatten = hasShortFlag(args, 'F') || hasLongFlag(args, "flatten")
	fs := newFlagSet(o)
	expanded, err := expandPrefixes(args)
	if err == nil {
		err = fs.Parse(expanded)
		if err != nil {
			err = pflagError(err)
		}
	}
	if err != nil {
		// A message level on the line applies to the error's messages
		// (getopt takes the options before the bad one).
		for i, a := range args {
			v, ok := strings.CutPrefix(a, "--message-level=")
			if a == "--message-level" && i+1 < len(args) {
				v, ok = args[i+1], true
			}
			if n := cAtoi(v); ok && n >= 0 && n <= 31 {
				o.msgLevel = n
			}
		}
		return o, err
	}
	fs.Visit(func(f *pflag.Flag) { o.given[f.Name] = true })
	o.args = fs.Args()
	o.mapSizeSet = o.given["map-size"]
	return o, nil
}

// mdfValues refuses the values makedumpfile refuses while it reads its
// command line, in its words: a dump or message level out of range, a
// size -L does not take. It takes numbers as makedumpfile does (atoi:
// "7x" is 7); values reads them as pagepipe does.
func (o *options) mdfValues() error {
	ml := cAtoi(*o.raw["message-level"])
	if ml < 0 || ml > 31 {
		return &valueError{fmt.Sprintf("Message_level(%d) is invalid.", ml)}
	}
	o.msgLevel = ml
	for _, f := range strings.Split(*o.raw["dump-level"], ",") {
		if f == "" {
			continue // strtok skips empty fields
		}
		if n := cAtoi(f); n < 0 || n > maxDumpLevel {
			return &valueError{fmt.Sprintf("Dump_level(%d) is invalid.", n)}
		}
	}
	if v := *o.raw["size-limit"]; o.given["size-limit"] {
		n, err := memparse(v)
		if err != nil {
			return &valueError{fmt.Sprintf("Limit size(%s) is invalid.", v)}
		}
		o.sizeLimit = n
	}
	return nil
}

// values reads the values as pagepipe takes them, stricter than
// makedumpfile where a value would otherwise be a silent 0: a number must
// be a number. Then the options pagepipe has no counterpart for.
func (o *options) values() error {
	if v := *o.raw["vtop"]; o.given["vtop"] {
		// strtoul(optarg, NULL, 0), as makedumpfile reads it.
		n, err := strconv.ParseUint(strings.TrimSpace(v), 0, 64)
		if err != nil {
			return usagef("--vtop %s: not an address", v)
		}
		o.vtop = n
	}
	levels := strings.FieldsFunc(*o.raw["dump-level"], func(r rune) bool { return r == ',' })
	if len(levels) == 0 {
		levels = []string{"0"}
	}
	var err error
	if o.levels, err = dump.ParseLevels(strings.Join(levels, ",")); err != nil {
		return usagef("-d %s: a dump level is a number from 0 to 31 (makedumpfile reads what is not a number as 0)", *o.raw["dump-level"])
	}
	for _, n := range []struct {
		long string
		p    *int
		min  int
	}{
		{"message-level", &o.msgLevel, 0},
		{"num-threads", &o.threads, 0},
		{"map-size", &o.mapSizeKiB, 1},
		{"block-order", &o.blockOrder, -1 << 31},
		{"cyclic-buffer", &o.cyclicBufferKB, 0},
		{"splitblock-size", &o.splitblockKB, -1 << 31}, // the engine says what it takes
	} {
		v := *o.raw[n.long]
		i, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return usagef("%s %s: not a number (makedumpfile reads it as %d)", optionByLong(n.long).name(), v, cAtoi(v))
		}
		if i < n.min {
			return usagef("%s %d: must be at least %d", optionByLong(n.long).name(), i, n.min)
		}
		*n.p = i
	}
	if o.mapSizeKiB%4 != 0 {
		return usagef("--map-size %d is not a positive multiple of the page size in KiB", o.mapSizeKiB)
	}
	if o.dmesgFormat != dmesgCallerID && o.dmesgFormat != dmesgClassic {
		return usagef("--dmesg-format %q: want %s or %s", o.dmesgFormat, dmesgCallerID, dmesgClassic)
	}
	if _, ok := priorities[o.priority]; !ok {
		return usagef("--priority %q: want on, off or auto", o.priority)
	}
	if o.partialPages != partialPagesClassic && o.partialPages != partialPagesKeep {
		return usagef("--partial-pages %q: want %s or %s", o.partialPages, partialPagesClassic, partialPagesKeep)
	}
	if o.debug {
		o.msgLevel |= mlDebug
	}
	if o.showStats {
		o.msgLevel |= mlReport
	}
	if o.checkParams {
		o.msgLevel = 7 // as makedumpfile: --check-params prints no debug
	}
	return nil
}

// check is makedumpfile's check of the whole command line (its
// check_param_for_* functions, 1.7.2 to upstream: the same rules, each
// refusal with makedumpfile's message where it gives one and with a
// reason of pagepipe's where it gives none), then pagepipe's own. Where
// pagepipe takes a line makedumpfile refuses (--num-threads with -E or
// --split), differences says so.
func (o *options) check() error {
	switch {
	case o.given["generate-vmcoreinfo"]:
		if !o.given["vmlinux"] || len(o.args) != 0 {
			return usagef("-g FILE needs -x VMLINUX and no other file")
		}
		return nil
	case o.rearrange:
		return o.checkRearrange()
	case o.reassemble:
		return o.checkReassemble()
	}
	return o.checkCreate()
}

// refusedWith are the options of mode, of those given, that makedumpfile
// refuses with it.
func (o *options) refusedWith(mode string, names ...string) error {
	for _, n := range names {
		if o.given[n] && (n != "dump-level" || o.levels[0] != 0) {
			return usagef("%s cannot be used with %s", optionByLong(n).name(), mode)
		}
	}
	return nil
}

// compressLongs are the options that choose a codec.
var compressLongs = []string{"compress-c", "compress-l", "compress-p", "compress-z", "lz4"}

func (o *options) checkRearrange() error {
	if err := o.refusedWith("-R", append(compressLongs, "dump-level", "elf-dumpfile", "vmcoreinfo", "vmlinux", "xen-syms",
		"flatten", "generate-vmcoreinfo", "exclude-xen-dom")...); err != nil {
		return err
	}
	if len(o.args) != 1 {
		return usagef("-R needs DUMPFILE (it reads the stream from stdin), got %d arguments", len(o.args))
	}
	return nil
}

func (o *options) checkReassemble() error {
	if err := o.refusedWith("--reassemble", append(compressLongs, "dump-level", "elf-dumpfile", "vmcoreinfo", "vmlinux",
		"xen-syms", "flatten", "generate-vmcoreinfo", "exclude-xen-dom", "split")...); err != nil {
		return err
	}
	if o.dryRun {
		return &mdfError{"--dry-run cannot be used with --reassemble."}
	}
	if len(o.args) == 0 {
		return usagef("--reassemble needs the split DUMPFILEs and the DUMPFILE to write")
	}
	return nil
}

// checkCreate checks a line that reads VMCORE: a dump, or its log with
// --dump-dmesg.
func (o *options) checkCreate() error {
	g := o.given
	switch {
	case o.compress != "" && o.elf:
		return usagef("-E writes pages uncompressed: it cannot be used with -c, -l, -p, -z or --lz4")
	case g["vmcoreinfo"] && g["vmlinux"]:
		return usagef("-i cannot be used with -x")
	case g["vmcoreinfo"] && g["xen-syms"]:
		return usagef("-i cannot be used with --xen-syms")
	case o.dryRun && o.dumpDmesg:
		return &mdfError{"--dry-run cannot be used with --dump-dmesg."}
	case o.flatten && o.split:
		return usagef("--split cannot be used with -F")
	case o.partialDmesg && !o.dumpDmesg:
		return usagef("--partial-dmesg is for --dump-dmesg")
	case o.excludeVmemmap && o.workDir == "":
		return &mdfError{"-e requires --work-dir"}
	}
	n := len(o.args)
	switch {
	case n == 2 && !o.flatten && !o.split && !g["diskset"]:
	case o.split && (n > 2 || g["diskset"] && n == 2):
		if o.elf {
			return &mdfError{"Options for splitting dumpfile cannot be used with Elf format."}
		}
	case n == 1 && !o.split && g["diskset"]:
	case n == 1 && o.flatten:
	case n == 1 && o.memUsage:
		if o.dryRun || o.dumpDmesg || o.split || o.elf || o.flatten {
			return usagef("--mem-usage prints a table: it cannot be used with --dry-run, --dump-dmesg, --split, -E or -F")
		}
		return nil
	case o.memUsage:
		return usagef("--mem-usage needs /proc/kcore only, got %d arguments", n)
	case o.flatten && o.dumpDmesg:
		return usagef("need VMCORE (-F --dump-dmesg writes the log to stdout), got %d arguments", n)
	case o.flatten:
		return usagef("need VMCORE (-F writes to stdout), got %d arguments", n)
	case o.split:
		return usagef("need VMCORE and at least two DUMPFILEs, got %d arguments", n)
	default:
		return usagef("need VMCORE and DUMPFILE, got %d arguments", n)
	}
	// pagepipe's own: where makedumpfile would take the line and fail
	// in the run, or the line asks what makedumpfile cannot.
	if o.dumpDmesg && o.split {
		return usagef("--dump-dmesg writes one LOGFILE: it cannot be used with --split")
	}
	if err := o.dumpOptions(nil).Check(); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return nil
}

// differences are the lines of a command line pagepipe runs and
// makedumpfile refuses, in words for --check-params.
func (o *options) differences() []string {
	var out []string
	if o.threads > 0 && o.given["num-threads"] && !o.dumpDmesg && !o.rearrange && !o.reassemble {
		if o.elf {
			out = append(out, fmt.Sprintf("pagepipe writes the ELF dump with %d workers (makedumpfile refuses --num-threads with -E)", o.threads))
		}
		if o.split {
			out = append(out, fmt.Sprintf("pagepipe writes the split files with %d workers (makedumpfile refuses --num-threads with --split)", o.threads))
		}
	}
	if o.given["config"] && !o.given["vmlinux"] && !o.rearrange && !o.reassemble {
		out = append(out, "pagepipe reads --config's types from the kernel's own BTF (makedumpfile refuses --config without -x)")
	}
	return out
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
	threads := o.threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	d := dump.Options{
		VMCOREINFOFile:  o.vmcoreinfo,
		Vmlinux:         o.vmlinux,
		FilterConfig:    o.filterConfig,
		ModuleDebuginfo: o.moduleDebuginfo,
		Vtop:            o.vtop,
		Levels:          o.levels,
		Codec:           o.compress,
		Workers:         threads,
		MapSize:         o.mapSizeKiB << 10,
		ZeroUnreadable:  o.zeroUnreadable,
		Priority:        priorities[o.priority],
		WorkDir:         o.workDir != "",
		CyclicBufferKiB: o.cyclicBufferKB,
		ExcludeVmemmap:  o.excludeVmemmap,
		KeepPartialData: o.partialPages == partialPagesKeep,
		Program:         progName,
		Process:         process{},
		Out: dump.Output{
			Force:         o.force,
			DryRun:        o.dryRun,
			SizeLimit:     o.sizeLimit,
			SplitBlockKiB: o.splitblockKB,
		},
	}
	if d.Out.SplitBlockKiB == 0 {
		d.Out.SplitBlockKiB = 1 << 20 // makedumpfile's default, 1 GiB
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

// maxDumpLevel is the highest dump level, every class left out.
const maxDumpLevel = 31

// memparse reads a size as makedumpfile's -L does (the kernel's
// memparse): a number in C's notation (0x… hex, 0… octal) and an
// optional K, M, G, T, P or E (either case), powers of 1024. Zero, a
// negative number and one past 2^63 are refused.
func memparse(s string) (int64, error) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	s = strings.TrimPrefix(s, "+")
	hex := len(s) > 2 && s[0] == '0' && s[1]|0x20 == 'x'
	num, shift := s, 0
	if n := len(s); n > 0 {
		// In hex, E is a digit (strtoull takes it first).
		if i := strings.IndexByte("KMGTPE", s[n-1]&^0x20); i >= 0 && !(hex && i == 5) {
			num, shift = s[:n-1], 10*(i+1)
		}
	}
	base, digits := 10, num
	switch {
	case hex:
		base, digits = 16, num[2:]
	case len(num) > 1 && num[0] == '0':
		base, digits = 8, num[1:]
	}
	n, err := strconv.ParseUint(digits, base, 64)
	if err != nil || strings.ContainsAny(digits, "+-_") || n == 0 || n > (1<<63-1)>>shift {
		return 0, errors.New("not a size")
	}
	return int64(n << shift), nil
}

// cAtoi is C's atoi: leading blanks, a sign, digits, and whatever follows
// ignored; 0 when there are no digits.
func cAtoi(s string) int {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	n := 0
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9' && n < 1<<31; i++ {
		n = n*10 + int(s[i]-'0')
	}
	if neg {
		return -n
	}
	return n
}

// expandPrefixes rewrites --abbrev[=v] to the one long option it is a
// unique prefix of, as getopt_long does: makedumpfile's long options and
// pagepipe's own; an ambiguous prefix is an error. pflag's names of
// options makedumpfile has only as short ones (--force for -f) are not
// long options.
func expandPrefixes(args []string) ([]string, error) {
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
		if s := optionByLong(name); s == nil || s.shortOnly {
			var match []string
			for _, s := range optionTable {
				if !s.shortOnly && s.status != developer && strings.HasPrefix(s.long, name) {
					match = append(match, s.long)
				}
			}
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
