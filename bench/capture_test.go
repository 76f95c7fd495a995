package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// strace -f -y's lines: a read of /proc/vmcore whole or cut in two by
// another thread's call, mmaps of it and of nothing, reads of other files.
func TestStraceVmcore(t *testing.T) {
	out := `801   read(3</proc/vmcore>, "\177ELF\2\1\1\0"..., 64) = 64
801   pread64(3</proc/vmcore>, "\0\0\0\0"..., 524288, 1048576) = 524288
801   mmap(NULL, 4194304, PROT_READ, MAP_PRIVATE|MAP_POPULATE, 3</proc/vmcore>, 0x100000) = 0x7f0a00000000
802   pread64(3</proc/vmcore>,  <unfinished ...>
801   mmap(NULL, 262144, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f0b00000000
801   read(4</usr/lib/libc.so.6>, "\177ELF) = 9 "..., 832) = 832
802   <... pread64 resumed>"\0\0 ) = 7 "..., 4096, 2048) = 4096
803   mmap(NULL, 1048576, PROT_READ, MAP_PRIVATE|MAP_POPULATE, 3</proc/vmcore>, 0x200000 <unfinished ...>
803   <... mmap resumed>) = 0x7f0c00000000
801   pread64(3</proc/vmcore>, 0x7f0d00000000, 4096, 999999999999) = -1 EIO (Input/output error)
801   +++ exited with 0 +++
`
	path := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := StraceVmcore(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := (VmcoreCalls{Reads: 4, ReadBytes: 64 + 524288 + 4096, Maps: 2}); c != want {
		t.Errorf("%+v, want %+v", c, want)
	}
}
