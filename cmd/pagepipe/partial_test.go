package main

import "testing"

// --partial-pages takes makedumpfile 1.7.2's rules (the default) or
// 1.7.6's; PAGEPIPE_PARTIAL_PAGES sets the default; anything else is a
// usage error.
func TestPartialPagesOption(t *testing.T) {
	for _, tc := range []struct {
		env, flag string
		keep, bad bool
	}{
		{"", "", false, false},
		{"", "1.7.6", true, false},
		{"1.7.6", "", true, false},
		{"1.7.6", "1.7.2", false, false},
		{"", "1.7.8", false, true},
		{"new", "", false, true},
	} {
		t.Run(tc.env+"/"+tc.flag, func(t *testing.T) {
			t.Setenv(partialPagesEnv, tc.env)
			args := []string{"-d", "1", "vmcore", "dump"}
			if tc.flag != "" {
				args = append([]string{"--partial-pages", tc.flag}, args...)
			}
			o, err := parseOptions(args)
			if err == nil {
				err = o.values()
			}
			switch {
			case tc.bad && err == nil:
				t.Fatalf("accepted %q", o.partialPages)
			case !tc.bad && (err != nil || o.dumpOptions(nil).KeepPartialData != tc.keep):
				t.Fatalf("rules %q, %v; want KeepPartialData %v", o.partialPages, err, tc.keep)
			}
		})
	}
}
