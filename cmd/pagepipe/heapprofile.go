package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// heapLive is the runtime metric the peak is taken on: the heap the
// last garbage collection found live, which is what a heap profile
// describes.
const heapLive = "/gc/heap/live:bytes"

// startHeapProfile writes a Go heap profile to path each time the live
// heap reaches a new peak (sampled every 10 ms, a new peak being 2 %
// above the last one written), so that the file holds what was live when
// the heap was at its largest: where peak memory goes, by allocation
// site. For developers (--heapprofile); stop ends the sampling and
// writes the profile once more if nothing was written.
func startHeapProfile(path string) (stop func() error, err error) {
	runtime.MemProfileRate = 4096 // finer than the default 512 KiB: small tables show
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		return nil, fmt.Errorf("--heapprofile: %w", err)
	}
	done, finished := make(chan struct{}), make(chan error, 1)
	go func() {
		s := []metrics.Sample{{Name: heapLive}}
		var peak uint64
		var werr error
		write := func() {
			f, err := os.Create(path)
			if err == nil {
				err = pprof.Lookup("heap").WriteTo(f, 0)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil && werr == nil {
				werr = fmt.Errorf("--heapprofile: %w", err)
			}
		}
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				if peak == 0 {
					write()
				}
				finished <- werr
				return
			case <-t.C:
			}
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak+peak/50 {
				peak = v
				write()
			}
		}
	}()
	return func() error { close(done); return <-finished }, nil
}
