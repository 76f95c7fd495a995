package source

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"

	"pagepipe/bitmap"
	"pagepipe/kdumpfmt"
	"pagepipe/kernel"
)

// Memory is a crashed machine's memory as pagepipe reads it: an ELF vmcore
// (/proc/vmcore, QEMU's ELF) or a kdump-compressed dump being refiltered
// or converted to another codec.
type Memory interface {
	// Notes returns the ELF notes, the CPU count and where the VMCOREINFO
	// text is in them (size 0: none).
	Notes() (notes []byte, nrCPUs int, vmcoreinfoOff, vmcoreinfoSize uint64)
	// Arch is the architecture of the crashed kernel.
	Arch() kernel.Arch
	// PageSize is the crashed kernel's page size in bytes (one of
	// PageSizes): the unit of every pfn and of Reader.Page.
	PageSize() uint64
	// Pfns returns one past the highest pfn of the machine.
	Pfns() uint64
	// Bitmaps returns the 1st bitmap (pfns present) and the 2nd as far as
	// the input decides it (pfns with data), cut at maxMapnr, taking the
	// pages PT_LOADs hold in part as pp says; a dump's bitmaps are what
	// they are.
	Bitmaps(maxMapnr uint64, pp PartialPages) (present, dumpable *bitmap.Bitmap)
	// ReadPhys reads physical memory; what the input does not hold reads
	// as zeros. Safe for concurrent use.
	ReadPhys(paddr uint64, p []byte) error
	// NewReader returns a page reader for one worker.
	NewReader(mapSize int, useMmap bool) Reader
	Close() error
}

// PartialPages says how the bitmaps take a page that a PT_LOAD holds only
// in part, as makedumpfile does in the mode it runs in and the release
// pagepipe follows. kexec-tools' /proc/vmcore has such a page at the end of
// low RAM (0x9fc00).
type PartialPages struct {
	// LastPresent: a PT_LOAD's partial last page is present.
	// makedumpfile's one-cycle builder (create_1st_bitmap_file, with a
	// bitmap file) counts it; its cyclic one (create_bitmap_from_memhole)
	// rounds it down. filter.Cycle says which one runs.
	LastPresent bool
	// KeepData: the page holding p_paddr+p_filesz, when that is mid-page,
	// keeps its bit in the 2nd bitmap, as makedumpfile 1.7.6 and later
	// decide (exclude_nodata_pages rounds up since "Fix incorrect page
	// exclusion in exclude_nodata_pages()"); 1.7.2 to 1.7.5 round down and
	// leave it out. With LastPresent, a partial last page is then dumped,
	// the bytes past the PT_LOAD reading as zeros.
	KeepData bool
}

// Reader serves pages and physical ranges to one worker; the slices it
// returns are valid until its next call.
type Reader interface {
	Page(pfn uint64) ([]byte, error)
	SlicePhys(paddr uint64, n int) ([]byte, error)
	Close()
}

// OpenMemory opens an ELF vmcore or a kdump-compressed dump, telling them
// apart by their first bytes. A flattened dump must be rearranged first.
func OpenMemory(path string) (Memory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, denied(path, err)
	}
	var magic [16]byte
	_, err = io.ReadFull(f, magic[:])
	f.Close()
	switch {
	case err != nil && err != io.ErrUnexpectedEOF && err != io.EOF:
		return nil, denied(path, err)
	case bytes.HasPrefix(magic[:], []byte("KDUMP   ")) || bytes.HasPrefix(magic[:], []byte("DISKDUMP")):
		return openSupportedDump(path)
	case bytes.HasPrefix(magic[:], []byte("makedumpfile")):
		return openFlattened(path)
	}
	return Open(path)
}

// openSupportedDump opens a dump to be dumped again (refiltered, another
// codec), refusing one of an architecture or page size pagepipe does not
// dump. (OpenDump itself opens any dump: inspect and the reassembler only
// read its headers or copy it.)
func openSupportedDump(path string) (*Dump, error) {
	d, err := OpenDump(path)
	if err != nil {
		return nil, err
	}
	if err := d.checkArch(); err != nil {
		d.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// openFlattened rebuilds a flattened dump into a temporary file (in
// $TMPDIR) and opens that; the file goes when the dump is closed.
func openFlattened(path string) (Memory, error) {
	name, err := RearrangeToTemp(path)
	if err != nil {
		return nil, err
	}
	d, err := OpenDump(name)
	if err == nil {
		if err = d.checkArch(); err != nil {
			d.Close()
			err = fmt.Errorf("%s: %w", path, err)
		}
	}
	if err != nil {
		os.Remove(name)
		return nil, err
	}
	d.Path = path
	return &rearranged{Dump: d, tmp: name}, nil
}

// RearrangeToTemp rebuilds the flattened stream in the file path into a
// temporary file (in $TMPDIR), whose name it returns: the caller removes
// it.
func RearrangeToTemp(path string) (string, error) {
	in, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer in.Close()
	tmp, err := os.CreateTemp("", "pagepipe-rearranged-*")
	if err != nil {
		return "", fmt.Errorf("%s: rebuild the flattened dump: %w", path, err)
	}
	_, err = kdumpfmt.Unflatten(bufio.NewReaderSize(in, 1<<20), tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("%s: rebuild the flattened dump: %w", path, err)
	}
	return tmp.Name(), nil
}

// rearranged is a dump rebuilt from a flattened stream into a temporary file.
type rearranged struct {
	*Dump
	tmp string
}

// Unwrap returns the rebuilt dump.
func (r *rearranged) Unwrap() *Dump { return r.Dump }

func (r *rearranged) Close() error {
	err := r.Dump.Close()
	os.Remove(r.tmp)
	return err
}
