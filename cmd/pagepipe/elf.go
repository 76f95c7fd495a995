package main

import (
	"context"
	"errors"
)

// writeELF writes the dump as ELF (-E).
func (j *dumpJob) writeELF(ctx context.Context) error {
	return errors.New("-E is not implemented yet")
}
