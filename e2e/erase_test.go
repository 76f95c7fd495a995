//go:build integration

package e2e

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/kdumpfmt"
)

// eraseConfig exercises every form of makedumpfile.conf(5) on Debian 12's
// 6.1: a char * string, a member of a member, size N, nullify, size NK, a
// size taken from a member's value; loops over a list_head (every task),
// over the module list, over a list linked by its own next member, over an
// array; and a [brd] section for a loaded module, with a loop over its
// own list_head and its static variable.
const eraseConfig = `# pagepipe's acceptance config (e2e/erase_test.go)
erase saved_command_line
erase init_uts_ns.name.nodename
erase init_task.comm size 8
erase init_task.stack nullify
erase boot_command_line size 2K
erase init_uts_ns.name.domainname size init_task.nr_cpus_allowed
for t in init_task.tasks.next within task_struct:tasks
	erase t.comm
	erase t.mm nullify
endfor
for m in modules within module:list
	erase m.name size 4
endfor
for fs in file_systems via next
	erase fs.name
endfor
for g in idt_table
	erase g.offset_low
endfor
[brd]
for b in brd_devices within brd_device:brd_list
	erase b.brd_nr_pages
	erase b.brd_disk nullify
endfor
erase rd_size
[no_such_module]
erase whatever
`

// The lines ERASEINFO must hold, one per form.
var eraseinfoWants = []string{
	"erase saved_command_line size ", "erase init_uts_ns.name.nodename size 65\n",
	"erase init_task.comm size 8\n", "erase init_task.stack nullify\n",
	"erase init_uts_ns.name.domainname size ", "erase t.comm size 16\n", "erase t.mm nullify\n",
	"erase m.name size 4\n", "erase fs.name size ", "erase g.offset_low size 2\n",
	"erase b.brd_nr_pages size 8\n", "erase b.brd_disk nullify\n", "erase rd_size size 8\n",
}

// eraseSetup writes the config and finds the debuginfo: the vmlinux, and
// brd's module debuginfo as a directory for pagepipe and as a
// /usr/lib/debug tree for makedumpfile (which finds it through elfutils,
// beside the module's path under /lib/modules).
func eraseSetup(t *testing.T) (conf, vmlinux, moddir, debugRoot string) {
	t.Helper()
	vmlinux = fixture.DebugVmlinux(t)
	moddir = fixture.DebugModules(t, "brd")
	dir := t.TempDir()
	conf = filepath.Join(dir, "erase.conf")
	if err := os.WriteFile(conf, []byte(eraseConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	abi := strings.TrimPrefix(filepath.Base(vmlinux), "vmlinux-")
	abi = abi[:strings.Index(abi, "-amd64")+len("-amd64")]
	rel, err := filepath.Rel("/lib/modules/"+abi, moduleFile(t, abi, "brd"))
	if err != nil {
		t.Fatal(err)
	}
	debugRoot = filepath.Join(dir, "debug")
	dst := filepath.Join(debugRoot, "lib/modules", abi, rel)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(moddir, "brd.ko"), dst); err != nil {
		t.Fatal(err)
	}
	return conf, vmlinux, moddir, debugRoot
}

// moduleFile is where the host's kernel keeps module name.
func moduleFile(t *testing.T, abi, name string) string {
	out, err := exec.Command("modinfo", "-k", abi, "-n", name).Output()
	if err != nil {
		t.Fatalf("modinfo -n %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// makedumpfileErase runs makedumpfile 1.7.2 with args in a mount
// namespace whose /usr/lib/debug is debugRoot.
func makedumpfileErase(t *testing.T, debugRoot string, args ...string) string {
	t.Helper()
	script := `mount --bind "$1" /usr/lib/debug && shift && exec makedumpfile "$@"`
	cmd := exec.Command("unshare", append([]string{"-m", "sh", "-c", script, "sh", debugRoot}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("makedumpfile %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func pagepipeRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("pagepipe %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// eraseinfoOf reads a kdump file's ERASEINFO.
func eraseinfoOf(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hb := make([]byte, kdumpfmt.HeaderSize)
	if _, err := f.ReadAt(hb, 0); err != nil {
		t.Fatal(err)
	}
	h, err := kdumpfmt.UnmarshalHeader(hb)
	if err != nil {
		t.Fatal(err)
	}
	sb := make([]byte, kdumpfmt.SubHeaderSize)
	if _, err := f.ReadAt(sb, int64(h.BlockSize)); err != nil {
		t.Fatal(err)
	}
	s, err := kdumpfmt.UnmarshalSubHeader(sb)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, s.SizeEraseinfo)
	if _, err := f.ReadAt(b, int64(s.OffsetEraseinfo)); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// With -x and a config of every form, pagepipe's uncompressed dumps of
// the real 6.1 fixtures, KASLR on and off, are byte-identical to
// makedumpfile 1.7.2's at -d 1 and -d 31 (ERASEINFO included), and crash
// reads 'X' where the config erased.
func TestEraseMatchesMakedumpfile(t *testing.T) {
	conf, vmlinux, moddir, debugRoot := eraseSetup(t)
	for _, fx := range []struct {
		name string
		opt  fixture.Options
	}{{"kaslr", fixture.Options{}}, {"nokaslr", fixture.Options{Cmdline: "nokaslr"}}} {
		t.Run(fx.name, func(t *testing.T) {
			vmcore := fixture.Real(t, fx.opt).Vmcore
			for _, level := range []string{"1", "31"} {
				t.Run("d"+level, func(t *testing.T) {
					dir := t.TempDir()
					mdf, pp := filepath.Join(dir, "mdf"), filepath.Join(dir, "pp")
					makedumpfileErase(t, debugRoot, "-d", level, "-x", vmlinux, "--config", conf, vmcore, mdf)
					msgs := pagepipeRun(t, "-d", level, "-x", vmlinux, "--config", conf, "--module-debuginfo", moddir, vmcore, pp)
					equalFiles(t, pp, mdf)
					info := eraseinfoOf(t, pp)
					for _, w := range eraseinfoWants {
						if !strings.Contains(info, w) {
							t.Errorf("ERASEINFO lacks %q", w)
						}
					}
					if t.Failed() {
						t.Logf("ERASEINFO:\n%s\npagepipe:\n%s", head(info, 30), msgs)
					}
				})
			}
		})
	}
}

// crash reads 'X' where the config erased, in pagepipe's dump as in
// makedumpfile's. (The acceptance config nullifies what crash needs to
// start, every task's mm and init_task's stack: crash is given a config
// that leaves the kernel analysable.)
func TestEraseCrashReadsX(t *testing.T) {
	vmlinux := fixture.DebugVmlinux(t)
	vmcore := realVmcore(t).Vmcore
	dir := t.TempDir()
	conf := filepath.Join(dir, "crash.conf")
	if err := os.WriteFile(conf, []byte("erase init_uts_ns.name.nodename\nerase init_task.comm size 8\nerase saved_command_line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mdf, pp := filepath.Join(dir, "mdf"), filepath.Join(dir, "pp")
	if out, err := exec.Command("makedumpfile", "-d", "31", "-x", vmlinux, "--config", conf, vmcore, mdf).CombinedOutput(); err != nil {
		t.Fatalf("makedumpfile: %v\n%s", err, out)
	}
	pagepipeRun(t, "-d", "31", "-x", vmlinux, "--config", conf, vmcore, pp)
	equalFiles(t, pp, mdf)
	cmds := []string{"p init_uts_ns.name.nodename", "p init_task.comm", "p saved_command_line", "sys"}
	ours, theirs := judge.Crash(t, vmlinux, pp, cmds...), judge.Crash(t, vmlinux, mdf, cmds...)
	if ours != theirs {
		t.Errorf("crash reads pagepipe's dump otherwise:\n%s\n--- makedumpfile's\n%s", head(ours, 30), head(theirs, 30))
	}
	for _, w := range []string{strings.Repeat("X", 65), `"XXXXXXXX`} {
		if !strings.Contains(ours, w) {
			t.Errorf("crash does not read the erased bytes as 'X' (%q):\n%s", w, head(ours, 30))
		}
	}
}

// The other shapes erase the same bytes: -E is makedumpfile's ELF dump
// with its ERASEINFO note, -F rebuilds into the file, --split's parts
// are makedumpfile's (each with the ERASEINFO of its own pages).
func TestEraseShapes(t *testing.T) {
	conf, vmlinux, moddir, debugRoot := eraseSetup(t)
	vmcore := realVmcore(t).Vmcore
	dir := t.TempDir()
	erase := []string{"-x", vmlinux, "--config", conf}
	ours := append([]string{"--module-debuginfo", moddir}, erase...)

	t.Run("elf", func(t *testing.T) {
		mdf, pp := filepath.Join(dir, "mdf.elf"), filepath.Join(dir, "pp.elf")
		makedumpfileErase(t, debugRoot, append(append([]string{"-E", "-d", "31"}, erase...), vmcore, mdf)...)
		pagepipeRun(t, append(append([]string{"-E", "-d", "31"}, ours...), vmcore, pp)...)
		elfSameButAliasErased(t, pp, mdf)
		os.Remove(mdf)
	})
	file := filepath.Join(dir, "pp")
	pagepipeRun(t, append(append([]string{"-d", "31", "-l"}, ours...), vmcore, file)...)
	t.Run("flattened", func(t *testing.T) {
		rebuilt := filepath.Join(dir, "rebuilt")
		cmd := exec.Command("sh", "-c", `p=$1; shift; "$p" -F --priority=off "$@" | "$p" -R "$REBUILT"`, "sh", bin)
		cmd.Args = append(cmd.Args, append(append([]string{"-d", "31", "-l"}, ours...), vmcore)...)
		cmd.Env = append(os.Environ(), "REBUILT="+rebuilt)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("-F | -R: %v\n%s", err, out)
		}
		equalFiles(t, rebuilt, file)
	})
	t.Run("split", func(t *testing.T) {
		var mdf, pp []string
		for i := range 3 {
			mdf = append(mdf, filepath.Join(dir, "mdf.split"+string(rune('0'+i))))
			pp = append(pp, filepath.Join(dir, "pp.split"+string(rune('0'+i))))
		}
		makedumpfileErase(t, debugRoot, append(append(append([]string{"--split", "-d", "31"}, erase...), vmcore), mdf...)...)
		pagepipeRun(t, append(append(append([]string{"--split", "-d", "31"}, ours...), vmcore), pp...)...)
		for i := range pp {
			equalFiles(t, pp[i], mdf[i])
		}
	})
	t.Run("refilter", func(t *testing.T) {
		// Refiltering carries the input's ERASEINFO on, as makedumpfile
		// copies it.
		mdf, pp := filepath.Join(dir, "mdf.re"), filepath.Join(dir, "pp.re")
		makedumpfileErase(t, debugRoot, "-d", "31", "-l", file, mdf)
		pagepipeRun(t, "-d", "31", "-l", file, pp)
		equalFiles(t, pp, mdf)
		if eraseinfoOf(t, pp) != eraseinfoOf(t, file) {
			t.Errorf("the refiltered dump's ERASEINFO is not its input's")
		}
	})
}

// elfSameButAliasErased: the ELF dumps pp and mdf are the same bytes but
// where makedumpfile leaves data the config erases: it erases a page once,
// where the file first holds it, and so leaves the kernel image's pages
// as they were in the RAM PT_LOAD that holds them a second time; pagepipe
// erases both copies. Every differing byte is such a byte, 'X' or 0 in
// pagepipe's dump.
func elfSameButAliasErased(t *testing.T, pp, mdf string) {
	t.Helper()
	a, b := readFile(t, pp), readFile(t, mdf)
	if len(a) != len(b) {
		t.Fatalf("%s is %d bytes, %s %d", pp, len(a), mdf, len(b))
	}
	f, err := elf.NewFile(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	var text, ram []*elf.Prog
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		if p.Vaddr >= 0xffffffff80000000 {
			text = append(text, p)
		} else {
			ram = append(ram, p)
		}
	}
	inAlias := func(off uint64) bool {
		for _, r := range ram {
			if off >= r.Off && off < r.Off+r.Filesz {
				pa := r.Paddr + off - r.Off
				for _, k := range text {
					if pa >= k.Paddr && pa < k.Paddr+k.Filesz {
						return true
					}
				}
			}
		}
		return false
	}
	n := 0
	for i := range a {
		if a[i] == b[i] {
			continue
		}
		n++
		if (a[i] != 'X' && a[i] != 0) || !inAlias(uint64(i)) {
			t.Fatalf("byte %d differs (%#x, makedumpfile %#x) outside the RAM copy of an erased kernel image byte", i, a[i], b[i])
		}
	}
	t.Logf("%d bytes of the kernel image's RAM copy erased that makedumpfile leaves", n)
}

// A config pagepipe cannot resolve is refused in one line naming the line
// of the config, before any output exists.
func TestEraseRefusesUnresolvable(t *testing.T) {
	vmlinux := fixture.DebugVmlinux(t)
	vmcore := realVmcore(t).Vmcore
	dir := t.TempDir()
	conf := filepath.Join(dir, "bad.conf")
	os.WriteFile(conf, []byte("erase init_task.comm\nerase init_task.no_such_member\n"), 0o644)
	out := filepath.Join(dir, "dump")
	b, err := exec.Command(bin, "-d", "31", "-x", vmlinux, "--config", conf, vmcore, out).CombinedOutput()
	if err == nil {
		t.Fatalf("pagepipe took a config it cannot resolve:\n%s", b)
	}
	if !strings.Contains(string(b), "line 2") || !strings.Contains(string(b), "no_such_member") {
		t.Errorf("the refusal does not name the line:\n%s", b)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused dump left %s", out)
	}
}

// withoutVMCOREINFO copies vmcore with its VMCOREINFO note renamed, so
// that neither makedumpfile nor pagepipe finds it.
func withoutVMCOREINFO(t *testing.T, vmcore string) string {
	t.Helper()
	b := readFile(t, vmcore)
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes := b[p.Off : p.Off+p.Filesz]
		i := bytes.Index(notes, []byte("VMCOREINFO\x00"))
		if i < 0 {
			t.Fatal("no VMCOREINFO note")
		}
		copy(notes[i:], "VMCOREINFX")
	}
	out := filepath.Join(t.TempDir(), "vmcore")
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// -g writes makedumpfile's VMCOREINFO file, and a vmcore whose note was
// removed dumps with -i of that file (or with -x alone) as makedumpfile
// dumps it: byte-identical at -d 31. (Without its note the vmcore cannot
// say KERNELOFFSET: the nokaslr fixture, as makedumpfile needs too.)
func TestVMCOREINFOFileForANotelessVmcore(t *testing.T) {
	vmlinux := fixture.DebugVmlinux(t)
	noteless := withoutVMCOREINFO(t, fixture.Real(t, fixture.Options{Cmdline: "nokaslr"}).Vmcore)
	dir := t.TempDir()
	ours, theirs := filepath.Join(dir, "pp.vmcoreinfo"), filepath.Join(dir, "mdf.vmcoreinfo")
	pagepipeRun(t, "-g", ours, "-x", vmlinux)
	if out, err := exec.Command("makedumpfile", "-g", theirs, "-x", vmlinux).CombinedOutput(); err != nil {
		t.Fatalf("makedumpfile -g: %v\n%s", err, out)
	}
	equalFiles(t, ours, theirs)
	for _, args := range [][]string{{"-i", ours}, {"-x", vmlinux}} {
		t.Run(args[0], func(t *testing.T) {
			mdf, pp := filepath.Join(dir, "mdf"+args[0]), filepath.Join(dir, "pp"+args[0])
			if out, err := exec.Command("makedumpfile", append(args, "-d", "31", noteless, mdf)...).CombinedOutput(); err != nil {
				t.Fatalf("makedumpfile: %v\n%s", err, out)
			}
			pagepipeRun(t, append(args, "-d", "31", noteless, pp)...)
			equalFiles(t, pp, mdf)
		})
	}
}
