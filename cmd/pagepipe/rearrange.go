package main

import (
	"fmt"
	"io"
	"os"

	"pagepipe/source"
)

// rearrange rebuilds a dump file from the flattened stream on stdin (-R).
// A stream that is not flattened, or short, leaves no file behind.
func rearrange(stdin io.Reader, path string, force bool) error {
	f, err := createOutput(path, force)
	if err != nil {
		return err
	}
	if _, err := source.Rearrange(stdin, f); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("rearrange stdin into %s: %w", path, err)
	}
	return f.Close()
}
