package main

import (
	"bytes"
	"strings"
	"testing"
)

// -x, --config, --module-debuginfo and --vtop reach the dump's options;
// --vtop reads an address as strtoul(, , 0) does.
func TestDebuginfoOptions(t *testing.T) {
	o, err := parseOptions([]string{"-d", "31", "-x", "vmlinux", "--config", "erase.conf", "--module-debuginfo", "dir", "--vtop", "0xffffffff81000000", "vmcore", "dump"})
	if err == nil {
		err = o.values()
	}
	if err != nil {
		t.Fatal(err)
	}
	d := o.dumpOptions(nil)
	if d.Vmlinux != "vmlinux" || d.FilterConfig != "erase.conf" || d.ModuleDebuginfo != "dir" || d.Vtop != 0xffffffff81000000 {
		t.Errorf("options %+v", d)
	}
	for _, v := range []struct {
		arg  string
		want uint64
	}{{"4096", 4096}, {"0x10", 16}, {"010", 8}} {
		o, err := parseOptions([]string{"--vtop", v.arg, "vmcore", "dump"})
		if err == nil {
			err = o.values()
		}
		if err != nil || o.vtop != v.want {
			t.Errorf("--vtop %s = %#x, %v; want %#x", v.arg, o.vtop, err, v.want)
		}
	}
	if o, err := parseOptions([]string{"--vtop", "kernel", "vmcore", "dump"}); err != nil || o.values() == nil {
		t.Errorf("--vtop kernel accepted")
	}
}

// -g needs -x and no file operands; it is refused as a usage error.
func TestGenerateVMCOREINFOUsage(t *testing.T) {
	for _, args := range [][]string{{"-g", "out"}, {"-g", "out", "-x", "vmlinux", "vmcore"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &stdout, &stderr); code == exitOK {
			t.Errorf("%q: exit %d", args, code)
		}
		if !strings.Contains(stdout.String()+stderr.String(), "-g FILE needs -x VMLINUX") {
			t.Errorf("%q: %s%s", args, stdout.String(), stderr.String())
		}
	}
}
