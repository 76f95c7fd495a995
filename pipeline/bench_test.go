package pipeline_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pagepipe/dump"
	"pagepipe/filter"
	"pagepipe/internal/synth"
	"pagepipe/pipeline"
	"pagepipe/sink"
	"pagepipe/source"
)

// discard is an Output that drops every byte.
type discard struct{}

func (discard) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }

// BenchmarkCopyPass runs the whole dump through the engine (read from mmap
// windows, zero check, compress, reorder, kdump writer; --dry-run, so that
// the disk is not measured) over a generated 256 MiB vmcore with the
// default page mix, at dump level 1. MB/s counts input pages; the copy
// pass's own wall time is reported as copy-ns/op.
//
//	go test -run '^$' -bench CopyPass -benchtime 5x ./pipeline/
func BenchmarkCopyPass(b *testing.B) {
	dir := b.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir, _ = os.MkdirTemp("/dev/shm", "pagepipe-bench")
		defer os.RemoveAll(dir)
	}
	path := filepath.Join(dir, "vmcore")
	if err := synth.WriteFile(path, synth.Default(256)); err != nil {
		b.Fatal(err)
	}
	for _, cd := range append([]string{""}, dump.CodecNames()...) {
		for _, workers := range []int{1, 2, 4} {
			name := cmp.Or(cd, "none")
			b.Run(fmt.Sprintf("%s/workers=%d", name, workers), func(b *testing.B) {
				var copyWall time.Duration
				for b.Loop() {
					res, err := dump.Run(context.Background(), dump.Options{
						Input:   path,
						Levels:  []dump.Level{filter.ExcludeZero},
						Codec:   cd,
						Workers: workers,
						Mmap:    dump.MmapOn,
						Out:     dump.Output{Shape: dump.Kdump, Paths: []string{"bench"}, DryRun: true},
					}, nil)
					if err != nil {
						b.Fatal(err)
					}
					b.SetBytes(int64(res.Copy.Pages * synth.PageSize))
					copyWall += res.Copy.Wall
				}
				b.ReportMetric(float64(copyWall.Nanoseconds())/float64(b.N), "copy-ns/op")
			})
		}
	}
}

// A mapped vmcore page that faults (here: the file is cut short under the
// mapping, as an I/O error under /proc/vmcore would fault) stops the pass
// with an error naming the pfn, not a crash.
func TestFaultingPageIsAnError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vmcore")
	if err := synth.WriteFile(path, synth.Default(8)); err != nil {
		t.Fatal(err)
	}
	v, err := source.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	plan, err := filter.NewPlan(context.Background(), v, 0, nil, 1, source.PartialPages{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	meta := &sink.Meta{BlockSize: synth.PageSize, MaxMapnr: v.MaxMapnr, Notes: v.Info.Notes,
		Present: plan.Present, Dumpable: plan.Dumpable, NumDumpable: plan.NumDumpable}
	k, err := sink.NewKdump(discard{}, meta)
	if err != nil {
		t.Fatal(err)
	}
	truncated := false
	_, err = pipeline.Run(context.Background(), pipeline.Config{
		Workers:  1,
		PageSize: int(v.PageSize()),
		NewReader: func() pipeline.PageReader {
			r := v.NewReader(64<<20, true) // one window over the whole file
			return r
		},
		Pfns:   plan.Dumpable.Cursor(),
		Writer: k,
		Progress: func(done uint64) {
			if !truncated {
				truncated = true
				if err := os.Truncate(path, 1<<20); err != nil {
					t.Error(err)
				}
			}
		},
	})
	if err == nil || !strings.Contains(err.Error(), "cannot be read there") {
		t.Fatalf("error %v, want one naming the unreadable pfn", err)
	}

	// With ZeroUnreadable the pass goes on: the pages past the cut are
	// stored as zeros and counted.
	k, err = sink.NewKdump(discard{}, meta)
	if err != nil {
		t.Fatal(err)
	}
	st, err := pipeline.Run(context.Background(), pipeline.Config{
		Workers:        2,
		PageSize:       int(v.PageSize()),
		NewReader:      func() pipeline.PageReader { return v.NewReader(64<<20, true) },
		Pfns:           plan.Dumpable.Cursor(),
		Writer:         k,
		ZeroUnreadable: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Unreadable == 0 || st.Unreadable >= st.Pages {
		t.Fatalf("%d of %d pages unreadable", st.Unreadable, st.Pages)
	}
}
