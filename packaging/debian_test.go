//go:build integration

package packaging

// The Debian packages installed where admins install them: a minimal
// Debian 12 system (fixtures/make-debian-root.sh, cached) holding
// kdump-tools and makedumpfile, as apt installs them, into which dpkg
// installs pagepipe and pagepipe-as-makedumpfile.
//
// Each test works on its own copy of the cached system, an overlay whose
// lower layer is the cache (never written) and whose upper layer is the
// test's temporary directory. Every command runs in a mount namespace of
// its own (unshare --mount) that mounts the overlay, proc, sysfs and /dev
// and chroots: the mounts vanish with the namespace, however the command
// or the test ends, and nothing is installed on the machine running the
// test. Services cannot start inside (the system's policy-rc.d forbids
// them) and kdump is not armed (kdump-tools' debconf answer is no).

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
)

// debianRoot runs fixtures/make-debian-root.sh (minutes when the system is
// not cached, a second when it is) and returns the cache directory: the
// system in root/, its facts in info.
func debianRoot(t *testing.T) (dir string, info map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	if dl, ok := t.Deadline(); ok {
		cancel()
		ctx, cancel = context.WithDeadline(context.Background(), dl.Add(-30*time.Second))
	}
	defer cancel()
	script := filepath.Join(repo, "fixtures", "make-debian-root.sh")
	cmd := exec.CommandContext(ctx, "bash", script)
	// On cancellation let the script's trap remove its temporary directory.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, lastLines(stderr.String(), 30))
	}
	dir = strings.TrimSpace(stdout.String())
	if i := strings.LastIndexByte(dir, '\n'); i >= 0 {
		dir = dir[i+1:]
	}
	info, err := fixture.ReadInfo(filepath.Join(dir, "info"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, info
}

// system is a throwaway copy of the cached Debian system.
type system struct {
	lower, upper, work, merged string
	// share is a directory of the test's, mounted at /pagepipe inside.
	share string
}

func newSystem(t *testing.T, cached string) *system {
	t.Helper()
	base := t.TempDir()
	s := &system{
		lower: filepath.Join(cached, "root"),
		upper: filepath.Join(base, "upper"), work: filepath.Join(base, "work"),
		merged: filepath.Join(base, "merged"), share: filepath.Join(base, "share"),
	}
	for _, d := range []string{s.upper, s.work, s.merged, s.share} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// inNamespace mounts the system and chroots into it; the script is $1, the
// file to show as /proc/vmcore $2 (none: proc is mounted there).
const inNamespace = `set -eu
m=$PP_MERGED
mount -t overlay overlay -o "lowerdir=$PP_LOWER,upperdir=$PP_UPPER,workdir=$PP_WORK" "$m"
mount -t sysfs sysfs "$m/sys"
mount --rbind /dev "$m/dev"
mkdir -p "$m/pagepipe"
mount --bind "$PP_SHARE" "$m/pagepipe"
if [ -n "$2" ]; then
	# What a capture kernel's /proc holds for kdump-config: the vmcore.
	mount -t tmpfs -o mode=0555 vmcore-only "$m/proc"
	touch "$m/proc/vmcore"
	mount --bind -o ro "$2" "$m/proc/vmcore"
else
	mount -t proc proc "$m/proc"
fi
exec chroot "$m" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
	DEBIAN_FRONTEND=noninteractive /bin/sh -euc "$1"`

// result is one command's exit code and output.
type result struct {
	rc             int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.rc, lastLines(r.stdout, 30), lastLines(r.stderr, 30))
}

// sh runs script with sh -eu inside the system; vmcore, if not empty, is
// the file the system sees as /proc/vmcore.
func (s *system) sh(t *testing.T, script, vmcore string) result {
	t.Helper()
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", inNamespace, "in-namespace", script, vmcore)
	cmd.Env = append(os.Environ(), "PP_LOWER="+s.lower, "PP_UPPER="+s.upper, "PP_WORK="+s.work, "PP_MERGED="+s.merged, "PP_SHARE="+s.share)
	// If the test process dies, so does the command (and its namespace
	// once its children end).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	rc := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("unshare: %v", err)
		}
		rc = ee.ExitCode()
	}
	return result{rc, stdout.String(), stderr.String()}
}

// must runs script as sh does and fails the test unless it exits 0.
func (s *system) must(t *testing.T, what, script string) result {
	t.Helper()
	r := s.sh(t, script, "")
	if r.rc != 0 {
		t.Fatalf("%s: %s", what, r)
	}
	return r
}

// names is what sits at makedumpfile's two names and their diverted
// names, read inside the system.
type names struct {
	diversions        []string // dpkg-divert --list lines naming makedumpfile
	bin, binDistrib   []byte   // /usr/bin/makedumpfile[.distrib], links followed; nil: absent
	man, manDistrib   []byte   // /usr/share/man/man8/makedumpfile[.distrib].8.gz
	version           string   // makedumpfile -v's first line, as kdump-config's PATH finds it
	resolved, binLink string   // where that makedumpfile resolves to; readlink of the name
}

// names reads makedumpfile's names inside the system.
func (s *system) names(t *testing.T) names {
	t.Helper()
	out := filepath.Join(s.share, "names")
	os.RemoveAll(out)
	s.must(t, "read makedumpfile's names", `o=/pagepipe/names
mkdir -p $o
dpkg-divert --list > $o/diversions
for f in /usr/bin/makedumpfile /usr/bin/makedumpfile.distrib /usr/share/man/man8/makedumpfile.8.gz /usr/share/man/man8/makedumpfile.distrib.8.gz; do
	if [ -e $f ]; then cp -L $f $o/$(basename $f); fi
done
readlink /usr/bin/makedumpfile > $o/link || true
# kdump-config's own PATH.
PATH=/bin:/usr/bin:/sbin:/usr/sbin
if p=$(command -v makedumpfile); then
	readlink -f "$p" > $o/resolved
	makedumpfile -v > $o/version 2>&1 || true
fi`)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return b
	}
	n := names{
		bin: read("makedumpfile"), binDistrib: read("makedumpfile.distrib"),
		man: read("makedumpfile.8.gz"), manDistrib: read("makedumpfile.distrib.8.gz"),
		resolved: strings.TrimSpace(string(read("resolved"))), binLink: strings.TrimSpace(string(read("link"))),
	}
	n.version, _, _ = strings.Cut(string(read("version")), "\n")
	for _, line := range strings.Split(string(read("diversions")), "\n") {
		if strings.Contains(line, "makedumpfile") {
			n.diversions = append(n.diversions, line)
		}
	}
	slices.Sort(n.diversions)
	return n
}

// The diversions pagepipe-as-makedumpfile holds while installed.
var ourDiversions = []string{
	"diversion of /usr/bin/makedumpfile to /usr/bin/makedumpfile.distrib by pagepipe-as-makedumpfile",
	"diversion of /usr/share/man/man8/makedumpfile.8.gz to /usr/share/man/man8/makedumpfile.distrib.8.gz by pagepipe-as-makedumpfile",
}

// want describes what makedumpfile's names must hold.
type want struct {
	diverted bool // pagepipe-as-makedumpfile's diversions are in place
	debian   bool // Debian's makedumpfile is installed
}

// files are the bytes the names may hold: Debian's makedumpfile and its
// manual page (from its .deb), pagepipe and its manual page (from ours).
type files struct {
	debianBin, debianMan, pagepipeBin, pagepipeMan []byte
	version                                        string
}

// check fails the test unless n is what w says, with the diverted and
// restored names byte for byte those of the packages.
func (f files) check(t *testing.T, when string, n names, w want) {
	t.Helper()
	fail := func(format string, a ...any) { t.Errorf("%s: "+format, append([]any{when}, a...)...) }
	wantDiv := []string(nil)
	if w.diverted {
		wantDiv = ourDiversions
	}
	if !slices.Equal(n.diversions, wantDiv) {
		fail("dpkg-divert --list: %q, want %q", n.diversions, wantDiv)
	}
	same := func(name string, got, want []byte, what string) {
		if !bytes.Equal(got, want) {
			switch {
			case want == nil:
				fail("%s exists (%d bytes), want none", name, len(got))
			case got == nil:
				fail("%s is missing, want %s", name, what)
			default:
				fail("%s is not %s: %s", name, what, judge.FirstDiff(got, want))
			}
		}
	}
	switch {
	case w.diverted:
		same("/usr/bin/makedumpfile", n.bin, f.pagepipeBin, "pagepipe")
		same("/usr/share/man/man8/makedumpfile.8.gz", n.man, f.pagepipeMan, "pagepipe's manual page")
		if n.binLink != "pagepipe" || n.resolved != "/usr/bin/pagepipe" {
			fail("/usr/bin/makedumpfile links to %q, kdump-config's PATH finds %q: want pagepipe, /usr/bin/pagepipe", n.binLink, n.resolved)
		}
		if want := "pagepipe: version " + f.version + " "; !strings.HasPrefix(n.version, want) {
			fail("makedumpfile -v: %q, want pagepipe's %q", n.version, want)
		}
		var distribBin, distribMan []byte
		if w.debian {
			distribBin, distribMan = f.debianBin, f.debianMan
		}
		same("/usr/bin/makedumpfile.distrib", n.binDistrib, distribBin, "Debian's makedumpfile")
		same("/usr/share/man/man8/makedumpfile.distrib.8.gz", n.manDistrib, distribMan, "Debian's manual page")
	case w.debian:
		same("/usr/bin/makedumpfile", n.bin, f.debianBin, "Debian's makedumpfile")
		same("/usr/share/man/man8/makedumpfile.8.gz", n.man, f.debianMan, "Debian's manual page")
		same("/usr/bin/makedumpfile.distrib", n.binDistrib, nil, "")
		same("/usr/share/man/man8/makedumpfile.distrib.8.gz", n.manDistrib, nil, "")
		if n.binLink != "" || !strings.HasPrefix(n.version, "makedumpfile: version ") {
			fail("/usr/bin/makedumpfile links to %q; -v says %q: want Debian's program", n.binLink, n.version)
		}
	default:
		for name, b := range map[string][]byte{"/usr/bin/makedumpfile": n.bin, "/usr/bin/makedumpfile.distrib": n.binDistrib,
			"/usr/share/man/man8/makedumpfile.8.gz": n.man, "/usr/share/man/man8/makedumpfile.distrib.8.gz": n.manDistrib} {
			same(name, b, nil, "")
		}
	}
}

// debFile returns one file of a package, extracted.
func debFile(t *testing.T, deb, path string) []byte {
	t.Helper()
	return readFile(t, filepath.Join(extract(t, deb), path))
}

// TestDebianSystem installs both packages into a minimal Debian 12 beside
// kdump-tools and makedumpfile and checks, step by step:
//   - apt-get install of the two files diverts makedumpfile: /usr/bin/makedumpfile is pagepipe (as
//     kdump-config's PATH finds it, and -v says so), Debian's program and
//     manual page are byte for byte at makedumpfile.distrib;
//   - reinstalling makedumpfile or pagepipe-as-makedumpfile changes
//     nothing: makedumpfile stays diverted, the diversions stay single;
//   - kdump-tools' kernel hook makes the kdump initrd, and any makedumpfile
//     in it is pagepipe (Debian's kdump initrd carries none: the capture
//     kernel mounts the root file system and runs kdump-config there);
//   - kdump-config savecore, as installed, with the real fixture as
//     /proc/vmcore, saves a dump that is pagepipe's (rebuilt with -R, equal
//     to pagepipe -c -d 31's), that libkdumpfile reads page for page and
//     pagepipe verify accepts, and the kernel log;
//   - command lines pagepipe cannot do (-X, --eppic, an s390x vmcore)
//     run Debian's makedumpfile through the fallback (handedOver), and
//     with no makedumpfile of Debian's they are refused in one line
//     (noFallback);
//   - removing pagepipe-as-makedumpfile gives Debian's makedumpfile and
//     manual page back byte for byte;
//   - an installation that fails in unpacking (a file conflict) takes the
//     diversions away again (postrm abort-install);
//   - the other order: pagepipe-as-makedumpfile first, makedumpfile
//     installed after it lands at makedumpfile.distrib, and removal again
//     gives it its name.
func TestDebianSystem(t *testing.T) {
	pkgs := debs(t)
	ours := pkgs["pagepipe_"+runtime.GOARCH]
	asMdf := pkgs["pagepipe-as-makedumpfile_all"]
	if ours == "" {
		t.Fatalf("no pagepipe package for this machine's architecture %s", runtime.GOARCH)
	}
	vmcore := fixture.Real(t, fixture.Options{}).Vmcore
	cached, info := debianRoot(t)
	t.Logf("Debian system %s: %s, kernel %s", cached, info["suite"], info["kernel"])
	mdfDebs, err := filepath.Glob(filepath.Join(cached, "root/var/cache/apt/archives/makedumpfile_*.deb"))
	if err != nil || len(mdfDebs) != 1 {
		t.Fatalf("the cached system's apt cache holds makedumpfile debs %v (%v), want one", mdfDebs, err)
	}
	f := files{
		debianBin:   debFile(t, mdfDebs[0], "usr/bin/makedumpfile"),
		debianMan:   debFile(t, mdfDebs[0], "usr/share/man/man8/makedumpfile.8.gz"),
		pagepipeBin: debFile(t, ours, "usr/bin/pagepipe"),
		pagepipeMan: debFile(t, ours, "usr/share/man/man8/pagepipe.8.gz"),
		version:     version(t),
	}
	s := newSystem(t, cached)
	for _, p := range []string{ours, asMdf} {
		copyFile(t, p, filepath.Join(s.share, filepath.Base(p)))
	}
	debsIn := "/pagepipe/" + filepath.Base(ours) + " /pagepipe/" + filepath.Base(asMdf)
	asMdfIn := "/pagepipe/" + filepath.Base(asMdf)

	// kdump-tools and makedumpfile from the system's apt cache, as Debian
	// installs them (--no-download: nothing from the network).
	s.must(t, "apt-get install kdump-tools makedumpfile", "apt-get install -y -q --no-download kdump-tools makedumpfile")
	f.check(t, "with Debian's makedumpfile", s.names(t), want{debian: true})

	// As docs/packaging.md says to install them: apt, given the files.
	// (Not --no-download: apt takes local files in through its download
	// step. They depend on nothing to download.)
	r := s.must(t, "apt-get install pagepipe pagepipe-as-makedumpfile", "apt-get install -y -q "+debsIn)
	if !strings.Contains(r.stdout, "Adding '"+ourDiversions[0]+"'") {
		t.Errorf("apt-get install did not say it diverted makedumpfile:\n%s", r.stdout)
	}
	f.check(t, "after installing pagepipe-as-makedumpfile", s.names(t), want{diverted: true, debian: true})

	s.must(t, "apt-get install --reinstall makedumpfile", "apt-get install -y -q --no-download --reinstall makedumpfile")
	f.check(t, "after reinstalling makedumpfile", s.names(t), want{diverted: true, debian: true})
	s.must(t, "dpkg -i pagepipe-as-makedumpfile again", "dpkg -i "+asMdfIn)
	f.check(t, "after reinstalling pagepipe-as-makedumpfile", s.names(t), want{diverted: true, debian: true})

	t.Run("kdump initrd", func(t *testing.T) { kdumpInitrd(t, s, info["kernel"], f.pagepipeBin) })
	t.Run("savecore", func(t *testing.T) { savecore(t, s, vmcore, filepath.Join(extract(t, ours), "usr/bin/pagepipe")) })
	foreign := filepath.Join(s.share, "s390x.vmcore")
	if err := synth.WriteFile(foreign, synth.ForeignMachine(synth.S390X, 8)); err != nil {
		t.Fatal(err)
	}
	t.Run("fallback", func(t *testing.T) { handedOver(t, s, vmcore) })

	s.must(t, "apt-get remove pagepipe-as-makedumpfile", "apt-get remove -y -q pagepipe-as-makedumpfile")
	f.check(t, "after removing pagepipe-as-makedumpfile", s.names(t), want{debian: true})

	// A package that owns one of pagepipe-as-makedumpfile's files makes its
	// unpacking fail after preinst diverted makedumpfile.
	clash := clashingDeb(t, s.share, "/usr/share/doc/pagepipe-as-makedumpfile/copyright")
	s.must(t, "dpkg -i the clashing package", "dpkg -i /pagepipe/"+filepath.Base(clash))
	r = s.sh(t, "dpkg -i "+asMdfIn, "")
	if r.rc == 0 || !strings.Contains(r.stderr, "trying to overwrite '/usr/share/doc/pagepipe-as-makedumpfile/copyright'") {
		t.Errorf("dpkg -i pagepipe-as-makedumpfile beside a package owning its copyright file: want a file conflict, got %s", r)
	}
	f.check(t, "after a failed installation", s.names(t), want{debian: true})
	s.must(t, "dpkg -r the clashing package", "dpkg -r pagepipe-test-clash")

	// The other order: no makedumpfile when pagepipe-as-makedumpfile comes.
	s.must(t, "dpkg -r makedumpfile", "dpkg -r makedumpfile")
	f.check(t, "with no makedumpfile", s.names(t), want{})
	s.must(t, "dpkg -i pagepipe-as-makedumpfile", "dpkg -i "+asMdfIn)
	f.check(t, "pagepipe-as-makedumpfile with no makedumpfile", s.names(t), want{diverted: true})
	t.Run("no fallback", func(t *testing.T) { noFallback(t, s, vmcore) })
	s.must(t, "apt-get install makedumpfile after pagepipe-as-makedumpfile", "apt-get install -y -q --no-download makedumpfile")
	f.check(t, "makedumpfile installed after pagepipe-as-makedumpfile", s.names(t), want{diverted: true, debian: true})
	s.must(t, "dpkg -r pagepipe-as-makedumpfile", "dpkg -r pagepipe-as-makedumpfile")
	f.check(t, "after removing pagepipe-as-makedumpfile again", s.names(t), want{debian: true})
	s.must(t, "dpkg -r pagepipe", "dpkg -r pagepipe")
}

// kdumpInitrd runs kdump-tools' kernel hook, which makes the kdump initrd
// (mkinitramfs with kdump-tools' configuration), unpacks it and checks it:
// it is kdump's (the kdump-tools initramfs hook put its sysctl.conf in),
// and every makedumpfile it carries is pagepipe.
func kdumpInitrd(t *testing.T, s *system, kernel string, pagepipeBin []byte) {
	if !regexp.MustCompile(`^[0-9][A-Za-z0-9.+_-]*$`).MatchString(kernel) {
		t.Fatalf("the cached system's kernel is %q", kernel)
	}
	os.RemoveAll(filepath.Join(s.share, "initrd"))
	s.must(t, "kdump-tools' kernel hook", "/etc/kernel/postinst.d/kdump-tools "+kernel+
		"\nunmkinitramfs /var/lib/kdump/initrd.img-"+kernel+" /pagepipe/initrd")
	tree := filepath.Join(s.share, "initrd")
	var sysctl bool
	var carried []string
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(tree, p)
		if strings.HasSuffix(rel, "etc/kdump/sysctl.conf") {
			sysctl = true
		}
		if d.Name() != "makedumpfile" {
			return nil
		}
		carried = append(carried, rel)
		b, err := readInTree(tree, p)
		if err != nil {
			return err
		}
		if !bytes.Equal(b, pagepipeBin) {
			t.Errorf("the kdump initrd's %s is not pagepipe", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sysctl {
		t.Errorf("the initrd has no etc/kdump/sysctl.conf: kdump-tools' initramfs hook did not run")
	}
	t.Logf("makedumpfile in the kdump initrd: %q", carried)
}

// readInTree reads p, following links as the initrd would resolve them:
// absolute targets inside tree.
func readInTree(tree, p string) ([]byte, error) {
	for range 40 {
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return os.ReadFile(p)
		}
		to, err := os.Readlink(p)
		if err != nil {
			return nil, err
		}
		if filepath.IsAbs(to) {
			// An initrd unpacked from an early and a main archive has
			// its root one level down, in main/.
			root := tree
			if rel, _ := filepath.Rel(tree, p); strings.HasPrefix(rel, "main/") {
				root = filepath.Join(tree, "main")
			}
			p = filepath.Join(root, to)
		} else {
			p = filepath.Join(filepath.Dir(p), to)
		}
	}
	return nil, fmt.Errorf("%s: too many links", p)
}

// savecore runs kdump-config savecore, as kdump-tools installs it and with
// its settings, the vmcore at /proc/vmcore, and judges what it saved:
// pagepipe ran its line (nothing was handed over to makedumpfile).
func savecore(t *testing.T, s *system, vmcore, pagepipe string) {
	r := s.sh(t, "kdump-config savecore", vmcore)
	if r.rc != 0 || !strings.Contains(r.stdout, "saved vmcore in") || !strings.Contains(r.stdout, "saved dmesg content in") ||
		strings.Contains(r.stdout+r.stderr, "falling back") || strings.Contains(r.stdout+r.stderr, "handing over") {
		t.Fatalf("kdump-config savecore: %s", r)
	}
	find := func(pattern string) string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(s.upper, "var/crash/2*", pattern))
		if err != nil || len(m) != 1 {
			t.Fatalf("%s in /var/crash: %v %v", pattern, m, err)
		}
		return m[0]
	}
	if b := readFile(t, find("dmesg.*")); !bytes.Contains(b, []byte("] Linux version ")) {
		t.Errorf("the dmesg file does not hold the kernel log: %.200q", b)
	}
	// kdump-config's dump is flattened (it adds -F to MAKEDUMP_ARGS, "-c
	// -d 31" by default) into a pipe, so prioritised (issue 21): rebuilt,
	// it is pagepipe's -c -d 31 --priority dump.
	dir := t.TempDir()
	rebuilt, direct, reference := filepath.Join(dir, "rebuilt"), filepath.Join(dir, "direct"), filepath.Join(dir, "reference")
	flat, err := os.Open(find("dump.*"))
	if err != nil {
		t.Fatal(err)
	}
	defer flat.Close()
	cmd := exec.Command(pagepipe, "-R", rebuilt)
	cmd.Stdin = flat
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pagepipe -R: %v\n%s", err, out)
	}
	run(t, pagepipe, "--message-level", "0", "-c", "-d", "31", "--priority", vmcore, direct)
	if a, b := readFile(t, rebuilt), readFile(t, direct); !bytes.Equal(a, b) {
		t.Errorf("kdump-config's dump, rebuilt, is not pagepipe -c -d 31 --priority's: %s", judge.FirstDiff(a, b))
	}
	// Debian's makedumpfile on this machine (scripts/deps.sh) says which
	// pages -d 31 keeps; libkdumpfile must read each as the vmcore has it.
	judge.Makedumpfile(t, "--message-level", "0", "-d", "31", vmcore, reference)
	want := judge.ExpectedPages(t, vmcore, reference)
	if d := want.Diff(judge.Libkdumpfile(t, rebuilt, judge.AllPFNs(t, rebuilt))); d != "" {
		t.Errorf("libkdumpfile on kdump-config's dump:\n%s", d)
	}
	if out, err := exec.Command(pagepipe, "verify", vmcore, rebuilt).CombinedOutput(); err != nil {
		t.Errorf("pagepipe verify: %v\n%s", err, out)
	}
}

// debianVersionLine is what Debian 12's makedumpfile prints first at
// message level 8 (-D); pagepipe's says "(pagepipe)".
const debianVersionLine = "makedumpfile: version 1.7.2 (released on 20 Oct 2022)\n"

// handedOver runs, with both packages installed and Debian's makedumpfile
// diverted, command lines pagepipe cannot do, as a kdump script would run
// them (makedumpfile by name, kdump-config's PATH): -X and --eppic on the
// vmcore, and a vmcore of s390x (/pagepipe/s390x.vmcore). Each is handed
// over to Debian's makedumpfile, found beside the link: pagepipe's one
// line first on stderr, then Debian's program runs (its version line, at
// -D, on stdout) and its exit status is the line's, as Debian's program
// run directly gives it. kdump-config's own line ran pagepipe (savecore).
func handedOver(t *testing.T, s *system, vmcore string) {
	for _, tc := range []struct {
		name, args, reason string
	}{
		{"-X", "-X -D -d 31 /proc/vmcore /var/crash/xen", "-X (exclude Xen domain-U pages) is not built into pagepipe"},
		{"--eppic", "--eppic /pagepipe/macro.c -D -d 31 /proc/vmcore /var/crash/eppic", "--eppic (erase kernel data with eppic macros) is not built into pagepipe"},
		{"s390x", "-D -c -d 31 /pagepipe/s390x.vmcore /var/crash/s390x", "/pagepipe/s390x.vmcore is a vmcore of s390x (ELF e_machine), which pagepipe does not dump"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(s.share, "macro.c"), []byte("int main(void) { return 1; }\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := s.sh(t, "PATH=/bin:/usr/bin:/sbin:/usr/sbin\nmakedumpfile "+tc.args, vmcore)
			// kdump-config's PATH finds makedumpfile in /bin, which is
			// /usr/bin in a merged /usr.
			want := regexp.MustCompile("^makedumpfile: " + regexp.QuoteMeta(tc.reason) + ": handing over to (/usr)?/bin/makedumpfile\\.distrib\n")
			if !want.MatchString(r.stderr) || !strings.HasPrefix(r.stdout, debianVersionLine) {
				t.Errorf("makedumpfile %s: want %q on stderr first and Debian's version line on stdout; %s", tc.args, want, r)
			}
			direct := s.sh(t, "/usr/bin/makedumpfile.distrib "+strings.Replace(tc.args, "/var/crash/", "/var/crash/direct-", 1), vmcore)
			if r.rc != direct.rc || !strings.HasPrefix(direct.stdout, debianVersionLine) {
				t.Errorf("exit %d; Debian's makedumpfile run directly: %s", r.rc, direct)
			}
		})
	}
}

// noFallback runs, with pagepipe-as-makedumpfile installed and no
// makedumpfile of Debian's, the lines handedOver runs: each is refused in
// one line (pagepipe's config file names /usr/bin/makedumpfile, which is
// pagepipe itself), exit 1, and no file is written.
func noFallback(t *testing.T, s *system, vmcore string) {
	for _, tc := range []struct{ args, says string }{
		{"-X -d 31 /proc/vmcore /var/crash/xen", "-X (exclude Xen domain-U pages) is not built into pagepipe, and there is no makedumpfile to hand over to"},
		{"--eppic /pagepipe/macro.c -d 31 /proc/vmcore /var/crash/eppic", "--eppic (erase kernel data with eppic macros) is not built into pagepipe, and there is no makedumpfile to hand over to"},
		{"-c -d 31 /pagepipe/s390x.vmcore /var/crash/s390x", "s390x vmcores are not supported"},
	} {
		out := strings.Fields(tc.args)[len(strings.Fields(tc.args))-1]
		r := s.sh(t, "PATH=/bin:/usr/bin:/sbin:/usr/sbin\nrc=0\nmakedumpfile "+tc.args+" || rc=$?\n[ ! -e "+out+" ] || echo "+out+" exists\nexit $rc", vmcore)
		if r.rc != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "makedumpfile: ") && !strings.HasPrefix(r.stderr, "pagepipe: ") ||
			!strings.Contains(r.stderr, tc.says) || strings.Contains(r.stdout, "version") || strings.Contains(r.stdout, "exists") {
			t.Errorf("makedumpfile %s with no fallback: want exit 1, one line saying %q and no file; %s", tc.args, tc.says, r)
		}
	}
}

// clashingDeb builds, in dir, a package pagepipe-test-clash that owns path.
func clashingDeb(t *testing.T, dir, path string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range map[string]string{
		"DEBIAN/control": "Package: pagepipe-test-clash\nVersion: 1\nArchitecture: all\nMaintainer: pagepipe tests <tests@pagepipe.invalid>\n" +
			"Description: owns a file of pagepipe-as-makedumpfile, for a test\n",
		path: "a file in the way\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(dir, "pagepipe-test-clash_1_all.deb")
	run(t, "dpkg-deb", "--root-owner-group", "--build", root, deb)
	return deb
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.WriteFile(dst, readFile(t, src), 0o644); err != nil {
		t.Fatal(err)
	}
}
