package judge

import (
	"testing"

	"pagepipe/source"
)

// ExpectedPages hashes, for every pfn that the reference dump holds (as
// its bitmap of dumpable pages says), the page as the vmcore has it: what a
// judge reading a dump that keeps the same pages must find.
func ExpectedPages(tb testing.TB, vmcore, reference string) Pages {
	tb.Helper()
	v, err := source.Open(vmcore)
	if err != nil {
		tb.Fatal(err)
	}
	defer v.Close()
	d, err := source.OpenDump(reference)
	if err != nil {
		tb.Fatal(err)
	}
	defer d.Close()
	r := v.NewReader(source.DefaultMapSize, true)
	defer r.Close()
	want := Pages{}
	for pfn := d.Dumpable.NextSet(0); pfn < d.MaxMapnr; pfn = d.Dumpable.NextSet(pfn + 1) {
		page, err := r.Page(pfn)
		if err != nil {
			tb.Fatal(err)
		}
		want[pfn] = Hash(page)
	}
	return want
}

// AllPFNs is the one range of every pfn a dump can hold, [0, max_mapnr),
// for a judge to try them all.
func AllPFNs(tb testing.TB, dump string) []Range {
	tb.Helper()
	d, err := source.OpenDump(dump)
	if err != nil {
		tb.Fatal(err)
	}
	defer d.Close()
	return []Range{{Lo: 0, Hi: d.MaxMapnr}}
}
