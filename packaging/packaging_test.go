//go:build integration

package packaging

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"pagepipe/internal/fixture"
)

var (
	repo   string // the repository's root
	outDir string // the packages this test binary builds
)

func TestMain(m *testing.M) {
	var err error
	if repo, err = fixture.RepoRoot(); err == nil {
		outDir, err = os.MkdirTemp("", "pagepipe-packaging")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(outDir)
	os.Exit(code)
}

// arches are the architectures `make deb` and `make rpm` build for, with
// the ELF machine each binary must be for.
var arches = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// version is pagepipe's version as cmd/pagepipe/version.go sets it, the one
// place it is written.
func version(t *testing.T) string {
	t.Helper()
	b := readFile(t, filepath.Join(repo, "cmd", "pagepipe", "version.go"))
	m := regexp.MustCompile(`(?m)^const version = "([^"]+)"$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("cmd/pagepipe/version.go has no `const version = \"...\"` line")
	}
	return string(m[1])
}

// debVersion is the Debian packages' version: pagepipe's with revision 1.
func debVersion(t *testing.T) string { return version(t) + "-1" }

type made struct {
	once  sync.Once
	paths []string
	err   error
}

var targets sync.Map // make target → *made

// makeTarget runs `make -s TARGET OUTVAR=DIR` once per test binary and
// returns the paths the target printed, which must be inside DIR.
func makeTarget(t *testing.T, target, outVar string) []string {
	t.Helper()
	v, _ := targets.LoadOrStore(target, &made{})
	m := v.(*made)
	m.once.Do(func() {
		dir := filepath.Join(outDir, target)
		cmd := exec.Command("make", "-s", target, outVar+"="+dir)
		cmd.Dir = repo
		cmd.Env = os.Environ()
		if g := goCommand(); g != "" {
			cmd.Env = append(cmd.Env, "GO="+g)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			m.err = fmt.Errorf("make %s: %v\n%s", target, err, stderr.String())
			return
		}
		for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			if filepath.Dir(line) != dir {
				m.err = fmt.Errorf("make %s printed %q, not a package in %s", target, line, dir)
				return
			}
			m.paths = append(m.paths, line)
		}
	})
	if m.err != nil {
		t.Fatal(m.err)
	}
	return m.paths
}

// goCommand finds go for the build scripts. go test puts its own bin
// directory first on the test binary's PATH, so go is found even when go
// test was started by an absolute path with no go on PATH.
func goCommand() string {
	p, err := exec.LookPath("go")
	if err != nil {
		return ""
	}
	return p
}

// debs builds the Debian packages with `make deb` and returns them by
// name: "pagepipe_amd64", "pagepipe_arm64", "pagepipe-as-makedumpfile_all".
func debs(t *testing.T) map[string]string {
	t.Helper()
	byName := map[string]string{}
	for _, p := range makeTarget(t, "deb", "DEB_OUT") {
		f := strings.Split(strings.TrimSuffix(filepath.Base(p), ".deb"), "_")
		if len(f) != 3 || f[1] != debVersion(t) {
			t.Fatalf("make deb made %s: not PACKAGE_%s_ARCH.deb", p, debVersion(t))
		}
		byName[f[0]+"_"+f[2]] = p
	}
	want := []string{"pagepipe-as-makedumpfile_all"}
	for arch := range arches {
		want = append(want, "pagepipe_"+arch)
	}
	for _, name := range want {
		if byName[name] == "" {
			t.Fatalf("make deb made no %s package: %v", name, byName)
		}
	}
	if len(byName) != len(want) {
		t.Fatalf("make deb made %d packages, want %d: %v", len(byName), len(want), byName)
	}
	return byName
}

// entry is one line of `dpkg-deb -c`: mode, owner and, for a link, its
// target.
type entry struct{ mode, owner, link string }

// debEntries lists the package's file system tree (dpkg-deb -c) by path,
// with the sizes of its files.
func debEntries(t *testing.T, deb string) (map[string]entry, map[string]int64) {
	t.Helper()
	out := run(t, "dpkg-deb", "-c", deb)
	entries, sizes := map[string]entry{}, map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		// drwxr-xr-x root/root 0 2026-12-01 20:18 ./usr/bin/
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb -c %s: bad line %q", deb, line)
		}
		path, link := f[5], ""
		if len(f) == 8 && f[6] == "->" {
			link = f[7]
		} else if len(f) != 6 {
			t.Fatalf("dpkg-deb -c %s: bad line %q", deb, line)
		}
		entries[path] = entry{f[0], f[1], link}
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			t.Fatalf("dpkg-deb -c %s: bad size in %q", deb, line)
		}
		sizes[path] = n
	}
	return entries, sizes
}

// dirs are the directory entries every package has, "./" included.
func dirs(paths ...string) map[string]entry {
	m := map[string]entry{}
	for _, p := range append([]string{"./", "./usr/", "./usr/share/", "./usr/share/doc/", "./usr/share/lintian/", "./usr/share/lintian/overrides/"}, paths...) {
		m[p] = entry{"drwxr-xr-x", "root/root", ""}
	}
	return m
}

func file(mode string) entry { return entry{mode, "root/root", ""} }
func link(to string) entry   { return entry{"lrwxrwxrwx", "root/root", to} }

func wantEntries(pkg string) map[string]entry {
	want := dirs("./usr/bin/", "./usr/share/man/", "./usr/share/man/man8/", "./usr/share/doc/"+pkg+"/")
	for path, e := range map[string]entry{
		"./usr/share/doc/" + pkg + "/copyright":           file("-rw-r--r--"),
		"./usr/share/doc/" + pkg + "/changelog.Debian.gz": file("-rw-r--r--"),
		"./usr/share/lintian/overrides/" + pkg:            file("-rw-r--r--"),
	} {
		want[path] = e
	}
	switch pkg {
	case "pagepipe":
		want["./usr/bin/pagepipe"] = file("-rwxr-xr-x")
		want["./usr/share/man/man8/pagepipe.8.gz"] = file("-rw-r--r--")
		maps.Copy(want, dirs("./etc/", "./etc/pagepipe/"))
		want["./etc/pagepipe/pagepipe.conf"] = file("-rw-r--r--")
	case "pagepipe-as-makedumpfile":
		want["./usr/bin/makedumpfile"] = link("pagepipe")
		want["./usr/share/man/man8/makedumpfile.8.gz"] = link("pagepipe.8.gz")
	}
	return want
}

// info is what `dpkg-deb -I` says of a package: its control fields and its
// control members, each marked executable or not.
type info struct {
	fields  map[string]string
	members map[string]bool // name → executable
}

func debInfo(t *testing.T, deb string) info {
	t.Helper()
	out := run(t, "dpkg-deb", "-I", deb)
	in := info{fields: map[string]string{}, members: map[string]bool{}}
	member := regexp.MustCompile(`^ +(\*)? *\d+ bytes, +\d+ lines +(\*)? *(\S+)`)
	field := regexp.MustCompile(`^ ([A-Z][A-Za-z-]+): (.*)$`)
	for _, line := range strings.Split(out, "\n") {
		if m := member.FindStringSubmatch(line); m != nil {
			in.members[m[3]] = m[1] != "" || m[2] != ""
		} else if m := field.FindStringSubmatch(line); m != nil {
			in.fields[m[1]] = m[2]
		}
	}
	return in
}

// TestDebPackages checks what `make deb` built with dpkg-deb -I and -c:
// the control fields and maintainer scripts, every entry of each tree with
// its mode and owner, the md5sums, and the static binary for the right
// machine, with no interpreter and no shared library.
func TestDebPackages(t *testing.T) {
	pkgs := debs(t)
	v := debVersion(t)
	for name, deb := range pkgs {
		t.Run(name, func(t *testing.T) {
			pkg, arch, _ := strings.Cut(name, "_")
			in := debInfo(t, deb)
			wantFields := map[string]string{
				"Package": pkg, "Version": v, "Architecture": arch,
				"Section": "admin", "Priority": "optional",
			}
			wantMembers := map[string]bool{"control": false, "md5sums": false}
			if pkg == "pagepipe-as-makedumpfile" {
				wantFields["Depends"] = "pagepipe (= " + v + ")"
				wantMembers["preinst"], wantMembers["postrm"] = true, true
			} else {
				wantMembers["conffiles"] = false
			}
			for k, want := range wantFields {
				if got := in.fields[k]; got != want {
					t.Errorf("%s: %q, want %q", k, got, want)
				}
			}
			for _, k := range []string{"Pre-Depends", "Recommends", "Conflicts", "Breaks", "Replaces", "Provides"} {
				if got, ok := in.fields[k]; ok {
					t.Errorf("%s: %q, want none", k, got)
				}
			}
			if pkg == "pagepipe" {
				if got, ok := in.fields["Depends"]; ok {
					t.Errorf("Depends: %q: a static binary depends on nothing", got)
				}
			}
			if !strings.Contains(in.fields["Maintainer"], "@") || in.fields["Description"] == "" {
				t.Errorf("Maintainer %q, Description %q", in.fields["Maintainer"], in.fields["Description"])
			}
			if !maps.Equal(in.members, wantMembers) {
				t.Errorf("control members (name: executable) %v, want %v", in.members, wantMembers)
			}

			entries, sizes := debEntries(t, deb)
			if want := wantEntries(pkg); !maps.Equal(entries, want) {
				t.Errorf("dpkg-deb -c:\n got %v\nwant %v", entries, want)
			}
			// Installed-Size as dpkg-gencontrol counts it: KiB per file,
			// rounded up, and 1 per directory or link.
			kib := int64(0)
			for path, e := range entries {
				switch {
				case path == "./":
				case e.mode[0] == '-':
					kib += (sizes[path] + 1023) / 1024
				default:
					kib++
				}
			}
			if got := in.fields["Installed-Size"]; got != strconv.FormatInt(kib, 10) {
				t.Errorf("Installed-Size %s, want %d", got, kib)
			}

			root := extract(t, deb)
			checkMD5sums(t, deb, root)
			if pkg == "pagepipe" {
				checkStatic(t, filepath.Join(root, "usr/bin/pagepipe"), arches[arch])
				checkCopyright(t, filepath.Join(root, "usr/bin/pagepipe"), filepath.Join(root, "usr/share/doc/pagepipe/copyright"))
				if got, want := gunzip(t, filepath.Join(root, "usr/share/man/man8/pagepipe.8.gz")), readFile(t, filepath.Join(repo, "docs/pagepipe.8")); !bytes.Equal(got, want) {
					t.Errorf("the manual page is not docs/pagepipe.8")
				}
				// The fallback's config file, a conffile.
				if got, want := readFile(t, filepath.Join(root, "etc/pagepipe/pagepipe.conf")), readFile(t, filepath.Join(repo, "packaging/pagepipe.conf")); !bytes.Equal(got, want) {
					t.Errorf("/etc/pagepipe/pagepipe.conf is not packaging/pagepipe.conf")
				}
				if got := run(t, "dpkg-deb", "--info", deb, "conffiles"); got != "/etc/pagepipe/pagepipe.conf\n" {
					t.Errorf("conffiles: %q", got)
				}
			}
			changelog := string(gunzip(t, filepath.Join(root, "usr/share/doc", pkg, "changelog.Debian.gz")))
			if first, _, _ := strings.Cut(changelog, "\n"); first != "pagepipe ("+v+") unstable; urgency=medium" {
				t.Errorf("changelog.Debian.gz starts %q", first)
			}
		})
	}
	// The binary's own version is the packages' (without the revision).
	bin := filepath.Join(extract(t, pkgs["pagepipe_"+runtime.GOARCH]), "usr/bin/pagepipe")
	out := run(t, bin, "-v")
	if want := "pagepipe: version " + version(t) + " "; !strings.HasPrefix(out, want) {
		t.Errorf("pagepipe -v: %q, want it to start %q", out, want)
	}
}

// checkStatic fails unless path is an executable for machine with nothing
// for a dynamic loader to do: no PT_INTERP, no PT_DYNAMIC, no DT_NEEDED.
func checkStatic(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != machine || f.Type != elf.ET_EXEC || f.Class != elf.ELFCLASS64 {
		t.Errorf("%s: %v %v %v, want a 64-bit executable for %v", path, f.Class, f.Type, f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has a %v program header: not static", path, p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) != 0 {
		t.Errorf("%s needs shared libraries %v (%v)", path, libs, err)
	}
}

// checkCopyright fails unless the copyright file has a Files: paragraph
// for every module compiled into the binary (debug/buildinfo), and none
// for a module that is not.
func checkCopyright(t *testing.T, bin, copyright string) {
	t.Helper()
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, d := range bi.Deps {
		linked[d.Path] = true
	}
	covered := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, copyright)))
	for sc.Scan() {
		patterns, ok := strings.CutPrefix(sc.Text(), "Files: ")
		if !ok {
			continue
		}
		for _, p := range strings.Fields(patterns) {
			if p == "*" || p == "go/*" { // pagepipe's own code; Go's library
				continue
			}
			dir := strings.TrimSuffix(p, "/*")
			mod := dir
			for mod != "." && !linked[mod] {
				mod = filepath.Dir(mod)
			}
			if mod == "." {
				t.Errorf("copyright: Files: %s names no module compiled into pagepipe", p)
				continue
			}
			if mod == dir {
				covered[mod] = true
			}
		}
	}
	for mod := range linked {
		if !covered[mod] {
			t.Errorf("copyright: no Files: %s/* paragraph for the module compiled into pagepipe", mod)
		}
	}
}

// checkMD5sums compares the package's md5sums with its extracted files,
// the conffiles (in etc) left out, as dh_md5sums leaves them out.
func checkMD5sums(t *testing.T, deb, root string) {
	t.Helper()
	want := map[string]string{}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if rel, _ := filepath.Rel(root, p); err == nil && fi.IsDir() && rel == "etc" {
			return filepath.SkipDir
		}
		if err == nil && fi.Mode().IsRegular() {
			sum := md5.Sum(readFile(t, p))
			rel, _ := filepath.Rel(root, p)
			want[rel] = hex.EncodeToString(sum[:])
		}
		return err
	})
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "--info", deb, "md5sums")), "\n") {
		sum, path, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("md5sums: bad line %q", line)
		}
		got[path] = sum
	}
	if !maps.Equal(got, want) {
		t.Errorf("md5sums %v, want %v", got, want)
	}
}

// TestDebLintian runs lintian over the three packages, with every tag
// lintian has (-E --pedantic, info included): it must report nothing.
// What the packages override, each override saying why, is in
// packaging/debian/*.lintian-overrides (docs/packaging.md); an override
// that no longer matches is reported too (unused-override).
func TestDebLintian(t *testing.T) {
	var files []string
	for _, p := range debs(t) {
		files = append(files, p)
	}
	slices.Sort(files)
	cmd := exec.Command("lintian", append([]string{"--display-info", "--display-experimental", "--pedantic", "--tag-display-limit", "0",
		"--fail-on", "error,warning,info,pedantic,experimental"}, files...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var tags []string
	for _, line := range strings.Split(stdout.String(), "\n") {
		if regexp.MustCompile(`^[A-Z]: `).MatchString(line) && !strings.HasPrefix(line, "N: ") {
			tags = append(tags, line)
		}
	}
	if err != nil || len(tags) > 0 {
		t.Errorf("lintian: %v\n%s\n%s", err, strings.Join(tags, "\n"), lastLines(stderr.String(), 10))
	}
}

// TestRPMPackages builds the RPMs with `make rpm` (rpmbuild -bb
// packaging/pagepipe.spec) and checks them with rpm -qp: the same program,
// manual page and copyright as the Debian packages, byte for byte (the
// RPM's license directory where Debian has /usr/share/doc; no Debian
// changelog or lintian overrides), /etc/pagepipe/pagepipe.conf a config
// file, and pagepipe-as-makedumpfile's link at
// makedumpfile's RPM path, providing and conflicting with makedumpfile.
func TestRPMPackages(t *testing.T) {
	v := version(t)
	rpms := map[string]string{}
	for _, p := range makeTarget(t, "rpm", "RPM_OUT") {
		rpms[filepath.Base(p)] = p
	}
	want := map[string]string{"pagepipe-as-makedumpfile-" + v + "-1.noarch.rpm": "noarch"}
	rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}
	for arch := range arches {
		want["pagepipe-"+v+"-1."+rpmArch[arch]+".rpm"] = arch
	}
	if len(rpms) != len(want) {
		t.Fatalf("make rpm made %v, want %v", rpms, want)
	}
	pkgs := debs(t)
	sbindir := strings.TrimSpace(run(t, "rpm", "--eval", "%{_sbindir}"))
	for name, arch := range want {
		t.Run(name, func(t *testing.T) {
			rpm := rpms[name]
			if rpm == "" {
				t.Fatalf("make rpm made no %s", name)
			}
			got := rpmDump(t, rpm)
			wantFiles := map[string]rpmFile{}
			if arch == "noarch" {
				wantFiles[sbindir+"/makedumpfile"] = rpmFile{mode: "0120777", link: relPath(t, sbindir, "/usr/bin/pagepipe")}
				wantFiles["/usr/share/man/man8/makedumpfile.8.gz"] = rpmFile{mode: "0120777", link: "pagepipe.8.gz"}
				for query, want := range map[string]string{
					"--requires":  "pagepipe = " + v + "-1",
					"--provides":  "makedumpfile",
					"--conflicts": "makedumpfile",
				} {
					lines := strings.Split(strings.TrimSpace(run(t, "rpm", "-qp", query, rpm)), "\n")
					if !slices.Contains(lines, want) {
						t.Errorf("rpm -qp %s: %q, want %q among them", query, lines, want)
					}
				}
			} else {
				root := extract(t, pkgs["pagepipe_"+arch])
				for path, src := range map[string]string{
					"/usr/bin/pagepipe":                      "usr/bin/pagepipe",
					"/usr/share/man/man8/pagepipe.8.gz":      "usr/share/man/man8/pagepipe.8.gz",
					"/usr/share/licenses/pagepipe/copyright": "usr/share/doc/pagepipe/copyright",
				} {
					fi, err := os.Stat(filepath.Join(root, src))
					if err != nil {
						t.Fatal(err)
					}
					sum := sha256.Sum256(readFile(t, filepath.Join(root, src)))
					wantFiles[path] = rpmFile{mode: fmt.Sprintf("0100%o", fi.Mode().Perm()), sha256: hex.EncodeToString(sum[:])}
				}
				wantFiles["/usr/share/licenses/pagepipe"] = rpmFile{mode: "040755"}
				sum := sha256.Sum256(readFile(t, filepath.Join(repo, "packaging/pagepipe.conf")))
				wantFiles["/etc/pagepipe/pagepipe.conf"] = rpmFile{mode: "0100644", sha256: hex.EncodeToString(sum[:])}
				wantFiles["/etc/pagepipe"] = rpmFile{mode: "040755"}
				if got := strings.TrimSpace(run(t, "rpm", "-qp", "--configfiles", rpm)); got != "/etc/pagepipe/pagepipe.conf" {
					t.Errorf("rpm -qp --configfiles: %q", got)
				}
			}
			if !maps.Equal(got, wantFiles) {
				t.Errorf("rpm -qp --dump:\n got %v\nwant %v", got, wantFiles)
			}
		})
	}
}

// rpmFile is what rpm --dump says of a file, digest aside for links and
// directories.
type rpmFile struct{ mode, sha256, link string }

func rpmDump(t *testing.T, rpm string) map[string]rpmFile {
	t.Helper()
	files := map[string]rpmFile{}
	for _, line := range strings.Split(strings.TrimSpace(run(t, "rpm", "-qp", "--dump", rpm)), "\n") {
		// path size mtime digest mode owner group isconfig isdoc rdev symlink
		f := strings.Fields(line)
		if len(f) != 11 {
			t.Fatalf("rpm --dump %s: bad line %q", rpm, line)
		}
		if f[5] != "root" || f[6] != "root" {
			t.Errorf("%s: owner %s:%s, want root:root", f[0], f[5], f[6])
		}
		rf := rpmFile{mode: f[4]}
		switch {
		case strings.HasPrefix(f[4], "0120"):
			rf.link = f[10]
		case strings.HasPrefix(f[4], "0100"):
			rf.sha256 = f[3]
		}
		files[f[0]] = rf
	}
	return files
}

func relPath(t *testing.T, fromDir, to string) string {
	t.Helper()
	r, err := filepath.Rel(fromDir, to)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var extracted sync.Map // .deb → directory

// extract unpacks a package's tree (dpkg-deb -x) once per test binary and
// returns its root; the files are shared, read only.
func extract(t *testing.T, deb string) string {
	t.Helper()
	if dir, ok := extracted.Load(deb); ok {
		return dir.(string)
	}
	dir := filepath.Join(outDir, "x", filepath.Base(deb))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "dpkg-deb", "-x", deb, dir)
	extracted.Store(deb, dir)
	return dir
}

func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

// run runs a command and returns its stdout; it fails the test if the
// command fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
	return stdout.String()
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
