// Package realsample is the sample of real kernel pages that the codec
// benchmarks and tests compress: pages of the real Debian fixture
// (internal/fixture.Real) that makedumpfile -d 31 would compress. It is
// shared by the tests of codec and codec/lzo.
package realsample

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"pagepipe/chunk"
	"pagepipe/filter"
	"pagepipe/internal/fixture"
	"pagepipe/internal/integration"
	"pagepipe/kernel"
	"pagepipe/source"
)

// pageSize is the fixture's page size (x86_64).
const pageSize = 4096

// Size is how many pages the sample holds: 16 MiB.
const Size = 4096

// Sample is a deterministic sample of the pages makedumpfile -d 31
// compresses in the real fixture: the dumpable pages at dump level 31 that
// are not all zero (zero pages share one raw descriptor and are never
// compressed), taken evenly over pfn order.
type Sample struct {
	Pages    [][]byte // pageSize bytes each, in pfn order
	Dumpable uint64   // pages dump level 31 keeps, zero pages included
	NonZero  uint64   // of those, the ones not all zero: what is compressed
}

var (
	mu  sync.Mutex
	set *Sample
)

// Get returns the sample of the real fixture, made once per test
// binary. Making the fixture, if it is not cached, takes about half a
// minute.
func Get(tb testing.TB) *Sample {
	tb.Helper()
	integration.Require(tb, "the real fixture's page sample (realsample.Get)")
	mu.Lock()
	defer mu.Unlock()
	if set == nil {
		paths := fixture.Real(tb, fixture.Options{})
		s, err := sample(paths.Vmcore, Size)
		if err != nil {
			tb.Fatalf("sample %s: %v", paths.Vmcore, err)
		}
		set = s
	}
	return set
}

// sample takes n pages from the vmcore at path, as Sample
// describes.
func sample(path string, n int) (*Sample, error) {
	v, err := source.Open(path)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	vi, err := kernel.ParseVMCOREINFO(v.Vmcoreinfo())
	if err != nil {
		return nil, err
	}
	k, err := filter.OpenKernel(vi, v, v.Pfns())
	if err != nil {
		return nil, err
	}
	plan, err := filter.NewPlan(context.Background(), v, filter.MaxLevel, k, 1, source.PartialPages{}, 0)
	if err != nil {
		return nil, err
	}
	r := v.NewReader(source.DefaultMapSize, true)
	defer r.Close()

	var pfns []uint64 // the pages -d 31 compresses
	for pfn := plan.Dumpable.NextSet(0); pfn < plan.Dumpable.Len(); pfn = plan.Dumpable.NextSet(pfn + 1) {
		page, err := r.Page(pfn)
		if err != nil {
			return nil, err
		}
		if !chunk.IsZero(page) {
			pfns = append(pfns, pfn)
		}
	}
	if len(pfns) < n {
		return nil, fmt.Errorf("only %d non-zero dumpable pages, want %d", len(pfns), n)
	}
	s := &Sample{Dumpable: plan.NumDumpable, NonZero: uint64(len(pfns))}
	buf := make([]byte, n*pageSize)
	for i := range n {
		page, err := r.Page(pfns[i*len(pfns)/n])
		if err != nil {
			return nil, err
		}
		p := buf[i*pageSize : (i+1)*pageSize : (i+1)*pageSize]
		copy(p, page)
		s.Pages = append(s.Pages, p)
	}
	return s, nil
}
