package lzo_test

import (
	"bytes"
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

const pageSize = 4096

// pageSource names files to take pages from: up to perFile pages from each
// file matched by the globs (files in name order, pages spread evenly over
// each file) until the source has given max pages. Text sources skip pages
// that are not mostly printable.
type pageSource struct {
	name    string
	globs   []string
	perFile int
	max     int
	text    bool
}

// pageSources is the page set shared by the tests and benchmarks: a mix
// of machine code and data, compressed data, source text and zero pages,
// about 4 MiB. Every source lies inside the Go installation that runs the
// test (its tool binaries, the compressed files and ELF objects of its
// standard library's testdata, its sources), so the set is the same on
// every machine with the same Go, whatever else the host has installed.
// Real kernel pages are tested in asm_integration_test.go.
var pageSources = []pageSource{
	{name: "Go tool binaries", globs: []string{filepath.Join(goTools, "*")}, perFile: 80, max: 640},
	{name: "compressed data", globs: []string{
		filepath.Join(build.Default.GOROOT, "lib", "time", "*.zip"),
		filepath.Join(build.Default.GOROOT, "src", "image", "testdata", "*.png"),
		filepath.Join(build.Default.GOROOT, "src", "compress", "*", "testdata", "*"),
	}, perFile: 4, max: 64},
	{name: "ELF objects", globs: []string{filepath.Join(build.Default.GOROOT, "src", "debug", "elf", "testdata", "*")}, perFile: 4, max: 64},
	{name: "Go sources", globs: []string{filepath.Join(build.Default.GOROOT, "src", "*", "*.go")}, perFile: 1, max: 192, text: true},
}

// goTools is the directory of the go command's own tools (compile, link,
// vet, ...): large Go-built executables on every machine that runs go test.
var goTools = filepath.Join(build.Default.GOROOT, "pkg", "tool", build.Default.GOOS+"_"+build.Default.GOARCH)

const zeroPages = 64

var pageSet = sync.OnceValue(loadPages)

// loadPages builds the page set described by pageSources.
func loadPages() [][]byte {
	var pages [][]byte
	for _, s := range pageSources {
		pages = appendFilePages(pages, s)
	}
	for range zeroPages {
		pages = append(pages, make([]byte, pageSize))
	}
	return pages
}

// appendFilePages appends the pages source s yields.
func appendFilePages(pages [][]byte, s pageSource) [][]byte {
	var files []string
	for _, g := range s.globs {
		m, _ := filepath.Glob(g)
		for _, name := range m {
			// Library names are often links to one file.
			if real, err := filepath.EvalSymlinks(name); err == nil {
				files = append(files, real)
			}
		}
	}
	slices.Sort(files)
	files = slices.Compact(files)

	got := 0
	for _, name := range files {
		if got == s.max {
			break
		}
		fi, err := os.Stat(name)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() < pageSize {
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		n := int(fi.Size() / pageSize)
		take := min(s.perFile, n, s.max-got)
		for i := range take {
			page := make([]byte, pageSize)
			off := int64(i*(n/take)) * pageSize
			if _, err := f.ReadAt(page, off); err != nil {
				continue
			}
			if s.text && !mostlyText(page) {
				continue
			}
			pages = append(pages, page)
			got++
		}
		f.Close()
	}
	return pages
}

func mostlyText(p []byte) bool {
	printable := 0
	for _, c := range p {
		if c == '\n' || c == '\t' || (c >= ' ' && c < 0x7f) {
			printable++
		}
	}
	return printable > len(p)*9/10
}

// pagesFor returns the page set, failing the test when it is too small to
// mean anything (a Go installation without its sources or tools).
func pagesFor(tb testing.TB) [][]byte {
	tb.Helper()
	pages := pageSet()
	nonZero := 0
	zero := make([]byte, pageSize)
	for _, p := range pages {
		if !bytes.Equal(p, zero) {
			nonZero++
		}
	}
	if nonZero < 100 {
		tb.Fatalf("page set has only %d non-zero pages: is GOROOT (%s) whole?", nonZero, build.Default.GOROOT)
	}
	return pages
}
