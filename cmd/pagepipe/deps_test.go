package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The dump binary lives in a capture kernel's initramfs, inside the
// crashkernel= reservation: it must not carry the bench's plotting
// libraries, their fonts and image codecs, nor the vmcore generator.
func TestNoBenchDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "pagepipe/cmd/pagepipe").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps gave %d packages", len(deps))
	}
	for _, p := range deps {
		for _, bad := range []string{"gonum.org/", "golang.org/x/image", "font", "freetype", "codeberg.org/", "git.sr.ht/", "github.com/ajstarks/", "pagepipe/bench", "pagepipe/internal/synth"} {
			if strings.Contains(p, bad) {
				t.Errorf("cmd/pagepipe depends on %s", p)
			}
		}
	}
}

// cmd/pagepipe is the command line only: flags, console, messages, exit
// codes. The dump itself is the engine's (pagepipe/dump); of the project
// it may import nothing else but the process-wide helpers: the CPU set,
// the memory probe (the garbage collector's limit) and the run statistics
// (--stats-file).
func TestImportsOnlyTheEngine(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "pagepipe/cmd/pagepipe").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{"pagepipe/dump": true, "pagepipe/internal/cpuset": true,
		"pagepipe/internal/memprobe": true, "pagepipe/internal/runstats": true}
	seen := false
	for _, p := range strings.Fields(string(out)) {
		if p == "pagepipe/dump" {
			seen = true
		}
		if strings.HasPrefix(p, "pagepipe/") && !allowed[p] {
			t.Errorf("cmd/pagepipe imports %s", p)
		}
	}
	if !seen {
		t.Errorf("cmd/pagepipe does not import the engine: %q", out)
	}
}

// The layers of docs/architecture.md, top first: a package imports only
// packages of layers below its own.
var layers = [][]string{
	{"cmd/pagepipe", "cmd/pagepipe-bench"},
	{"bench", "internal/synth"},
	{"dump", "internal/fixture"},
	// The page's way: filter (reads source) decides, pipeline copies,
	// sink writes; side by side, none imports another. convert rebuilds
	// dumps from dumps (reads source, writes as sink writes).
	{"filter", "pipeline", "sink", "priority", "convert"},
	{"source"},
	{"codec", "kernel", "erase"},
	{"kdumpfmt", "bitmap", "chunk", "internal/reorder", "codec/lzo", "internal/cpuclock", "internal/cpuset", "internal/memprobe", "internal/runstats", "internal/integration", "debuginfo"},
}

// A page goes down one way: source → filter → pipeline → sink. The
// pipeline knows the chunks (pagepipe/chunk) and the interfaces its
// writers satisfy, not the filter that chose the pages, the writers or
// the engine; a writer knows neither the pipeline nor the reader of the
// input.
func TestDataFlow(t *testing.T) {
	for _, c := range []struct {
		pkg       string
		forbidden []string
	}{
		{"pipeline", []string{"sink", "filter", "dump", "source", "priority"}},
		{"sink", []string{"source", "pipeline", "filter", "dump", "priority"}},
		{"filter", []string{"pipeline", "sink", "dump"}},
		{"source", []string{"sink", "pipeline", "filter", "convert"}},
	} {
		out, err := exec.Command("go", "list", "-deps", "pagepipe/"+c.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", c.pkg, err)
		}
		deps := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			deps[p] = true
		}
		if !deps["pagepipe/"+c.pkg] {
			t.Fatalf("go list -deps %s does not list it: %q", c.pkg, out)
		}
		for _, f := range c.forbidden {
			if deps["pagepipe/"+f] {
				t.Errorf("%s depends on %s", c.pkg, f)
			}
		}
	}
}

// Arrows point down only.
func TestArrowsPointDown(t *testing.T) {
	layer := map[string]int{}
	for i, ps := range layers {
		for _, p := range ps {
			layer["pagepipe/"+p] = i
		}
	}
	var pkgs []string
	for p := range layer {
		pkgs = append(pkgs, p)
	}
	out, err := exec.Command("go", append([]string{"list", "-f", `{{.ImportPath}} {{join .Imports " "}}`}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, "pagepipe/") {
				continue
			}
			to, ok := layer[imp]
			if !ok {
				t.Errorf("%s imports %s, which has no layer in docs/architecture.md", f[0], imp)
			} else if to <= layer[f[0]] {
				t.Errorf("%s imports %s: an arrow that does not point down", f[0], imp)
			}
		}
	}
}
