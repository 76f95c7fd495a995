package synth

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// KcoreOptions shapes a kcore-shaped image (WriteKcore).
type KcoreOptions struct {
	// NoVMCOREINFO leaves the VMCOREINFO note out, as kernels before
	// 4.19 do.
	NoVMCOREINFO bool
	// SplitVmemmap gives every RAM segment a vmemmap PT_LOAD of its own
	// even where they overlap (the kernel merges them): the typing must
	// not depend on the merge.
	SplitVmemmap bool
}

// KcoreSegment is one PT_LOAD of a kcore-shaped image as WriteKcore wrote
// it, with the kind a reader should give it ("text", "ram", "vmalloc",
// "modules", "vmemmap", "other").
type KcoreSegment struct {
	Kind               string
	Vaddr, Paddr, Size uint64
	Offset             uint64
	dataSeg            int // the vmcore segment holding its data (-1: none)
	noPhys             bool
}

// kcoreData is where the image's memory starts in the file: the kcore's
// own headers lie before it, the kernel machine's vmcore (whose segment
// data the RAM PT_LOADs point into) from it on.
const kcoreData = 1 << 20

// KcoreLayout is the PT_LOADs WriteKcore writes for s, in file order:
// the image, vmalloc, the modules' range, the RAM ranges, their vmemmap
// and (x86_64) the vsyscall page, as fs/proc/kcore.c lists them.
func KcoreLayout(s Spec, o KcoreOptions) ([]KcoreSegment, error) {
	if s.Kernel == nil || s.Arch != X86_64 && s.Arch != AArch64 {
		return nil, errors.New("synth: a kcore image is made of an x86_64 or aarch64 kernel machine")
	}
	k, err := kernelOf(&s)
	if err != nil {
		return nil, err
	}
	g, err := GeometryOf(s)
	if err != nil {
		return nil, err
	}
	ps := k.ps
	var out []KcoreSegment
	img := k.fileSegs[0]
	out = append(out, KcoreSegment{Kind: "text", Vaddr: img.Vaddr, Paddr: img.Paddr, Size: img.FileSize, dataSeg: 0})
	var modules, vmallocSize uint64
	if k.arm == nil {
		vmallocSize = 32 << 40       // VMALLOC_SIZE_TB, 4-level paging
		modules = 0xffffffffc0000000 // MODULES_VADDR with KASLR
		out = append(out, KcoreSegment{Kind: "vmalloc", Vaddr: k.vmallocStart, Size: vmallocSize, noPhys: true})
		out = append(out, KcoreSegment{Kind: "modules", Vaddr: modules, Size: 0xffffffffff000000 - modules, noPhys: true})
	} else {
		out = append(out, KcoreSegment{Kind: "vmalloc", Vaddr: k.vmallocStart, Size: k.arm.vmallocEnd - k.vmallocStart, noPhys: true})
		out = append(out, KcoreSegment{Kind: "modules", Vaddr: k.arm.modulesVaddr, Size: k.arm.modulesEnd - k.arm.modulesVaddr, noPhys: true})
	}
	var vmemmap []KcoreSegment
	for i, sg := range k.fileSegs[1:] {
		out = append(out, KcoreSegment{Kind: "ram", Vaddr: sg.Vaddr, Paddr: sg.Paddr, Size: sg.FileSize, dataSeg: i + 1})
		lo := sg.Paddr / ps
		hi := (sg.Paddr + sg.FileSize) / ps
		start := (k.vmemmap + lo*structPageSize) &^ (ps - 1)
		end := (k.vmemmap + hi*structPageSize - 1 + ps) &^ (ps - 1)
		if n := len(vmemmap); n > 0 && !o.SplitVmemmap && start <= vmemmap[n-1].Vaddr+vmemmap[n-1].Size {
			last := &vmemmap[n-1]
			last.Size = max(last.Vaddr+last.Size, end) - last.Vaddr
			continue
		}
		vmemmap = append(vmemmap, KcoreSegment{Kind: "vmemmap", Vaddr: start, Size: end - start, noPhys: true})
	}
	out = append(out, vmemmap...)
	if k.arm == nil {
		out = append(out, KcoreSegment{Kind: "other", Vaddr: 0xffffffffff600000, Size: ps, noPhys: true})
	}
	for i := range out {
		sg := &out[i]
		if sg.noPhys {
			sg.Paddr = ^uint64(0)
			sg.dataSeg = -1
			continue
		}
		sg.Offset = uint64(kcoreData + g.LoadOff[sg.dataSeg])
	}
	return out, nil
}

// WriteKcore writes an image shaped like /proc/kcore of the kernel
// machine s (x86_64 or aarch64) to path, sparse: an ELF core whose
// PT_LOADs are typed by address range (KcoreLayout) and whose notes are
// kcore's (a zeroed NT_PRSTATUS, NT_PRPSINFO, NT_TASKSTRUCT and the
// kernel's VMCOREINFO, without CRASHTIME: nothing crashed). The RAM's
// bytes are s's. PT_LOADs without a physical address point at no data:
// nothing may read them.
func WriteKcore(path string, s Spec, o KcoreOptions) error {
	segs, err := KcoreLayout(s, o)
	if err != nil {
		return err
	}
	g, err := GeometryOf(s)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(kcoreData + g.Size); err != nil {
		return err
	}
	if err := write(offsetWriter{f, kcoreData}, s, true); err != nil {
		return err
	}
	hdr, err := kcoreHeaders(s, segs, o)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return err
	}
	return f.Close()
}

type offsetWriter struct {
	w   io.WriterAt
	off int64
}

func (o offsetWriter) WriteAt(b []byte, off int64) (int, error) { return o.w.WriteAt(b, off+o.off) }

// kcoreHeaders builds the ELF header, the program headers and the notes.
func kcoreHeaders(s Spec, segs []KcoreSegment, o KcoreOptions) ([]byte, error) {
	e := newELFEncoder(s.Arch)
	ord := s.Arch.byteOrder()
	var notes []byte
	notes = appendNote(notes, ord, "CORE", NtPrstatus, make([]byte, s.Arch.info().prstatus))
	notes = appendNote(notes, ord, "CORE", 3, make([]byte, 136)) // NT_PRPSINFO
	notes = appendNote(notes, ord, "CORE", 4, make([]byte, 512)) // NT_TASKSTRUCT (its size is the kernel's)
	if !o.NoVMCOREINFO {
		var vi strings.Builder
		for _, l := range strings.Split(vmcoreinfoOf(&s), "\n") {
			if l != "" && !strings.HasPrefix(l, "CRASHTIME=") {
				vi.WriteString(l + "\n")
			}
		}
		notes = appendNote(notes, ord, "VMCOREINFO", 0, []byte(vi.String()))
	}
	phnum := 1 + len(segs)
	noteOff := ehdrSize + int64(phnum)*e.phsz
	if noteOff+int64(len(notes)) > kcoreData {
		return nil, fmt.Errorf("synth: kcore headers of %d segments do not fit in %d bytes", len(segs), kcoreData)
	}
	b := make([]byte, noteOff+int64(len(notes)))
	copy(b, "\x7fELF")
	b[4], b[5], b[6] = 2, 1, 1
	ord.PutUint16(b[16:], etCore)
	ord.PutUint16(b[18:], s.Arch.info().machine)
	ord.PutUint32(b[20:], 1)
	ord.PutUint64(b[32:], ehdrSize)
	ord.PutUint16(b[52:], ehdrSize)
	ord.PutUint16(b[54:], uint16(e.phsz))
	ord.PutUint16(b[56:], uint16(phnum))
	ph := b[ehdrSize:]
	e.phdr(ph, ptNote, 0, uint64(noteOff), 0, 0, uint64(len(notes)), uint64(len(notes)))
	for _, sg := range segs {
		ph = ph[e.phsz:]
		e.phdr(ph, ptLoad, 7, sg.Offset, sg.Vaddr, sg.Paddr, sg.Size, sg.Size)
	}
	copy(b[noteOff:], notes)
	return b, nil
}
