package source

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"pagepipe/bitmap"
)

// Memory is a crashed machine's memory as pagepipe reads it: an ELF vmcore
// (/proc/vmcore, QEMU's ELF) or a kdump-compressed dump being refiltered
// or converted to another codec.
type Memory interface {
	// Notes returns the ELF notes, the CPU count and where the VMCOREINFO
	// text is in them (size 0: none).
	Notes() (notes []byte, nrCPUs int, vmcoreinfoOff, vmcoreinfoSize uint64)
	// Pfns returns one past the highest pfn of the machine.
	Pfns() uint64
	// Bitmaps returns the 1st bitmap (pfns present) and the 2nd as far as
	// the input decides it (pfns with data), cut at maxMapnr.
	Bitmaps(maxMapnr uint64) (present, dumpable *bitmap.Bitmap)
	// ReadPhys reads physical memory; what the input does not hold reads
	// as zeros. Safe for concurrent use.
	ReadPhys(paddr uint64, p []byte) error
	// NewReader returns a page reader for one worker.
	NewReader(mapSize int, useMmap bool) Reader
	Close() error
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
		return nil, err
	}
	var magic [16]byte
	_, err = io.ReadFull(f, magic[:])
	f.Close()
	switch {
	case err != nil && err != io.ErrUnexpectedEOF && err != io.EOF:
		return nil, err
	case bytes.HasPrefix(magic[:], []byte("KDUMP   ")) || bytes.HasPrefix(magic[:], []byte("DISKDUMP")):
		return OpenDump(path)
	case bytes.HasPrefix(magic[:], []byte("makedumpfile")):
		return nil, fmt.Errorf("%s: a flattened dump: rebuild it with -R first", path)
	}
	return Open(path)
}
