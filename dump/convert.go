package dump

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"pagepipe/sink"
	"pagepipe/source"
)

// Rearrange rebuilds a dump file from a flattened stream (-R). A stream
// that is not flattened, or short, leaves no file behind.
func Rearrange(stream io.Reader, path string, force bool) error {
	f, err := createOutput(path, force)
	if err != nil {
		return err
	}
	if _, err := source.Rearrange(stream, f); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("rearrange stdin into %s: %w", path, err)
	}
	return f.Close()
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
