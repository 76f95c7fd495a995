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
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	self     func() (string, error)       // pagepipe's own executable (needs /proc)

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
	name, err := f.runAs()
	if err != nil || name == "" {
		return ""
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
// executable file that is not pagepipe (the makedumpfile link of
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
	if f.isPagepipe(p, st) {
		return false, p + " is pagepipe itself"
	}
	return true, ""
}

// pagepipeMain is the main package of every pagepipe build, as its Go
// build information names it.
const pagepipeMain = "pagepipe/cmd/pagepipe"

// isPagepipe says whether the program at p (st) is pagepipe: this very
// file (os.Executable, where /proc is mounted: a capture kernel's early
// userspace or a chroot may have none), the file of the name it was run
// as, or any pagepipe build (its Go build information), such as a copy
// of pagepipe put in an initramfs under makedumpfile's name.
func (f *fallback) isPagepipe(p string, st os.FileInfo) bool {
	for _, self := range []func() (string, error){f.self, f.runAs} {
		if self == nil {
			continue
		}
		if me, err := self(); err == nil {
			if mst, err := os.Stat(me); err == nil && os.SameFile(st, mst) {
				return true
			}
		}
	}
	return isPagepipeBuild(p)
}

// isPagepipeBuild says whether p is a Go program whose build information
// names pagepipe's main package: "path\tpagepipe/cmd/pagepipe\n" just
// after the "\xff Go buildinf:" header, where Go 1.18 and later keep it
// inline. It reads the file through (debug/buildinfo and debug/elf would
// bring 160 KB and more into a binary that lives in an initramfs).
func isPagepipeBuild(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	header, want := []byte("\xff Go buildinf:"), []byte("path\t"+pagepipeMain+"\n")
	const window = 256 // the header, the Go version and the start of modinfo
	buf := make([]byte, 0, 64<<10+window)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		for i := 0; ; {
			k := bytes.Index(buf[i:], header)
			if k < 0 {
				break
			}
			i += k
			if len(buf)-i < window && err == nil {
				break // read on: the rest may be in the next block
			}
			if bytes.Contains(buf[i:min(len(buf), i+window)], want) {
				return true
			}
			i++
		}
		if err != nil {
			return false
		}
		// Keep the tail, where a header may have begun.
		keep := min(len(buf), window)
		buf = append(buf[:0], buf[len(buf)-keep:]...)
	}
}

// runAs is the file of the name pagepipe was run as.
func (f *fallback) runAs() (string, error) {
	if strings.Contains(f.argv0, "/") || f.argv0 == "" {
		return f.argv0, nil
	}
	return f.lookPath(f.argv0)
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
