package main

import "testing"

// --dmesg-format takes makedumpfile 1.7.5's format (the default) or
// 1.7.2's; PAGEPIPE_DMESG_FORMAT sets the default; anything else is a
// usage error.
func TestDmesgFormatOption(t *testing.T) {
	for _, tc := range []struct {
		env, flag, want string
		bad             bool
	}{
		{"", "", dmesgCallerID, false},
		{"", "1.7.2", dmesgClassic, false},
		{"1.7.2", "", dmesgClassic, false},
		{"1.7.2", "1.7.5", dmesgCallerID, false},
		{"", "1.7.8", "", true},
		{"current", "", "", true},
	} {
		t.Run(tc.env+"/"+tc.flag, func(t *testing.T) {
			t.Setenv(dmesgFormatEnv, tc.env)
			args := []string{"--dump-dmesg", "vmcore", "log"}
			if tc.flag != "" {
				args = append([]string{"--dmesg-format", tc.flag}, args...)
			}
			o, err := parseOptions(args)
			if err == nil {
				err = o.values()
			}
			switch {
			case tc.bad && err == nil:
				t.Fatalf("accepted %q", o.dmesgFormat)
			case !tc.bad && (err != nil || o.dmesgFormat != tc.want):
				t.Fatalf("format %q, %v; want %q", o.dmesgFormat, err, tc.want)
			}
		})
	}
}
