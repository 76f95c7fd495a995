package sink

import (
	"os"
	"syscall"
)

// fallocate allocates the blocks of [off, off+n) of f (mode 0: the file
// grows if that passes its end; the new bytes read as zeros).
func fallocate(f *os.File, off, n int64) error {
	return syscall.Fallocate(int(f.Fd()), 0, off, n)
}
