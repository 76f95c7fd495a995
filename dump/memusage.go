package dump

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"pagepipe/chunk"
	"pagepipe/filter"
	"pagepipe/source"
)

// MemUsageOptions is one --mem-usage run.
type MemUsageOptions struct {
	// Input is /proc/kcore, or a kcore-shaped file.
	Input string
	// Iomem is the kernel's resource map (/proc/iomem) whose "Crash
	// kernel" ranges are left out, as makedumpfile leaves them out (they
	// are not in the capture kernel's /proc/vmcore); "" for none.
	Iomem string
	// Workers read pages for the zero count; 0 is one.
	Workers int
}

// MemUsage is the running kernel's page usage: what makedumpfile's
// --mem-usage prints (print_mem_usage), computed from the live kernel's
// struct pages at dump level 31 (each page in one class, zero pages
// counted among those no other class excludes), over the RAM of kcore
// less any crashkernel reservation.
type MemUsage struct {
	PageSize                                    uint64
	Total                                       uint64 // pages on the system (the RAM less the reservation)
	Zero, Cache, CachePrivate, User, Free, Kern uint64
	// Other is what level 31 also leaves out that the table has no row
	// for (hwpoison, offline pages), as makedumpfile counts them.
	Other uint64
	// Crashkernel is the pages of the reservation left out.
	Crashkernel uint64
}

// ErrNotKcore is --mem-usage given a vmcore or a dump.
var ErrNotKcore = errors.New("--mem-usage reads the running kernel's /proc/kcore (or a kcore-shaped file)")

// ComputeMemUsage reads the input's struct pages and, for the pages that
// level 31 keeps, their contents (the zero count).
func ComputeMemUsage(ctx context.Context, o MemUsageOptions) (*MemUsage, error) {
	v, err := source.Open(o.Input)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	if v.Kcore == nil {
		return nil, fmt.Errorf("%s is not kcore: %w", o.Input, source.Unsupported(ErrNotKcore))
	}
	vi, err := loadVMCOREINFO(v, "")
	if err != nil {
		return nil, err
	}
	if vi, err = withDefaults(vi, v); err != nil {
		return nil, err
	}
	if err := v.Arch().Check(vi); err != nil {
		return nil, source.Unsupported(err)
	}
	kern, err := filter.OpenKernel(vi, v, v.Pfns())
	if err != nil {
		return nil, fmt.Errorf("the running kernel's mem_map: %w", err)
	}
	workers := max(o.Workers, 1)
	// One cycle, from a bitmap file, as makedumpfile's --mem-usage: a
	// PT_LOAD's partial last page is present.
	plan, err := filter.NewPlan(ctx, v, filter.MaxLevel, kern, workers, source.PartialPages{LastPresent: true}, 0)
	if err != nil {
		return nil, err
	}
	ps := v.PageSize()
	u := &MemUsage{PageSize: ps}
	if o.Iomem != "" {
		ranges, err := crashkernelRanges(o.Iomem)
		if err != nil {
			return nil, err
		}
		for _, r := range ranges {
			lo, hi := r[0]/ps, min((r[1]+ps-1)/ps, plan.MaxMapnr)
			if lo >= hi {
				continue
			}
			u.Crashkernel += plan.Present.Count(lo, hi)
			plan.Present.ClearRange(lo, hi)
			plan.Dumpable.ClearRange(lo, hi)
		}
	}
	u.Total = plan.Present.Count(0, plan.MaxMapnr)
	ex := plan.Excluded
	u.Cache, u.CachePrivate, u.User, u.Free, u.Other = ex.Cache, ex.CachePrivate, ex.User, ex.Free, ex.Hwpoison+ex.Offline
	if u.Zero, err = countZero(ctx, v, plan, workers); err != nil {
		return nil, err
	}
	excluded := u.Zero + u.Cache + u.CachePrivate + u.User + u.Free + u.Other
	if excluded > u.Total {
		return nil, fmt.Errorf("%d pages excluded of %d: the counts do not add up", excluded, u.Total)
	}
	u.Kern = u.Total - excluded
	return u, nil
}

// countZero counts the zero pages among those the plan keeps, on workers
// goroutines, each over its own run of pfns with its own reader.
func countZero(ctx context.Context, v *source.Vmcore, plan *filter.Plan, workers int) (uint64, error) {
	const span = 1 << 16
	var next atomic.Uint64
	var zero atomic.Uint64
	g, ctx := errgroup.WithContext(ctx)
	var mu sync.Mutex
	for range workers {
		g.Go(func() error {
			mu.Lock()
			r := v.NewReader(0, false)
			mu.Unlock()
			defer r.Close()
			for {
				lo := next.Add(span) - span
				if lo >= plan.MaxMapnr {
					return nil
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				hi := min(lo+span, plan.MaxMapnr)
				var n uint64
				for pfn := plan.Dumpable.NextSet(lo); pfn < hi; pfn = plan.Dumpable.NextSet(pfn + 1) {
					p, err := r.Page(pfn)
					if err != nil {
						return fmt.Errorf("read pfn %#x: %w", pfn, err)
					}
					if chunk.IsZero(p) {
						n++
					}
				}
				zero.Add(n)
			}
		})
	}
	err := g.Wait()
	return zero.Load(), err
}

// crashkernelRanges are the "Crash kernel" ranges of a /proc/iomem
// ([start, end) in bytes).
func crashkernelRanges(path string) ([][2]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][2]uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rng, name, ok := strings.Cut(sc.Text(), " : ")
		if !ok || strings.TrimSpace(name) != "Crash kernel" {
			continue
		}
		a, b, ok := strings.Cut(strings.TrimSpace(rng), "-")
		lo, err1 := strconv.ParseUint(a, 16, 64)
		hi, err2 := strconv.ParseUint(b, 16, 64)
		if !ok || err1 != nil || err2 != nil || hi < lo {
			return nil, fmt.Errorf("%s: bad line %q", path, sc.Text())
		}
		if lo == 0 && hi == 0 {
			// Without root the kernel shows every address as 0.
			return nil, fmt.Errorf("%s shows no addresses (not root)", path)
		}
		out = append(out, [2]uint64{lo, hi + 1})
	}
	return out, sc.Err()
}

// Print writes makedumpfile 1.7.2's table (print_mem_usage), byte for
// byte, then pagepipe's: the pages and bytes each dump level keeps.
func (u *MemUsage) Print(w io.Writer) {
	fmt.Fprintf(w, "\n")
	fmt.Fprintf(w, "TYPE\t\tPAGES\t\t\tEXCLUDABLE\tDESCRIPTION\n")
	fmt.Fprintf(w, "----------------------------------------------------------------------\n")
	fmt.Fprintf(w, "ZERO\t\t%-16d\tyes\t\tPages filled with zero\n", u.Zero)
	fmt.Fprintf(w, "NON_PRI_CACHE\t%-16d\tyes\t\tCache pages without private flag\n", u.Cache)
	fmt.Fprintf(w, "PRI_CACHE\t%-16d\tyes\t\tCache pages with private flag\n", u.CachePrivate)
	fmt.Fprintf(w, "USER\t\t%-16d\tyes\t\tUser process pages\n", u.User)
	fmt.Fprintf(w, "FREE\t\t%-16d\tyes\t\tFree pages\n", u.Free)
	fmt.Fprintf(w, "KERN_DATA\t%-16d\tno\t\tDumpable kernel data \n", u.Kern)
	fmt.Fprintf(w, "\n")
	fmt.Fprintf(w, "page size:\t\t%-16d\n", u.PageSize)
	fmt.Fprintf(w, "Total pages on system:\t%-16d\n", u.Total)
	fmt.Fprintf(w, "Total size on system:\t%-16d Byte\n", u.Total*u.PageSize)
	fmt.Fprintf(w, "\n")
	fmt.Fprintf(w, "DUMP LEVEL\tPAGES (at most)\t\tSIZE (at most)\n")
	fmt.Fprintf(w, "----------------------------------------------------------------------\n")
	for l := filter.Level(0); l <= filter.MaxLevel; l++ {
		n := u.Keeps(l)
		fmt.Fprintf(w, "%-2d\t\t%-16d\t%d Byte\n", l, n, n*u.PageSize)
	}
}

// Keeps is how many pages a dump at level l holds at most: the pages of
// the classes it keeps. Level 31 counts a zero page only where no other
// class took it, so a level that keeps a class and leaves out zero pages
// may hold fewer (that class's zero pages); every other level holds
// exactly this, as the struct pages were when read.
func (u *MemUsage) Keeps(l filter.Level) uint64 {
	n := u.Total - u.Other
	if l&(filter.ExcludeCache|filter.ExcludeCachePri) != 0 {
		n -= u.Cache
	}
	if l.Has(filter.ExcludeCachePri) {
		n -= u.CachePrivate
	}
	if l.Has(filter.ExcludeUser) {
		n -= u.User
	}
	if l.Has(filter.ExcludeFree) {
		n -= u.Free
	}
	if l.Has(filter.ExcludeZero) {
		n -= u.Zero
	}
	return n
}

// IomemOf is the resource map whose crashkernel reservation --mem-usage
// leaves out of input: the running system's, when input is its
// /proc/kcore; none for a file.
func IomemOf(input string) string {
	if source.LiveKcore(input) {
		return "/proc/iomem"
	}
	return ""
}
