//go:build integration

package debuginfo

import (
	"debug/elf"
	"testing"

	"pagepipe/internal/fixture"
)

// On Debian 12's 6.1, the kernel's own BTF (its vmlinux's .BTF section,
// the bytes between __start_BTF and __stop_BTF in its memory) answers
// every member and size lookup of the structures a filter config walks as
// the vmlinux's DWARF does; it has no type for a global variable.
func TestKernelBTFAsDWARF(t *testing.T) {
	vmlinux := fixture.DebugVmlinux(t)
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
		if err1 != nil || err2 != nil || ds != bs {
			t.Errorf("StructSize(%s): DWARF %d, %v; BTF %d, %v", s, ds, err1, bs, err2)
			continue
		}
		st, err := b.structType(s)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		var walk func(t *btfType, depth int)
		walk = func(t *btfType, depth int) {
			for _, m := range t.members {
				if m.name != "" {
					names[m.name] = true
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
	if _, err := b.Var("init_task"); err == nil {
		t.Errorf("the 6.1 kernel's BTF has a type for init_task")
	}
	if v, err := b.Var("current_task"); err != nil || v.Name != "task_struct" || v.Flags != Ptr|Struct {
		t.Errorf("Var(current_task) = %+v, %v", v, err)
	}
}
