package main

import (
	"bytes"
	"testing"
)

// The unsupported-kernel warning is makedumpfile's two common lines, for
// releases outside 2.6.15 to 6.12.
func TestWarnKernelVersion(t *testing.T) {
	for release, warn := range map[string]bool{
		"6.1.0-57-amd64": false, "4.19.0": false, "6.12.48+deb13-amd64": false, "2.6.15": false,
		"6.13.0": true, "7.0": true, "2.6.14-1": true, "garbage": false,
	} {
		var out bytes.Buffer
		c := &console{level: 7, stdout: &out, stderr: &out}
		warnKernelVersion(c, release)
		want := ""
		if warn {
			want = "The kernel version is not supported.\nThe " + progName + " operation may be incomplete.\n"
		}
		if out.String() != want {
			t.Errorf("%s: %q, want %q", release, out.String(), want)
		}
	}
}

// Command-line errors print what makedumpfile prints, on its streams.
func TestUsageErrorsAsMakedumpfile(t *testing.T) {
	try := "Commandline parameter is invalid.\nTry `" + progName + " --help' for more information.\n"
	for _, tc := range []struct {
		args           []string
		stdout, stderr string
	}{
		{[]string{"-d", "32", "a", "b"}, "Dump_level(32) is invalid.\n", ""},
		{[]string{"--message-level", "40", "a", "b"}, "Message_level(40) is invalid.\n", ""},
		{[]string{"--bogus", "a", "b"}, try, progName + ": unrecognized option '--bogus'\n"},
		{[]string{"-q", "a", "b"}, try, progName + ": invalid option -- 'q'\n"},
		{[]string{"a", "b", "--message-level"}, try, progName + ": option '--message-level' requires an argument\n"},
		{[]string{"-d"}, try, progName + ": option requires an argument -- 'd'\n"},
		{[]string{"-F", "-d", "31", "a", "b"}, "", progName + ": need VMCORE (-F writes to stdout), got 2 arguments\n" + try},
		{[]string{"--message-level", "0", "--bogus", "a", "b"}, "", progName + ": unrecognized option '--bogus'\n"},
	} {
		rc, stdout, stderr := pagepipe(t, tc.args...)
		if rc != 1 || stdout != tc.stdout || stderr != tc.stderr {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1, %q, %q", tc.args, rc, stdout, stderr, tc.stdout, tc.stderr)
		}
	}
}
