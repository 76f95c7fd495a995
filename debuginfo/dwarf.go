package debuginfo

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// DWARF is the debuginfo of a vmlinux or of a kernel module: its DWARF
// types and variables and its ELF symbol table.
//
// Lookups find what makedumpfile's dwarf_info.c finds, in the order it
// searches: compilation units in file order, and in each unit the DIEs of
// its chain of first children (deepest level first) before its top-level
// DIEs; the first variable, structure (or typedef of one) or enumerator of
// a name wins, declarations included. A vmlinux's sections are mapped, not
// read: its DWARF is hundreds of megabytes.
type DWARF struct {
	name    string
	data    *dwarf.Data
	elf     *elf.File
	mapped  []byte // the file
	unmap   bool   // mapped is a mapping, to unmap on Close
	ptrSize int

	vars      map[string]dwarf.Offset
	structs   map[string][]candidate // until the first sized structure
	closed    map[string]bool        // a sized structure of the name is recorded
	typedefs  map[string][]dwarf.Offset
	enumTypes []dwarf.Offset // every enumeration type, in search order
	units     []dwarf.Offset // every unit's DIE, in order

	enumOnce    sync.Once
	enumerators map[string]int64

	symbols  map[string]uint64 // the first symbol of each name
	symValue []uint64          // every symbol's value, for NextSymbol

	// members remembers Member's answers: a loop asks the same ones for
	// every element, and each is a depth-first search through DIEs.
	membersMu sync.Mutex
	members   map[[2]string]memberAnswer
}

type memberAnswer struct {
	m   Member
	err error
}

// candidate is a DIE that may be the structure of a name: a structure or
// a typedef of one.
type candidate struct {
	off     dwarf.Offset
	typedef bool
}

// maxCandidates bounds what is kept per name before the structure of the
// name is met (typedefs of the name that may lead to it).
const maxCandidates = 16

// OpenDWARF opens a vmlinux or module debuginfo file and indexes its
// DWARF. A relocatable file (a module's .ko) has its relocations applied;
// an executable's debug sections are mapped from the file.
func OpenDWARF(path string) (*DWARF, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > 0 && st.Mode().IsRegular() {
		if m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED); err == nil {
			d, err := newDWARF(path, m)
			if err != nil {
				unix.Munmap(m)
				return nil, err
			}
			d.unmap = true
			return d, nil
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return newDWARF(path, b)
}

// newDWARF reads the debuginfo file held in b.
func newDWARF(name string, b []byte) (*DWARF, error) {
	d := &DWARF{name: name, mapped: b}
	var err error
	if d.elf, err = elf.NewFile(bytesReaderAt(b)); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch d.elf.Class {
	case elf.ELFCLASS64:
		d.ptrSize = 8
	case elf.ELFCLASS32:
		d.ptrSize = 4
	}
	if d.elf.Type == elf.ET_REL {
		d.data, err = d.elf.DWARF()
	} else {
		d.data, err = d.mappedDWARF()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := d.index(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := d.readSymbols(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

// Close releases the file's mapping.
func (d *DWARF) Close() error {
	if d.unmap {
		d.unmap = false
		return unix.Munmap(d.mapped)
	}
	return nil
}

type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// mappedDWARF builds the DWARF from the debug sections as they lie in the
// mapping (a compressed section is decompressed).
func (d *DWARF) mappedDWARF() (*dwarf.Data, error) {
	sec := func(name string) ([]byte, error) {
		s := d.elf.Section(name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			return nil, nil
		}
		if s.Flags&elf.SHF_COMPRESSED == 0 {
			end := s.Offset + s.FileSize
			if end < s.Offset || end > uint64(len(d.mapped)) {
				return nil, fmt.Errorf("section %s lies past the end of the file", name)
			}
			return d.mapped[s.Offset:end:end], nil
		}
		return s.Data()
	}
	var b [8][]byte
	for i, n := range []string{"abbrev", "aranges", "frame", "info", "line", "pubnames", "ranges", "str"} {
		var err error
		if b[i], err = sec(".debug_" + n); err != nil {
			return nil, err
		}
	}
	if b[3] == nil {
		return nil, errors.New("no .debug_info section: not a debug vmlinux")
	}
	data, err := dwarf.New(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7])
	if err != nil {
		return nil, err
	}
	for _, n := range []string{"addr", "line_str", "str_offsets", "rnglists", "loclists"} {
		s, err := sec(".debug_" + n)
		if err != nil {
			return nil, err
		}
		if s != nil {
			if err := data.AddSection(".debug_"+n, s); err != nil {
				return nil, err
			}
		}
	}
	return data, nil
}

// index reads every unit's searched DIEs once (see DWARF).
func (d *DWARF) index() error {
	d.vars = map[string]dwarf.Offset{}
	d.structs = map[string][]candidate{}
	d.closed = map[string]bool{}
	d.typedefs = map[string][]dwarf.Offset{}
	r := d.data.Reader()
	for {
		cu, err := r.Next()
		if err != nil {
			return err
		}
		if cu == nil {
			return nil
		}
		d.units = append(d.units, cu.Offset)
		if !cu.Children {
			continue
		}
		// The chain of first children, top level first.
		var chain []dwarf.Offset
		for {
			e, err := r.Next()
			if err != nil {
				return err
			}
			if e == nil || e.Tag == 0 {
				break
			}
			chain = append(chain, e.Offset)
			if !e.Children {
				break
			}
		}
		// Each level's DIEs, deepest first; the top level last leaves
		// the reader at the next unit.
		for i := len(chain) - 1; i >= 0; i-- {
			r.Seek(chain[i])
			for {
				e, err := r.Next()
				if err != nil {
					return err
				}
				if e == nil || e.Tag == 0 {
					break
				}
				d.record(e)
				if e.Children {
					r.SkipChildren()
				}
			}
		}
	}
}

// record notes a searched DIE in the indexes.
func (d *DWARF) record(e *dwarf.Entry) {
	name, _ := e.Val(dwarf.AttrName).(string)
	if name == "" {
		return
	}
	switch e.Tag {
	case dwarf.TagVariable:
		if _, ok := d.vars[name]; !ok {
			d.vars[name] = e.Offset
		}
	case dwarf.TagStructType:
		if d.closed[name] {
			return
		}
		if size, ok := e.Val(dwarf.AttrByteSize).(int64); ok && size > 0 {
			d.closed[name] = true
			d.structs[name] = append(d.structs[name], candidate{off: e.Offset})
		}
	case dwarf.TagTypedef:
		if !d.closed[name] && len(d.structs[name]) < maxCandidates {
			d.structs[name] = append(d.structs[name], candidate{off: e.Offset, typedef: true})
		}
		if len(d.typedefs[name]) < maxCandidates {
			d.typedefs[name] = append(d.typedefs[name], e.Offset)
		}
	case dwarf.TagEnumerationType:
		d.enumTypes = append(d.enumTypes, e.Offset)
	}
}

// entry reads the DIE at off.
func (d *DWARF) entry(off dwarf.Offset) (*dwarf.Entry, error) {
	r := d.data.Reader()
	r.Seek(off)
	e, err := r.Next()
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, fmt.Errorf("no DIE at %#x", off)
	}
	return e, nil
}

// children reads the DIEs directly below the one at off.
func (d *DWARF) children(off dwarf.Offset) ([]*dwarf.Entry, error) {
	r := d.data.Reader()
	r.Seek(off)
	e, err := r.Next()
	if err != nil || e == nil || !e.Children {
		return nil, err
	}
	var out []*dwarf.Entry
	for {
		c, err := r.Next()
		if err != nil {
			return nil, err
		}
		if c == nil || c.Tag == 0 {
			return out, nil
		}
		out = append(out, c)
		if c.Children {
			r.SkipChildren()
		}
	}
}

// typeOf is the DIE e's DW_AT_type refers to; nil when it has none.
func (d *DWARF) typeOf(e *dwarf.Entry) (*dwarf.Entry, error) {
	off, ok := e.Val(dwarf.AttrType).(dwarf.Offset)
	if !ok {
		return nil, nil
	}
	return d.entry(off)
}

// byteSize is a DIE's DW_AT_byte_size (or DW_AT_bit_size in bytes); -1
// when it has neither, as libdw's dwarf_bytesize.
func byteSize(e *dwarf.Entry) int64 {
	if v, ok := e.Val(dwarf.AttrByteSize).(int64); ok {
		return v
	}
	if v, ok := e.Val(dwarf.AttrBitSize).(int64); ok {
		return (v + 7) / 8
	}
	return -1
}

// maxChain bounds a chain of type references (a loop in corrupt DWARF).
const maxChain = 64

// typeOfDIE follows e's type chain to its end (makedumpfile's
// get_dwarf_base_type) and reads e's own array length.
func (d *DWARF) typeOfDIE(e *dwarf.Entry) (Type, error) {
	t := Type{ArrayLen: -1}
	end := e
	for range maxChain {
		next, err := d.typeOf(end)
		if err != nil {
			return Type{}, err
		}
		if next == nil {
			break
		}
		switch next.Tag {
		case dwarf.TagArrayType:
			t.Flags |= Array
		case dwarf.TagPointerType:
			t.Flags |= Ptr
		case dwarf.TagStructType:
			t.Flags |= Struct
		case dwarf.TagBaseType:
			t.Flags |= Base
		}
		end = next
	}
	if end == e {
		return Type{}, fmt.Errorf("DIE %#x has no type", e.Offset)
	}
	t.Name, _ = end.Val(dwarf.AttrName).(string)
	if t.Name == "" && t.Flags == Ptr {
		t.Name = "void"
	}
	t.Size = byteSize(end)
	n, _, err := d.arrayLen(e)
	if err != nil {
		return Type{}, err
	}
	t.ArrayLen = n
	return t, nil
}

// arrayLen is the first dimension of the DIE e's type when that is an
// array (through one const), -1 when it is not (makedumpfile's
// get_data_array_length); ok is false where makedumpfile's fails: e has
// no type, or its array no subrange or upper bound.
func (d *DWARF) arrayLen(e *dwarf.Entry) (n int64, ok bool, err error) {
	t, err := d.typeOf(e)
	if err != nil || t == nil {
		return -1, false, err
	}
	if t.Tag == dwarf.TagConstType {
		if t, err = d.typeOf(t); err != nil || t == nil {
			return -1, false, err
		}
	}
	if t.Tag != dwarf.TagArrayType {
		return -1, true, nil
	}
	kids, err := d.children(t.Offset)
	if err != nil {
		return -1, false, err
	}
	for _, k := range kids {
		if k.Tag != dwarf.TagSubrangeType {
			continue
		}
		switch ub := k.Val(dwarf.AttrUpperBound).(type) {
		case int64:
			return int64(uint64(ub) + 1), true, nil
		case uint64:
			return int64(ub + 1), true, nil
		}
		return -1, false, nil
	}
	return -1, false, nil
}

// Var is the type of the first variable named name.
func (d *DWARF) Var(name string) (Type, error) {
	off, ok := d.vars[name]
	if !ok {
		return Type{}, notFound("variable", name)
	}
	e, err := d.entry(off)
	if err != nil {
		return Type{}, err
	}
	return d.typeOfDIE(e)
}

// structDIE finds the structure of a name: the first structure with a
// size, or typedef (of typedefs) of one, in search order.
func (d *DWARF) structDIE(name string) (*dwarf.Entry, error) {
	for _, c := range d.structs[name] {
		e, err := d.entry(c.off)
		if err != nil {
			return nil, err
		}
		if c.typedef {
			for range maxChain {
				if e, err = d.typeOf(e); err != nil {
					return nil, err
				}
				if e == nil || e.Tag != dwarf.TagTypedef {
					break
				}
			}
			if e == nil || e.Tag != dwarf.TagStructType {
				continue
			}
		}
		if byteSize(e) > 0 {
			return e, nil
		}
	}
	return nil, notFound("structure", name)
}

// StructSize is the size of the structure named name.
func (d *DWARF) StructSize(name string) (int64, error) {
	e, err := d.structDIE(name)
	if err != nil {
		return 0, err
	}
	return byteSize(e), nil
}

// PointerSize is the size of a pointer of the file's class.
func (d *DWARF) PointerSize() int { return d.ptrSize }

// Member finds member in the structure named structName (see Types). The
// offset, the type and the array length are each searched as makedumpfile
// searches them, which differ only for members without a byte offset
// (bitfields): the offset search passes over those.
func (d *DWARF) Member(structName, member string) (Member, error) {
	key := [2]string{structName, member}
	d.membersMu.Lock()
	a, ok := d.members[key]
	d.membersMu.Unlock()
	if ok {
		return a.m, a.err
	}
	m, err := d.member(structName, member)
	d.membersMu.Lock()
	if d.members == nil {
		d.members = map[[2]string]memberAnswer{}
	}
	d.members[key] = memberAnswer{m, err}
	d.membersMu.Unlock()
	return m, err
}

func (d *DWARF) member(structName, member string) (Member, error) {
	s, err := d.structDIE(structName)
	if err != nil {
		return Member{}, err
	}
	var m Member
	off, found, err := d.searchMember(s, member, func(e *dwarf.Entry, union bool) (bool, error) {
		_, ok := memberLocation(e)
		return union || ok, nil
	})
	if err != nil {
		return Member{}, err
	}
	if !found {
		return Member{}, fmt.Errorf("structure %q has no member %q: %w", structName, member, ErrNotFound)
	}
	m.Offset = off
	var typ *dwarf.Entry
	if _, _, err := d.searchMember(s, member, func(e *dwarf.Entry, _ bool) (bool, error) {
		typ = e
		return true, nil
	}); err != nil {
		return Member{}, err
	}
	if m.Type, err = d.typeOfDIE(typ); err != nil {
		return Member{}, err
	}
	return m, nil
}

// MemberArrayLength is the first dimension of member when it is an array
// (makedumpfile's MEMBER_ARRAY_LENGTH_INIT): -1 when it is not, or when
// the structure or member is not there.
func (d *DWARF) MemberArrayLength(structName, member string) (int64, error) {
	s, err := d.structDIE(structName)
	if err != nil {
		return -1, nil
	}
	n := int64(-1)
	_, _, err = d.searchMember(s, member, func(e *dwarf.Entry, _ bool) (bool, error) {
		var ok bool
		var err error
		n, ok, err = d.arrayLen(e)
		return ok, err
	})
	return n, err
}

// memberLocation is a member's DW_AT_data_member_location, as a constant
// or a DW_OP_plus_uconst expression.
func memberLocation(e *dwarf.Entry) (int64, bool) {
	switch v := e.Val(dwarf.AttrDataMemberLoc).(type) {
	case int64:
		return v, true
	case []byte:
		if len(v) > 0 && v[0] == 0x23 { // DW_OP_plus_uconst
			var n uint64
			for i, b := range v[1:] {
				n |= uint64(b&0x7f) << (7 * i)
				if b&0x80 == 0 {
					return int64(n), true
				}
				if i == 9 {
					break
				}
			}
		}
	}
	return 0, false
}

// maxDepth bounds the descent through embedded structures.
const maxDepth = 32

// searchMember searches the structure or union s for member, depth first
// as makedumpfile's search_member: a member of another name whose type is
// a structure or union is searched before the next member; a member of the
// name is taken when accept takes it. The offset returned adds the
// containing members' offsets.
func (d *DWARF) searchMember(s *dwarf.Entry, member string, accept func(e *dwarf.Entry, union bool) (bool, error)) (int64, bool, error) {
	budget := maxMemberVisits
	return d.searchMemberDepth(s, member, accept, 0, &budget)
}

// maxMemberVisits bounds the members one search looks at: corrupt type
// information can embed a structure in itself.
const maxMemberVisits = 1 << 16

var errMemberSearch = errors.New("the member search went through more than 65536 members: the type information loops")

func (d *DWARF) searchMemberDepth(s *dwarf.Entry, member string, accept func(*dwarf.Entry, bool) (bool, error), depth int, budget *int) (int64, bool, error) {
	if depth > maxDepth {
		return 0, false, nil
	}
	kids, err := d.children(s.Offset)
	if err != nil {
		return 0, false, err
	}
	union := s.Tag == dwarf.TagUnionType
	for _, k := range kids {
		if *budget--; *budget < 0 {
			return 0, false, errMemberSearch
		}
		if k.Tag != dwarf.TagMember {
			continue
		}
		name, _ := k.Val(dwarf.AttrName).(string)
		if name != member {
			t, err := d.typeOf(k)
			if err != nil {
				return 0, false, err
			}
			if t != nil && (t.Tag == dwarf.TagStructType || t.Tag == dwarf.TagUnionType) {
				off, found, err := d.searchMemberDepth(t, member, accept, depth+1, budget)
				if err != nil {
					return 0, false, err
				}
				if found {
					loc, _ := memberLocation(k)
					return off + loc, true, nil
				}
			}
			continue
		}
		ok, err := accept(k, union)
		if err != nil {
			return 0, false, err
		}
		if !ok {
			continue
		}
		loc := int64(0)
		if !union {
			loc, _ = memberLocation(k)
		}
		return loc, true, nil
	}
	return 0, false, nil
}

// TypedefSize is the size of the type the first typedef of a name with a
// sized type names (makedumpfile's TYPEDEF_SIZE_INIT).
func (d *DWARF) TypedefSize(name string) (int64, error) {
	for _, off := range d.typedefs[name] {
		e, err := d.entry(off)
		if err != nil {
			return 0, err
		}
		for range maxChain {
			if e, err = d.typeOf(e); err != nil {
				return 0, err
			}
			if e == nil || e.Tag != dwarf.TagTypedef {
				break
			}
		}
		if e == nil {
			continue
		}
		if n := byteSize(e); n > 0 {
			return n, nil
		}
	}
	return 0, notFound("typedef", name)
}

// TypedefFile is the source file that declares the first typedef of a
// name with a DW_AT_decl_file (makedumpfile's SRCFILE), as its unit's line
// table names it.
func (d *DWARF) TypedefFile(name string) (string, error) {
	for _, off := range d.typedefs[name] {
		e, err := d.entry(off)
		if err != nil {
			return "", err
		}
		idx, ok := e.Val(dwarf.AttrDeclFile).(int64)
		if !ok {
			continue
		}
		i, _ := slices.BinarySearch(d.units, off+1)
		if i == 0 {
			continue
		}
		cu, err := d.entry(d.units[i-1])
		if err != nil {
			return "", err
		}
		lr, err := d.data.LineReader(cu)
		if err != nil {
			return "", err
		}
		if lr == nil {
			continue
		}
		files := lr.Files()
		if idx < 0 || idx >= int64(len(files)) || files[idx] == nil {
			continue
		}
		return files[idx].Name, nil
	}
	return "", notFound("typedef", name)
}

// Enumerator is the value of the enumerator name in the first unit that
// has it (makedumpfile's get_enum_number).
func (d *DWARF) Enumerator(name string) (int64, error) {
	var err error
	d.enumOnce.Do(func() { err = d.indexEnumerators() })
	if err != nil {
		return 0, err
	}
	v, ok := d.enumerators[name]
	if !ok {
		return 0, notFound("enumerator", name)
	}
	return v, nil
}

func (d *DWARF) indexEnumerators() error {
	d.enumerators = map[string]int64{}
	for _, off := range d.enumTypes {
		kids, err := d.children(off)
		if err != nil {
			return err
		}
		for _, k := range kids {
			name, _ := k.Val(dwarf.AttrName).(string)
			if k.Tag != dwarf.TagEnumerator || name == "" {
				continue
			}
			if _, ok := d.enumerators[name]; ok {
				continue
			}
			switch v := k.Val(dwarf.AttrConstValue).(type) {
			case int64:
				d.enumerators[name] = v
			case uint64:
				d.enumerators[name] = int64(v)
			}
		}
	}
	return nil
}

// SymbolArray tells whether the first variable named name is an array
// (makedumpfile's SYMBOL_ARRAY_TYPE_INIT), and its length: the first
// dimension, -1 when it has none.
func (d *DWARF) SymbolArray(name string) (isArray bool, length int64, err error) {
	off, ok := d.vars[name]
	if !ok {
		return false, -1, notFound("variable", name)
	}
	e, err := d.entry(off)
	if err != nil {
		return false, -1, err
	}
	t, err := d.typeOf(e)
	if err != nil || t == nil {
		return false, -1, err
	}
	n, _, err := d.arrayLen(e)
	return t.Tag == dwarf.TagArrayType, n, err
}

// readSymbols reads the ELF symbol table: the first symbol of each name.
func (d *DWARF) readSymbols() error {
	syms, err := d.elf.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return err
	}
	d.symbols = make(map[string]uint64, len(syms))
	d.symValue = make([]uint64, 0, len(syms))
	for _, s := range syms {
		d.symValue = append(d.symValue, s.Value)
		if s.Name == "" {
			continue
		}
		if _, ok := d.symbols[s.Name]; !ok {
			d.symbols[s.Name] = s.Value
		}
	}
	return nil
}

// SymbolValue is the value of the first symbol named name in the ELF
// symbol table, as linked (no KASLR).
func (d *DWARF) SymbolValue(name string) (uint64, bool) {
	v, ok := d.symbols[name]
	return v, ok
}

// NextSymbolValue is the lowest symbol value above name's (makedumpfile's
// get_next_symbol_addr).
func (d *DWARF) NextSymbolValue(name string) (uint64, bool) {
	v, ok := d.symbols[name]
	if !ok {
		return 0, false
	}
	var next uint64
	found := false
	for _, s := range d.symValue {
		if s > v && (!found || s < next) {
			next, found = s, true
		}
	}
	return next, found
}

// ReadVirt reads the file's bytes at a linked virtual address (from the
// PT_LOAD that holds it), as makedumpfile reads the vmlinux's utsname.
func (d *DWARF) ReadVirt(vaddr uint64, p []byte) error {
	for _, prog := range d.elf.Progs {
		if prog.Type != elf.PT_LOAD || vaddr < prog.Vaddr || vaddr-prog.Vaddr >= prog.Filesz {
			continue
		}
		if vaddr-prog.Vaddr+uint64(len(p)) > prog.Filesz {
			return fmt.Errorf("%s: %d bytes at %#x run past its segment", d.name, len(p), vaddr)
		}
		_, err := prog.ReadAt(p, int64(vaddr-prog.Vaddr))
		return err
	}
	return fmt.Errorf("%s: no segment holds %#x", d.name, vaddr)
}

// String names the file.
func (d *DWARF) String() string { return d.name }
