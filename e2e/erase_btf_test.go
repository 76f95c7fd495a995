//go:build integration

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/source"
)

// What the kernels' own BTF can type. Debian's 6.1 (amd64, arm64) and
// 6.12 were built without pahole's global_var: their BTF has a VAR for
// each per-cpu variable and for nothing else (380, 304 and 387 of them;
// sid's 7.2 has 426, also per-cpu only), and a module's split BTF the
// same (ext4's discard_pa_seq, the only VAR of the fixture's modules). So
// a config BTF resolves starts from a per-cpu variable. btfConfig holds
// every form that can start there: a member of a member, size N, size NK,
// nullify, a member through a pointer, a char * string, loops over an
// array of structures, an array of pointers, a list_head within a
// structure and a list linked by its own next member, and a [module]
// section. %[1]s is a per-cpu pointer to a task_struct, %[2]s a per-cpu
// char *.
const btfConfig = `# e2e/erase_btf_test.go: what the kernel's BTF types
erase runqueues.nr_running
erase runqueues.cfs.nr_running size 2
erase runqueues.nr_switches size 1K
erase %[1]s nullify
erase %[1]s.comm
erase %[2]s
for w in cpu_worker_pools
	erase w.nr_workers
	erase w.attrs nullify
endfor
for s in cached_stacks
	erase s.addr nullify
	erase s.size
endfor
for r in runqueues.cfs_tasks within task_struct:group_node
	erase r.comm
endfor
for b in runqueues.balance_callback via next
	erase b.func nullify
endfor
[ext4]
erase discard_pa_seq
`

// btfSizeFromValue is the size SYM.member form: the value it reads is
// per-cpu data too.
const btfSizeFromValue = "erase runqueues.nr_switches size runqueues.nr_running\n"

type btfKernel struct {
	name          string
	vmcore        func(t *testing.T) string
	suite, arch   string
	task, charPtr string
	// textSymbolsOnly: the kernel was built without CONFIG_KALLSYMS_ALL
	// (Debian 12's arm64): its kallsyms, and its modules' symbol tables,
	// hold functions only.
	textSymbolsOnly bool
}

var btfKernels = []btfKernel{
	{"6.1", func(t *testing.T) string { return realVmcore(t).Vmcore }, "", "", "current_task", "irq_name", false},
	{"6.12", func(t *testing.T) string { return newKernel(t, trixieOptions(), "6.12.", false) }, "trixie", "", "pcpu_hot.current_task", "irq_name", false},
	{"arm64", armVmcore, "bookworm", "arm64", "__entry_task", "this_cpu_vector", true},
}

// Without -x, a config resolves through the kernel's own BTF and kallsyms
// to exactly what it resolves to through the debug vmlinux's DWARF: on the
// real 6.1 and 6.12 fixtures, at -d 1 and -d 31, uncompressed, the two
// dumps hold the same pages with the same bytes (and are the same file),
// and the config's notes (each range that is not mapped, each pointer
// that cannot be read, with its address) are the same lines; on 6.1 the
// dump of its [vmlinux] lines is makedumpfile 1.7.2's with -x. Every line
// of the acceptance config that starts from a global variable is refused
// without -x in one line, before any output exists. The arm64 fixture's
// kernel has no data symbol in its kallsyms: without -x the whole config
// is refused in one line (with -x it dumps).
func TestEraseBTFAsDWARF(t *testing.T) {
	for _, k := range btfKernels {
		t.Run(k.name, func(t *testing.T) {
			vmcore := k.vmcore(t)
			vmlinux := fixture.DebugVmlinuxOf(t, k.suite, k.arch)
			moddir := fixture.DebugModulesOf(t, k.suite, k.arch, "ext4")
			dir := t.TempDir()
			conf := filepath.Join(dir, "btf.conf")
			text := fmt.Sprintf(btfConfig, k.task, k.charPtr)
			if k.textSymbolsOnly {
				// ext4's symbol table in the dump holds its functions
				// only: -x refuses the section too.
				vmlinuxPart, modulePart, _ := strings.Cut(text, "[ext4]")
				c := filepath.Join(dir, "ext4.conf")
				writeConf(t, c, "[ext4]"+modulePart)
				out := refused(t, filepath.Join(dir, "x.ext4"), "-d", "31", "-x", vmlinux, "--module-debuginfo", moddir, "--config", c, vmcore)
				if !strings.Contains(out, `module ext4 has no symbol "discard_pa_seq"`) {
					t.Errorf("-x [ext4]: %q", out)
				}
				text = vmlinuxPart
			}
			writeConf(t, conf, text)
			for _, level := range []string{"1", "31"} {
				t.Run("d"+level, func(t *testing.T) {
					x, b := filepath.Join(dir, "x"+level), filepath.Join(dir, "btf"+level)
					xmsgs := pagepipeRun(t, "--message-level", "31", "-d", level, "-x", vmlinux, "--module-debuginfo", moddir, "--config", conf, vmcore, x)
					defer os.Remove(x)
					xn := configNotes(xmsgs, conf)
					if strings.Count(xn, "\n") < 5 {
						t.Errorf("the config resolved to fewer notes than its per-cpu lines:\n%s", xn)
					}
					if k.textSymbolsOnly {
						out := refused(t, b, "-d", level, "--config", conf, vmcore)
						if !strings.Contains(out, "CONFIG_KALLSYMS_ALL") {
							t.Errorf("without -x: %q", out)
						}
						return
					}
					bmsgs := pagepipeRun(t, "--message-level", "31", "-d", level, "--config", conf, vmcore, b)
					defer os.Remove(b)
					if bn := configNotes(bmsgs, conf); xn != bn {
						t.Errorf("the config's notes differ:\n-x:\n%s\nBTF:\n%s", xn, bn)
					}
					samePages(t, b, x)
					equalFiles(t, b, x)
				})
			}
			if k.name == "6.1" {
				t.Run("makedumpfile", func(t *testing.T) {
					// makedumpfile 1.7.2 resolves the config's [vmlinux]
					// lines through the vmlinux to the same dump.
					c := filepath.Join(dir, "vmlinux.conf")
					vmlinuxPart, _, _ := strings.Cut(text, "[ext4]")
					writeConf(t, c, vmlinuxPart)
					mdf, b := filepath.Join(dir, "mdf"), filepath.Join(dir, "btf.vmlinux")
					if out, err := exec.Command("makedumpfile", "-d", "31", "-x", vmlinux, "--config", c, vmcore, mdf).CombinedOutput(); err != nil {
						t.Fatalf("makedumpfile: %v\n%s", err, out)
					}
					pagepipeRun(t, "-d", "31", "--config", c, vmcore, b)
					equalFiles(t, b, mdf)
					os.Remove(mdf)
					os.Remove(b)
				})
			}
			t.Run("size-from-value", func(t *testing.T) {
				// -x refuses it: the value is per-cpu data at no mapped
				// address; the BTF alike.
				c := filepath.Join(dir, "size.conf")
				writeConf(t, c, btfSizeFromValue)
				xo := refused(t, filepath.Join(dir, "x.size"), "-d", "31", "-x", vmlinux, "--config", c, vmcore)
				if !strings.Contains(xo, "line 1: size ") {
					t.Errorf("size SYM.member with -x: %q", xo)
				}
				if !k.textSymbolsOnly {
					if bo := refused(t, filepath.Join(dir, "b.size"), "-d", "31", "--config", c, vmcore); bo != xo {
						t.Errorf("size SYM.member: -x says %q, BTF %q", xo, bo)
					}
				}
			})
			t.Run("refused", func(t *testing.T) {
				unitConf := filepath.Join(dir, "unit.conf")
				want := "pagepipe: --config " + unitConf + ": line "
				if k.textSymbolsOnly {
					want = "pagepipe: --config " + unitConf + " without -x: the kernel's kallsyms hold no data symbols"
				}
				for i, unit := range configUnits(eraseConfig) {
					writeConf(t, unitConf, unit.text)
					out := refused(t, filepath.Join(dir, "unit"), "-d", "31", "--config", unitConf, vmcore)
					if !strings.HasPrefix(out, want) {
						t.Errorf("unit %d (%q): the refusal is not %q...: %q", i, unit.first, want, out)
					}
				}
			})
		})
	}
}

func writeConf(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// configNotes are the lines pagepipe said about the config file conf.
func configNotes(msgs, conf string) string {
	var b strings.Builder
	for l := range strings.SplitSeq(msgs, "\n") {
		if strings.HasPrefix(l, "--config "+conf+": ") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// refused runs pagepipe with args and out, which must fail with one line
// on stderr (stdout says "pagepipe Failed.", as makedumpfile's) and leave
// no out; it returns that line.
func refused(t *testing.T, out string, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, append(args, out)...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Errorf("pagepipe %s took it", strings.Join(args, " "))
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("pagepipe %s left %s", strings.Join(args, " "), out)
		os.Remove(out)
	}
	s := strings.TrimSuffix(stderr.String(), "\n")
	if s == "" || strings.Contains(s, "\n") {
		t.Errorf("pagepipe %s refused in other than one line:\n%s", strings.Join(args, " "), s)
	}
	return s
}

// configUnit is one statement of a config: an erase line or a loop, with
// the section it is in.
type configUnit struct {
	first, text string
}

// configUnits splits a config into its statements (comments dropped),
// each a config of its own under its section's header; the sections of
// modules no fixture loads are left out.
func configUnits(conf string) []configUnit {
	var units []configUnit
	section, loop := "[vmlinux]", ""
	for l := range strings.SplitSeq(conf, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
		case strings.HasPrefix(trimmed, "["):
			section = trimmed
		case loop != "":
			loop += l + "\n"
			if trimmed == "endfor" {
				units = append(units, configUnit{strings.SplitN(loop, "\n", 2)[0], section + "\n" + loop})
				loop = ""
			}
		case strings.HasPrefix(trimmed, "for "):
			loop = l + "\n"
		default:
			units = append(units, configUnit{trimmed, section + "\n" + l + "\n"})
		}
	}
	var kept []configUnit
	for _, u := range units {
		if !strings.HasPrefix(u.text, "[no_such_module]") {
			kept = append(kept, u)
		}
	}
	return kept
}

// samePages fails unless the kdump files a and b dump the same pages with
// the same bytes.
func samePages(t *testing.T, a, b string) {
	t.Helper()
	da, err := source.OpenDump(a)
	if err != nil {
		t.Fatal(err)
	}
	defer da.Close()
	db, err := source.OpenDump(b)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if da.MaxMapnr != db.MaxMapnr || da.PageSize() != db.PageSize() {
		t.Fatalf("%s: %d pages of %d bytes; %s: %d of %d", a, da.MaxMapnr, da.PageSize(), b, db.MaxMapnr, db.PageSize())
	}
	pa, pb := make([]byte, da.PageSize()), make([]byte, db.PageSize())
	dumped, differ := 0, 0
	for pfn := range da.MaxMapnr {
		ina, inb := da.Dumpable.Test(pfn), db.Dumpable.Test(pfn)
		if ina != inb {
			t.Fatalf("pfn %#x: dumped in %s %v, in %s %v", pfn, a, ina, b, inb)
		}
		if !ina {
			continue
		}
		dumped++
		if err := da.ReadPage(pfn, pa); err != nil {
			t.Fatal(err)
		}
		if err := db.ReadPage(pfn, pb); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pa, pb) {
			if differ < 5 {
				t.Errorf("pfn %#x differs", pfn)
			}
			differ++
		}
	}
	if differ > 0 {
		t.Errorf("%d of %d dumped pages differ", differ, dumped)
	}
	t.Logf("%d dumped pages the same", dumped)
}
