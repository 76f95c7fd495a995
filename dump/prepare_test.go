package dump

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// notes is an Events that keeps the messages and the steps.
type notes struct {
	strings.Builder
	steps []string // "label" as each step ends, "label timed" with a STEP time
}

func (n *notes) Begin(string, uint64, uint64) func(uint64) { return func(uint64) {} }
func (n *notes) End(label string, took time.Duration) {
	if took > 0 {
		label += " timed"
	}
	n.steps = append(n.steps, label)
}
func (n *notes) Notef(_ Class, format string, a ...any) { fmt.Fprintf(n, format, a...) }

// The unsupported-kernel warning is makedumpfile's two common lines, for
// releases outside 2.6.15 to 6.12.
func TestWarnKernelVersion(t *testing.T) {
	for release, warn := range map[string]bool{
		"6.1.0-57-amd64": false, "4.19.0": false, "6.12.48+deb13-amd64": false, "2.6.15": false,
		"6.13.0": true, "7.0": true, "2.6.14-1": true, "garbage": false,
	} {
		var out notes
		warnKernelVersion(&out, "pagepipe", release)
		want := ""
		if warn {
			want = "The kernel version is not supported.\nThe pagepipe operation may be incomplete.\n"
		}
		if out.String() != want {
			t.Errorf("%s: %q, want %q", release, out.String(), want)
		}
	}
}
