package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"pagepipe/internal/fixture"
)

// The capture-kernel study (fixtures/make-capture.sh --plan bench;
// docs/benchmarks.md, "In the capture kernel"): every program's runs on
// the same /proc/vmcore, round by round, as the capture kernel timed
// them, and their reads of /proc/vmcore as strace saw them.

// CaptureProgram names a program of the bench plan as the tables do.
var CaptureProgram = map[string]string{
	"pp":  "pagepipe",
	"pp0": "pagepipe (base)",
	"mdf": "makedumpfile 1.7.2",
	"sid": "makedumpfile 1.7.8",
}

// captureTags are the bench plan's argument tags in table order.
var captureTags = []struct{ tag, args string }{
	{"l31", "-l -d 31"}, {"c31", "-c -d 31"}, {"z31", "-z -d 31"}, {"l1", "-l -d 1"},
}

// VmcoreCalls is what a program asked of /proc/vmcore, by strace -y:
// read calls (read, pread64, readv, preadv) and their bytes, and mmaps.
type VmcoreCalls struct {
	Reads     int
	ReadBytes int64
	Maps      int
}

// straceCall matches a call line of strace -f -y (its pid first when
// several processes or threads are traced): the call's name, and the rest.
var straceCall = regexp.MustCompile(`^(?:\d+\s+)?(?:<\.\.\. )?(\w+)(?: resumed>|\()(.*)$`)

// StraceVmcore counts the /proc/vmcore calls in an strace -f -y output.
// With -f a call may be cut in two ("<unfinished ...>", then "<... NAME
// resumed>"): the first half names the file, the second the result.
func StraceVmcore(path string) (VmcoreCalls, error) {
	f, err := os.Open(path)
	if err != nil {
		return VmcoreCalls{}, err
	}
	defer f.Close()
	var c VmcoreCalls
	pending := map[string]bool{} // pid → an unfinished read of /proc/vmcore
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pid, _, _ := strings.Cut(line, " ")
		m := straceCall.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name, args, ret := m[1], m[2], ""
		if i := strings.LastIndex(line, ") = "); i >= 0 {
			ret, _, _ = strings.Cut(line[i+4:], " ")
		}
		resumed := strings.Contains(line, " resumed>")
		onVmcore := strings.Contains(args, "</proc/vmcore>")
		if resumed {
			onVmcore = pending[pid]
			delete(pending, pid)
		} else if strings.HasSuffix(line, "<unfinished ...>") {
			if onVmcore && isRead(name) {
				pending[pid] = true
				c.Reads++
			} else if onVmcore && name == "mmap" {
				c.Maps++
			}
			continue
		}
		switch {
		case !onVmcore:
		case isRead(name):
			if !resumed {
				c.Reads++
			}
			if n, err := strconv.ParseInt(ret, 10, 64); err == nil && n > 0 {
				c.ReadBytes += n
			}
		case name == "mmap" && !resumed:
			c.Maps++
		}
	}
	return c, sc.Err()
}

func isRead(name string) bool {
	return name == "read" || name == "pread64" || name == "readv" || name == "preadv"
}

// WriteCaptureBench prints a bench plan's runs: per argument tag, a row
// per program with the medians over the rounds, and the /proc/vmcore calls
// of its strace'd run; then the diagnostic runs.
func WriteCaptureBench(w io.Writer, c fixture.Capture) error {
	p := &printer{w: w}
	p.f("capture kernel: %s CPUs, MemTotal %s kB, /proc/vmcore %s bytes; %s (%s)\n",
		c.Guest["cpus"], c.Guest["memtotal_kb"], c.Guest["vmcore_bytes"], c.Info["made"], c.Dir)
	type key struct{ tag, prog string }
	by := map[key][]fixture.Run{}
	rounds := 0
	var progs []string
	for name, r := range c.Runs {
		parts := strings.SplitN(name, "-", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[0], "r") {
			continue
		}
		n, err := strconv.Atoi(parts[0][1:])
		if err != nil {
			continue
		}
		rounds = max(rounds, n)
		by[key{parts[2], parts[1]}] = append(by[key{parts[2], parts[1]}], r)
		if !slices.Contains(progs, parts[1]) {
			progs = append(progs, parts[1])
		}
	}
	order := []string{"pp", "pp0", "mdf", "sid"}
	slices.SortFunc(progs, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) })
	med := func(rs []fixture.Run, f func(fixture.Run) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return statOf(v).Median
	}
	for _, t := range captureTags {
		rows := [][]string{{"program", "runs", "real (s)", "user (s)", "sys (s)", "user+sys (s)", "peak RSS (KiB)", "read() MB", "read() calls", "threads", "ctx switches (vol/invol)", "vmcore maps", "vmcore reads, MB"}}
		for _, prog := range progs {
			rs := by[key{t.tag, prog}]
			if len(rs) == 0 {
				continue
			}
			maps, reads := "-", "-"
			if t.tag == "l31" {
				if vc, err := StraceVmcore(c.Out("chk-" + prog + "-l31.strace")); err == nil {
					maps, reads = strconv.Itoa(vc.Maps), fmt.Sprintf("%d, %.2f", vc.Reads, float64(vc.ReadBytes)/1e6)
				}
			}
			threads, csw := "-", "-"
			if rs[0].Sampled && rs[0].Threads > 0 {
				threads = fmt.Sprintf("%.0f", med(rs, func(r fixture.Run) float64 { return float64(r.Threads) }))
				csw = fmt.Sprintf("%.0f / %.0f", med(rs, func(r fixture.Run) float64 { return float64(r.VCSW) }), med(rs, func(r fixture.Run) float64 { return float64(r.NVCSW) }))
			}
			rows = append(rows, []string{CaptureProgram[prog], strconv.Itoa(len(rs)),
				fmt.Sprintf("%.2f", med(rs, func(r fixture.Run) float64 { return r.Wall })),
				fmt.Sprintf("%.2f", med(rs, func(r fixture.Run) float64 { return r.User })),
				fmt.Sprintf("%.2f", med(rs, func(r fixture.Run) float64 { return r.Sys })),
				fmt.Sprintf("%.2f", med(rs, func(r fixture.Run) float64 { return r.User + r.Sys })),
				fmt.Sprintf("%.0f", med(rs, func(r fixture.Run) float64 { return float64(r.RSSKB) })),
				fmt.Sprintf("%.2f", med(rs, func(r fixture.Run) float64 { return float64(r.ReadBytes) / 1e6 })),
				fmt.Sprintf("%.0f", med(rs, func(r fixture.Run) float64 { return float64(r.ReadCalls) })),
				threads, csw, maps, reads})
		}
		if len(rows) == 1 {
			continue
		}
		p.f("\n[%s] medians of %d alternating rounds (the capture kernel's busybox time; read() from /proc/PID/io: every file; vmcore maps and reads: strace -f -y of one more run each)\n", t.args, rounds)
		p.table(rows)
	}
	var diags []string
	for name := range c.Runs {
		if strings.HasPrefix(name, "diag-") || strings.HasSuffix(name, "-version") || strings.HasPrefix(name, "chk-") {
			diags = append(diags, name)
		}
	}
	slices.Sort(diags)
	if len(diags) > 0 {
		p.f("\n[single runs] diagnostics, the version commands (start and exit alone), the strace'd runs\n")
		rows := [][]string{{"command", "real (s)", "user (s)", "sys (s)", "peak RSS (KiB)", "threads", "ctx switches (vol/invol)"}}
		for _, name := range diags {
			r := c.Runs[name]
			th, csw := "-", "-"
			if r.Sampled && r.Threads > 0 {
				th, csw = strconv.FormatInt(r.Threads, 10), fmt.Sprintf("%d / %d", r.VCSW, r.NVCSW)
			}
			rows = append(rows, []string{name, fmt.Sprintf("%.2f", r.Wall), fmt.Sprintf("%.2f", r.User), fmt.Sprintf("%.2f", r.Sys), strconv.FormatInt(r.RSSKB, 10), th, csw})
		}
		p.table(rows)
	}
	for _, prog := range []string{"pp", "mdf"} {
		if b, err := os.ReadFile(c.Out("diag-" + prog + "-syscalls.txt")); err == nil {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			p.f("\n[syscalls] %s -F -l -d 31 under strace -f -c (its top 14 lines)\n%s\n", CaptureProgram[prog], strings.Join(lines[:min(len(lines), 14)], "\n"))
		}
	}
	if b, err := os.ReadFile(c.Out("cpucost.out")); err == nil {
		p.f("\n[cpucost] pagepipe-bench cpucost --n 20000, in the capture kernel\n%s", b)
	}
	if b, err := os.ReadFile(c.Out("readcost.out")); err == nil {
		p.f("\n[readcost] pagepipe-bench readcost --mib 64 --pages 1000 /proc/vmcore, in the capture kernel\n%s", b)
	}
	return p.err
}
