package structpage

import (
	"fmt"
	"strconv"
)

// riscv64: the kernel image sits at NUMBER(KERNEL_LINK_ADDR) and up, at
// va - NUMBER(va_kernel_pa_offset) in physical memory (which is how
// swapper_pg_dir is found); every other address is walked from
// swapper_pg_dir by the privileged spec's Sv39, Sv48 or Sv57 (VA_BITS):
// 512 eight-byte entries a level, bit 0 valid, any of bits 1-3 (R, W, X)
// a leaf at whatever level it sits, the PPN in bits 10-53.

// unsignedHex reads a NUMBER(...) riscv64 prints as "0x%lx".
func (v *Vmcore) unsignedHex(key string) (uint64, error) {
	s, ok := v.Info[key]
	if !ok {
		return 0, fmt.Errorf("VMCOREINFO has no %s", key)
	}
	n, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("VMCOREINFO %s=%q: %w", key, s, err)
	}
	return n, nil
}

func (v *Vmcore) setupRISCV() error {
	var err error
	if v.imageOff, err = v.unsignedHex("NUMBER(va_kernel_pa_offset)"); err != nil {
		return err
	}
	if v.linkAddr, err = v.unsignedHex("NUMBER(KERNEL_LINK_ADDR)"); err != nil {
		return err
	}
	if v.pageOffset, err = v.unsignedHex("NUMBER(PAGE_OFFSET)"); err != nil {
		return err
	}
	for i, k := range []string{"NUMBER(MODULES_VADDR)", "NUMBER(MODULES_END)"} {
		if v.modules[i], err = v.unsignedHex(k); err != nil {
			return err
		}
	}
	base, err := v.Number("NUMBER(phys_ram_base)")
	if err != nil {
		return err
	}
	v.ramBase = uint64(base)
	bits, err := v.Number("NUMBER(VA_BITS)")
	if err != nil {
		return err
	}
	switch bits {
	case 39, 48, 57:
		v.levels = int(bits-12) / 9
	default:
		return fmt.Errorf("NUMBER(VA_BITS)=%d: not Sv39, Sv48 or Sv57", bits)
	}
	pgd, err := v.Symbol("swapper_pg_dir")
	if err != nil {
		return err
	}
	if pgd < v.linkAddr {
		return fmt.Errorf("SYMBOL(swapper_pg_dir)=%#x is not in the kernel image", pgd)
	}
	v.top = pgd - v.imageOff
	return nil
}

func (v *Vmcore) virtRISCV(vaddr uint64) (uint64, error) {
	if vaddr >= v.linkAddr {
		return vaddr - v.imageOff, nil
	}
	if v.Released178 && vaddr >= v.pageOffset && !(vaddr >= v.modules[0] && vaddr <= v.modules[1]) {
		// 1.7.8 maps everything from PAGE_OFFSET up but the modules
		// linearly (right for the linear map, which is all there is
		// above PAGE_OFFSET but the image and the modules).
		return vaddr - v.pageOffset + v.ramBase, nil
	}
	table := v.top
	for level := v.levels; level >= 1; level-- {
		shift := 12 + 9*uint(level-1)
		e, err := v.u64(table + (vaddr>>shift)&511*8)
		if err != nil {
			return 0, fmt.Errorf("walk %#x, level %d: %w", vaddr, level, err)
		}
		if e&1 == 0 {
			return 0, fmt.Errorf("%#x: %w", vaddr, errUnmapped)
		}
		pa := e & (1<<54 - 1) >> 10 << 12
		if e&0xe != 0 {
			mask := uint64(1)<<shift - 1
			if v.Released178 {
				// 1.7.8's vtop_riscv64: the leaf's address plus the
				// offset in a 4 KiB page, whatever the leaf's size.
				return pa + vaddr&0xfff, nil
			}
			if pa&mask != 0 {
				return 0, fmt.Errorf("%#x: level %d leaf %#x is a misaligned superpage", vaddr, level, e)
			}
			return pa | vaddr&mask, nil
		}
		if level == 1 {
			return 0, fmt.Errorf("%#x: last-level entry %#x is no leaf", vaddr, e)
		}
		table = pa
	}
	panic("unreachable")
}
