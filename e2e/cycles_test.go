//go:build integration

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// On the real fixture (1 GiB, 2^18 pfns), dumps whose 2nd bitmap is held
// whole (--cyclic-buffer 128: 2^20 pfns a cycle) and in 32 cycles
// (--cyclic-buffer 1: 8192 pfns) have the same bytes, at -d 1 and 31, as
// kdump, flattened, split and ELF output; both give --cyclic-buffer, so
// makedumpfile's own choice (in cycles) is the same. Uncompressed, the
// 32-cycle kdump dump is makedumpfile's own with the same option, byte for
// byte.
func TestRealCyclesChangeNoByte(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	dir := t.TempDir()
	cycles := regexp.MustCompile(`the 2nd bitmap in (\d+) cycles`)
	for _, level := range []string{"1", "31"} {
		for _, shape := range []string{"kdump", "flattened", "split", "elf"} {
			t.Run(shape+"-d"+level, func(t *testing.T) {
				var outs [2][]string
				for i, kib := range []string{"128", "1"} {
					out := filepath.Join(dir, fmt.Sprintf("%s-%s-%s", shape, level, kib))
					args := []string{"-f", "--message-level", "8", "--cyclic-buffer", kib, "-d", level}
					outs[i] = []string{out}
					switch shape {
					case "kdump":
						args = append(args, "-l", vmcore, out)
					case "flattened":
						args = append(args, "-l", "-F", vmcore)
					case "split":
						outs[i] = []string{out + ".1", out + ".2", out + ".3"}
						args = append(append(args, "-l", "--splitblock-size", "16384", "--split", vmcore), outs[i]...)
					case "elf":
						args = append(args, "-E", vmcore, out)
					}
					cmd := exec.Command(bin, args...)
					var msgs bytes.Buffer
					cmd.Stdout, cmd.Stderr = &msgs, &msgs
					if shape == "flattened" { // the stream on stdout, the messages on stderr
						f, err := os.Create(out)
						if err != nil {
							t.Fatal(err)
						}
						cmd.Stdout = f
						defer f.Close()
					}
					if err := cmd.Run(); err != nil {
						t.Fatalf("pagepipe %s: %v\n%s", strings.Join(args, " "), err, msgs.String())
					}
					n := 1 // no line: one cycle
					if m := cycles.FindSubmatch(msgs.Bytes()); m != nil {
						n, _ = strconv.Atoi(string(m[1]))
					}
					if i == 0 && n != 1 || i == 1 && n < 32 {
						t.Fatalf("--cyclic-buffer %s: %d cycles\n%s", kib, n, msgs.String())
					}
				}
				for k := range outs[0] {
					equalFiles(t, outs[0][k], outs[1][k])
				}
			})
		}
		t.Run("makedumpfile-d"+level, func(t *testing.T) {
			args := []string{"--cyclic-buffer", "1", "-d", level}
			equalFiles(t, dump(t, "pagepipe", vmcore, args...), dump(t, "makedumpfile", vmcore, args...))
		})
	}
}
