package main

// The fallback: a command line pagepipe cannot do (an option it does not
// have, a vmcore of an architecture it does not dump) is run by the real
// makedumpfile, so that no kdump setup loses its dump by switching.
// pagepipe says so in one line on stderr and execs makedumpfile with the
// same arguments: exit status, stdout and stderr are then makedumpfile's.
// Where makedumpfile is (find): the divert's makedumpfile.distrib beside
// the name pagepipe was run as, else $PAGEPIPE_FALLBACK, else the
// fallback= lines of /etc/pagepipe/pagepipe.conf, which the packages
// install; none, and the line is refused as before. docs/kdump.md and
// pagepipe(8) (FALLBACK) say what runs where.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"pagepipe/kdumpfmt"
	"pagepipe/kernel"
	"pagepipe/source"
)

const (
	// fallbackEnv names the makedumpfile to hand over to; "none" turns
	// the fallback off.
	fallbackEnv = "PAGEPIPE_FALLBACK"
	// fallbackConfig holds fallback=PATH lines, the first usable wins.
	fallbackConfig = "/etc/pagepipe/pagepipe.conf"
	// divertedName is where dpkg-divert puts Debian's makedumpfile when
	// pagepipe-as-makedumpfile takes its place.
	divertedName = "makedumpfile.distrib"
	// handedOverEnv is set in the environment of the program pagepipe
	// hands over to: a pagepipe that finds it set was run by that
	// program (a wrapper that calls makedumpfile, which is pagepipe) and
	// does not hand over again.
	handedOverEnv = "PAGEPIPE_HANDED_OVER"
)

// A fallback finds the makedumpfile to hand over to and runs it. Its
// fields are the process's surroundings, so that tests can stand in.
type fallback struct {
	argv0    string                       // the name pagepipe was run as
	getenv   func(string) string          // the environment
	environ  func() []string              // the whole environment, for exec
	lookPath func(string) (string, error) // PATH lookup of a bare argv0
	config   string                       // fallbackConfig
	self     func() (string, error)       // pagepipe's own executable
	// exec replaces the process; it returns only on failure.
	exec func(path string, argv, env []string) error
}

// sysFallback is the process's own; tests replace it (TestMain).
var sysFallback = &fallback{
	argv0:    os.Args[0],
	getenv:   os.Getenv,
	environ:  os.Environ,
	lookPath: exec.LookPath,
	config:   fallbackConfig,
	self:     os.Executable,
	exec:     syscall.Exec,
}

// find returns the program to hand over to, or "" and why there is none.
func (f *fallback) find() (path, why string) {
	if f.getenv(handedOverEnv) != "" {
		return "", fmt.Sprintf("%s is set: pagepipe was run by the makedumpfile it handed over to", handedOverEnv)
	}
	env := f.getenv(fallbackEnv)
	if env == "none" {
		return "", fallbackEnv + "=none"
	}
	var skipped []string
	try := func(p string, named bool) bool {
		if p == "" {
			return false
		}
		if ok, why := f.usable(p, named); !ok {
			if why != "" {
				skipped = append(skipped, why)
			}
			return false
		}
		path = p
		return true
	}
	if try(f.beside(), false) || try(env, true) {
		return path, ""
	}
	for _, p := range f.configured() {
		if try(p, true) {
			return path, ""
		}
	}
	why = fmt.Sprintf("no %s beside %s, none in $%s or %s", divertedName, f.argv0, fallbackEnv, f.config)
	if len(skipped) > 0 {
		why += "; " + strings.Join(skipped, "; ")
	}
	return "", why
}

// beside is makedumpfile.distrib in the directory of the name pagepipe
// was run as (as makedumpfile, the link in /usr/bin or /usr/sbin; a bare
// name is where PATH found it).
func (f *fallback) beside() string {
	name := f.argv0
	if name == "" {
		return ""
	}
	if !strings.Contains(name, "/") {
		p, err := f.lookPath(name)
		if err != nil {
			return ""
		}
		name = p
	}
	return filepath.Join(filepath.Dir(name), divertedName)
}

// configured are the config file's fallback= paths, in order.
func (f *fallback) configured() []string {
	if f.config == "" {
		return nil
	}
	file, err := os.Open(f.config)
	if err != nil {
		return nil
	}
	defer file.Close()
	var paths []string
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "fallback="); ok && !strings.HasPrefix(line, "#") {
			paths = append(paths, strings.TrimSpace(v))
		}
	}
	return paths
}

// usable says whether p is a program pagepipe may hand over to: an
// executable file that is not pagepipe itself (the makedumpfile link of
// pagepipe-as-makedumpfile is, and exec'ing it would start over); why is
// said for a program that is there but not usable, and for one that is
// not there when it was named (by the environment or the config file).
func (f *fallback) usable(p string, named bool) (ok bool, why string) {
	st, err := os.Stat(p)
	if err != nil {
		if named {
			return false, err.Error()
		}
		return false, ""
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return false, p + " is not an executable file"
	}
	if self, err := f.self(); err == nil {
		if me, err := os.Stat(self); err == nil && os.SameFile(st, me) {
			return false, p + " is pagepipe itself"
		}
	}
	return true, ""
}

// handOver execs the fallback with pagepipe's arguments, after one line
// on stderr naming the reason and the program. It returns only when
// there is none (why says so) or the exec failed (then rc is the exit
// code).
func (f *fallback) handOver(c *console, reason string, args []string) (rc int, why string) {
	path, why := f.find()
	if path == "" {
		return 0, why
	}
	c.errorf("%s: %s: handing over to %s\n", progName, reason, path)
	argv := append([]string{f.argv0}, args...)
	env := append(f.environ(), handedOverEnv+"="+path)
	err := f.exec(path, argv, env)
	c.errorf("%s: run %s: %v\n", progName, path, err)
	return exitFailed, ""
}

// handedOverOptions are the options given on the line that pagepipe
// hands over, each named once, in the table's order.
func (o *options) handedOverOptions() []*optSpec {
	var out []*optSpec
	for i := range optionTable {
		if s := &optionTable[i]; s.status == handOver && o.given[s.long] {
			out = append(out, s)
		}
	}
	return out
}

// handOverReason says which options of the line are makedumpfile's and
// not built into pagepipe ("" for none).
func (o *options) handOverReason() string {
	var names []string
	for _, s := range o.handedOverOptions() {
		names = append(names, fmt.Sprintf("%s (%s)", s.name(), s.help))
	}
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0] + " is not built into pagepipe"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " are not built into pagepipe"
}

// An archRow is one architecture makedumpfile dumps, by uname -m name,
// with the page sizes its kernels use and those pagepipe dumps.
type archRow struct {
	name     string
	kernel   []uint64 // page sizes its kernels are built with
	pagepipe []uint64 // of those, the ones pagepipe dumps; none: makedumpfile dumps them all
}

const (
	kib4  = 4 << 10
	kib8  = 8 << 10
	kib16 = 16 << 10
	kib64 = 64 << 10
)

// archTable is the one place that says which vmcores pagepipe dumps and
// which it hands to makedumpfile: when pagepipe comes to dump one more
// (riscv64, ppc64le with 4 KiB pages), its row's pagepipe sizes gain it
// (TestArchTableMatchesKernel checks the rows against package kernel).
// A vmcore of a page size no kernel of its architecture uses is damaged,
// not foreign: it is refused, never handed over.
var archTable = []archRow{
	{"x86_64", []uint64{kib4}, []uint64{kib4}},
	{"aarch64", []uint64{kib4, kib16, kib64}, []uint64{kib4, kib16, kib64}},
	{"ppc64le", []uint64{kib4, kib64}, []uint64{kib64}},
	{"riscv64", []uint64{kib4}, nil},
	{"s390x", []uint64{kib4}, nil},
	{"ppc64", []uint64{kib4, kib64}, nil},
	{"i386", []uint64{kib4}, nil},
	{"arm", []uint64{kib4}, nil},
	{"ppc", []uint64{kib4, kib16, kib64}, nil},
	{"loongarch64", []uint64{kib4, kib16, kib64}, nil},
	{"mips64", []uint64{kib4, kib16, kib64}, nil},
	{"sparc64", []uint64{kib8}, nil},
	{"ia64", []uint64{kib4, kib16, kib64}, nil},
}

func archRowOf(name string) *archRow {
	for i := range archTable {
		if archTable[i].name == name {
			return &archTable[i]
		}
	}
	return nil
}

func hasSize(sizes []uint64, n uint64) bool {
	for _, s := range sizes {
		if s == n {
			return true
		}
	}
	return false
}

// foreignInput opens the input as a dump would, before any output
// exists, and says what of it makedumpfile must dump ("" when pagepipe
// dumps it, or when the input is refused for another reason, which the
// run then gives): a vmcore (or a dump to filter again) of an
// architecture pagepipe does not dump, or of a page size pagepipe does
// not dump that architecture with. vmcoreinfo is -i's file.
func foreignInput(path, vmcoreinfo string) string {
	if flattened(path) {
		// Rebuilding the stream to look would copy the whole dump:
		// the run refuses a foreign one, as before the fallback.
		return ""
	}
	m, err := source.OpenMemory(path)
	var ae *source.ArchError
	if errors.As(err, &ae) {
		if row := archRowOf(ae.Arch); row != nil && len(row.pagepipe) == 0 {
			return fmt.Sprintf("%s is a vmcore of %s (%s), which pagepipe does not dump", path, ae.Arch, ae.From)
		}
		return ""
	}
	if err != nil {
		return ""
	}
	defer m.Close()
	arch, size := m.Arch().Name(), m.PageSize()
	if _, _, _, n := m.Notes(); n == 0 && vmcoreinfo != "" {
		if b, err := os.ReadFile(vmcoreinfo); err == nil {
			if vi, err := kernel.ParseVMCOREINFO(b); err == nil && vi.PageSize() > 0 {
				size = uint64(vi.PageSize())
			}
		}
	}
	row := archRowOf(arch)
	if row == nil || hasSize(row.pagepipe, size) || !hasSize(row.kernel, size) {
		return ""
	}
	return fmt.Sprintf("%s is a vmcore of %s with %d KiB pages, which pagepipe does not dump", path, arch, size>>10)
}

// flattened says whether path starts as a flattened dump does.
func flattened(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, len(kdumpfmt.FlatSignature))
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == kdumpfmt.FlatSignature
}
