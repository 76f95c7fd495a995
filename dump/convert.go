package dump

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"pagepipe/convert"
	"pagepipe/kdumpfmt"
	"slices"
	"strings"
)

// RearrangeOptions are one -R: a flattened stream rebuilt into a file.
type RearrangeOptions struct {
	// Stream is the flattened stream (standard input).
	Stream io.Reader
	// Path is the dump file to write.
	Path string
	// Force overwrites an existing file (-f).
	Force bool
	// DryRun reads and checks the stream and writes no file.
	DryRun bool
}

// Rearrange rebuilds a dump file from a flattened stream (-R). A stream
// that is not flattened leaves no file behind. A kdump-compressed stream
// that ends before its end marker (its writer was stopped, or the disk it
// went to filled up) is rebuilt as far as it goes into a dump marked
// incomplete, which is kept (convert.FinishCut), and an IncompleteError
// says how many pages were lost; one cut before its headers and bitmaps
// landed, or an ELF stream cut short, leaves no file, and so does a
// rebuild that ctx stops.
func Rearrange(ctx context.Context, o RearrangeOptions) error {
	stream, path, force := o.Stream, o.Path, o.Force
	if o.DryRun {
		if err := checkOutput(path, force); err != nil {
			return err
		}
		if _, err := convert.Rearrange(ctx, stream, devNull{}); err != nil {
			return fmt.Errorf("rearrange stdin (--dry-run, no file written): %w", err)
		}
		return nil
	}
	f, err := createOutput(path, force)
	if err != nil {
		return err
	}
	_, err = convert.Rearrange(ctx, stream, f)
	var cut *kdumpfmt.CutError
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
func finishCut(f *os.File, path string, cut *kdumpfmt.CutError) error {
	if err := f.Close(); err != nil {
		return err
	}
	rw, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	kept, lost, err := convert.FinishCut(rw, cut.End)
	if cerr := rw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: %w", cut, err)
	}
	return &IncompleteError{Err: fmt.Errorf("%s rebuilt from a flattened stream cut short: %d pages kept, %d lost", path, kept, lost)}
}

// ReassembleOptions are one --reassemble: split files joined into one.
type ReassembleOptions struct {
	// Parts are the split files, in any order.
	Parts []string
	// Path is the dump file to write.
	Path string
	// Force overwrites an existing file (-f).
	Force bool
}

// Reassemble joins split dump files, pagepipe's or makedumpfile's, given
// in any order, into the one dump they were cut from (--reassemble). From
// incomplete parts it makes a dump marked incomplete, kept, and returns
// an IncompleteError. A join that ctx stops leaves no file.
func Reassemble(ctx context.Context, o ReassembleOptions) error {
	parts, out, force := o.Parts, o.Path, o.Force
	set, err := convert.OpenSplitSet(parts)
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
	if _, err := set.Reassemble(ctx, f); err != nil {
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
