package dump

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"pagepipe/bitmap"
	"pagepipe/filter"
	"pagepipe/pipeline"
	"pagepipe/source"
)

// A live dump is a dump of the running kernel, read from /proc/kcore (a
// kcore-shaped input: source.Kcore). What differs from a vmcore's:
//
//   - The 2nd bitmap is made once and held whole, never made again per
//     cycle: struct pages change while they are read, and a second scan
//     would decide other pages than the first, whose count fixed the page
//     descriptors' area (the page index). Its count is the one the data
//     follows, whatever changes during the read.
//   - Every page of the kernel image (_text to _end, kcore's text
//     segment) is dumped, whatever its struct page said when read: a
//     free block or compound page read mid-change must not take the
//     image's .data with it.
//   - Only direct-mapped RAM is read (source.TypeKcore), with pread: kcore
//     has no mmap.
//   - The dump says it is live: a "PAGEPIPE" note (liveNoteType) with the
//     time, and the header's timestamp is that time (there was no crash).
//   - It is never written into memory (tmpfs, ramfs): that is memory it
//     reads, and it would read its own output.

// liveNoteName and liveNoteType name the note a live dump carries: its
// desc is "LIVE=<unix seconds>\nSOURCE=<path>\n".
const (
	liveNoteName = "PAGEPIPE"
	liveNoteType = 0x4c495645 // "LIVE"
)

// live is the live input's part of the input.
type live struct {
	kcore *source.Kcore
	// revisit is the pages the page scan left out as free, cache or user
	// memory that are dumped all the same: the copy pass reads each one's
	// struct page again, and stores it as zeros if it still says so, or
	// copies it (it became kernel memory since the scan).
	revisit  *bitmap.Bitmap
	excluded *filter.Excluded
	kern     *filter.Kernel
	level    filter.Level
	taken    time.Time
	// imagePages is how many pages of the kernel image the page scan had
	// left out and the dump holds all the same.
	imagePages uint64
}

// isLive reports whether the input is a kcore, live.
func (in *input) isLive() bool { return in.live != nil }

// checkLiveTarget refuses a live dump into memory: tmpfs or ramfs, whose
// pages are the RAM being read.
func checkLiveTarget(o *Options) error {
	for _, p := range o.Out.Paths {
		var st unix.Statfs_t
		if err := unix.Statfs(filepath.Dir(p), &st); err != nil {
			continue // the create will say
		}
		switch st.Type {
		case unix.TMPFS_MAGIC, unix.RAMFS_MAGIC:
			return source.Unsupported(fmt.Errorf("%s is in memory (tmpfs): a live dump written there would be part of the memory it reads; write it to a disk", p))
		}
	}
	return nil
}

// holdImage sets every present pfn of the kernel image in the plan's 2nd
// bitmap (held whole) and recounts the dumpable pages.
func holdImage(plan *filter.Plan, k *source.Kcore, ps uint64) uint64 {
	lo, hi := k.ImageStart/ps, min((k.ImageEnd+ps-1)/ps, plan.MaxMapnr)
	var added uint64
	for pfn := lo; pfn < hi; pfn++ {
		if plan.Present.Test(pfn) && !plan.Dumpable.Test(pfn) {
			plan.Dumpable.Set(pfn)
			added++
		}
	}
	plan.NumDumpable += added
	return added
}

// liveNote is the note a live dump appends to kcore's notes.
func liveNote(taken time.Time, path string) []byte {
	desc := fmt.Sprintf("LIVE=%d\nSOURCE=%s\n", taken.Unix(), path)
	name := liveNoteName + "\x00"
	var b []byte
	le := binary.LittleEndian
	b = le.AppendUint32(b, uint32(len(name)))
	b = le.AppendUint32(b, uint32(len(desc)))
	b = le.AppendUint32(b, liveNoteType)
	b = append(b, name...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	b = append(b, desc...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// LiveInfo is what a dump's live note says.
type LiveInfo struct {
	Taken  time.Time
	Source string
}

// findLiveNote finds the live note in a dump's notes (nil: none).
func findLiveNote(notes []byte) *LiveInfo {
	le := binary.LittleEndian
	for off := 0; off+12 <= len(notes); {
		namesz, descsz, typ := int(le.Uint32(notes[off:])), int(le.Uint32(notes[off+4:])), le.Uint32(notes[off+8:])
		if namesz == 0 && descsz == 0 && typ == 0 {
			return nil
		}
		nameOff := off + 12
		descOff := nameOff + (namesz+3)&^3
		if namesz < 0 || descsz < 0 || namesz > len(notes) || descsz > len(notes) || descOff+descsz > len(notes) {
			return nil
		}
		name := string(bytes.TrimRight(notes[nameOff:nameOff+namesz], "\x00"))
		if name == liveNoteName && typ == liveNoteType {
			li := &LiveInfo{}
			for _, l := range strings.Split(string(notes[descOff:descOff+descsz]), "\n") {
				k, v, _ := strings.Cut(l, "=")
				switch k {
				case "LIVE":
					if t, err := strconv.ParseInt(v, 10, 64); err == nil {
						li.Taken = time.Unix(t, 0)
					}
				case "SOURCE":
					li.Source = v
				}
			}
			return li
		}
		off = descOff + (descsz+3)&^3
	}
	return nil
}

// newRevisitor is the copy pass's Revisitor maker for a live dump (nil:
// none, when the page scan left nothing out to revisit).
func (l *live) newRevisitor() func() (pipeline.Revisitor, error) {
	if l == nil || l.revisit == nil {
		return nil
	}
	return func() (pipeline.Revisitor, error) {
		return l.kern.NewRevisitor(l.level, l.excluded, l.revisit)
	}
}
