package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// make test's -race pass runs the tests of this package that RACE_CMD (in
// the Makefile) matches: every alternative of it must match a test here,
// with or without the integration tag, so that renaming a test cannot
// drop it from the pass without this failing.
func TestRaceCmdNamesTests(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RACE_CMD = (.+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no RACE_CMD line in the Makefile")
	}
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range decl.FindAllSubmatch(b, -1) {
			tests = append(tests, string(d[1]))
		}
	}
	if len(tests) < 20 {
		t.Fatalf("found only %d tests in %d files", len(tests), len(files))
	}
	for _, alt := range strings.Split(strings.TrimSpace(string(m[1])), "|") {
		re, err := regexp.Compile(alt)
		if err != nil {
			t.Fatalf("RACE_CMD alternative %q: %v", alt, err)
		}
		var hit []string
		for _, name := range tests {
			if re.MatchString(name) {
				hit = append(hit, name)
			}
		}
		if len(hit) == 0 {
			t.Errorf("RACE_CMD alternative %q matches no test of cmd/pagepipe", alt)
		}
	}
}
