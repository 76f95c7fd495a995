package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"pagepipe/dump"
)

// Message-level bits, as makedumpfile's print_info.h.
const (
	mlProgress = 1  // progress indicator, always on stderr
	mlCommon   = 2  // common messages: stdout (stderr with -F)
	mlError    = 4  // error messages: stderr
	mlDebug    = 8  // debug messages: stdout (stderr with -F)
	mlReport   = 16 // report and STEP timings: stdout (stderr with -F)
)

// console prints messages by class, to the stream makedumpfile uses.
type console struct {
	level  int
	stdout io.Writer // stderr when the dump itself goes to stdout (-F)
	stderr io.Writer
	// tty: the progress line is redrawn with \r; otherwise each update is
	// its own line (serial consoles, journald).
	tty bool
	cur *progress // the step begun last
}

func (c *console) msg(format string, a ...any) {
	if c.level&mlCommon != 0 {
		fmt.Fprintf(c.stdout, format, a...)
	}
}

func (c *console) debug(format string, a ...any) {
	if c.level&mlDebug != 0 {
		fmt.Fprintf(c.stdout, format, a...)
	}
}

func (c *console) report(format string, a ...any) {
	if c.level&mlReport != 0 {
		fmt.Fprintf(c.stdout, format, a...)
	}
}

func (c *console) errorf(format string, a ...any) {
	if c.level&mlError != 0 {
		fmt.Fprintf(c.stderr, format, a...)
	}
}

// progress draws makedumpfile's progress line: label padded to 50 columns,
// percentage, spinner, ETA; pagepipe adds the current throughput.
type progress struct {
	c       *console
	label   string
	total   uint64
	start   time.Time
	last    time.Time
	spin    int
	lastPct int
	noRate  bool   // a step without a page count: no throughput
	page    uint64 // bytes per page, for the throughput
}

func (c *console) newProgress(label string, total, pageSize uint64) *progress {
	now := time.Now()
	return &progress{c: c, label: label, total: total, start: now, lastPct: -1, page: pageSize}
}

// update redraws the line at most once a second, and always at 100 %.
func (p *progress) update(done uint64) {
	if p.c.level&mlProgress == 0 {
		return
	}
	now := time.Now()
	pct := 1000
	if p.total > 0 {
		pct = int(done * 1000 / p.total)
	}
	if pct < 1000 && now.Sub(p.last) < time.Second {
		return
	}
	if pct == p.lastPct && !p.c.tty {
		return
	}
	p.last, p.lastPct = now, pct
	elapsed := now.Sub(p.start)
	eta := " "
	if done > 0 && elapsed > 0 {
		eta = "eta: " + formatETA(time.Duration(float64(elapsed)*float64(p.total-done)/float64(done)))
	}
	rate := ""
	if s := elapsed.Seconds(); s > 0 && !p.noRate {
		rate = fmt.Sprintf("  %.0f MiB/s", float64(done*p.page)/s/(1<<20))
	}
	spinner := `/|\-`[p.spin%4]
	p.spin++
	lead, tail := "\r", ""
	if !p.c.tty {
		lead, tail = "", "\n"
	}
	fmt.Fprintf(p.c.stderr, "%s%-50s: [%3d.%d %%] %c  %16s%s%s", lead, p.label, pct/10, pct%10, spinner, eta, rate, tail)
}

// finish prints the final 100 % line and ends it.
func (p *progress) finish() {
	if p.c.level&mlProgress == 0 {
		return
	}
	p.lastPct = -1
	p.update(p.total)
	if p.c.tty {
		fmt.Fprint(p.c.stderr, "\n")
	}
}

// formatETA follows makedumpfile: Ns, MmSs, HhMm, DdHh, >100day.
func formatETA(d time.Duration) string {
	s := int64(d.Seconds())
	switch {
	case s < 100:
		return fmt.Sprintf("%ds", s)
	case s < 100*60:
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 48*3600:
		return fmt.Sprintf("%dh%dm", s/3600, s/60%60)
	case s < 100*86400:
		return fmt.Sprintf("%dd%dh", s/86400, s/3600%24)
	}
	return ">100day"
}

// oneLine flattens an error to the single line users see.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// usageError reports a bad command line as makedumpfile does and returns
// its exit code: getopt's own line ("PROG: unrecognized option '--x'") on
// stderr, or makedumpfile's own message about the line ("-e requires
// --work-dir"), then the common messages "Commandline parameter is
// invalid." and "Try `PROG --help' ..." (stdout, or stderr with -F); a
// value makedumpfile refuses while reading the line gets only its one
// message ("Dump_level(N) is invalid."). Where makedumpfile gives no
// reason, pagepipe adds one error line, "PROG: REASON", on stderr
// (docs/reliability.md: every refusal says why in one line).
func usageError(c *console, err error) int {
	var ge *getoptError
	var ve *valueError
	var me *mdfError
	switch {
	case errors.As(err, &ve):
		c.msg("%s\n", ve.msg)
		return exitFailed
	case errors.As(err, &ge):
		// getopt prints this whatever the message level.
		fmt.Fprintf(c.stderr, "%s: %s\n", progName, ge.msg)
	case errors.As(err, &me):
		c.msg("%s\n", me.msg)
	default:
		reason := strings.TrimPrefix(oneLine(err), errUsage.Error()+": ")
		c.errorf("%s: %s\n", progName, reason)
	}
	if errors.Is(err, errUsage) {
		c.msg("Commandline parameter is invalid.\n")
		c.msg("Try `%s --help' for more information.\n", progName)
	}
	return exitFailed
}

// debugHeader starts the debug messages as makedumpfile does: the version
// and the command line (with a trailing space, as makedumpfile prints it).
func debugHeader(c *console, args []string) {
	c.debug("%s: version %s (pagepipe)\n", progName, version)
	c.debug("command line: %s \n\n", strings.Join(append([]string{progName}, args...), " "))
}

// The console is the dump's Events: makedumpfile's progress lines, STEP
// timings and messages, each on the stream makedumpfile uses.

// Begin starts a step's progress line.
func (c *console) Begin(label string, total, pageSize uint64) func(done uint64) {
	c.cur = c.newProgress(label, total, pageSize)
	return c.cur.update
}

// End draws the step's final (100 %) progress line, then its STEP timing
// when it is timed. A step that was not begun (the filter pass's two) gets
// a line without throughput.
func (c *console) End(label string, took time.Duration) {
	p := c.cur
	if p == nil || p.label != label {
		p = c.newProgress(label, 1, 0)
		p.noRate = true
	}
	c.cur = nil
	p.finish()
	if took > 0 {
		c.step(label, took)
	}
}

// Wants reports whether the message level prints debug messages (the
// engine keeps what only a debug message names when it does); other
// classes are filtered as they are printed.
func (c *console) Wants(class dump.Class) bool {
	return class != dump.Debug || c.level&mlDebug != 0
}

// Notef prints a message of its class.
func (c *console) Notef(class dump.Class, format string, a ...any) {
	switch class {
	case dump.Common:
		c.msg(format, a...)
	case dump.Debug:
		c.debug(format, a...)
	case dump.Report:
		c.report(format, a...)
	case dump.Progress:
		if c.level&mlProgress != 0 {
			fmt.Fprintf(c.stderr, format, a...)
		}
	case dump.Error:
		c.errorf(format, a...)
	}
}
