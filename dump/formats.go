package dump

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"pagepipe/kdumpfmt"
	"pagepipe/source"
)

// A dumpFile is a dump as inspect and verify read it: every format
// pagepipe writes, a flattened one rebuilt first into a temporary file.
type dumpFile struct {
	path   string // the file read: the rebuilt one for a flattened dump
	format string // "kdump-compressed", "ELF", "flattened kdump-compressed", ...
	elf    bool
	tmp    string // the rebuilt file, removed by close
}

// openDumpFile tells a dump's format by its first bytes: a
// kdump-compressed file (whole, or one split file), a flattened stream of
// either (-F), or an ELF file (-E, or a vmcore); anything else is refused
// in one line saying which formats are read.
func openDumpFile(path string) (*dumpFile, error) {
	magic, err := readMagic(path)
	if err != nil {
		return nil, err
	}
	d := &dumpFile{path: path}
	if bytes.HasPrefix(magic, []byte(kdumpfmt.FlatSignature)) {
		if d.tmp, err = source.RearrangeToTemp(path); err != nil {
			return nil, err
		}
		d.path = d.tmp
		if magic, err = readMagic(d.tmp); err != nil {
			d.close()
			return nil, err
		}
	}
	switch {
	case bytes.HasPrefix(magic, []byte(kdumpfmt.Signature)) || bytes.HasPrefix(magic, []byte("DISKDUMP")):
		d.format = "kdump-compressed"
	case bytes.HasPrefix(magic, []byte("\x7fELF")):
		d.format, d.elf = "ELF", true
	default:
		d.close()
		return nil, fmt.Errorf("%s: not a dump: pagepipe reads kdump-compressed files (whole or split), their flattened streams (-F) and ELF files (-E, vmcores)", path)
	}
	if d.tmp != "" {
		d.format = "flattened " + d.format + " (rebuilt in a temporary file)"
	}
	return d, nil
}

func (d *dumpFile) close() {
	if d.tmp != "" {
		os.Remove(d.tmp)
	}
}

func readMagic(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	magic := make([]byte, 16)
	n, err := io.ReadFull(f, magic)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return magic[:n], nil
}
