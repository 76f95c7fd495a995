package main

import (
	"bytes"
	"strings"
	"testing"
)

// Every subcommand answers a bad command line with exit status 1 and one
// line naming itself (or its usage), and --help with its usage and 0.
func TestBadCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "pagepipe-bench bench: unknown flag: --bogus"},
		{[]string{"cores", "--runs", "x"}, `pagepipe-bench cores: invalid argument "x" for "--runs"`},
		{[]string{"cores", "a", "b"}, "pagepipe-bench cores: at most one VMCORE"},
		{[]string{"roofline"}, "usage: pagepipe-bench roofline "},
		{[]string{"roofline", "--cpu", "-1", "v"}, "pagepipe-bench roofline: --cpu -1: not one of this process's CPUs"},
		{[]string{"cpucost", "--n", "2"}, "usage: pagepipe-bench cpucost "},
		{[]string{"readcost", "--sizes", "3", "v"}, `pagepipe-bench readcost: --sizes "3": KiB, multiples of 4`},
		{[]string{"gen-vmcore", "--used", "0.3", "out"}, "pagepipe-bench gen-vmcore: --used needs --profile"},
		{[]string{"gen-vmcore", "--shape", "nope", "out"}, `pagepipe-bench gen-vmcore: unknown shape "nope"`},
		{[]string{"gen-vmcore"}, "usage: pagepipe-bench gen-vmcore "},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != exitFailed {
			t.Errorf("%q: exit %d, want %d", tc.args, code, exitFailed)
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], tc.want) || stdout.Len() != 0 {
			t.Errorf("%q: stderr %q, stdout %q; want one line starting %q", tc.args, stderr.String(), stdout.String(), tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"roofline", "--help"}, &stdout, &stderr); code != exitOK || !strings.HasPrefix(stderr.String(), "usage: pagepipe-bench roofline ") {
		t.Errorf("roofline --help: exit %d, %q", code, stderr.String())
	}
}
