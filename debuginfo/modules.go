package debuginfo

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// VirtReader reads the crashed kernel's virtual memory.
type VirtReader interface {
	ReadVirt(vaddr uint64, p []byte) error
}

// Module is a module loaded in the crashed kernel, with its symbol table
// as the kernel keeps it (the core symbols: struct module's core_kallsyms,
// which makedumpfile finds as module.symtab).
type Module struct {
	Name string
	Addr uint64 // its struct module

	// The symbol table, read when a symbol is first asked for (a config
	// names a few of the loaded modules).
	mem            VirtReader
	symtab, strtab uint64
	nsyms          uint32
	symbols        map[string]uint64 // nil until read
	symErr         error
}

// Symbol is the address of a symbol of the module: the first of the name
// in its symbol table.
func (m *Module) Symbol(name string) (uint64, error) {
	if m.symbols == nil && m.symErr == nil {
		m.symbols = map[string]uint64{}
		if err := m.readSymbols(m.mem, m.symtab, m.strtab, m.nsyms); err != nil {
			m.symErr = fmt.Errorf("module %s: %w", m.Name, err)
		}
	}
	if m.symErr != nil {
		return 0, m.symErr
	}
	if v, ok := m.symbols[name]; ok && v != 0 {
		return v, nil
	}
	return 0, fmt.Errorf("module %s has no symbol %q: %w", m.Name, name, ErrNotFound)
}

// maxModules and maxModuleSymbols bound what is read from a crashed
// kernel's module list.
const (
	maxModules       = 1 << 14
	maxModuleSymbols = 1 << 20
	moduleNameLen    = 56 // MODULE_NAME_LEN on 64-bit kernels
	maxSymbolName    = 512
)

// Modules reads the crashed kernel's module list (the list_head at
// modulesAddr, the vmlinux's `modules`) with vmlinux's types: each
// module's name and symbol table, as makedumpfile's load_module_symbols
// reads them (the symbols when the module is first asked for one).
func Modules(t Types, mem VirtReader, modulesAddr uint64) ([]*Module, error) {
	off := func(s, m string) (uint64, error) {
		mm, err := t.Member(s, m)
		return uint64(mm.Offset), err
	}
	listOff, err := off("module", "list")
	if err != nil {
		return nil, err
	}
	nameOff, err := off("module", "name")
	if err != nil {
		return nil, err
	}
	symtabOff, err := off("module", "symtab")
	if err != nil {
		return nil, err
	}
	numOff, err := off("module", "num_symtab")
	if err != nil {
		return nil, err
	}
	strtabOff, err := off("module", "strtab")
	if err != nil {
		return nil, err
	}
	ptr := func(at uint64) (uint64, error) {
		var b [8]byte
		if err := mem.ReadVirt(at, b[:]); err != nil {
			return 0, err
		}
		return binary.LittleEndian.Uint64(b[:]), nil
	}
	var mods []*Module
	cur, err := ptr(modulesAddr)
	if err != nil {
		return nil, fmt.Errorf("the module list: %w", err)
	}
	for cur != modulesAddr {
		if len(mods) == maxModules {
			return nil, fmt.Errorf("the module list has more than %d modules", maxModules)
		}
		mod := cur - listOff
		var name [moduleNameLen]byte
		if err := mem.ReadVirt(mod+nameOff, name[:]); err != nil {
			return nil, fmt.Errorf("module at %#x: %w", mod, err)
		}
		m := &Module{Name: cstring(name[:]), Addr: mod, mem: mem}
		symtab, err := ptr(mod + symtabOff)
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Name, err)
		}
		strtab, err := ptr(mod + strtabOff)
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Name, err)
		}
		var nb [4]byte
		if err := mem.ReadVirt(mod+numOff, nb[:]); err != nil {
			return nil, fmt.Errorf("module %s: %w", m.Name, err)
		}
		n := binary.LittleEndian.Uint32(nb[:])
		if n > maxModuleSymbols {
			return nil, fmt.Errorf("module %s: %d symbols", m.Name, n)
		}
		m.symtab, m.strtab, m.nsyms = symtab, strtab, n
		mods = append(mods, m)
		if cur, err = ptr(cur); err != nil {
			return nil, fmt.Errorf("the module list after %s: %w", m.Name, err)
		}
	}
	return mods, nil
}

// readSymbols reads n Elf64_Syms at symtab, their names in strtab; the
// first of each name wins (symbol 0 is the null symbol).
func (m *Module) readSymbols(mem VirtReader, symtab, strtab uint64, n uint32) error {
	if n == 0 {
		return nil
	}
	syms := make([]byte, 24*uint64(n))
	if err := mem.ReadVirt(symtab, syms); err != nil {
		return fmt.Errorf("symtab: %w", err)
	}
	// The names are read at once up to the start of the last one; a name
	// that does not end there is read alone.
	var maxName uint32
	for i := uint32(1); i < n; i++ {
		maxName = max(maxName, binary.LittleEndian.Uint32(syms[24*i:]))
	}
	var tab []byte
	if maxName < maxStrtab {
		tab = make([]byte, maxName+1)
		if err := mem.ReadVirt(strtab, tab); err != nil {
			tab = nil
		}
	}
	name := make([]byte, maxSymbolName)
	for i := uint32(1); i < n; i++ {
		s := syms[24*i:]
		stName := binary.LittleEndian.Uint32(s)
		value := binary.LittleEndian.Uint64(s[8:])
		nm, ok := tabString(tab, stName)
		if !ok {
			var err error
			if nm, err = readCString(mem, strtab+uint64(stName), name); err != nil {
				return fmt.Errorf("strtab: %w", err)
			}
		}
		if _, ok := m.symbols[nm]; !ok && nm != "" {
			m.symbols[nm] = value
		}
	}
	return nil
}

// maxStrtab bounds the string table read at once.
const maxStrtab = 16 << 20

// tabString is the NUL-terminated string at off in tab, if it ends there
// within maxSymbolName bytes.
func tabString(tab []byte, off uint32) (string, bool) {
	if uint64(off) >= uint64(len(tab)) {
		return "", false
	}
	rest := tab[off:]
	end := bytes.IndexByte(rest[:min(len(rest), maxSymbolName)], 0)
	if end < 0 {
		return "", false
	}
	return string(rest[:end]), true
}

// readCString reads a NUL-terminated string at vaddr, up to len(buf) bytes,
// without reading past the page it ends in.
func readCString(mem VirtReader, vaddr uint64, buf []byte) (string, error) {
	for got := 0; got < len(buf); {
		n := min(len(buf)-got, int(4096-(vaddr+uint64(got))%4096))
		if err := mem.ReadVirt(vaddr+uint64(got), buf[got:got+n]); err != nil {
			return "", err
		}
		if i := strings.IndexByte(string(buf[got:got+n]), 0); i >= 0 {
			return string(buf[:got+i]), nil
		}
		got += n
	}
	return string(buf), nil
}

func cstring(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\x00")
	return s
}

// FindModuleDebuginfo finds a module's debuginfo file: NAME.ko or
// NAME.ko.debug (a '-' and a '_' in module names being the same) under
// dir when one is given, else where makedumpfile finds it through
// elfutils: /usr/lib/debug/lib/modules/RELEASE (Debian's and Fedora's
// -dbg/-debuginfo packages), then the module itself under
// /lib/modules/RELEASE when it kept its DWARF.
func FindModuleDebuginfo(name, release, dir string) (string, error) {
	var roots []string
	if dir != "" {
		roots = []string{dir}
	} else {
		roots = []string{filepath.Join("/usr/lib/debug/lib/modules", release), filepath.Join("/lib/modules", release)}
	}
	want := strings.ReplaceAll(name, "-", "_")
	for _, root := range roots {
		var found string
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if p == root {
					return err
				}
				return nil
			}
			if e.IsDir() {
				return nil
			}
			base := e.Name()
			stem, ok := strings.CutSuffix(base, ".ko.debug")
			if !ok {
				stem, ok = strings.CutSuffix(base, ".ko")
			}
			if !ok || strings.ReplaceAll(stem, "-", "_") != want {
				return nil
			}
			if hasDWARF(p) {
				found = p
				return fs.SkipAll
			}
			return nil
		})
		if found != "" {
			return found, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("no debuginfo for module %s under %s: %w", name, strings.Join(roots, " or "), ErrNotFound)
}

// hasDWARF tells whether an ELF file has a .debug_info section.
func hasDWARF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return false
	}
	s := ef.Section(".debug_info")
	return s != nil && s.Size > 0
}

// KernelSymbols is a vmlinux's symbol table as the crashed kernel has
// it: a symbol that Relocates says KASLR moved is Offset (VMCOREINFO's
// KERNELOFFSET) further, as makedumpfile relocates it (get_kaslr_offset).
type KernelSymbols struct {
	DWARF     *DWARF
	Offset    uint64
	Relocates func(addr uint64) bool
}

// Symbol is the address of the first symbol of the name.
func (k KernelSymbols) Symbol(name string) (uint64, error) {
	v, ok := k.DWARF.SymbolValue(name)
	if !ok || v == 0 {
		return 0, notFound("symbol", name)
	}
	if k.Offset != 0 && k.Relocates != nil && k.Relocates(v) {
		v += k.Offset
	}
	return v, nil
}
