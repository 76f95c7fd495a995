//go:build integration

package debuginfo

import (
	"debug/elf"
	"errors"
	"testing"

	"pagepipe/internal/fixture"
)

// On Debian 12's 6.1 (amd64 and arm64), Debian 13's 6.12 and sid's 7.2, the kernel's
// own BTF (its vmlinux's .BTF section, the bytes between __start_BTF and
// __stop_BTF in its memory) answers every member and size lookup of the
// structures a filter config walks as the vmlinux's DWARF does, and the
// type of each variable it has a VAR for (the per-cpu ones) as the DWARF
// answers it; it has no type for a global variable.
func TestKernelBTFAsDWARF(t *testing.T) {
	for _, k := range []struct{ name, suite, arch, task string }{
		{"6.1", "", "", "current_task"},
		{"6.12", "trixie", "", "runqueues"},
		{"arm64", "bookworm", "arm64", "__entry_task"},
		{"7.2", "sid", "", "current_task"},
	} {
		t.Run(k.name, func(t *testing.T) {
			kernelBTFAsDWARF(t, fixture.DebugVmlinuxOf(t, k.suite, k.arch), k.task)
		})
	}
}

func kernelBTFAsDWARF(t *testing.T, vmlinux, perCPU string) {
	d, err := OpenDWARF(vmlinux)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f, err := elf.Open(vmlinux)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, err := f.Section(".BTF").Data()
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseBTF(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, declared, multidim := 0, 0, 0
	for _, s := range []string{"task_struct", "module", "page", "list_head", "file_system_type", "gate_struct",
		"uts_namespace", "new_utsname", "mm_struct", "pglist_data", "zone", "printk_ringbuffer", "vmap_area", "inode", "super_block"} {
		ds, err1 := d.StructSize(s)
		bs, err2 := b.StructSize(s)
		if errors.Is(err1, ErrNotFound) && errors.Is(err2, ErrNotFound) {
			continue // gate_struct is x86's
		}
		if err1 != nil || err2 != nil || ds != bs {
			t.Errorf("StructSize(%s): DWARF %d, %v; BTF %d, %v", s, ds, err1, bs, err2)
			continue
		}
		st, _, err := b.structType(s)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		var walk func(t *btfType, depth int)
		walk = func(t *btfType, depth int) {
			for _, m := range b.membersOf(t) {
				if n := b.name(m.nameOff); n != "" {
					names[n] = true
				}
				if mt := b.typ(m.typ); mt != nil && (mt.kind == btfStruct || mt.kind == btfUnion) && depth < 3 {
					walk(mt, depth+1)
				}
			}
		}
		walk(st, 0)
		for m := range names {
			dm, err1 := d.Member(s, m)
			bm, err2 := b.Member(s, m)
			n++
			switch {
			case (err1 == nil) == (err2 == nil) && dm == bm:
				continue
			case err1 == nil && err2 == nil && dm.Offset == bm.Offset && dm.Type.Flags&Ptr != 0 && dm.Type.Size == -1 && bm.Type.Size >= 0 &&
				dm.Type.Name == bm.Type.Name && dm.Type.Flags == bm.Type.Flags:
				// A pointer to a structure the DWARF unit only declares:
				// the DWARF has no size for it (makedumpfile erases
				// nothing), the deduplicated BTF has the structure's.
				declared++
			case err1 == nil && err2 == nil && dm.Offset == bm.Offset && dm.Type.Flags&Array != 0 && dm.Type.Name == bm.Type.Name &&
				dm.Type.Flags == bm.Type.Flags && bm.Type.ArrayLen > dm.Type.ArrayLen && bm.Type.ArrayLen%dm.Type.ArrayLen == 0:
				// A multi-dimensional array: makedumpfile takes the DWARF's
				// first dimension, pahole's BTF has one flat array.
				multidim++
			default:
				t.Errorf("Member(%s, %s): DWARF %+v, %v; BTF %+v, %v", s, m, dm, err1, bm, err2)
			}
		}
	}
	t.Logf("%d member lookups: all agree but %d pointers to structures the DWARF unit only declares and %d multi-dimensional arrays", n, declared, multidim)
	for _, g := range []string{"init_task", "saved_command_line", "modules", "init_uts_ns"} {
		if _, err := b.Var(g); err == nil {
			t.Errorf("the kernel's BTF has a type for %s", g)
		}
	}
	if _, err := b.Var(perCPU); err != nil {
		t.Errorf("Var(%s): %v", perCPU, err)
	}
	vars, differ := 0, 0
	for _, v := range b.types {
		if v.kind != btfVar {
			continue
		}
		vars++
		name := b.name(v.nameOff)
		dv, err1 := d.Var(name)
		bv, err2 := b.Var(name)
		if err1 != nil || err2 != nil {
			t.Errorf("Var(%s): DWARF %v, BTF %v", name, err1, err2)
			continue
		}
		if dv != bv {
			// The same two cases as members'.
			if dv.Name == bv.Name && dv.Flags == bv.Flags && (dv.Size == -1 && dv.Flags&Ptr != 0 ||
				dv.Flags&Array != 0 && dv.ArrayLen > 0 && bv.ArrayLen%dv.ArrayLen == 0) {
				differ++
				continue
			}
			t.Errorf("Var(%s): DWARF %+v, BTF %+v", name, dv, bv)
		}
	}
	t.Logf("%d variables in the BTF: all typed as the DWARF types them but %d (a declared structure's pointer, a multi-dimensional array)", vars, differ)
	if vars < 100 {
		t.Errorf("only %d variables in the BTF", vars)
	}
}
