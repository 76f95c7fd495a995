//go:build !linux

package sink

import "os"

func fallocate(*os.File, int64, int64) error { return nil }
