package main

import (
	"fmt"
	"io"
	"strings"
)

// An optStatus says what pagepipe does with an option.
type optStatus int

const (
	// same: pagepipe does what makedumpfile does.
	same optStatus = iota
	// differs: pagepipe does it, deliberately otherwise in one respect
	// (the row's note says how; pagepipe(8) too).
	differs
	// noEffect: accepted for makedumpfile's command lines, no use to
	// pagepipe.
	noEffect
	// handOver: makedumpfile's, not built into pagepipe: a command line
	// that gives it is run by makedumpfile (fallback.go), or refused
	// when there is none.
	handOver
	// own: pagepipe's own option; makedumpfile does not know it.
	own
	// developer: pagepipe's own, left out of --help.
	developer
)

// An optSpec is one option of the command line: makedumpfile's (every
// option of its man page and of its getopt tables, 1.7.2 to upstream) or
// pagepipe's own.
type optSpec struct {
	short byte // 0: none
	// long is the long option; for an option makedumpfile has only as a
	// short one (shortOnly) it is pflag's name for it, which the command
	// line does not take (getopt_long would not).
	long      string
	shortOnly bool
	arg       string // the value's name in --help; "" for none
	group     string
	status    optStatus
	help      string
	// note says where pagepipe differs or what it does instead (differs,
	// noEffect); --help prints it after the help.
	note string
}

// The groups of --help, in order.
const (
	grpOutput   = "The dump file"
	grpFilter   = "What goes in"
	grpDmesg    = "The kernel log"
	grpRun      = "Resources"
	grpMessages = "Messages and checks"
	grpForeign  = "Makedumpfile's, handed over to it"
)

var groupOrder = []string{grpOutput, grpFilter, grpDmesg, grpRun, grpMessages, grpForeign}

// optionTable is every option pagepipe's command line knows. A row's
// status is the one place that says whether pagepipe does an option:
// when pagepipe comes to do one it hands over today (--eppic, say), its
// row's status becomes same (or differs, with a
// note) and newFlagSet binds it; TestOptionTableMatchesFlags checks that
// the two agree.
var optionTable = []optSpec{
	{short: 'c', long: "compress-c", shortOnly: true, group: grpOutput, help: "compress each page with zlib"},
	{short: 'l', long: "compress-l", shortOnly: true, group: grpOutput, help: "compress each page with LZO"},
	{short: 'p', long: "compress-p", shortOnly: true, group: grpOutput, help: "compress each page with snappy"},
	{short: 'z', long: "compress-z", shortOnly: true, group: grpOutput, help: "compress each page with zstd (of -c, -l, -p, -z and --lz4 the last wins)"},
	{long: "lz4", group: grpOutput, status: own, help: "compress with lz4, which only pagepipe reads: convert before sharing"},
	{short: 'E', long: "elf-dumpfile", shortOnly: true, group: grpOutput, help: "write an ELF dump"},
	{short: 'F', long: "flatten", shortOnly: true, group: grpOutput, help: "write a flattened stream to standard output"},
	{short: 'R', long: "rearrange", shortOnly: true, group: grpOutput, help: "rebuild DUMPFILE from a flattened stream on standard input"},
	{long: "split", group: grpOutput, status: differs, help: "split the dump over DUMPFILE1 DUMPFILE2 ...",
		note: "with --num-threads too, which makedumpfile refuses"},
	{long: "reassemble", group: grpOutput, help: "join split files into the last DUMPFILE"},
	{long: "splitblock-size", arg: "KIB", group: grpOutput, help: "--split cuts on multiples of this many KiB of memory"},
	{short: 'L', long: "size-limit", shortOnly: true, arg: "SIZE", group: grpOutput, help: "stop at SIZE bytes of output (K, M, G, T, P, E suffixes); the dump is marked incomplete"},
	{long: "priority", arg: "[=on|off|auto]", group: grpOutput, status: own, help: "write the pages an analysis needs first, so a dump cut short opens in crash (auto: with -L or into a pipe or device)"},
	{short: 'f', long: "force", shortOnly: true, group: grpOutput, help: "overwrite an existing DUMPFILE"},
	{long: "dry-run", group: grpOutput, help: "do everything but write a file"},
	{long: "mem-usage", group: grpOutput, status: differs, help: "print the running kernel's page usage (/proc/kcore): the pages of each class and what each dump level keeps",
		note: "needs no crashkernel reservation (one is left out when there is one), and adds the pages and bytes of every dump level"},

	{short: 'd', long: "dump-level", shortOnly: true, arg: "LEVEL[,LEVEL]", group: grpFilter, status: differs, help: "leave out 1 zero, 2 cache, 4 private cache, 8 user, 16 free pages (add them)",
		note: "a level that is not a number is refused (makedumpfile reads it as 0)"},
	{short: 'x', long: "vmlinux", shortOnly: true, arg: "VMLINUX", group: grpFilter, status: differs, help: "read the kernel's types and symbols from a vmlinux with debug information (--config's, and what VMCOREINFO lacks)",
		note: "where VMCOREINFO and the vmlinux disagree, VMCOREINFO's value stays"},
	{long: "config", arg: "FILE", group: grpFilter, status: differs, help: "erase the kernel data a filter config file names (makedumpfile.conf(5)) with 'X'",
		note: "a line that does not resolve refuses the dump; without -x, the kernel's own BTF and kallsyms"},
	{long: "module-debuginfo", arg: "DIR", group: grpFilter, status: own, help: "where --config's [module] sections find their module's debuginfo (NAME.ko)"},
	{short: 'g', long: "generate-vmcoreinfo", shortOnly: true, arg: "VMCOREINFO", group: grpFilter, help: "write the VMCOREINFO file of -x VMLINUX, for -i"},
	{short: 'e', long: "exclude-vmemmap", shortOnly: true, group: grpFilter, help: "also leave out the struct pages describing only pages left out (x86_64; needs --work-dir)"},
	{short: 'i', long: "vmcoreinfo", shortOnly: true, arg: "VMCOREINFO", group: grpFilter, help: "the kernel's layout from this file, for a vmcore without the note"},
	{long: "partial-pages", arg: "RELEASE", group: grpFilter, status: own, help: "take a page a PT_LOAD holds in part as makedumpfile 1.7.2 (default) or 1.7.6 does"},
	{long: "zero-unreadable", group: grpFilter, status: own, help: "store pages the vmcore cannot give as zeros, count them and warn, instead of failing"},

	{long: "dump-dmesg", group: grpDmesg, help: "write the kernel log to LOGFILE (with -F, to standard output) instead of a dump"},
	{long: "partial-dmesg", group: grpDmesg, help: "with --dump-dmesg: only what was logged after the last dmesg -c"},
	{long: "dmesg-format", arg: "RELEASE", group: grpDmesg, status: own, help: "the log as makedumpfile 1.7.5 (default: a caller-id column) or 1.7.2 writes it"},

	{long: "num-threads", arg: "N", group: grpRun, status: differs, help: "workers reading and compressing pages (default: every usable CPU)",
		note: "also with -E and --split, which makedumpfile refuses"},
	{long: "cpus", arg: "N|LIST", group: grpRun, status: own, help: "confine pagepipe to N CPUs or a list such as 0,2-3, as nr_cpus=N would"},
	{long: "map-size", arg: "KIB", group: grpRun, status: own, help: "mmap window over the vmcore (default 4096)"},
	{long: "non-mmap", group: grpRun, help: "read the vmcore with read() instead of mmap()"},
	{long: "cyclic-buffer", arg: "KIB", group: grpRun, help: "the bitmaps' memory: they are built in cycles of 8 pfns a byte"},
	{long: "work-dir", arg: "DIR", group: grpRun, status: differs, help: "makedumpfile's bitmap directory: the bitmaps are built as it builds them there",
		note: "no file is written there"},
	{short: 'b', long: "block-order", shortOnly: true, arg: "ORDER", group: grpRun, status: noEffect, help: "makedumpfile's write cache",
		note: "writes in pieces of 1 MiB"},

	{long: "message-level", arg: "N", group: grpMessages, help: "1 progress, 2 common, 4 errors, 8 debug, 16 report (add them; default 7)"},
	{short: 'D', long: "debug", shortOnly: true, group: grpMessages, help: "add the debug messages (8)"},
	{long: "show-stats", group: grpMessages, help: "add the report (16)"},
	{long: "check-params", group: grpMessages, help: "only check the command line, for the program that would run it"},
	{long: "vtop", arg: "ADDR", group: grpMessages, help: "print how the crashed kernel's page tables translate a virtual address"},
	{short: 'v', long: "version", shortOnly: true, group: grpMessages, help: "the version and codecs"},
	{short: 'h', long: "help", group: grpMessages, help: "this help"},

	{long: "eppic", arg: "MACRO", group: grpForeign, status: handOver, help: "erase kernel data with eppic macros"},
	{long: "extension", arg: "SO", group: grpForeign, status: handOver, help: "load a makedumpfile extension (upstream, after 1.7.x)"},
	{short: 'X', long: "exclude-xen-dom", shortOnly: true, group: grpForeign, status: handOver, help: "exclude Xen domain-U pages"},
	{long: "xen-syms", arg: "XEN-SYMS", group: grpForeign, status: handOver, help: "the Xen hypervisor's symbols"},
	{long: "xen-vmcoreinfo", arg: "VMCOREINFO", group: grpForeign, status: handOver, help: "the Xen hypervisor's VMCOREINFO"},
	{long: "xen_phys_start", arg: "ADDR", group: grpForeign, status: handOver, help: "where Xen's memory starts (x86_64)"},
	{long: "diskset", arg: "VMCORE", group: grpForeign, status: handOver, help: "one disk of a sadump diskset"},

	{long: "cpuprofile", arg: "FILE", status: developer, help: "write a Go CPU profile"},
	{long: "heapprofile", arg: "FILE", status: developer, help: "write a Go heap profile at the heap's peak"},
	{long: "stats-file", arg: "FILE", status: developer, help: "write the run's stage CPU and phase times as JSON (pagepipe-bench)"},
}

// optionByLong returns the row of a long name (pflag's, for a short-only
// option).
func optionByLong(long string) *optSpec {
	for i := range optionTable {
		if optionTable[i].long == long {
			return &optionTable[i]
		}
	}
	return nil
}

// name is the option as the command line gives it: "-x" or "--config".
func (s *optSpec) name() string {
	if s.shortOnly || s.long == "" {
		return "-" + string(s.short)
	}
	return "--" + s.long
}

// printUsage prints --help: the usage lines and every option of the table
// by group, pagepipe's own marked "+" and makedumpfile's that pagepipe
// hands over marked ">".
func printUsage(w io.Writer) {
	p := progName
	fmt.Fprintf(w, `%[1]s: write a crashed kernel's memory as a filtered, compressed dump.
pagepipe takes makedumpfile's command line.

Usage:
  %[1]s [OPTION]... VMCORE DUMPFILE
  %[1]s -F [OPTION]... VMCORE > STREAM
  %[1]s -R DUMPFILE < STREAM
  %[1]s --split [OPTION]... VMCORE DUMPFILE1 DUMPFILE2 [DUMPFILE3 ...]
  %[1]s --reassemble DUMPFILE1 DUMPFILE2 [DUMPFILE3 ...] DUMPFILE
  %[1]s --dump-dmesg [--partial-dmesg] [-i VMCOREINFO] VMCORE LOGFILE
  %[1]s inspect DUMPFILE
  %[1]s verify VMCORE DUMPFILE...
VMCORE is an ELF vmcore (/proc/vmcore) or a dump to filter again.

Options: + pagepipe's own; > makedumpfile's, not built into pagepipe: a
command line with one is handed over to makedumpfile (pagepipe(8), FALLBACK).
`, p)
	for _, g := range groupOrder {
		fmt.Fprintf(w, "\n %s:\n", g)
		for _, s := range optionTable {
			if s.group != g {
				continue
			}
			var mark string
			switch s.status {
			case same, differs, noEffect:
				mark = " "
			case own:
				mark = "+"
			case handOver:
				mark = ">"
			}
			flag := s.name()
			if s.short != 0 && !s.shortOnly {
				flag = "-" + string(s.short) + ", " + flag
			}
			if s.arg != "" {
				sep := " "
				if strings.HasPrefix(s.arg, "[") {
					sep = ""
				}
				flag += sep + s.arg
			}
			help := s.help
			if s.note != "" {
				help += "; pagepipe: " + s.note
			}
			const indent = 29
			lead := fmt.Sprintf(" %s %-25s ", mark, flag)
			if len(lead) > indent {
				fmt.Fprintln(w, strings.TrimRight(lead, " "))
				lead = strings.Repeat(" ", indent)
			}
			for _, l := range wrap(help, 79-indent) {
				fmt.Fprintf(w, "%s%s\n", lead, l)
				lead = strings.Repeat(" ", indent)
			}
		}
	}
}

// wrap breaks text into lines of at most width columns, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}
