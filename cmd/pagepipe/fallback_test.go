package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"pagepipe/internal/synth"
)

// The tests run pagepipe in-process with no makedumpfile to hand over to,
// whatever the machine has installed: a test of the fallback gives its
// own (withFallback).
func TestMain(m *testing.M) {
	sysFallback = &fallback{getenv: func(string) string { return "" }}
	os.Exit(m.Run())
}

// execCall is one exec a test's fallback was asked for.
type execCall struct {
	path      string
	argv, env []string
}

// fakeFallback is a fallback whose makedumpfile is prog (nil exec calls
// are recorded, and the exec fails, so run returns).
func fakeFallback(t *testing.T, prog string, calls *[]execCall) *fallback {
	t.Helper()
	return &fallback{
		argv0:    "makedumpfile",
		getenv:   func(k string) string { return map[string]string{fallbackEnv: prog}[k] },
		environ:  func() []string { return []string{"PATH=/usr/bin"} },
		lookPath: func(string) (string, error) { return "", errors.New("no PATH here") },
		self:     func() (string, error) { return "", errors.New("no /proc here") },
		exec: func(path string, argv, env []string) error {
			*calls = append(*calls, execCall{path: path, argv: argv, env: env})
			return errors.New("exec stands in")
		},
	}
}

// withFallback makes f the process's fallback for the test.
func withFallback(t *testing.T, f *fallback) {
	t.Helper()
	old := sysFallback
	sysFallback = f
	t.Cleanup(func() { sysFallback = old })
}

// executable writes an executable script at path.
func executable(t *testing.T, path, script string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// Where the makedumpfile to hand over to is found, in order: the divert's
// makedumpfile.distrib beside the name pagepipe was run as (a bare name
// through PATH), $PAGEPIPE_FALLBACK, the config file's fallback= lines;
// never pagepipe itself (the makedumpfile link of pagepipe-as-makedumpfile)
// nor a file that is not executable; none with PAGEPIPE_FALLBACK=none or
// in a process pagepipe handed over to.
func TestFallbackDiscovery(t *testing.T) {
	dir := t.TempDir()
	bin, env, etc := filepath.Join(dir, "bin"), filepath.Join(dir, "env"), filepath.Join(dir, "etc")
	for _, d := range []string{bin, env, etc} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self := executable(t, filepath.Join(bin, "pagepipe"), "exit 0")
	if err := os.Symlink("pagepipe", filepath.Join(bin, "makedumpfile")); err != nil {
		t.Fatal(err)
	}
	distrib := filepath.Join(bin, divertedName)
	fromEnv := executable(t, filepath.Join(env, "makedumpfile"), "exit 0")
	fromConfig := executable(t, filepath.Join(etc, "makedumpfile"), "exit 0")
	notExec := filepath.Join(etc, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(etc, "pagepipe.conf")
	writeConfig := func(lines ...string) {
		if err := os.WriteFile(config, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		argv0   string
		distrib bool   // makedumpfile.distrib beside the link
		vars    string // KEY=VALUE;...
		config  []string
		want    string // "" for none
		why     string // part of why, for none
	}{
		{name: "beside", argv0: filepath.Join(bin, "makedumpfile"), distrib: true, vars: fallbackEnv + "=" + fromEnv, want: distrib},
		{name: "beside through PATH", argv0: "makedumpfile", distrib: true, want: distrib},
		{name: "environment", argv0: filepath.Join(bin, "makedumpfile"), vars: fallbackEnv + "=" + fromEnv, config: []string{"fallback=" + fromConfig}, want: fromEnv},
		{name: "config", argv0: filepath.Join(bin, "makedumpfile"),
			config: []string{"# the first usable", "fallback=" + filepath.Join(etc, "missing"), "fallback=" + notExec, "fallback=" + filepath.Join(bin, "makedumpfile"), "fallback = x", "fallback=" + fromConfig}, want: fromConfig},
		{name: "none", argv0: filepath.Join(bin, "makedumpfile"), config: []string{"#fallback=" + fromConfig}, why: "no makedumpfile.distrib beside"},
		{name: "only pagepipe itself", argv0: filepath.Join(bin, "makedumpfile"), config: []string{"fallback=" + filepath.Join(bin, "makedumpfile")},
			why: "makedumpfile is pagepipe itself"},
		{name: "not executable", argv0: filepath.Join(bin, "makedumpfile"), vars: fallbackEnv + "=" + notExec, why: "not-executable is not an executable file"},
		{name: "missing", argv0: filepath.Join(bin, "makedumpfile"), vars: fallbackEnv + "=" + filepath.Join(env, "missing"), why: "no such file"},
		{name: "off", argv0: filepath.Join(bin, "makedumpfile"), distrib: true, vars: fallbackEnv + "=none", why: fallbackEnv + "=none"},
		{name: "handed over already", argv0: filepath.Join(bin, "makedumpfile"), distrib: true, vars: handedOverEnv + "=" + distrib, why: handedOverEnv + " is set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(distrib)
			if tc.distrib {
				executable(t, distrib, "exit 0")
			}
			writeConfig(tc.config...)
			vars := map[string]string{}
			for _, kv := range strings.Split(tc.vars, ";") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					vars[k] = v
				}
			}
			f := &fallback{
				argv0:  tc.argv0,
				getenv: func(k string) string { return vars[k] },
				lookPath: func(name string) (string, error) {
					p := filepath.Join(bin, name)
					_, err := os.Stat(p)
					return p, err
				},
				config: config,
				self:   func() (string, error) { return self, nil },
			}
			got, why := f.find()
			if got != tc.want || tc.want == "" && !strings.Contains(why, tc.why) {
				t.Fatalf("found %q (%s), want %q (%s)", got, why, tc.want, tc.why)
			}
		})
	}
}

// A command line with an option pagepipe does not have is handed to
// makedumpfile whole (exec, with pagepipe's argv and PAGEPIPE_HANDED_OVER
// set), after one line on stderr naming the options, each once, and the
// program; so are its --help, its --check-params and lines pagepipe would
// refuse for other reasons. Nothing else is written.
func TestHandOverOptions(t *testing.T) {
	dir := t.TempDir()
	mdf := executable(t, filepath.Join(dir, "makedumpfile.real"), "exit 0")
	out := filepath.Join(dir, "out")
	for _, tc := range []struct {
		args []string
		line string
	}{
		{[]string{"-X", "-d", "31", "/proc/vmcore", out}, "-X (exclude Xen domain-U pages) is not built into pagepipe"},
		{[]string{"-c", "--eppic", "macro.c", "-X", "/proc/vmcore", out}, "--eppic (erase kernel data with eppic macros) and -X (exclude Xen domain-U pages) are not built into pagepipe"},
		{[]string{"--diskset=A", "--diskset=B", "-x", "vmlinux", out}, "--diskset (one disk of a sadump diskset) is not built into pagepipe"},
		{[]string{"--xen-syms", "xen-syms", "--xen_phys_start=0x1000000", "/proc/vmcore", out}, "--xen-syms (the Xen hypervisor's symbols) and --xen_phys_start (where Xen's memory starts (x86_64)) are not built into pagepipe"},
		{[]string{"--check-params", "--eppic", "filter.c", "-x", "vmlinux", "-d", "31", "/proc/vmcore", out}, "--eppic (erase kernel data with eppic macros) is not built into pagepipe"},
		{[]string{"-h", "-X"}, "-X (exclude Xen domain-U pages) is not built into pagepipe"},
		{[]string{"-X", "-d", "abc", "--num-threads", "2", "-E", "/proc/vmcore", out}, "-X (exclude Xen domain-U pages) is not built into pagepipe"},
		{[]string{"-F", "--extension", "x.so", "/proc/vmcore"}, "--extension (load a makedumpfile extension (upstream, after 1.7.x)) is not built into pagepipe"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var calls []execCall
			withFallback(t, fakeFallback(t, mdf, &calls))
			rc, stdout, stderr := pagepipe(t, tc.args...)
			if len(calls) != 1 {
				t.Fatalf("%d execs, want 1 (exit %d)\n%s%s", len(calls), rc, stdout, stderr)
			}
			c := calls[0]
			if c.path != mdf || !slices.Equal(c.argv, append([]string{"makedumpfile"}, tc.args...)) || !slices.Contains(c.env, handedOverEnv+"="+mdf) {
				t.Errorf("exec %s %q %q", c.path, c.argv, c.env)
			}
			want := "pagepipe: " + tc.line + ": handing over to " + mdf + "\n"
			if first, _, _ := strings.Cut(stderr, "\n"); first+"\n" != want || stdout != "" {
				t.Errorf("stdout %q, stderr %q; want stderr to start %q", stdout, stderr, want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s exists", out)
			}
		})
	}
}

// Without a makedumpfile to hand over to, a line with an option pagepipe
// does not have is refused as before: one error line naming each option
// once ("pagepipe: -X ...", never "pagepipe: pagepipe"), exit 1, no file;
// so is --check-params of it.
func TestNoFallbackRefusesInOneLine(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	for _, args := range [][]string{
		{"-X", "-d", "31", "/proc/vmcore", out},
		{"--check-params", "-X", "-d", "31", "/proc/vmcore", out},
		{"--diskset=A", "--diskset=B", "-x", "vmlinux", out},
		{"-F", "--eppic", "m.c", "/proc/vmcore"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			for _, prog := range []string{"pagepipe", "makedumpfile"} {
				progName = prog
				rc, _, stderr := pagepipe(t, args...)
				progName = "pagepipe"
				lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
				if slices.Contains(args, "-F") {
					lines = lines[:len(lines)-2] // the common messages
				}
				if rc != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], prog+": ") ||
					!strings.Contains(lines[0], "there is no makedumpfile to hand over to") || strings.Contains(stderr, "pagepipe: pagepipe") {
					t.Fatalf("as %s: exit %d, stderr %q", prog, rc, stderr)
				}
				for _, o := range []string{"--diskset", "-x ", "-X ", "--eppic"} {
					if n := strings.Count(lines[0], o); n > 1 {
						t.Errorf("names %s %d times: %s", o, n, lines[0])
					}
				}
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("left %v", left)
			}
		})
	}
}

// A vmcore of an architecture pagepipe does not dump (s390x, i386), and a
// dump of one to filter again, go to makedumpfile, decided before any
// output exists, in every output shape and for --dump-dmesg. One pagepipe
// dumps does not (x86_64; ppc64le with 4 KiB pages, since issue 37), and
// neither does an input refused as damaged (a page size no kernel of its
// architecture has, architectures that disagree, a riscv64 vmcore without
// a key its walk needs): the run refuses it.
func TestHandOverArchitectures(t *testing.T) {
	dir := t.TempDir()
	mdf := executable(t, filepath.Join(dir, "makedumpfile.real"), "exit 0")
	x86 := writeShape(t, dir, "x86_64", synth.ForeignMachine(synth.X86_64, 8))
	x86dump := filepath.Join(dir, "x86_64.dump")
	mustPagepipe(t, "-d", "1", x86, x86dump)
	s390xDump := filepath.Join(dir, "s390x.dump")
	writeWithMachine(t, x86dump, s390xDump, "s390x")
	ppc4k := synth.NewPPC64Machine(synth.KernelSpec{Profile: "6.12"}, 64)
	x86big := synth.WithPageSize(synth.ForeignMachine(synth.X86_64, 8), 16384)
	// An x86_64 ELF header over an aarch64 kernel's VMCOREINFO.
	mixed := synth.ForeignMachine(synth.X86_64, 8)
	mixed.VMCOREINFO += "NUMBER(kimage_voffset)=0xffffb03beb800000\n"
	inputs := map[string]string{
		"s390x":       writeShape(t, dir, "s390x", synth.ForeignMachine(synth.S390X, 8)),
		"riscv64":     writeShape(t, dir, "riscv64", synth.ForeignMachine(synth.RISCV64, 8)),
		"i386":        writeShape(t, dir, "i386", synth.ForeignMachine(synth.I386, 8)),
		"ppc64le-4k":  writeShape(t, dir, "ppc64le-4k", ppc4k),
		"s390x-dump":  s390xDump,
		"x86_64":      x86,
		"x86_64-dump": x86dump,
		"x86_64-16k":  writeShape(t, dir, "x86_64-16k", x86big),
		"mixed":       writeShape(t, dir, "mixed", mixed),
	}
	for name, handed := range map[string]bool{
		"s390x": true, "riscv64": false, "i386": true, "s390x-dump": true,
		"x86_64": false, "ppc64le-4k": false, "x86_64-dump": false, "x86_64-16k": false, "mixed": false,
	} {
		in := inputs[name]
		for _, shape := range [][]string{{"-d", "31"}, {"-E"}, {"-F", "-l"}, {"--split"}, {"--dump-dmesg"}} {
			dumped := name == "x86_64" || name == "ppc64le-4k"
			if dumped && shape[0] != "-F" {
				continue // dumped: one shape is enough
			}
			t.Run(name+strings.Join(shape, ""), func(t *testing.T) {
				outDir := t.TempDir()
				args := append(slices.Clone(shape), in)
				switch shape[0] {
				case "-F":
				case "--split":
					args = append(args, filepath.Join(outDir, "1"), filepath.Join(outDir, "2"))
				default:
					args = append(args, filepath.Join(outDir, "out"))
				}
				var calls []execCall
				withFallback(t, fakeFallback(t, mdf, &calls))
				rc, stdout, stderr := pagepipe(t, args...)
				if got := len(calls) == 1; got != handed {
					t.Fatalf("handed over %v, want %v: exit %d\n%s", got, handed, rc, stderr)
				}
				if handed {
					if !strings.HasPrefix(stderr, "pagepipe: "+in+" is a vmcore of ") || !strings.Contains(stderr, "which pagepipe does not dump: handing over to "+mdf+"\n") || stdout != "" {
						t.Errorf("stdout %q, stderr %q", stdout, stderr)
					}
					if left, _ := os.ReadDir(outDir); len(left) != 0 {
						t.Errorf("left %v", left)
					}
				}
				if dumped && rc != 0 {
					t.Errorf("exit %d: %s", rc, stderr)
				}
				if !handed && !dumped && name != "x86_64-dump" && rc != 1 {
					t.Errorf("damaged input: exit %d, want 1", rc)
				}
			})
		}
	}
}

// The fallback for real: pagepipe installed as makedumpfile with a
// makedumpfile.distrib beside it execs it (exit status, stdout and stderr
// are its, after pagepipe's one line); a makedumpfile.distrib that is a
// copy of pagepipe is not handed over to; and a makedumpfile.distrib that
// runs makedumpfile again (a wrapper of pagepipe's) does not make a loop:
// the second pagepipe refuses.
func TestHandOverExecs(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pagepipe")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	link := filepath.Join(dir, "makedumpfile")
	if err := os.Symlink("pagepipe", link); err != nil {
		t.Fatal(err)
	}
	distrib := filepath.Join(dir, divertedName)
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(link, args...)
		cmd.Env = append(os.Environ(), fallbackEnv+"=")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}

	executable(t, distrib, `echo "makedumpfile.distrib $* ($`+handedOverEnv+`)"; echo "its stderr" >&2; exit 3`)
	rc, stdout, stderr := run("-X", "-d", "31", "/proc/vmcore", "out")
	if want := "makedumpfile.distrib -X -d 31 /proc/vmcore out (" + distrib + ")\n"; rc != 3 || stdout != want {
		t.Errorf("exit %d, stdout %q; want 3, %q", rc, stdout, want)
	}
	if want := "makedumpfile: -X (exclude Xen domain-U pages) is not built into pagepipe: handing over to " + distrib + "\nits stderr\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}

	// A copy of pagepipe (another file: an initramfs's makedumpfile) is
	// known by its build information.
	os.Remove(distrib)
	if err := os.WriteFile(distrib, readFile(t, bin), 0o755); err != nil {
		t.Fatal(err)
	}
	rc, stdout, stderr = run("-X", "-d", "31", "/proc/vmcore", "out")
	if rc != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, distrib+" is pagepipe itself") {
		t.Errorf("a copy of pagepipe as makedumpfile.distrib: exit %d, stdout %q, stderr %q", rc, stdout, stderr)
	}

	executable(t, distrib, `exec `+link+` "$@"`)
	rc, stdout, stderr = run("--eppic", "m.c", "-d", "31", "/proc/vmcore", "out")
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if rc != 1 || len(lines) != 2 || !strings.Contains(lines[0], "handing over to "+distrib) ||
		!strings.Contains(lines[1], handedOverEnv+" is set") || !strings.Contains(stdout, "Commandline parameter is invalid.") {
		t.Errorf("a loop: exit %d, stdout %q, stderr %q", rc, stdout, stderr)
	}
}

// Every option of makedumpfile's getopt tables (1.7.2 to upstream: the
// short options "b:cDd:eEFfg:hi:lL:pRvXx:z" and the long ones) has a row
// in optionTable, and the table and the flag set agree: a row is a flag,
// taking a value where the row names one; a row pagepipe hands over is
// bound to nothing else.
func TestOptionTableMatchesFlags(t *testing.T) {
	shorts := "b:cDd:eEFfg:hi:lL:pRvXx:z"
	longs := []string{"split", "reassemble", "xen-syms:", "xen-vmcoreinfo:", "xen_phys_start:", "message-level:", "vtop:",
		"dump-dmesg", "partial-dmesg", "config:", "help", "diskset:", "cyclic-buffer:", "eppic:", "non-mmap", "mem-usage",
		"splitblock-size:", "work-dir:", "num-threads:", "check-params", "dry-run", "show-stats", "extension:"}
	takesValue := func(s *optSpec) bool { return s.arg != "" && !strings.HasPrefix(s.arg, "[") }
	for i := 0; i < len(shorts); i++ {
		c := shorts[i]
		if c == ':' {
			continue
		}
		var row *optSpec
		for j := range optionTable {
			if optionTable[j].short == c {
				row = &optionTable[j]
			}
		}
		if row == nil {
			t.Errorf("-%c has no row", c)
		} else if want := i+1 < len(shorts) && shorts[i+1] == ':'; takesValue(row) != want {
			t.Errorf("-%c: takes a value %v, want %v", c, takesValue(row), want)
		}
	}
	for _, l := range longs {
		name, value := strings.CutSuffix(l, ":")
		row := optionByLong(name)
		if row == nil || row.shortOnly {
			t.Errorf("--%s has no row", name)
		} else if takesValue(row) != value {
			t.Errorf("--%s: takes a value %v, want %v", name, takesValue(row), value)
		}
	}
	fs := newFlagSet(&options{})
	for _, s := range optionTable {
		f := fs.Lookup(s.long)
		switch {
		case f == nil:
			t.Errorf("%s: no flag", s.name())
		case string(s.short) != f.Shorthand && s.short != 0:
			t.Errorf("%s: shorthand %q", s.name(), f.Shorthand)
		case (f.NoOptDefVal == "") != takesValue(&s):
			t.Errorf("%s: takes a value %v, the table says %v", s.name(), f.NoOptDefVal == "", takesValue(&s))
		}
		if _, handed := f.Value.(*handedValue); f != nil && handed != (s.status == handOver) {
			t.Errorf("%s: handed over %v, the table says %v", s.name(), handed, s.status == handOver)
		}
		if s.status != developer && (s.group == "" || !slices.Contains(groupOrder, s.group)) {
			t.Errorf("%s: group %q is not one of --help's", s.name(), s.group)
		}
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if optionByLong(f.Name) == nil {
			t.Errorf("--%s: no row in optionTable", f.Name)
		}
	})
}
