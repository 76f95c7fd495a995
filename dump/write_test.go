package dump

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/chunk"
	"pagepipe/pipeline"
	"pagepipe/sink"
)

// abortOnly is a shape whose Abort succeeds.
type abortOnly struct{}

func (abortOnly) WriteChunk(chunk.Chunk) error { return nil }
func (abortOnly) Close() error                 { return nil }
func (abortOnly) Abort() error                 { return nil }
func (abortOnly) Written() uint64              { return 0 }

// A dump that stopped (here: a full disk) and whose file then fails to
// close (as an NFS close() can) does not pass for a valid incomplete dump:
// the close error reaches the caller, with the file's name, beside the
// reason it stopped.
func TestStopReportsCloseErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dump")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // the second close, in finish, fails
	tg := &targets{outs: []sink.Output{f}, names: []string{path}, files: []*os.File{f}}
	j := &job{o: &Options{Out: Output{Paths: []string{path}}}, ev: silent{}}
	err = j.stop(abortOnly{}, tg, syscall.ENOSPC)
	if errors.Is(err, ErrIncomplete) {
		t.Errorf("%v: called incomplete though the file did not close", err)
	}
	if !errors.Is(err, os.ErrClosed) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path+": ") {
		t.Errorf("%v: want the close error, named, and the full disk", err)
	}

	// Closed fine, the same stop is an incomplete dump for a full output.
	f, err = os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tg = &targets{outs: []sink.Output{f}, names: []string{path}, files: []*os.File{f}}
	err = j.stop(abortOnly{}, tg, syscall.ENOSPC)
	if !errors.Is(err, ErrIncomplete) || !errors.Is(err, ErrOutputFull) {
		t.Errorf("%v: want an incomplete dump for a full output", err)
	}
}

// A flattened stream's records must come in one order: its writer is a
// pipeline.Writer, not a pipeline.Placer (whose chunks the workers write
// at once); a file's is a Placer.
func TestOnlyFilesArePlaced(t *testing.T) {
	m := bitmap.New(64)
	m.SetRange(0, 64)
	l := kdumpLayout{meta: &sink.Meta{BlockSize: 4096, MaxMapnr: 64, Present: m, Dumpable: m, NumDumpable: 64}}
	flat, err := sink.NewFlat(io.Discard, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		out    sink.Output
		placed bool
	}{
		{"flattened stream", flat, false},
		{"file", devNull{}, true},
	} {
		s, err := l.open([]sink.Output{c.out})
		if err != nil {
			t.Fatal(err)
		}
		_, placer := s.(pipeline.Placer)
		_, writer := s.(pipeline.Writer)
		if placer != c.placed || writer == c.placed {
			t.Errorf("%s: %T is a Placer %v, a Writer %v; want a Placer %v", c.name, s, placer, writer, c.placed)
		}
	}
}
