//go:build integration

package filter_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"pagepipe/filter"
	"pagepipe/source"
)

// On the 6.1 profile (the newest kernel makedumpfile 1.7.2 filters
// correctly) pagepipe's dumped pfns equal makedumpfile's at every level.
func TestScanMatchesMakedumpfile61(t *testing.T) {
	dir := t.TempDir()
	_, v, k := machine(t, dir, "6.1", 256)
	for _, level := range testLevels {
		t.Run(fmt.Sprint(level), func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprintf("mdf-%d", level))
			if b, err := exec.Command("makedumpfile", "-f", "-d", fmt.Sprint(level), v.Path, out).CombinedOutput(); err != nil {
				t.Fatalf("makedumpfile: %v\n%s", err, b)
			}
			d, err := source.OpenDump(out)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			defer os.Remove(out)
			plan, err := filter.NewPlan(context.Background(), v, level, k, 2, source.PartialPages{}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !plan.Dumpable.Equal(d.Dumpable) {
				t.Fatalf("dumped pfns differ from makedumpfile's: %s", firstDifference(plan.Dumpable, d.Dumpable))
			}
		})
	}
}

// makedumpfile -d 31 keeps the pfns pagepipe's scan keeps on a Lean
// machine (TestLeanMachine: the truth's).
func TestLeanMachineMakedumpfile(t *testing.T) {
	dir := t.TempDir()
	_, v, k := leanMachine(t, dir)
	plan, err := filter.NewPlan(context.Background(), v, 31, k, 2, source.PartialPages{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "mdf")
	if b, err := exec.Command("makedumpfile", "-f", "-d", "31", v.Path, out).CombinedOutput(); err != nil {
		t.Fatalf("makedumpfile: %v\n%s", err, b)
	}
	d, err := source.OpenDump(out)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !plan.Dumpable.Equal(d.Dumpable) {
		t.Errorf("makedumpfile's bitmap differs: %s", firstDifference(plan.Dumpable, d.Dumpable))
	}
}
