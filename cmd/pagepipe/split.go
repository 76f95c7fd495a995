package main

import (
	"context"
	"errors"
)

// writeSplit writes the dump split over outs (--split).
func (j *dumpJob) writeSplit(ctx context.Context, outs []string) error {
	return errors.New("--split is not implemented yet")
}

// reassemble joins split dump files into one (--reassemble).
func reassemble(parts []string, out string, force bool) error {
	return errors.New("--reassemble is not implemented yet")
}
