//go:build integration

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
)

// vtopBlock is the --vtop output of a run: from "Translating" to the blank
// line after the result.
func vtopBlock(out string) string {
	i := strings.Index(out, "Translating virtual address")
	if i < 0 {
		return ""
	}
	rest := out[i:]
	if j := strings.Index(rest, "\n\n"); j >= 0 {
		rest = rest[:j+1]
	}
	return rest
}

// --vtop prints what makedumpfile 1.7.2 prints, each page-table entry the
// walk reads included, for an address of each kind: kernel text, kernel
// data, the direct map, the vmemmap, vmalloc (a kernel stack) and a
// module's data.
func TestVtopMatchesMakedumpfile(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	vmlinux := fixture.DebugVmlinux(t)
	out := judge.Crash(t, vmlinux, vmcore, "p/x _stext", "p/x &init_uts_ns", "p/x mem_section", "p/x vmemmap_base", "p/x ((struct vmap_area *)((char *)vmap_area_list.next - 40))->va_start", "sym rd_size")
	hex := regexp.MustCompile(`= (0x[0-9a-f]+)|^([0-9a-f]{16}) \([^)]*\) rd_size`)
	var addrs []string
	for _, line := range strings.Split(out, "\n") {
		if m := hex.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			a := m[1]
			if a == "" {
				a = "0x" + m[2]
			}
			addrs = append(addrs, a)
		}
	}
	if len(addrs) != 6 {
		t.Fatalf("crash gave %d addresses %q, want 6:\n%s", len(addrs), addrs, out)
	}
	addrs = append(addrs, "0xffffc9ffff000000") // in vmalloc's range, not mapped
	dir := t.TempDir()
	for _, a := range addrs {
		t.Run(a, func(t *testing.T) {
			// The block is on stdout, the error line of an address
			// that is not mapped on stderr.
			run := func(prog, out string) (string, string) {
				var stdout, stderr strings.Builder
				cmd := exec.Command(prog, "-f", "--vtop", a, "-d", "31", vmcore, filepath.Join(dir, out))
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				cmd.Run()
				return stdout.String(), stderr.String()
			}
			mdfOut, mdfErr := run("makedumpfile", "mdf")
			ppOut, ppErr := run(bin, "pp")
			want, got := vtopBlock(mdfOut), vtopBlock(ppOut)
			if want == "" || got != want {
				t.Errorf("--vtop %s:\n got %q\nwant %q", a, got, want)
			}
			for _, line := range strings.Split(mdfErr, "\n") {
				if strings.Contains(line, "Can't get a valid") && !strings.Contains(ppErr, line) {
					t.Errorf("pagepipe does not say %q:\n%s", line, ppErr)
				}
			}
		})
	}
}

// On arm64 too, --vtop prints makedumpfile's translation (1.7.2 prints no
// table entries there): kernel text and data, the linear map, the vmemmap
// and an address that is not mapped.
func TestARM64VtopMatchesMakedumpfile(t *testing.T) {
	vmcore, mdf := armVmcore(t), fixture.Peer(t, "makedumpfile-arm64")
	vi := vmcoreinfoOf(t, vmcore)
	var addrs []string
	for _, s := range []string{"_stext", "init_uts_ns", "mem_section", "swapper_pg_dir"} {
		v, ok := vi.Symbol(s)
		if !ok {
			t.Fatalf("VMCOREINFO has no SYMBOL(%s)", s)
		}
		addrs = append(addrs, fmt.Sprintf("%#x", v))
	}
	// The vmemmap of 48-bit VAs with 4 KiB pages, and a hole below it.
	addrs = append(addrs, "0xfffffc0000001000", "0xfffffb0000000000")
	dir := t.TempDir()
	for _, a := range addrs {
		t.Run(a, func(t *testing.T) {
			run := func(prog, out string) string {
				var stdout strings.Builder
				cmd := exec.Command(prog, "-f", "--vtop", a, "-d", "31", vmcore, filepath.Join(dir, out))
				cmd.Stdout = &stdout
				cmd.Run()
				return stdout.String()
			}
			want, got := vtopBlock(run(mdf, "mdf")), vtopBlock(run(bin, "pp"))
			if want == "" || got != want {
				t.Errorf("--vtop %s:\n got %q\nwant %q", a, got, want)
			}
		})
	}
}
