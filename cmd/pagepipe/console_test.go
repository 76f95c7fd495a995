package main

import (
	"testing"
)

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
