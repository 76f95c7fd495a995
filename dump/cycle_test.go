//go:build !race

// Not under the race detector (make test's -race pass builds with the race
// tag): the study dumps a 4 GiB machine eight times over and races nothing
// that TestRunKdump and TestRunSplit do not; it runs in the plain pass.

package dump

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"pagepipe/internal/synth"
)

// TestCyclesChangeNoByte dumps a generated 4 GiB machine (6.1, two
// gigantic pages, each across eight cycles) with its 2nd bitmap held whole
// and in at least 32 cycles, at -d 1 and 31, as kdump, flattened, split
// and ELF output: the bytes must be the same. Both runs give
// --cyclic-buffer, so makedumpfile's own choice (in cycles, which decides
// the partial pages) is the same in both; only pagepipe's cycles differ.
// (It dumped a 64 GiB machine until issue 31; the cycles' count and what
// they cut are alike at this size, for a fraction of the time.)
func TestCyclesChangeNoByte(t *testing.T) {
	dir := shmDir(t, 1<<30)
	vmcore := filepath.Join(dir, "vmcore")
	if err := synth.WriteFile(vmcore, synth.NewKernelMachine(synth.KernelSpec{Profile: "6.1", KASLR: true, Gigantic: 2}, 4<<10)); err != nil {
		t.Fatal(err)
	}
	cyclesLine := regexp.MustCompile(`the 2nd bitmap in (\d+) cycles`)
	for _, level := range []Level{1, 31} {
		for _, shape := range []string{"kdump", "flattened", "split", "elf"} {
			t.Run(fmt.Sprintf("%s-d%d", shape, level), func(t *testing.T) {
				var sums [2]string
				for i, kib := range []int{16 << 10, 4} { // 128 Mi pfns: one cycle; 32 Ki pfns: 33
					o := Options{Input: vmcore, Levels: []Level{level}, Codec: "lzo", Workers: 2, CyclicBufferKiB: kib}
					paths := []string{filepath.Join(dir, "out")}
					switch shape {
					case "split":
						paths = append(paths, filepath.Join(dir, "out2"), filepath.Join(dir, "out3"))
						o.Out = Output{Shape: Split, Paths: paths, SplitBlockKiB: 1 << 10}
					case "elf":
						o.Codec = ""
						o.Out = Output{Shape: ELF, Paths: paths}
					default:
						o.Out = Output{Paths: paths}
					}
					h := sha256.New()
					if shape == "flattened" {
						o.Out = Output{Stream: h}
						paths = nil
					}
					_, ev := run(t, o)
					n := 1 // no line: one cycle
					if m := cyclesLine.FindStringSubmatch(ev.String()); m != nil {
						n, _ = strconv.Atoi(m[1])
					}
					if i == 0 && n != 1 || i == 1 && n < 32 {
						t.Fatalf("--cyclic-buffer %d: %d cycles", kib, n)
					}
					for _, p := range paths {
						f, err := os.Open(p)
						if err != nil {
							t.Fatal(err)
						}
						_, err = io.Copy(h, f)
						f.Close()
						os.Remove(p)
						if err != nil {
							t.Fatal(err)
						}
					}
					sums[i] = fmt.Sprintf("%x", h.Sum(nil))
				}
				if sums[0] != sums[1] {
					t.Errorf("one cycle and 33 give different bytes: %s, %s", sums[0], sums[1])
				}
			})
		}
	}
}

// shmDir is a directory on /dev/shm when it has room for need bytes
// twice over (a sparse vmcore reads fastest from memory), else a test
// temporary directory.
func shmDir(t *testing.T, need uint64) string {
	t.Helper()
	var st syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &st) == nil && st.Bavail*uint64(st.Bsize) > 2*need {
		if d, err := os.MkdirTemp("/dev/shm", "pagepipe-cycles-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}
