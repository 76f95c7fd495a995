package dump

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"pagepipe/internal/synth"
	"pagepipe/source"
)

// stopAfterPriority is Events that stops the dump (cancels its context,
// as a signal does) once the copy pass has written the priority set.
type stopAfterPriority struct {
	notes
	prio   uint64
	cancel context.CancelCauseFunc
}

var prioLine = regexp.MustCompile(`Priority pages first: (\d+) pages`)

func (s *stopAfterPriority) Notef(c Class, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	if m := prioLine.FindStringSubmatch(msg); m != nil {
		s.prio, _ = strconv.ParseUint(m[1], 10, 64)
	}
	s.notes.Notef(c, "%s", msg)
}

func (s *stopAfterPriority) Begin(string, uint64, uint64) func(uint64) {
	return func(done uint64) {
		if s.prio > 0 && done >= s.prio {
			s.cancel(errors.New("stopped after the priority set"))
		}
	}
}

// Issue 21, --split: a prioritised split dump stopped once the priority
// set is written (a signal, say) leaves parts marked incomplete that
// between them keep the whole priority set, each its own range's pages:
// reassembled, the dump holds as many priority pages as the complete one,
// and fewer pages.
func TestPrioritySplitStopped(t *testing.T) {
	dir := t.TempDir()
	vmcore := filepath.Join(dir, "vmcore")
	if err := synth.WriteFile(vmcore, synth.KernelMachine("6.1", 128)); err != nil {
		t.Fatal(err)
	}
	complete := filepath.Join(dir, "complete")
	run(t, Options{Input: vmcore, Levels: []Level{1}, Codec: "lzo", Priority: PriorityOn, Out: Output{Paths: []string{complete}}})
	parts := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ev := &stopAfterPriority{cancel: cancel}
	_, err := Run(ctx, Options{Input: vmcore, Levels: []Level{1}, Codec: "lzo", Priority: PriorityOn, Workers: 2,
		Out: Output{Shape: Split, Paths: parts, SplitBlockKiB: 1024}}, ev)
	var ie *IncompleteError
	if !errors.As(err, &ie) || len(ie.Parts) == 0 || ev.prio == 0 {
		t.Fatalf("Run: %v (priority set %d pages), want incomplete parts\n%s", err, ev.prio, ev.String())
	}
	joined := filepath.Join(dir, "joined")
	if err := Reassemble(context.Background(), ReassembleOptions{Parts: parts, Path: joined}); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Reassemble: %v, want an incomplete dump", err)
	}
	want, wantPages := priorityHeld(t, complete)
	got, gotPages := priorityHeld(t, joined)
	if got != want || want == 0 {
		t.Errorf("the stopped split dump keeps %d priority pages, the complete one %d", got, want)
	}
	if gotPages >= wantPages {
		t.Errorf("the stopped split dump keeps %d pages of %d: not stopped early", gotPages, wantPages)
	}
	if err := Verify(&bytes.Buffer{}, vmcore, joined); err != nil && !errors.Is(err, source.ErrLost) {
		t.Errorf("verify: %v", err)
	}
}

var heldLine = regexp.MustCompile(`(?m)^priority set +: \d+ pages found, (\d+) in the dump`)

// priorityHeld is the priority pages inspect says the dump holds, and its
// pages.
func priorityHeld(t *testing.T, path string) (held, pages uint64) {
	t.Helper()
	var b bytes.Buffer
	if err := Inspect(&b, path); err != nil {
		t.Fatal(err)
	}
	m := heldLine.FindStringSubmatch(b.String())
	if m == nil {
		t.Fatalf("inspect %s: no priority line:\n%s", path, b.String())
	}
	held, _ = strconv.ParseUint(m[1], 10, 64)
	d, err := source.OpenDump(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	return held, d.NumDumpable()
}
