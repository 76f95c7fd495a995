package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// flatVirt is kernel virtual memory as a map of 8-byte words; unmapped
// addresses fail, as a missing page-table entry would.
type flatVirt map[uint64]uint64

func (m flatVirt) ReadVirt(vaddr uint64, p []byte) error {
	for i := 0; i < len(p); i += 8 {
		w, ok := m[vaddr+uint64(i)]
		if !ok {
			return fmt.Errorf("virtual %#x not mapped", vaddr+uint64(i))
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], w)
		copy(p[i:], b[:])
	}
	return nil
}

const (
	testRoots    = 0xffffffff83000000 // SYMBOL(mem_section): the root array
	testSections = 0xffff888001000000 // where root 0's sections live
	testVmemmap  = 0xffffea0000000000
)

func sparseVMCOREINFO(t testing.TB, extra string) *VMCOREINFO {
	vi, err := ParseVMCOREINFO([]byte(fmt.Sprintf("OSRELEASE=6.1.0\nPAGESIZE=4096\n"+
		"SYMBOL(mem_section)=%x\nLENGTH(mem_section)=2048\nSIZE(mem_section)=16\n"+
		"OFFSET(mem_section.section_mem_map)=0\nNUMBER(SECTION_SIZE_BITS)=27\n"+
		"NUMBER(MAX_PHYSMEM_BITS)=46\nSIZE(page)=64\n%s", uint64(testRoots), extra)))
	if err != nil {
		t.Fatal(err)
	}
	return vi
}

// sparseMemory lays out SPARSEMEM_EXTREME with VMEMMAP: one root holding
// the given present sections.
func sparseMemory(present ...uint64) flatVirt {
	m := flatVirt{}
	for i := uint64(0); i < 256; i++ {
		m[testRoots+8*i] = 0
		m[testSections+16*i] = 0
		m[testSections+16*i+8] = 0
	}
	m[testRoots] = testSections
	for _, nr := range present {
		// The kernel stores mem_map - start_pfn (in struct pages) with
		// flag bits: present (bit 0), has mem_map (bit 1).
		start := nr * 32768
		coded := testVmemmap + start*64 - start*64 // vmemmap: pfn-indexed
		m[testSections+16*nr] = coded | 0x3
	}
	return m
}

func TestFindMemMapSparseExtreme(t *testing.T) {
	vi := sparseVMCOREINFO(t, "")
	mm, err := FindMemMap(vi, sparseMemory(0, 1, 3), 5*32768)
	if err != nil {
		t.Fatal(err)
	}
	want := []Section{
		{0, 32768, testVmemmap},
		{32768, 65536, testVmemmap + 32768*64},
		{3 * 32768, 4 * 32768, testVmemmap + 3*32768*64},
	}
	if fmt.Sprint(mm.Sections) != fmt.Sprint(want) {
		t.Fatalf("sections %x, want %x", mm.Sections, want)
	}
	if mm.MaxPFN() != 4*32768 {
		t.Fatalf("MaxPFN %d", mm.MaxPFN())
	}
	// A max_mapnr inside a section cuts it.
	mm, err = FindMemMap(vi, sparseMemory(0), 1000)
	if err != nil || len(mm.Sections) != 1 || mm.Sections[0].EndPFN != 1000 {
		t.Fatalf("cut section: %+v, %v", mm, err)
	}
}

func TestFindMemMapErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra string
		mem   flatVirt
		want  string
	}{
		{"no present section", "", sparseMemory(), "no present section"},
		{"unreadable roots", "", flatVirt{}, "read 1 roots"},
		{"root points nowhere", "", flatVirt{testRoots: 0xffff888012340000}, "read sections"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FindMemMap(sparseVMCOREINFO(t, tc.extra), tc.mem, 4*32768)
			if err == nil || !contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	vi, _ := ParseVMCOREINFO([]byte("OSRELEASE=6.1.0\nPAGESIZE=4096\nSIZE(page)=64\n"))
	if _, err := FindMemMap(vi, flatVirt{}, 100); !errors.Is(err, ErrNoMemMap) {
		t.Fatalf("no memory model: %v", err)
	}
	vi, _ = ParseVMCOREINFO([]byte("OSRELEASE=6.1.0\nPAGESIZE=4096\n"))
	if _, err := FindMemMap(vi, flatVirt{}, 100); err == nil || !contains(err.Error(), "SIZE(page)") {
		t.Fatalf("no SIZE(page): %v", err)
	}
}

func contains(s, sub string) bool { return len(sub) == 0 || len(s) >= len(sub) && indexOf(s, sub) >= 0 }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// fuzzVirt serves any address from the fuzzer's bytes, repeated: hostile
// mem_section contents.
type fuzzVirt []byte

func (f fuzzVirt) ReadVirt(vaddr uint64, p []byte) error {
	if len(f) == 0 {
		return errors.New("no memory")
	}
	for off := vaddr % uint64(len(f)); len(p) > 0; off = 0 {
		p = p[copy(p, f[off:]):]
	}
	return nil
}

// fuzzFindMemMap is FuzzFindMemMap's call: SPARSEMEM_EXTREME with the
// given SIZE(mem_section), OFFSET(mem_section.section_mem_map),
// SECTION_SIZE_BITS and MAX_PHYSMEM_BITS, over memory that repeats mem.
func fuzzFindMemMap(size, off, sectionBits, physBits int64, maxMapnr uint64, mem []byte) (*MemMap, error) {
	vi, err := ParseVMCOREINFO([]byte(fmt.Sprintf("OSRELEASE=6.1.0\nPAGESIZE=4096\n"+
		"SYMBOL(mem_section)=ffffffff83000000\nSIZE(mem_section)=%d\n"+
		"OFFSET(mem_section.section_mem_map)=%d\nNUMBER(SECTION_SIZE_BITS)=%d\n"+
		"NUMBER(MAX_PHYSMEM_BITS)=%d\nSIZE(page)=64\n", size, off, sectionBits, physBits)))
	if err != nil {
		return nil, err
	}
	return FindMemMap(vi, fuzzVirt(mem), maxMapnr%(1<<36))
}

// The input FuzzFindMemMap found taking seconds a call (issue 14), in
// testdata/fuzz/FuzzFindMemMap/984fe13bfdceb50d: a 143-byte struct
// mem_section and 2^21 sections (a machine of 2^36 pfns) would have read
// 300 MB of kernel memory, all of it the same byte. No kernel's struct
// mem_section is that big, and the decoder says so before reading any.
func TestFindMemMapHugeSections(t *testing.T) {
	_, err := fuzzFindMemMap(143, 71, 27, 50, 68719476680, []byte{0x1c})
	want := "mem_section: SIZE 143 and OFFSET(section_mem_map) 71 are not plausible"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// The mem_section decoder takes hostile VMCOREINFO values and memory
// without panicking, looping or allocating without bound.
func FuzzFindMemMap(f *testing.F) {
	f.Add(int64(16), int64(0), int64(27), int64(46), uint64(1<<30), []byte{0, 0, 0, 0x88, 0xff, 0xff, 0xff, 0xff, 3, 0, 0, 0, 0, 0xea, 0xff, 0xff})
	f.Add(int64(0), int64(8), int64(12), int64(52), uint64(1<<40), []byte{1})
	f.Fuzz(func(t *testing.T, size, off, sectionBits, physBits int64, maxMapnr uint64, mem []byte) {
		mm, err := fuzzFindMemMap(size, off, sectionBits, physBits, maxMapnr, mem)
		if err != nil {
			return
		}
		prev := uint64(0)
		for _, s := range mm.Sections {
			if s.StartPFN < prev || s.EndPFN <= s.StartPFN || s.MemMap < kernelSpaceStart {
				t.Fatalf("bad section %+v after %d", s, prev)
			}
			prev = s.EndPFN
		}
	})
}
