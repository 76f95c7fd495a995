package e2e

import (
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/kernel"
	"pagepipe/source"
)

// Real fixtures of kernels newer than the host's Debian 12 6.1, booted from
// the suites' own packages (fixtures/debian-kernel.sh). makedumpfile 1.7.2
// is wrong for them (6.9+ page types, 6.12's one-type-per-page byte), so the
// judges are sid's makedumpfile 1.7.8, correct for 6.12 to 6.17, and sid's
// crash 9.0.2 (crash 8.0.2 cannot read 6.12: KASLR detection and the 6.4
// module layout).

// trixieOptions is Debian 13's 6.12 in the default 1 GiB guest.
// no_timer_check: under TCG on a loaded host the kernel's timer check may
// wrongly find the timer broken.
func trixieOptions() fixture.Options {
	return fixture.Options{Suite: "trixie", Cmdline: "no_timer_check"}
}

// la57Options is the same kernel on a CPU with 5-level page tables.
func la57Options() fixture.Options {
	o := trixieOptions()
	o.CPU = "qemu64,+la57"
	return o
}

// The levels acceptance asks of the newer kernels: each bit alone, 31, and
// two combinations.
var kernelLevels = []string{"1", "2", "4", "8", "16", "31", "11", "27"}

// newKernel returns the fixture of opt and fails unless its kernel is the
// release wanted (so that a fixture script falling back to the host's
// kernel cannot pass) and its page tables have the number of levels wanted.
func newKernel(t *testing.T, opt fixture.Options, release string, la57 bool) string {
	t.Helper()
	vmcore := fixture.Real(t, opt).Vmcore
	v, err := source.Open(vmcore)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	notes, _, off, size := v.Notes()
	vi, err := kernel.ParseVMCOREINFO(notes[off : off+size])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(vi.OSRelease(), release) {
		t.Fatalf("fixture %+v runs kernel %s, want %s", opt, vi.OSRelease(), release)
	}
	l5, _ := vi.Raw("NUMBER(pgtable_l5_enabled)")
	if got := l5 == "1"; got != la57 {
		t.Fatalf("fixture %+v: NUMBER(pgtable_l5_enabled)=%q, want 5-level paging %v", opt, l5, la57)
	}
	return vmcore
}

// Debian 13's 6.12: pagepipe's uncompressed dumps are byte-identical to
// makedumpfile 1.7.8's at every level asked, with the same counts.
func TestTrixieLevelsMatchMakedumpfile178(t *testing.T) {
	vmcore := newKernel(t, trixieOptions(), "6.12.", false)
	levelsMatch(t, vmcore, fixture.Peer(t, "makedumpfile-sid"), kernelLevels)
}

// libkdumpfile and drgn read every page of pagepipe's 6.12 dumps back.
func TestTrixieReadersReadEveryPage(t *testing.T) {
	vmcore := newKernel(t, trixieOptions(), "6.12.", false)
	readersReadEveryPage(t, vmcore, fixture.Peer(t, "makedumpfile-sid"), [][]string{{"-c", "-d", "1"}, {"-c", "-d", "31"}})
}

// crash 9.0.2 with 6.12's debug vmlinux sees the same machine in pagepipe's
// dumps as in makedumpfile 1.7.8's.
func TestTrixieCrashSameAsMakedumpfile178(t *testing.T) {
	vmcore := newKernel(t, trixieOptions(), "6.12.", false)
	crashSame(t, fixture.Peer(t, "crash-sid"), fixture.SuiteDebugVmlinux(t, "trixie"), vmcore,
		fixture.Peer(t, "makedumpfile-sid"), [][]string{{"-c", "-d", "1"}, {"-d", "31"}})
}

// 5-level paging, real: 6.12 under LA57. -d 31 is byte-identical to
// makedumpfile 1.7.8's, the readers read every page back, and crash sees
// the same machine.
func TestLA57MatchesMakedumpfile178(t *testing.T) {
	vmcore := newKernel(t, la57Options(), "6.12.", true)
	mdf := fixture.Peer(t, "makedumpfile-sid")
	levelsMatch(t, vmcore, mdf, []string{"31"})
	readersReadEveryPage(t, vmcore, mdf, [][]string{{"-c", "-d", "31"}})
	crashSame(t, fixture.Peer(t, "crash-sid"), fixture.SuiteDebugVmlinux(t, "trixie"), vmcore, mdf, [][]string{{"-d", "31"}})
}
