package structpage

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// ppc is a ppc64le kernel's address translation, read from VMCOREINFO and
// the kernel's own records, sharing nothing with pagepipe's kernel
// package: the linear map below NUMBER(VMALLOC_START) is PAGE_OFFSET +
// physical; above it the radix MMU's tables map everything (the vmemmap
// included: 6.6+ leaves vmemmap_list empty), while under hash the vmemmap
// is vmemmap_list's and only vmalloc is in the tables.
type ppc struct {
	radix        bool
	vmallocStart uint64
	// vmemmap is vmemmap_list (hash), sorted by virtual address.
	vmemmap []backing
}

type backing struct{ virt, phys, size uint64 }

// ppc64le with 4 KiB pages (arch/powerpc/include/asm/book3s/64): the linear
// map's base, the tables' index bits from the PGD down (radix-4k.h: a
// 13-bit PGD of 64 KiB; hash-4k.h), an entry's bits (present, leaf), the
// next table's address in an entry, a leaf's address bits (53, less the
// page offset).
const (
	ppcPageOffset = 0xc000000000000000
	ppcValid      = 1 << 63
	ppcLeaf       = 1 << 62
	ppcNextMask   = 0x0fffffffffffff00
	ppcRPNMask    = 1<<53 - 1
)

var ppcBits = map[bool][4]uint{true: {13, 9, 9, 9}, false: {9, 9, 7, 9}}

func (v *Vmcore) setupPPC() error {
	radix, err := v.Number("NUMBER(RADIX_MMU)")
	if err != nil {
		return err
	}
	start, ok := v.Info["NUMBER(VMALLOC_START)"]
	var vs uint64
	if _, err := fmt.Sscanf(start, "0x%x", &vs); !ok || err != nil || vs <= ppcPageOffset {
		return fmt.Errorf("NUMBER(VMALLOC_START)=%q", start)
	}
	top, err := v.Symbol("swapper_pg_dir")
	if err != nil {
		return err
	}
	if top < ppcPageOffset || top >= vs {
		return fmt.Errorf("SYMBOL(swapper_pg_dir)=%#x is not in the linear map", top)
	}
	v.top, v.levels = top-ppcPageOffset, 4
	v.ppc = &ppc{radix: radix == 1, vmallocStart: vs}
	if !v.ppc.radix {
		return v.readVmemmapList()
	}
	return nil
}

// readVmemmapList reads vmemmap_list: struct vmemmap_backing {list, phys,
// virt_addr} at the VMCOREINFO offsets, each backing a block of
// 1 << mmu_psize_defs[mmu_vmemmap_psize].shift bytes.
func (v *Vmcore) readVmemmapList() error {
	var err error
	num := func(key string) uint64 {
		if err != nil {
			return 0
		}
		var n int64
		n, err = v.Number(key)
		return uint64(n)
	}
	sym := func(name string) uint64 {
		if err != nil {
			return 0
		}
		var a uint64
		a, err = v.Symbol(name)
		return a
	}
	head, psizeAt, defs := sym("vmemmap_list"), sym("mmu_vmemmap_psize"), sym("mmu_psize_defs")
	defSize, shiftOff := num("SIZE(mmu_psize_def)"), num("OFFSET(mmu_psize_def.shift)")
	listOff, physOff, virtOff := num("OFFSET(vmemmap_backing.list)"), num("OFFSET(vmemmap_backing.phys)"), num("OFFSET(vmemmap_backing.virt_addr)")
	if err != nil {
		return err
	}
	u64 := func(va uint64, n int) (uint64, error) {
		b, err := v.ReadVirt(va, uint64(n))
		if err != nil {
			return 0, err
		}
		var x [8]byte
		copy(x[:], b)
		return binary.LittleEndian.Uint64(x[:]), nil
	}
	psize, err := u64(psizeAt, 4)
	if err != nil {
		return err
	}
	shift, err := u64(defs+psize*defSize+shiftOff, 4)
	if err != nil {
		return err
	}
	if shift < 12 || shift > 34 {
		return fmt.Errorf("vmemmap page shift %d", shift)
	}
	next, err := u64(head, 8)
	for n := 0; err == nil && next != 0; n++ {
		if n > 1<<22 {
			return fmt.Errorf("vmemmap_list does not end")
		}
		var b backing
		b.size = 1 << shift
		if b.phys, err = u64(next+physOff, 8); err != nil {
			break
		}
		if b.virt, err = u64(next+virtOff, 8); err != nil {
			break
		}
		v.ppc.vmemmap = append(v.ppc.vmemmap, b)
		next, err = u64(next+listOff, 8)
	}
	if err != nil {
		return fmt.Errorf("vmemmap_list: %w", err)
	}
	sort.Slice(v.ppc.vmemmap, func(i, j int) bool { return v.ppc.vmemmap[i].virt < v.ppc.vmemmap[j].virt })
	return nil
}

// virtPPC translates a ppc64le kernel address: the linear map by
// subtraction, the hash vmemmap by vmemmap_list, the rest by walking the
// tables from swapper_pg_dir (big-endian entries; a leaf at any level).
func (v *Vmcore) virtPPC(vaddr uint64) (uint64, error) {
	p := v.ppc
	switch {
	case vaddr >= ppcPageOffset && vaddr < p.vmallocStart:
		return vaddr - ppcPageOffset, nil
	case vaddr < ppcPageOffset:
		return 0, fmt.Errorf("%#x is not a kernel address", vaddr)
	case !p.radix:
		i := sort.Search(len(p.vmemmap), func(i int) bool { return p.vmemmap[i].virt+p.vmemmap[i].size > vaddr })
		if i < len(p.vmemmap) && p.vmemmap[i].virt <= vaddr {
			return p.vmemmap[i].phys + vaddr - p.vmemmap[i].virt, nil
		}
		if len(p.vmemmap) > 0 && vaddr >= p.vmemmap[0].virt {
			return 0, fmt.Errorf("%#x: %w", vaddr, errUnmapped)
		}
	}
	bits := ppcBits[p.radix]
	table, shift := v.top, uint(12+bits[1]+bits[2]+bits[3])
	for level := 0; level < 4; level++ {
		b, ok := v.Phys(table+(vaddr>>shift&(1<<bits[level]-1))*8, 8)
		if !ok {
			return 0, fmt.Errorf("walk %#x, level %d: table at %#x is not in the vmcore", vaddr, level, table)
		}
		e := binary.BigEndian.Uint64(b)
		if e&ppcValid == 0 {
			return 0, fmt.Errorf("%#x: %w", vaddr, errUnmapped)
		}
		if e&ppcLeaf != 0 {
			mask := uint64(1)<<shift - 1
			return e&ppcRPNMask&^mask | vaddr&mask, nil
		}
		if level == 3 {
			return 0, fmt.Errorf("walk %#x: a last-level entry %#x without _PAGE_PTE", vaddr, e)
		}
		table = e & ppcNextMask
		shift -= bits[level+1]
	}
	panic("unreachable")
}
