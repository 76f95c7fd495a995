//go:build integration

package main

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
)

// debianMakedumpfile is Debian 12's makedumpfile 1.7.2 (scripts/deps.sh
// installs it).
const debianMakedumpfile = "/usr/bin/makedumpfile"

// manPageOptions are the options of makedumpfile's man page (upstream at
// b7587f1, which adds --extension to Debian's 1.7.2 page), each with a
// value where it takes one, and -e, which both programs take and neither
// page lists. TestManPageOptionsListed checks that the installed page
// lists no other.
var manPageOptions = [][]string{
	{"-c"}, {"-l"}, {"-p"}, {"-z"}, {"-d", "31"}, {"-L", "1G"}, {"-E"}, {"-f"},
	{"-x", "VMLINUX"}, {"-i", "VMCOREINFO"}, {"-g", "VMCOREINFO"},
	{"--config", "FILTER.conf"}, {"--eppic", "MACRO.c"}, {"-F"}, {"-R"}, {"--split"},
	{"--num-threads", "2"}, {"--reassemble"}, {"-b", "4"}, {"--cyclic-buffer", "1024"},
	{"--splitblock-size", "1024"}, {"--work-dir", "WORKDIR"}, {"--non-mmap"},
	{"--xen-syms", "XEN-SYMS"}, {"--xen-vmcoreinfo", "VMCOREINFO"}, {"-X"},
	{"--xen_phys_start", "0x1000000"}, {"--message-level", "7"},
	{"--vtop", "0xffffffff81000000"}, {"--dump-dmesg"}, {"--partial-dmesg"},
	{"--mem-usage"}, {"--diskset=VMCORE1"}, {"-D"}, {"-h"}, {"--help"}, {"-v"},
	{"--dry-run"}, {"--show-stats"}, {"--extension", "EXT.so"}, {"-e"},
}

// positionals are the arguments each line is tried with: none, VMCORE,
// VMCORE DUMPFILE, VMCORE and two DUMPFILEs (names only: --check-params
// opens no file).
var positionals = [][]string{nil, {"VMCORE"}, {"VMCORE", "DUMPFILE"}, {"VMCORE", "DUMPFILE1", "DUMPFILE2"}}

// extension says why pagepipe's --check-params deliberately answers a
// line otherwise than makedumpfile 1.7.2's ("" where it must not): the
// options of the line (one or two of manPageOptions) and its number of
// positional arguments. pagepipe runs -E and --split with --num-threads
// (its parallel ELF and split dumps), which makedumpfile refuses; it
// refuses --dump-dmesg with --split, which makedumpfile takes and then
// fails on (its log goes to no file).
func extension(opts []string, positionals int) string {
	has := func(o string) bool { return slices.Contains(opts, o) }
	switch {
	case has("--num-threads") && has("-E") && positionals == 2:
		return "pagepipe writes ELF dumps with --num-threads workers; makedumpfile refuses the pair"
	case has("--num-threads") && has("--split") && positionals == 3:
		return "pagepipe writes split dumps with --num-threads workers; makedumpfile refuses the pair"
	case has("--dump-dmesg") && has("--split") && positionals == 3:
		return "--dump-dmesg writes one LOGFILE: makedumpfile takes --split with it, then fails"
	case has("--mem-usage") && positionals == 1 && (has("-E") || has("--split") || has("--dump-dmesg") || has("--dry-run")):
		return "--mem-usage prints a table: pagepipe refuses a dump's options beside it, which makedumpfile's --check-params takes"
	}
	return ""
}

// pagepipeAsMakedumpfile builds pagepipe and installs it as makedumpfile
// in a directory of its own, with Debian's makedumpfile beside it as
// makedumpfile.distrib, as pagepipe-as-makedumpfile's divert leaves them.
func pagepipeAsMakedumpfile(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "pagepipe")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for link, target := range map[string]string{"makedumpfile": "pagepipe", "makedumpfile.distrib": debianMakedumpfile} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "makedumpfile")
}

// exitOf runs prog with args in dir and returns its exit status and
// stderr.
func exitOf(t *testing.T, dir string, env []string, prog string, args ...string) (int, string) {
	cmd := exec.Command(prog, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	}
	t.Fatalf("%s: %v", prog, err)
	return -1, ""
}

// Acceptance (issue 30): every option and every pair of options of
// makedumpfile's man page, with each number of positional arguments,
// gets the same exit status from pagepipe's --check-params as from
// Debian's makedumpfile 1.7.2's, except the listed extensions. A line
// with an option pagepipe hands over is answered by makedumpfile itself
// (pagepipe says so on stderr); without a makedumpfile to hand over to,
// pagepipe refuses it in one line. No line leaves a file.
func TestCheckParamsMatchesMakedumpfile(t *testing.T) {
	pp := pagepipeAsMakedumpfile(t)
	var lines [][]string
	for i, a := range manPageOptions {
		lines = append(lines, a)
		for _, b := range manPageOptions[i+1:] {
			lines = append(lines, append(slices.Clone(a), b...))
		}
	}
	type result struct {
		opts    []string
		nargs   int
		line    []string
		mdf, pp int
		// makedumpfile on the line without --config FILTER.conf, where
		// the line has --config and no -x: pagepipe reads the types from
		// the kernel's BTF, so the rest of the line decides its answer.
		mdfBTF      int
		ppStderr    string
		alone       int // pagepipe without a fallback
		aloneStderr string
	}
	var results []result
	for _, l := range lines {
		for _, p := range positionals {
			results = append(results, result{opts: l, nargs: len(p), line: append(append([]string{"--check-params"}, l...), p...)})
		}
	}
	work := t.TempDir()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r := &results[i]
				r.mdf, _ = exitOf(t, work, nil, debianMakedumpfile, r.line...)
				r.mdfBTF = r.mdf
				if i := slices.Index(r.line, "--config"); i >= 0 && !slices.Contains(r.line, "-x") {
					r.mdfBTF, _ = exitOf(t, work, nil, debianMakedumpfile, slices.Delete(slices.Clone(r.line), i, i+2)...)
				}
				r.pp, r.ppStderr = exitOf(t, work, nil, pp, r.line...)
				r.alone, r.aloneStderr = exitOf(t, work, []string{fallbackEnv + "=none"}, pp, r.line...)
			}
		}()
	}
	for i := range results {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	handedOver := regexp.MustCompile(`^makedumpfile: .* (is|are) not built into pagepipe: handing over to .*/makedumpfile\.distrib\n`)
	var extensions, handed int
	for _, r := range results {
		line := strings.Join(r.line, " ")
		hands := false
		for _, s := range optionTable {
			if s.status == handOver && slices.ContainsFunc(r.line, func(a string) bool {
				return a == s.name() || strings.HasPrefix(a, s.name()+"=")
			}) {
				hands = true
			}
		}
		if hands != handedOver.MatchString(r.ppStderr) {
			t.Errorf("%s: handed over %v, want %v (stderr %q)", line, !hands, hands, r.ppStderr)
		}
		if hands {
			handed++
			// With -F the common messages ("Commandline parameter is
			// invalid.") are on stderr too.
			refusal := strings.TrimSuffix(r.aloneStderr, "Commandline parameter is invalid.\nTry `makedumpfile --help' for more information.\n")
			if r.alone != 1 || strings.Count(refusal, "\n") != 1 || !strings.Contains(refusal, "there is no makedumpfile to hand over to") {
				t.Errorf("%s without a fallback: exit %d, stderr %q; want 1 and one line", line, r.alone, r.aloneStderr)
			}
		} else if r.alone != r.pp {
			t.Errorf("%s: exit %d without a fallback, %d with one", line, r.alone, r.pp)
		}
		why := ""
		if !hands {
			why = extension(r.opts, r.nargs)
			if why == "" && r.mdfBTF != r.mdf {
				why = fmt.Sprintf("pagepipe reads --config's types from the kernel's own BTF; makedumpfile refuses --config without -x and exits %d without --config", r.mdfBTF)
			}
		}
		switch {
		case !hands && r.mdfBTF != r.mdf && r.pp != r.mdfBTF:
			t.Errorf("%s: pagepipe exits %d, makedumpfile without --config %d\n%s", line, r.pp, r.mdfBTF, r.ppStderr)
		case why == "" && r.pp != r.mdf:
			t.Errorf("%s: pagepipe exits %d, makedumpfile %d\n%s", line, r.pp, r.mdf, r.ppStderr)
		case why != "" && r.pp == r.mdf:
			t.Errorf("%s: listed as an extension (%s), but both exit %d", line, why, r.pp)
		case why != "":
			extensions++
			t.Logf("%s: pagepipe exits %d, makedumpfile %d: %s", line, r.pp, r.mdf, why)
		}
	}
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Errorf("--check-params left files: %v", entries)
	}
	t.Logf("%d lines: %d handed over to makedumpfile, %d answered otherwise as listed", len(results), handed, extensions)
	if handed == 0 || extensions == 0 {
		t.Errorf("nothing handed over or no extension met: the table proves nothing")
	}
}

// The options of the installed makedumpfile(8) are all in
// manPageOptions: the table above covers the page.
func TestManPageOptionsListed(t *testing.T) {
	page := manPage(t, "/usr/share/man/man8/makedumpfile.8.gz")
	listed := []string{"--check-params"} // on every line of the table
	for _, o := range manPageOptions {
		listed = append(listed, strings.SplitN(o[0], "=", 2)[0])
	}
	// The page's option paragraphs start \fB\-x\fR, \fB\-\-split\fR, or
	// .BI \-d (groff escapes).
	re := regexp.MustCompile(`(?m)^(?:\\fB|\.BI? )((?:\\-){1,2}[a-zA-Z](?:[a-zA-Z_-]|\\-)*(?:,\\-[a-z])*)`)
	n := 0
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		for _, o := range strings.Split(strings.ReplaceAll(m[1], `\-`, "-"), ",") {
			n++
			if !slices.Contains(listed, o) {
				t.Errorf("makedumpfile(8) lists %s, the table does not", o)
			}
		}
	}
	if n < 30 {
		t.Fatalf("found only %d options in makedumpfile(8): the pattern is wrong", n)
	}
}

func manPage(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("makedumpfile")) || bytes.Contains(b, []byte("pagepipe")) {
		t.Fatalf("%s is not makedumpfile's page", path)
	}
	return fmt.Sprint(string(b))
}

// reportHex reads the page counts of a --show-stats report, by label.
func reportHex(t *testing.T, out string) map[string]uint64 {
	t.Helper()
	counts := map[string]uint64{}
	for _, m := range regexp.MustCompile(`(?m)^\s*([A-Z][A-Za-z -]+?)\s*: 0x([0-9a-f]{16})$`).FindAllStringSubmatch(out, -1) {
		var n uint64
		if _, err := fmt.Sscanf(m[2], "%x", &n); err != nil {
			t.Fatal(err)
		}
		counts[m[1]] = n
	}
	if len(counts) < 10 {
		t.Fatalf("%d counts in the report:\n%s", len(counts), out)
	}
	return counts
}

// --show-stats's page counts differ from makedumpfile 1.7.2's on a
// /proc/vmcore with kexec-tools' kernel-text PT_LOAD (an alias of RAM), by
// exactly that alias: makedumpfile counts each PT_LOAD's pages, so its
// "Original pages" and "Remaining pages" hold the alias twice and its
// "Memory Hole" (max_mapnr minus Original) wraps below zero; pagepipe
// counts each page frame once. Every excluded class and the total agree
// (docs/kdump.md, "--show-stats").
func TestShowStatsAgainstMakedumpfile(t *testing.T) {
	dir := t.TempDir()
	s := synth.KernelMachine("6.1", 64)
	vmcore := writeShape(t, dir, "vmcore", s)
	_, pp, stderr := pagepipe(t, "--show-stats", "-d", "31", vmcore, filepath.Join(dir, "pp"))
	mdf := judge.Makedumpfile(t, "--show-stats", "-d", "31", vmcore, filepath.Join(dir, "mdf"))
	t.Logf("pagepipe:\n%s%s\nmakedumpfile 1.7.2:\n%s", pp, stderr, mdf)
	ours, theirs := reportHex(t, pp), reportHex(t, mdf)
	// The pages of the PT_LOADs, each counted, and the frames they hold.
	f, err := elf.Open(vmcore)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var perLoad uint64
	frames := map[uint64]bool{}
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		lo, hi := p.Paddr/synth.PageSize, (p.Paddr+p.Memsz)/synth.PageSize
		perLoad += hi - lo
		for p := lo; p < hi; p++ {
			frames[p] = true
		}
	}
	alias := perLoad - uint64(len(frames))
	if alias == 0 {
		t.Fatal("the machine has no aliased PT_LOAD: the test proves nothing")
	}
	for label, n := range theirs {
		want := n
		switch label {
		case "Original pages", "Remaining pages":
			want = n - alias
		case "Memory Hole":
			want = n + alias
		}
		if ours[label] != want {
			t.Errorf("%s: pagepipe %#x, makedumpfile %#x (alias %#x pages)", label, ours[label], n, alias)
		}
	}
	if ours["Original pages"] != uint64(len(frames)) || ours["Memory Hole"] != ours["Total pages"]-uint64(len(frames)) {
		t.Errorf("pagepipe's Original %#x, Memory Hole %#x; the machine has %#x frames of %#x", ours["Original pages"], ours["Memory Hole"], len(frames), ours["Total pages"])
	}
}
