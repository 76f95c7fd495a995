package dump

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"pagepipe/chunk"
	"pagepipe/source"
)

// Verify reads every page of a dump back and compares it with the vmcore
// it was made from, and says so on w: a check users can run after a
// capture (pagepipe verify), and the last step of `make demo`. The dump is
// any format pagepipe writes: kdump-compressed (a split file's own pages),
// flattened, or ELF (every byte its PT_LOADs hold).
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
	f, err := openDumpFile(dumpPath)
	if err != nil {
		return err
	}
	defer f.close()
	if f.elf {
		return verifyELF(v, f.path, dumpPath, w)
	}
	d, err := source.OpenDump(f.path)
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
	// The running kernel (kcore): read again, pages that changed since
	// the dump are counted, not refused.
	live := v.Kcore != nil
	r := v.NewReader(source.DefaultMapSize, !live)
	defer r.Close()
	got := make([]byte, d.PageSize())
	var pages, lost, erased, changed, zeroed uint64
	// A dump with ERASEINFO (--config) holds 'X' (or a nullified
	// pointer's zeros) where the vmcore holds what was erased.
	hasErase := d.Sub.SizeEraseinfo > 0
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
			if live {
				// A page the dump holds as zeros that holds data now
				// is most often one the page scan left out (free,
				// cache or user memory when the copy pass read its
				// struct page again), not a change: counted apart.
				if chunk.IsZero(got) {
					zeroed++
				} else {
					changed++
				}
				pages++
				continue
			}
			if !hasErase || !onlyErased(got, want) {
				return fmt.Errorf("pfn %#x differs from the vmcore", pfn)
			}
			erased++
		}
		pages++
	}
	if live {
		fmt.Fprintf(w, "verified: %d pages of %s against %s read again: %d changed since the dump (%.2f %%); %d held as zeros hold data now (pages left out as free, cache or user memory, or zero pages written since)", pages, dumpPath, vmcorePath, changed, 100*float64(changed)/float64(max(pages, 1)), zeroed)
	} else {
		fmt.Fprintf(w, "verified: %d pages of %s equal %s", pages, dumpPath, vmcorePath)
	}
	if erased > 0 {
		fmt.Fprintf(w, " (%d of them but for bytes erased by --config)", erased)
	}
	if lost > 0 {
		fmt.Fprintf(w, " (%d pages lost: incomplete dump)", lost)
	}
	fmt.Fprintln(w)
	return nil
}

// onlyErased tells whether every byte where the dump's page differs from
// the vmcore's is one an erase writes: 'X', or 0 (nullify).
func onlyErased(got, want []byte) bool {
	for i := range got {
		if got[i] != want[i] && got[i] != 'X' && got[i] != 0 {
			return false
		}
	}
	return true
}

// verifyELF compares every byte an ELF dump's PT_LOADs hold with the
// vmcore's memory at the same physical addresses.
func verifyELF(v *source.Vmcore, path, name string, w io.Writer) error {
	d, err := source.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	if d.PageSize() != v.PageSize() {
		return fmt.Errorf("the dump's pages are %d bytes, the vmcore's %d", d.PageSize(), v.PageSize())
	}
	got, want := make([]byte, 1<<20), make([]byte, 1<<20)
	var bytesSeen, changed, zeroed uint64
	erasedELF, erasedBytes := bytes.Contains(d.Info.Notes, []byte("ERASEINFO\x00")), false
	for _, l := range d.Loads {
		for off := uint64(0); off < l.FileSize; {
			n := min(uint64(len(got)), l.FileSize-off)
			if err := d.ReadPhys(l.Paddr+off, got[:n]); err != nil {
				return err
			}
			if err := v.ReadPhys(l.Paddr+off, want[:n]); err != nil {
				return err
			}
			if i := firstDiff(got[:n], want[:n]); i >= 0 && v.Kcore != nil {
				// The running kernel: count the pages that changed.
				ps := v.PageSize()
				for p := uint64(0); p < n; p += ps {
					if g := got[p:min(p+ps, n)]; !bytes.Equal(g, want[p:min(p+ps, n)]) {
						if chunk.IsZero(g) {
							zeroed++ // as in a kdump file's (verify)
						} else {
							changed++
						}
					}
				}
			} else if i >= 0 {
				// An ELF dump with an ERASEINFO note (--config) holds
				// 'X' or zeros where the vmcore holds what was erased.
				if !erasedELF || !onlyErased(got[:n], want[:n]) {
					return fmt.Errorf("physical address %#x differs from the vmcore", l.Paddr+off+uint64(i))
				}
				erasedBytes = true
			}
			off += n
		}
		bytesSeen += l.FileSize
	}
	pages := (bytesSeen + v.PageSize() - 1) / v.PageSize()
	if v.Kcore != nil {
		fmt.Fprintf(w, "verified: %d pages of %s against %s read again: %d changed since the dump (%.2f %%); %d held as zeros hold data now (pages left out as free, cache or user memory, or zero pages written since)\n", pages, name, v.Path, changed, 100*float64(changed)/float64(max(pages, 1)), zeroed)
		return nil
	}
	fmt.Fprintf(w, "verified: %d pages of %s equal %s", pages, name, v.Path)
	if erasedBytes {
		fmt.Fprintf(w, " (but for bytes erased by --config)")
	}
	fmt.Fprintln(w)
	return nil
}

// firstDiff is the index of the first byte where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
