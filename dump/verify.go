package dump

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"pagepipe/source"
)

// Verify reads every page of a dump back and compares it with the vmcore
// it was made from, and says so on w: a check users can run after a
// capture (pagepipe verify), and the last step of `make demo`.
func Verify(w io.Writer, vmcorePath, dumpPath string) error {
	if err := verify(vmcorePath, dumpPath, w); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	return nil
}

func verify(vmcorePath, dumpPath string, w io.Writer) error {
	v, err := source.Open(vmcorePath)
	if err != nil {
		return err
	}
	defer v.Close()
	d, err := source.OpenDump(dumpPath)
	if err != nil {
		return err
	}
	defer d.Close()
	if d.PageSize() != v.PageSize() {
		return fmt.Errorf("the dump's pages are %d bytes, the vmcore's %d", d.PageSize(), v.PageSize())
	}
	if d.MaxMapnr > v.MaxMapnr {
		return fmt.Errorf("dump covers %d pfns, the vmcore only %d", d.MaxMapnr, v.MaxMapnr)
	}
	r := v.NewReader(source.DefaultMapSize, true)
	defer r.Close()
	got := make([]byte, d.PageSize())
	var pages, lost uint64
	for pfn := d.Dumpable.NextSet(0); pfn < d.MaxMapnr; pfn = d.Dumpable.NextSet(pfn + 1) {
		if err := d.ReadPage(pfn, got); errors.Is(err, source.ErrLost) {
			lost++
			continue
		} else if errors.Is(err, source.ErrNotDumped) {
			continue // another part's page, in a split file
		} else if err != nil {
			return err
		}
		want, err := r.Page(pfn)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("pfn %#x differs from the vmcore", pfn)
		}
		pages++
	}
	fmt.Fprintf(w, "verified: %d pages of %s equal %s", pages, dumpPath, vmcorePath)
	if lost > 0 {
		fmt.Fprintf(w, " (%d pages lost: incomplete dump)", lost)
	}
	fmt.Fprintln(w)
	return nil
}
