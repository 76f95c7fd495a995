//go:build integration

package e2e

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/kernel"
	"pagepipe/source"
)

// A dmesg judge: a makedumpfile and the --dmesg-format that writes its
// format.
type dmesgJudge struct {
	name, format string
	prog         func(t *testing.T) string
}

// dmesgJudges are Debian 12's makedumpfile 1.7.2 and sid's 1.7.8, which
// adds the caller-id column (1.7.5 and later): pagepipe's default.
var dmesgJudges = []dmesgJudge{
	{"1.7.8", "1.7.5", func(t *testing.T) string { return fixture.Peer(t, "makedumpfile-sid") }},
	{"1.7.2", "1.7.2", func(*testing.T) string { return "makedumpfile" }},
}

// dmesgBoth runs pagepipe (with j's --dmesg-format, or none for the
// default) and j's makedumpfile with --dump-dmesg (plus extra flags) on
// vmcore, checks that both succeed, and returns the two logs.
func dmesgBoth(t *testing.T, j dmesgJudge, vmcore, name string, extra ...string) (ours, theirs string) {
	t.Helper()
	ours = filepath.Join(t.TempDir(), name+".pagepipe")
	theirs = filepath.Join(t.TempDir(), name+".makedumpfile")
	var format []string
	if j.format != "1.7.5" {
		format = []string{"--dmesg-format", j.format}
	}
	for _, run := range []struct {
		prog, out string
		own       []string
	}{{bin, ours, format}, {j.prog(t), theirs, nil}} {
		args := append(append(append([]string{"--dump-dmesg"}, run.own...), extra...), vmcore, run.out)
		if out, err := execOut(run.prog, args...); err != nil {
			t.Fatalf("%s %v: %v\n%s", filepath.Base(run.prog), args, err, out)
		}
	}
	return ours, theirs
}

// The kernel log of the real fixture (a 6.1 kernel's lockless ringbuffer)
// is byte-identical to makedumpfile 1.7.8's by default (with the caller
// id, T0 and the like, after each timestamp) and to 1.7.2's with
// --dmesg-format 1.7.2, whole and with --partial-dmesg.
func TestDmesgMatchesMakedumpfile(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	for _, j := range dmesgJudges {
		for name, extra := range map[string][]string{"full": nil, "partial": {"--partial-dmesg"}} {
			t.Run(j.name+"/"+name, func(t *testing.T) {
				ours, theirs := dmesgBoth(t, j, vmcore, name, extra...)
				equalFiles(t, ours, theirs)
				b := readFile(t, ours)
				banner := "] Linux version "
				if j.format == "1.7.5" {
					banner = "] [      T0] Linux version "
				}
				if !bytes.Contains(b, []byte(banner)) {
					t.Errorf("log does not start with the banner %q:\n%.300s", banner, b)
				}
			})
		}
	}
}

// A LOGFILE that exists is refused, and left alone, without -f.
func TestDmesgNoClobber(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	out := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(out, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	msg, err := execOut(bin, "--dump-dmesg", vmcore, out)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("existing LOGFILE: %v\n%s", err, msg)
	}
	if b := readFile(t, out); string(b) != "keep" {
		t.Fatalf("existing LOGFILE was changed to %.100q", b)
	}
	if msg, err := execOut(bin, "-f", "--dump-dmesg", vmcore, out); err != nil {
		t.Fatalf("-f: %v\n%s", err, msg)
	}
	if b := readFile(t, out); !bytes.Contains(b, []byte("] Linux version ")) {
		t.Errorf("-f did not write the log: %.100q", b)
	}
}

// On a copy of the fixture whose log has unprintable bytes in a message and
// whose clear_seq is 100 (as after dmesg -c), both tools still agree: this
// pins makedumpfile's \xNN escapes (sign-extended from 0x80 up) and its
// start of --partial-dmesg.
func TestDmesgPatchedMatchesMakedumpfile(t *testing.T) {
	vmcore := patchedDmesgVmcore(t, realVmcore(t).Vmcore)
	for _, j := range dmesgJudges {
		t.Run(j.name, func(t *testing.T) {
			full, fullRef := dmesgBoth(t, j, vmcore, "full")
			equalFiles(t, full, fullRef)
			part, partRef := dmesgBoth(t, j, vmcore, "partial", "--partial-dmesg")
			equalFiles(t, part, partRef)

			b := readFile(t, full)
			if !bytes.Contains(b, []byte(`] \x01\x7f\xffffff80\xffffffc3\xffffffff`+"\t\r\v\f"+`\x1b\x00Zq`)) {
				t.Errorf("patched message not in the log:\n%.400s", b)
			}
			if p := readFile(t, part); len(p) == 0 || len(p) >= len(b) || !bytes.HasSuffix(b, p) {
				t.Errorf("partial log (%d bytes) is not a proper tail of the full one (%d bytes)", len(p), len(b))
			}
		})
	}
}

// patchedDmesgVmcore copies vmcore and edits the crashed kernel's memory in
// the copy: the "Linux version" of the banner record becomes unprintable
// bytes, and clear_seq (a latched_seq) holds 100 in both values.
func patchedDmesgVmcore(t *testing.T, vmcore string) string {
	t.Helper()
	dst := filepath.Join(workDir, "dmesg-patched.vmcore")
	copyFile(t, vmcore, dst)
	v, err := source.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	vi, err := kernel.ParseVMCOREINFO(v.Vmcoreinfo())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := kernel.NewTranslator(v, vi)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// poke writes p at kernel virtual address va in every PT_LOAD that
	// holds it (the kernel-text segment aliases RAM).
	poke := func(va uint64, p []byte) {
		t.Helper()
		for i := range p {
			pa, err := tr.VtoP(va + uint64(i))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, l := range v.Loads {
				if pa >= l.Paddr && pa-l.Paddr < l.FileSize {
					if _, err := f.WriteAt(p[i:i+1], int64(l.Offset+pa-l.Paddr)); err != nil {
						t.Fatal(err)
					}
					n++
				}
			}
			if n == 0 {
				t.Fatalf("physical %#x is not in the vmcore", pa)
			}
		}
	}
	u64 := func(va uint64) uint64 {
		t.Helper()
		var b [8]byte
		if err := tr.ReadVirt(va, b[:]); err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint64(b[:])
	}
	value := func(key string) uint64 {
		t.Helper()
		n, err := vi.RequireValue(key)
		if err != nil {
			t.Fatal(err)
		}
		return uint64(n)
	}

	prb := u64(mustSymbol(t, vi, "prb"))
	ring := prb + value("OFFSET(printk_ringbuffer.text_data_ring)")
	data := u64(ring + value("OFFSET(prb_data_ring.data)"))
	sizeBits := u64(ring+value("OFFSET(prb_data_ring.size_bits)")) & 0xffffffff
	text := make([]byte, 1<<sizeBits)
	if err := tr.ReadVirt(data, text); err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(text, []byte("Linux version"))
	if i < 0 {
		t.Fatal("no banner in the text data ring")
	}
	poke(data+uint64(i), []byte("\x01\x7f\x80\xc3\xff\t\r\v\f\x1b\x00Zq"))

	var seq [16]byte
	binary.LittleEndian.PutUint64(seq[0:], 100)
	binary.LittleEndian.PutUint64(seq[8:], 100)
	poke(mustSymbol(t, vi, "clear_seq")+value("OFFSET(latched_seq.val)"), seq[:])
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

func mustSymbol(t *testing.T, vi *kernel.VMCOREINFO, name string) uint64 {
	t.Helper()
	s, err := vi.RequireSymbol(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dst) })
}
