package source

import (
	"fmt"
	"testing"
)

// Bitmaps takes the pages PT_LOADs hold in part as makedumpfile does:
// create_1st_bitmap_file counts a partial last page (LastPresent),
// create_bitmap_from_memhole rounds it down, and exclude_nodata_pages
// clears the 2nd bitmap from the page holding p_paddr+p_filesz (1.7.2) or
// from the next page boundary (KeepData, 1.7.6 and later) to the end of
// p_memsz, PT_LOAD by PT_LOAD after all are set.
func TestBitmapsPartialPages(t *testing.T) {
	// The cases are written in 4 KiB pages; each page size scales them.
	load := func(paddr, filesz, memsz uint64) Load { return Load{Paddr: paddr, FileSize: filesz, MemSize: memsz} }
	// kexec-tools' low RAM, ending mid-page at 0x9fc00 (pfn 0x9f).
	low := load(0x1000, 0x9fc00-0x1000, 0x9fc00-0x1000)
	// Data ending mid-page 0x101, memory to the end of 0x103.
	tail := load(0x100000, 0x1800, 0x4000)
	// A kernel-text PT_LOAD ending mid-page 0x202, RAM holding it whole.
	text, ram := load(0x200000, 0x2800, 0x2800), load(0x200000, 0x4000, 0x4000)
	for _, tc := range []struct {
		name  string
		loads []Load
		pfn   uint64
		// present and dumpable for {}, {LastPresent}, {KeepData}, both.
		present, dumpable [4]bool
	}{
		{"low RAM's partial page", []Load{low}, 0x9f, [4]bool{false, true, false, true}, [4]bool{false, false, false, true}},
		{"low RAM's last whole page", []Load{low}, 0x9e, [4]bool{true, true, true, true}, [4]bool{true, true, true, true}},
		{"data ends mid-page", []Load{tail}, 0x101, [4]bool{true, true, true, true}, [4]bool{false, false, true, true}},
		{"no data", []Load{tail}, 0x102, [4]bool{true, true, true, true}, [4]bool{false, false, false, false}},
		// 1.7.2 clears the page although another PT_LOAD holds it whole.
		{"text ends mid-page, RAM after", []Load{text, ram}, 0x202, [4]bool{true, true, true, true}, [4]bool{false, false, true, true}},
		{"text ends mid-page, RAM first", []Load{ram, text}, 0x202, [4]bool{true, true, true, true}, [4]bool{false, false, true, true}},
		{"RAM past the text's end", []Load{text, ram}, 0x203, [4]bool{true, true, true, true}, [4]bool{true, true, true, true}},
	} {
		for _, ps := range PageSizes {
			k := ps / 4096
			var loads []Load
			for _, l := range tc.loads {
				loads = append(loads, load(l.Paddr*k, l.FileSize*k, l.MemSize*k))
			}
			for i, pp := range []PartialPages{{}, {LastPresent: true}, {KeepData: true}, {LastPresent: true, KeepData: true}} {
				t.Run(fmt.Sprintf("%s/%d/%+v", tc.name, ps, pp), func(t *testing.T) {
					in := &Info{Loads: loads, pageSize: ps}
					for _, l := range loads {
						in.MaxMapnr = max(in.MaxMapnr, (l.Paddr+l.MemSize+ps-1)/ps)
					}
					p, d := in.Bitmaps(in.MaxMapnr, pp)
					if p.Test(tc.pfn) != tc.present[i] || d.Test(tc.pfn) != tc.dumpable[i] {
						t.Errorf("pfn %#x: present %v dumpable %v, want %v %v", tc.pfn, p.Test(tc.pfn), d.Test(tc.pfn), tc.present[i], tc.dumpable[i])
					}
				})
			}
		}
	}
}
