package main

// Drop-in defects found by trying every option against makedumpfile 1.7.2
// (issue 30): each test here failed before it was mended.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"pagepipe/internal/synth"
)

// pagepipeIn runs pagepipe in-process with stdin.
func pagepipeIn(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	rc := run(args, bytes.NewReader(stdin), &stdout, &stderr)
	return rc, stdout.String(), stderr.String()
}

// listDir names what dir holds, with each file's size.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %d", e.Name(), info.Size()))
	}
	return out
}

// --dry-run leaves no file in any mode (the directory is listed before and
// after): a kdump file, -E, --split, -F (nothing on stdout either), -R
// (the stream is read and checked); --reassemble and --dump-dmesg refuse
// it with makedumpfile's words. An existing DUMPFILE is refused as
// makedumpfile refuses it (exit 1, "file exists"), untouched, and with -f
// it is still untouched.
func TestDryRunWritesNothing(t *testing.T) {
	in := t.TempDir()
	vmcore := writeShape(t, in, "vmcore", synth.Shapes()["cpu1"])
	rc, stream, stderr := pagepipe(t, "-F", "-d", "1", vmcore)
	if rc != 0 || len(stream) == 0 {
		t.Fatalf("-F: exit %d: %s", rc, stderr)
	}
	part1, part2 := filepath.Join(in, "part1"), filepath.Join(in, "part2")
	mustPagepipe(t, "--split", "--splitblock-size", "64", "-d", "1", vmcore, part1, part2)
	inputs := listDir(t, in)

	for _, tc := range []struct {
		name  string
		args  []string // OUT, OUT1, OUT2: files in a fresh directory
		stdin string
		rc    int
		msg   string // on stdout (stderr with -F)
	}{
		{"kdump", []string{"-d", "1", vmcore, "OUT"}, "", 0, "The dumpfile is saved to "},
		{"elf", []string{"-E", "-d", "1", vmcore, "OUT"}, "", 0, "The dumpfile is saved to "},
		{"split", []string{"--split", "--splitblock-size", "64", "-d", "1", vmcore, "OUT1", "OUT2"}, "", 0, "The dumpfiles are saved to "},
		{"flat", []string{"-F", "-d", "1", vmcore}, "", 0, "The dumpfile is saved to STDOUT."},
		{"rearrange", []string{"-R", "OUT"}, stream, 0, "The dumpfile is saved to "},
		{"rearrange a bad stream", []string{"-R", "OUT"}, "not a stream", 1, "Failed."},
		{"reassemble", []string{"--reassemble", part1, part2, "OUT"}, "", 1, "--dry-run cannot be used with --reassemble.\nCommandline parameter is invalid."},
		{"dmesg", []string{"--dump-dmesg", vmcore, "OUT"}, "", 1, "--dry-run cannot be used with --dump-dmesg.\nCommandline parameter is invalid."},
	} {
		for _, existing := range []string{"", "-f", "no -f"} {
			if existing != "" && (tc.rc != 0 || tc.name == "flat") {
				continue
			}
			t.Run(tc.name+"/"+existing, func(t *testing.T) {
				out := t.TempDir()
				args := []string{"--dry-run"}
				for _, a := range tc.args {
					if strings.HasPrefix(a, "OUT") {
						a = filepath.Join(out, a)
					}
					args = append(args, a)
				}
				if existing != "" {
					// The last output exists.
					if err := os.WriteFile(args[len(args)-1], []byte("precious"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if existing == "-f" {
					args = append([]string{"-f"}, args...)
				}
				before := listDir(t, out)
				rc, stdout, stderr := pagepipeIn(t, []byte(tc.stdin), args...)
				msgs := stdout
				if tc.name == "flat" {
					msgs = stderr
					if stdout != "" {
						t.Errorf("-F --dry-run wrote %d bytes to stdout", len(stdout))
					}
				}
				wantRC, wantMsg := tc.rc, tc.msg
				if existing == "no -f" {
					wantRC, wantMsg = 1, "Failed."
					if !strings.Contains(stderr, "file exists") {
						t.Errorf("stderr %q does not say the file exists", stderr)
					}
				}
				if rc != wantRC || !strings.Contains(msgs, wantMsg) {
					t.Errorf("exit %d, messages %q%q; want %d and %q", rc, msgs, stderr, wantRC, wantMsg)
				}
				if after := listDir(t, out); !slices.Equal(before, after) {
					t.Errorf("the directory held %v, now %v", before, after)
				}
				if existing != "" {
					if b := readFile(t, args[len(args)-1]); string(b) != "precious" {
						t.Errorf("the existing file was written: %.40q", b)
					}
				}
				if got := listDir(t, in); !slices.Equal(got, inputs) {
					t.Errorf("the inputs' directory held %v, now %v", inputs, got)
				}
			})
		}
	}
}

// vmcoreWithoutNote writes a generated 6.1 machine (page tables,
// init_uts_ns) with its VMCOREINFO note renamed, so that makedumpfile and
// pagepipe need -i, and returns it with its VMCOREINFO text.
func vmcoreWithoutNote(t *testing.T, dir string) (vmcore, vmcoreinfo string) {
	t.Helper()
	s := synth.KernelMachine("6.1", 64)
	text, err := synth.KernelVMCOREINFO(s)
	if err != nil {
		t.Fatal(err)
	}
	core := readFile(t, writeShape(t, dir, "with-note", s))
	if n := bytes.Count(core, []byte("VMCOREINFO\x00")); n != 1 {
		t.Fatalf("%d VMCOREINFO note names", n)
	}
	vmcore = filepath.Join(dir, "no-note")
	if err := os.WriteFile(vmcore, bytes.Replace(core, []byte("VMCOREINFO\x00"), []byte("VMCOREINFX\x00"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	return vmcore, text
}

// -i with the VMCOREINFO of another kernel release, on a vmcore without
// its own note, exits 2 with check_release's message, as makedumpfile's
// man page says, before any output exists: the release is read from the
// crashed kernel's utsname. The right file dumps.
func TestWrongReleaseExits2(t *testing.T) {
	dir := t.TempDir()
	vmcore, text := vmcoreWithoutNote(t, dir)
	release := regexp.MustCompile(`(?m)^OSRELEASE=(.*)$`).FindStringSubmatch(text)
	if release == nil {
		t.Fatal("no OSRELEASE in the VMCOREINFO text")
	}
	right, wrong := filepath.Join(dir, "vmcoreinfo"), filepath.Join(dir, "vmcoreinfo-5.10")
	if err := os.WriteFile(right, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrong, []byte(strings.Replace(text, release[0], "OSRELEASE=5.10.0-99-amd64", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-d", "31"}, {"-c", "-d", "1"}, {"-E", "-d", "1"}, {"--dump-dmesg"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			rc, stdout, stderr := pagepipe(t, append(args, "-i", wrong, vmcore, out)...)
			want := "pagepipe: check_release: " + wrong + " and " + vmcore + " don't match"
			if rc != exitWrongRelease || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "is for 5.10.0-99-amd64, the crashed kernel is "+release[1]) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", rc, stderr, want)
			}
			if !strings.Contains(stdout, "pagepipe Failed.") {
				t.Errorf("stdout %q", stdout)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s exists", out)
			}
		})
	}
	mustPagepipe(t, "-d", "31", "-i", right, vmcore, filepath.Join(dir, "dump"))
}

// -R refuses what makedumpfile's -R refuses (a codec, a dump level other
// than 0, -E, -F, -i), naming it, with no file; -d 0 it takes.
func TestRearrangeRefusesDumpOptions(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", synth.Shapes()["cpu1"])
	_, stream, _ := pagepipe(t, "-F", "-d", "1", vmcore)
	for _, tc := range []struct {
		opts []string
		name string
	}{
		{[]string{"-c"}, "-c"}, {[]string{"-l"}, "-l"}, {[]string{"-p"}, "-p"}, {[]string{"-z"}, "-z"}, {[]string{"--lz4"}, "--lz4"},
		{[]string{"-d", "1"}, "-d"}, {[]string{"-d", "0,31"}, ""}, {[]string{"-E"}, "-E"}, {[]string{"-F"}, "-F"},
		{[]string{"-i", vmcore}, "-i"}, {[]string{"-d", "0"}, ""},
	} {
		t.Run(strings.Join(tc.opts, " "), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			rc, stdout, stderr := pagepipeIn(t, []byte(stream), append(append([]string{"-R"}, tc.opts...), out)...)
			if tc.name == "" {
				if rc != 0 {
					t.Fatalf("exit %d: %s", rc, stderr)
				}
				return
			}
			msgs := stdout + stderr
			if rc != 1 || !strings.Contains(stderr, "pagepipe: "+tc.name+" cannot be used with -R\n") || !strings.Contains(msgs, "Commandline parameter is invalid.") {
				t.Errorf("exit %d, stdout %q, stderr %q", rc, stdout, stderr)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s exists", out)
			}
		})
	}
}

// --partial-dmesg without --dump-dmesg is refused (makedumpfile refuses
// it), and no dump is written.
func TestPartialDmesgNeedsDumpDmesg(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", synth.Shapes()["cpu1"])
	out := filepath.Join(dir, "out")
	for _, extra := range [][]string{nil, {"--check-params"}} {
		rc, stdout, stderr := pagepipe(t, append(extra, "--partial-dmesg", "-d", "1", vmcore, out)...)
		if rc != 1 || !strings.Contains(stderr, "pagepipe: --partial-dmesg is for --dump-dmesg\n") || !strings.Contains(stdout, "Commandline parameter is invalid.") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", extra, rc, stdout, stderr)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s exists", out)
	}
}

// -L takes makedumpfile's sizes: a C number (hex, octal) with K, M, G, T,
// P or E in either case; what makedumpfile refuses gets its one line,
// "Limit size(S) is invalid.".
func TestSizeLimitSuffixes(t *testing.T) {
	for s, want := range map[string]int64{
		"4096": 4096, "1K": 1 << 10, "1k": 1 << 10, "2M": 2 << 20, "3G": 3 << 30, "1T": 1 << 40, "1t": 1 << 40,
		"2P": 2 << 50, "1E": 1 << 60, "7e": 7 << 60, "0x10": 16, "0x1E": 30, "010": 8, "0x10K": 16 << 10, " +5M": 5 << 20,
		"8E": -1, "0": -1, "": -1, "1X": -1, "K": -1, "-1": -1, "1KK": -1, "0x": -1, "08": -1, "1_000": -1, "1.5G": -1,
	} {
		got, err := memparse(s)
		if want < 0 && err == nil || want >= 0 && (err != nil || got != want) {
			t.Errorf("memparse(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, l := range []string{"1T", "1P", "1E", "1t"} {
		if rc, stdout, stderr := pagepipe(t, "--check-params", "-L", l, "vmcore", "dump"); rc != 0 {
			t.Errorf("-L %s: exit %d %q %q", l, rc, stdout, stderr)
		}
	}
	if rc, stdout, stderr := pagepipe(t, "--check-params", "-L", "1X", "vmcore", "dump"); rc != 1 || stdout != "Limit size(1X) is invalid.\n" || stderr != "" {
		t.Errorf("-L 1X: exit %d, stdout %q, stderr %q", rc, stdout, stderr)
	}
}

// --help lists every option of the table under its group, in the groups'
// order, pagepipe's own marked + and makedumpfile's that pagepipe hands
// over marked >; the developers' options stay out.
func TestHelpComplete(t *testing.T) {
	help := mustPagepipe(t, "--help")
	pos := map[string]int{}
	for _, g := range groupOrder {
		i := strings.Index(help, "\n "+g+":\n")
		if i < 0 {
			t.Fatalf("no group %q in:\n%s", g, help)
		}
		pos[g] = i
	}
	for i := 1; i < len(groupOrder); i++ {
		if pos[groupOrder[i]] < pos[groupOrder[i-1]] {
			t.Errorf("group %q before %q", groupOrder[i], groupOrder[i-1])
		}
	}
	for _, s := range optionTable {
		mark := map[optStatus]string{own: "+", handOver: ">"}[s.status]
		if mark == "" {
			mark = " "
		}
		re := regexp.MustCompile(`(?m)^ ` + regexp.QuoteMeta(mark) + ` (-[a-zA-Z], )?` + regexp.QuoteMeta(s.name()) + `[ =\[]`)
		loc := re.FindStringIndex(help)
		switch {
		case s.status == developer:
			if strings.Contains(help, s.name()) {
				t.Errorf("--help lists the developers' %s", s.name())
			}
		case loc == nil:
			t.Errorf("--help lacks %q %s", mark, s.name())
		default:
			next := len(help)
			if i := slices.Index(groupOrder, s.group); i+1 < len(groupOrder) {
				next = pos[groupOrder[i+1]]
			}
			if loc[0] < pos[s.group] || loc[0] > next {
				t.Errorf("%s is not in group %q", s.name(), s.group)
			}
		}
	}
}

// pagepipe(8) lists every makedumpfile option, and pagepipe's own, with
// what pagepipe does: an option pagepipe has in OPTIONS (each noted where
// it differs), one it hands over in FALLBACK.
func TestManPageListsEveryOption(t *testing.T) {
	page := string(readFile(t, "../../docs/pagepipe.8"))
	sections := map[string]string{}
	for _, s := range strings.Split(page, "\n.SH ")[1:] {
		name, body, _ := strings.Cut(s, "\n")
		sections[strings.Trim(name, `"`)] = body
	}
	// An entry is the line after .TP; its options are \fB\-x\fR,
	// \fB\-\-config\fR, .BR \-c ", " ... in groff.
	entries := func(body string) map[string]bool {
		names := map[string]bool{}
		lines := strings.Split(body, "\n")
		for i, l := range lines {
			if l != ".TP" || i+1 == len(lines) {
				continue
			}
			head := strings.ReplaceAll(lines[i+1], `\-`, "-")
			for _, m := range regexp.MustCompile(`(?:^|[ "\\fB(])(--?[a-zA-Z][a-zA-Z0-9_-]*)`).FindAllStringSubmatch(head, -1) {
				names[m[1]] = true
			}
		}
		return names
	}
	options, fallback := entries(sections["OPTIONS"]), entries(sections["FALLBACK"])
	if len(options) < 30 || len(fallback) < 5 {
		t.Fatalf("found %d options in OPTIONS and %d in FALLBACK: the page or the pattern is wrong", len(options), len(fallback))
	}
	for _, s := range optionTable {
		switch {
		case s.status == developer:
		case s.status == handOver && !fallback[s.name()]:
			t.Errorf("%s is handed over and not in FALLBACK", s.name())
		case s.status != handOver && !options[s.name()]:
			t.Errorf("%s is not in OPTIONS", s.name())
		}
	}
}

// --check-params says what pagepipe will do with a line makedumpfile
// refuses and pagepipe runs (its parallel -E and --split), and answers a
// line it refuses deliberately (a dump level that is not a number) as a
// run would.
func TestCheckParamsSaysWhatPagepipeDoes(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		rc     int
		stdout string
	}{
		{[]string{"-E", "--num-threads", "2", "-d", "31", "vmcore", "dump"}, 0, "pagepipe writes the ELF dump with 2 workers (makedumpfile refuses --num-threads with -E)\n"},
		{[]string{"--split", "--num-threads=3", "vmcore", "d1", "d2"}, 0, "pagepipe writes the split files with 3 workers (makedumpfile refuses --num-threads with --split)\n"},
		{[]string{"-l", "--num-threads", "2", "-d", "31", "vmcore", "dump"}, 0, ""},
		{[]string{"-l", "--config", "filter.conf", "vmcore", "dump"}, 0, "pagepipe reads --config's types from the kernel's own BTF (makedumpfile refuses --config without -x)\n"},
		{[]string{"-l", "--config", "filter.conf", "-x", "vmlinux", "vmcore", "dump"}, 0, ""},
		{[]string{"-d", "abc", "vmcore", "dump"}, 1, "Commandline parameter is invalid.\n"},
	} {
		rc, stdout, stderr := pagepipe(t, append([]string{"--check-params"}, tc.args...)...)
		if rc != tc.rc || !strings.HasPrefix(stdout, tc.stdout) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d, %q", tc.args, rc, stdout, stderr, tc.rc, tc.stdout)
		}
	}
	rc, _, stderr := pagepipe(t, "-d", "abc", "vmcore", "dump")
	if rc != 1 || !strings.Contains(stderr, "-d abc: a dump level is a number from 0 to 31") {
		t.Errorf("a run of -d abc: exit %d, %q", rc, stderr)
	}
}

// inspect and verify take every format pagepipe writes: a kdump file, a
// flattened stream (-F), an ELF dump (-E, flattened too) and split files;
// anything else is refused in one line saying what they read.
func TestInspectVerifyFormats(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", synth.Shapes()["holes"])
	path := func(n string) string { return filepath.Join(dir, n) }
	mustPagepipe(t, "-c", "-d", "1", vmcore, path("kdump"))
	mustPagepipe(t, "-E", "-d", "1", vmcore, path("elf"))
	mustPagepipe(t, "--split", "--splitblock-size", "64", "-d", "1", vmcore, path("part1"), path("part2"))
	for name, args := range map[string][]string{"flat": {"-F", "-l", "-d", "1", vmcore}, "flat-elf": {"-F", "-E", "-d", "1", vmcore}} {
		rc, stream, stderr := pagepipe(t, args...)
		if rc != 0 {
			t.Fatalf("%v: exit %d: %s", args, rc, stderr)
		}
		if err := os.WriteFile(path(name), []byte(stream), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, format := range map[string]string{
		"kdump": "kdump-compressed", "elf": "ELF", "part1": "kdump-compressed", "part2": "kdump-compressed",
		"flat": "flattened kdump-compressed", "flat-elf": "flattened ELF",
	} {
		t.Run(name, func(t *testing.T) {
			report := mustPagepipe(t, "inspect", path(name))
			if !strings.Contains(report, "format          : "+format) {
				t.Errorf("inspect:\n%s", report)
			}
			out := mustPagepipe(t, "verify", vmcore, path(name))
			if !regexp.MustCompile(`^verified: [1-9]\d* pages of `).MatchString(out) {
				t.Errorf("verify: %q", out)
			}
		})
	}
	if out := mustPagepipe(t, "verify", vmcore, path("part1"), path("part2")); strings.Count(out, "verified: ") != 2 {
		t.Errorf("verify of both split files: %q", out)
	}
	// A page changed in the ELF dump's data is found.
	elf := readFile(t, path("elf"))
	elf[len(elf)-100] ^= 0xff
	if err := os.WriteFile(path("elf-bad"), elf, 0o600); err != nil {
		t.Fatal(err)
	}
	if rc, _, stderr := pagepipe(t, "verify", vmcore, path("elf-bad")); rc != 1 || !strings.Contains(stderr, "differs from the vmcore") {
		t.Errorf("verify of a changed ELF dump: exit %d, %q", rc, stderr)
	}
	for _, sub := range [][]string{{"inspect", path("part1") + ".none"}, {"inspect", vmcore + "x"}, {"verify", vmcore, vmcore + "x"}} {
		if err := os.WriteFile(vmcore+"x", []byte("not a dump at all"), 0o600); err != nil {
			t.Fatal(err)
		}
		rc, stdout, stderr := pagepipe(t, sub...)
		if rc != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", sub, rc, stdout, stderr)
		}
		if strings.HasSuffix(sub[len(sub)-1], "x") && !strings.Contains(stderr, "not a dump: pagepipe reads kdump-compressed files (whole or split), their flattened streams (-F) and ELF files") {
			t.Errorf("%v: %q does not say what is read", sub, stderr)
		}
	}
}
