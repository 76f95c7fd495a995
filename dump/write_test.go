package dump

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pagepipe/pipeline"
	"pagepipe/sink"
)

// abortOnly is a shape whose Abort succeeds.
type abortOnly struct{}

func (abortOnly) WritePages([]uint64, []sink.Page, []byte) error { return nil }
func (abortOnly) Close() error                                   { return nil }
func (abortOnly) Abort() ([]int, error)                          { return []int{0}, nil }
func (abortOnly) Written() uint64                                { return 0 }

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

// A flattened stream's records must come in one order: its writer is not
// a pipeline.Placer (whose chunks the workers write at once), a file's is.
func TestOnlyFilesArePlaced(t *testing.T) {
	if _, ok := any(kdumpShape{}).(pipeline.Placer); ok {
		t.Error("kdumpShape (a flattened stream's writer) is a Placer")
	}
	if _, ok := any(placedKdump{}).(pipeline.Placer); !ok {
		t.Error("placedKdump is not a Placer")
	}
}
