package source

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pagepipe/internal/synth"
)

// kcoreMachines are kcore-shaped images of kernel machines: x86_64 with
// low RAM, the main range and RAM above 4 GiB (three vmemmap ranges, two
// merged by the kernel's rule or not), and arm64.
func kcoreMachines() []struct {
	name string
	spec synth.Spec
	opts synth.KcoreOptions
} {
	x86 := synth.KernelMachine("6.1", 64)
	x86hi := synth.KernelMachine("6.1", 64)
	x86hi.Segments = append(x86hi.Segments, synth.Segment{Paddr: 4 << 30, FileSize: 16 << 20, MemSize: 16 << 20})
	return []struct {
		name string
		spec synth.Spec
		opts synth.KcoreOptions
	}{
		{"x86_64", x86, synth.KcoreOptions{}},
		{"x86_64-high-split-vmemmap", x86hi, synth.KcoreOptions{SplitVmemmap: true}},
		{"x86_64-4.19", synth.KernelMachine("4.19", 64), synth.KcoreOptions{}},
		{"arm64", synth.NewARM64Machine(synth.KernelSpec{Profile: "6.1", KASLR: true}, 64), synth.KcoreOptions{}},
	}
}

func writeKcore(t testing.TB, s synth.Spec, o synth.KcoreOptions) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kcore")
	if err := synth.WriteKcore(path, s, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every PT_LOAD of a kcore-shaped image gets the kind its address range
// says, the vmcore's Loads are the RAM ones only, and their pages read as
// the machine's RAM (the image's pages too, through the direct map).
func TestKcoreSegmentTyping(t *testing.T) {
	for _, m := range kcoreMachines() {
		t.Run(m.name, func(t *testing.T) {
			want, err := synth.KcoreLayout(m.spec, m.opts)
			if err != nil {
				t.Fatal(err)
			}
			v, err := Open(writeKcore(t, m.spec, m.opts))
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			if v.Kcore == nil {
				t.Fatal("a kcore-shaped image opened as a vmcore")
			}
			got := map[uint64]string{}
			for _, s := range v.Kcore.Segments {
				got[s.Vaddr] = s.Kind.String()
			}
			var ramLoads int
			for _, w := range want {
				if got[w.Vaddr] != w.Kind {
					t.Errorf("PT_LOAD at %#x (%#x bytes): typed %q, want %q", w.Vaddr, w.Size, got[w.Vaddr], w.Kind)
				}
				switch w.Kind {
				case "ram":
					ramLoads++
					if dm := w.Vaddr - w.Paddr; v.Kcore.DirectMap != dm {
						t.Errorf("direct map %#x, want %#x", v.Kcore.DirectMap, dm)
					}
				case "text":
					if v.Kcore.ImageStart != w.Paddr || v.Kcore.ImageEnd != w.Paddr+w.Size {
						t.Errorf("image [%#x, %#x), want [%#x, %#x)", v.Kcore.ImageStart, v.Kcore.ImageEnd, w.Paddr, w.Paddr+w.Size)
					}
				}
			}
			if len(v.Kcore.Segments) != len(want) {
				t.Errorf("%d segments typed, %d written", len(v.Kcore.Segments), len(want))
			}
			if len(v.Loads) != ramLoads {
				t.Errorf("%d loads read, want the %d RAM ones", len(v.Loads), ramLoads)
			}
			r := v.NewReader(0, false)
			defer r.Close()
			ps := v.PageSize()
			buf := make([]byte, ps)
			for _, l := range v.Loads {
				for _, pa := range []uint64{l.Paddr, l.Paddr + l.MemSize - ps, v.Kcore.ImageStart} {
					if pa < l.Paddr || pa >= l.Paddr+l.MemSize {
						continue
					}
					page, err := r.Page(pa / ps)
					if err != nil {
						t.Fatal(err)
					}
					synth.Page(m.spec, pa/ps, buf)
					if !bytes.Equal(page, buf) {
						t.Errorf("page at %#x differs from the machine's", pa)
					}
				}
			}
		})
	}
}

// A kcore without VMCOREINFO (before 4.19) is refused as unsupported,
// before anything is read.
func TestKcoreWithoutVMCOREINFO(t *testing.T) {
	m := kcoreMachines()[0]
	_, err := Open(writeKcore(t, m.spec, synth.KcoreOptions{NoVMCOREINFO: true}))
	if !errors.Is(err, ErrNoVmcoreinfo) || !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err %v, want ErrNoVmcoreinfo and ErrUnsupported", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("%q is more than one line", err)
	}
}

// A refused open of kcore says why in one line: not root, or lockdown
// (which refuses root too); a vmcore's permission error stays as it is.
func TestKcoreDenied(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		lockdown string
		root     bool
		want     string
	}{
		{"[none] integrity confidentiality\n", false, "needs root (CAP_SYS_RAWIO)"},
		{"none [integrity] confidentiality\n", true, "locked down (integrity)"},
		{"none integrity [confidentiality]\n", false, "locked down (confidentiality)"},
		{"", true, "refused to let"},
	} {
		f := filepath.Join(dir, "lockdown")
		if err := os.WriteFile(f, []byte(tc.lockdown), 0o644); err != nil {
			t.Fatal(err)
		}
		old := lockdownFile
		lockdownFile = f
		e := denied("/proc/kcore", &os.PathError{Op: "open", Path: "/proc/kcore", Err: syscall.EPERM})
		lockdownFile = old
		d, ok := e.(*KcoreDeniedError)
		if !ok {
			t.Fatalf("%v is not a KcoreDeniedError", e)
		}
		d.Root = tc.root
		if msg := d.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") || !errors.Is(d, ErrUnsupported) {
			t.Errorf("lockdown %q root %v: %q, want one line with %q", tc.lockdown, tc.root, msg, tc.want)
		}
	}
	perm := &os.PathError{Op: "open", Path: "/tmp/vmcore", Err: syscall.EACCES}
	if e := denied("/tmp/vmcore", perm); e != error(perm) {
		t.Errorf("a vmcore's error became %v", e)
	}
}

// FuzzKcore parses kcore-shaped headers and types their segments: never a
// panic, and what is typed is consistent (the Loads are the RAM segments,
// all at one direct-map offset, within the image's pfns).
func FuzzKcore(f *testing.F) {
	for _, m := range kcoreMachines()[:1] {
		f.Add(kcoreHeader(f, m.spec))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// /proc/kcore's size is the kernel's address space: nothing in
		// it lies past the end.
		in, err := ParseELF(bytes.NewReader(b), 1<<46)
		if err != nil || !in.IsKcore() {
			return
		}
		k, err := TypeKcore(in)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q is more than one line", err)
			}
			return
		}
		if k.ImageEnd <= k.ImageStart && k.ImageEnd != 0 {
			t.Fatalf("image [%#x, %#x)", k.ImageStart, k.ImageEnd)
		}
		for _, l := range in.Loads {
			if l.Vaddr-l.Paddr != k.DirectMap {
				t.Fatalf("RAM %+v not at the direct map %#x", l, k.DirectMap)
			}
			if (l.Paddr+l.MemSize+in.PageSize()-1)/in.PageSize() > in.MaxMapnr {
				t.Fatalf("RAM %+v past max_mapnr %#x", l, in.MaxMapnr)
			}
		}
		if len(k.Segments) != len(in.Loads)+len(in.Unmapped)+1 {
			t.Fatalf("%d segments typed of %d RAM, %d unmapped and the image", len(k.Segments), len(in.Loads), len(in.Unmapped))
		}
	})
}

// kcoreHeader is the headers and notes of a kcore-shaped image of s: what
// the kernel makes at every open, without the memory behind it.
func kcoreHeader(t testing.TB, s synth.Spec) []byte {
	t.Helper()
	b, err := os.ReadFile(writeKcore(t, s, synth.KcoreOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	n := bytes.LastIndex(b[:1<<20], []byte("\n")) + 1
	return b[:(n+3)&^3]
}

// Every reader of a kcore-shaped input reads its own open file: the
// kernel copies each page of /proc/kcore through one bounce buffer per
// open file, so two readers' reads of one file at once may each get the
// other's page. A vmcore's readers share its file. The readers, at work
// at once, read the machine's pages, and closing one closes its file.
func TestKcoreReadersOwnTheirFile(t *testing.T) {
	m := kcoreMachines()[0]
	v, err := Open(writeKcore(t, m.spec, m.opts))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ps := v.PageSize()
	readers := []*PageReader{v.newReader(0, false, 1), v.newReader(0, false, 1), v.newReader(DefaultMapSize, true, 1)}
	seen := map[uintptr]bool{v.f.Fd(): true}
	for i, r := range readers {
		if !r.ownFile || r.f == v.f || seen[r.f.Fd()] {
			t.Fatalf("reader %d reads file %d (own %v), the vmcore's is %d: not a file of its own", i, r.f.Fd(), r.ownFile, v.f.Fd())
		}
		seen[r.f.Fd()] = true
	}
	errs := make(chan error, len(readers))
	for _, r := range readers {
		go func() {
			want := make([]byte, ps)
			for _, l := range v.Loads {
				for pfn := l.Paddr / ps; pfn < (l.Paddr+l.FileSize)/ps; pfn += 7 {
					page, err := r.Page(pfn)
					if err != nil {
						errs <- err
						return
					}
					synth.Page(m.spec, pfn, want)
					if !bytes.Equal(page, want) {
						errs <- fmt.Errorf("pfn %#x differs from the machine's", pfn)
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range readers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	f := readers[0].f
	readers[0].Close()
	if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a closed reader's file: Stat says %v, want it closed", err)
	}
	for _, r := range readers[1:] {
		r.Close()
	}
	// The vmcore's own reads (ReadPhys) still work, in turn.
	if err := v.ReadPhys(v.Loads[0].Paddr, make([]byte, ps)); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "vmcore")
	if err := synth.WriteFile(path, synth.KernelMachine("6.1", 64)); err != nil {
		t.Fatal(err)
	}
	vm, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	r := vm.newReader(0, false, 1)
	defer r.Close()
	if r.f != vm.f || r.ownFile {
		t.Errorf("a vmcore's reader opened a file of its own")
	}
}

// realKcores are the headers and notes of real /proc/kcores (the notes'
// CORE descriptors zeroed: they held the reading process's registers and
// task), as the live fixture's guests made them (fixtures/make-live.sh
// saves kcore.head), with the typing the kernel's address layout implies.
var realKcores = []struct {
	file string
	// want is the kind of the PT_LOAD at each address.
	want                   map[uint64]SegmentKind
	imageStart, imageEnd   uint64
	directMap, vmemmapBase uint64
	maxMapnr               uint64
}{
	{
		// Debian 12's 6.1.0-57-arm64 under QEMU virt (512 MiB from
		// 0x40000000), VA_BITS 48, KASLR: the image lies inside vmalloc's
		// range (its PT_LOAD overlaps vmalloc's and is told apart by its
		// physical address); the modules' 128 MiB below vmalloc; the
		// linear map randomized (PHYS_OFFSET "negative"); no vsyscall
		// page. VMCOREINFO names every range (MODULES_VADDR, VMALLOC_START,
		// VMEMMAP_START and their ends).
		file: "arm64-6.1.head",
		want: map[uint64]SegmentKind{
			0xffffbcea16000000: KcoreText,
			0xffff800008000000: KcoreVmalloc,
			0xffff800000000000: KcoreModules,
			0xffff43b380000000: KcoreRAM,
			0xfffffd0ece000000: KcoreVmemmap,
		},
		imageStart: 0x40200000, imageEnd: 0x42210000,
		// vaddr - paddr of the RAM: (0x40000000 - PHYS_OFFSET) | PAGE_OFFSET
		// less 0x40000000.
		directMap: 0xffff43b340000000,
		// The struct page of pfn 0x40000 (the RAM's first) is the
		// vmemmap PT_LOAD's start: 0x40000 * 64 bytes below it.
		vmemmapBase: 0xfffffd0ece000000 - 0x40000*64,
		maxMapnr:    0x60000,
	},
}

// realKcore is the header of a real kcore; ranges false hides
// VMCOREINFO's address ranges (NUMBER(VMALLOC_START) and the rest become
// names nothing reads), as a kernel without them writes it.
func realKcore(t testing.TB, file string, ranges bool) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "kcore", file))
	if err != nil {
		t.Fatal(err)
	}
	if !ranges {
		for _, n := range []string{"MODULES_VADDR", "MODULES_END", "VMALLOC_START", "VMALLOC_END", "VMEMMAP_START", "VMEMMAP_END"} {
			b = bytes.ReplaceAll(b, []byte("NUMBER("+n+")"), []byte("HIDDEN("+n+")"))
		}
	}
	return b
}

// The segment typing of real kcores: every PT_LOAD gets its kind, the
// image, the direct map and the vmemmap base are the kernel's, and the
// Loads a live dump reads are the RAM alone; by VMCOREINFO's address
// ranges and, without them, by the segments' shape.
func TestKcoreRealHeaders(t *testing.T) {
	for _, tc := range realKcores {
		for _, ranges := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/ranges=%v", tc.file, ranges), func(t *testing.T) {
				b := realKcore(t, tc.file, ranges)
				if !ranges && bytes.Contains(b, []byte("NUMBER(VMALLOC_START)")) {
					t.Fatal("VMCOREINFO's ranges not hidden")
				}
				// /proc/kcore's PT_LOADs lie at their addresses' offsets: up
				// to 2^64 for a kernel at the top of the address space.
				in, err := ParseELF(bytes.NewReader(b), math.MaxInt64)
				if err != nil {
					t.Fatal(err)
				}
				if !in.IsKcore() {
					t.Fatal("not told apart from a vmcore")
				}
				k, err := TypeKcore(in)
				if err != nil {
					t.Fatal(err)
				}
				if len(k.Segments) != len(tc.want) {
					t.Errorf("%d segments typed, want %d", len(k.Segments), len(tc.want))
				}
				for _, s := range k.Segments {
					if want, ok := tc.want[s.Vaddr]; !ok || s.Kind != want {
						t.Errorf("PT_LOAD at %#x (%#x bytes): typed %v, want %v", s.Vaddr, s.Size, s.Kind, want)
					}
				}
				if k.ImageStart != tc.imageStart || k.ImageEnd != tc.imageEnd {
					t.Errorf("image [%#x, %#x), want [%#x, %#x)", k.ImageStart, k.ImageEnd, tc.imageStart, tc.imageEnd)
				}
				if k.DirectMap != tc.directMap || k.VmemmapBase != tc.vmemmapBase {
					t.Errorf("direct map %#x, vmemmap base %#x; want %#x, %#x", k.DirectMap, k.VmemmapBase, tc.directMap, tc.vmemmapBase)
				}
				for _, l := range in.Loads {
					if l.Vaddr-l.Paddr != tc.directMap {
						t.Errorf("load %+v is not direct-mapped RAM", l)
					}
				}
				if in.MaxMapnr != tc.maxMapnr {
					t.Errorf("max_mapnr %#x, want %#x", in.MaxMapnr, tc.maxMapnr)
				}
			})
		}
	}
}
