package dump

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"pagepipe/sink"
	"pagepipe/source"
)

// Rearrange rebuilds a dump file from a flattened stream (-R). A stream
// that is not flattened leaves no file behind. A kdump-compressed stream
// that ends before its end marker (its writer was stopped, or the disk it
// went to filled up) is rebuilt as far as it goes into a dump marked
// incomplete, which is kept (sink.FinishCut), and an IncompleteError says
// how many pages were lost; one cut before its headers and bitmaps landed,
// or an ELF stream cut short, leaves no file. With dryRun the stream is
// read and checked and no file is written.
func Rearrange(stream io.Reader, path string, force, dryRun bool) error {
	if dryRun {
		if err := checkOutput(path, force); err != nil {
			return err
		}
		if _, err := source.Rearrange(stream, devNull{}); err != nil {
			return fmt.Errorf("rearrange stdin (--dry-run, no file written): %w", err)
		}
		return nil
	}
	f, err := createOutput(path, force)
	if err != nil {
		return err
	}
	_, err = source.Rearrange(stream, f)
	var cut *source.CutError
	if errors.As(err, &cut) {
		if err = finishCut(f, path, cut); err == nil || errors.Is(err, ErrIncomplete) {
			return err
		}
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("rearrange stdin into %s: %w", path, err)
	}
	return f.Close()
}

// finishCut closes f, the file rebuilt from a stream cut short, and
// leaves it a dump marked incomplete (an IncompleteError), or returns why
// it cannot be one.
func finishCut(f *os.File, path string, cut *source.CutError) error {
	if err := f.Close(); err != nil {
		return err
	}
	rw, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	kept, lost, err := sink.FinishCut(rw, cut.End)
	if cerr := rw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: %w", cut, err)
	}
	return &IncompleteError{Err: fmt.Errorf("%s rebuilt from a flattened stream cut short: %d pages kept, %d lost", path, kept, lost)}
}

// Reassemble joins split dump files, pagepipe's or makedumpfile's, given
// in any order, into the one dump they were cut from (--reassemble). From
// incomplete parts it makes a dump marked incomplete, kept, and returns
// an IncompleteError.
func Reassemble(parts []string, out string, force bool) error {
	set, err := sink.OpenSplitSet(parts)
	if err != nil {
		return err
	}
	if err := distinctFiles(append(slices.Clone(parts), out)); err != nil {
		return err
	}
	f, err := createOutput(out, force)
	if err != nil {
		return err
	}
	if _, err := set.Reassemble(f); err != nil {
		f.Close()
		os.Remove(out)
		return fmt.Errorf("reassemble into %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("reassemble into %s: %w", out, err)
	}
	if parts := set.Incomplete(); len(parts) > 0 {
		// Kept, valid and marked, as an incomplete dump is.
		return &IncompleteError{Err: fmt.Errorf("%s reassembled from incomplete split files (%s): %d pages lost", out, strings.Join(parts, ", "), set.Lost), Parts: parts}
	}
	return nil
}
