package integration

import (
	"fmt"
	"testing"
)

// recorder is a testing.TB that keeps what Fatalf said instead of
// stopping the test.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

// Require stops a test exactly when the binary lacks the tag, with one
// line that says what the test needs.
func TestRequire(t *testing.T) {
	r := &recorder{TB: t}
	Require(r, "the peer makedumpfile")
	want := ""
	if !Enabled {
		want = "needs -tags integration: the peer makedumpfile"
	}
	if r.fatal != want {
		t.Errorf("Require said %q, want %q", r.fatal, want)
	}
}
