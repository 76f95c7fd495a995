package debuginfo

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// BTF is a kernel's BPF Type Format type information: vmlinux's (between
// __start_BTF and __stop_BTF in the kernel image) or a module's split BTF
// on top of it. It answers Types' questions as the DWARF does (the same
// type chains, the same depth-first member search), so that a config
// resolves to the same bytes; what BTF does not hold it cannot answer: on
// kernels whose BTF was made without pahole's global_var feature (Debian
// 12's 6.1, Debian 13's 6.12) only the per-cpu variables have their types
// there.
//
// pagepipe reads BTF itself rather than through github.com/cilium/ebpf/btf:
// the lookups need a fraction of that package, which would add 380 KiB to
// the static binary a capture kernel carries.
type BTF struct {
	base  *BTF
	first uint32 // the ID of types[0]: 1, or the base's count + 1
	types []btfType
	// byName is the first ID of each name of a variable, structure or
	// typedef (what is looked up by name), sameName (by index in types)
	// the next ID of the same name (0: none): a map entry a name, not a
	// slice, for the tens of thousands of names of a kernel's BTF.
	byName   map[string]uint32
	sameName []uint32
	// strs is the string section, as one string that the names are
	// slices of; a split BTF's offsets start past its base's baseStrs
	// bytes.
	strs     string
	baseStrs uint32
	// members are the members of this BTF's structures and unions, each
	// one's vlen from its firstMember.
	members []btfMember
}

// btfType is one BTF type. It holds no pointer (names are string offsets,
// members an index), so that the garbage collector never scans the
// 100 000 of a kernel's BTF.
type btfType struct {
	nameOff uint32
	kind    uint8
	kflag   bool
	vlen    uint16
	// sizeType is the size (INT, STRUCT, UNION, ENUM, FLOAT, DATASEC) or
	// the referenced type (PTR, TYPEDEF, qualifiers, FUNC, FUNC_PROTO,
	// VAR).
	sizeType uint32
	// ARRAY: the element type and the count.
	elem, nelems uint32
	// STRUCT and UNION: the index of the first member in the owning
	// BTF's members.
	firstMember uint32
}

type btfMember struct {
	nameOff uint32
	typ     uint32
	offset  uint32 // bits; with kflag, a bitfield's size in the top byte
}

// BTF kinds.
const (
	btfInt = iota + 1
	btfPtr
	btfArray
	btfStruct
	btfUnion
	btfEnum
	btfFwd
	btfTypedef
	btfVolatile
	btfConst
	btfRestrict
	btfFunc
	btfFuncProto
	btfVar
	btfDatasec
	btfFloat
	btfDeclTag
	btfTypeTag
	btfEnum64
)

const (
	btfMagic     = 0xeb9f
	btfHeaderLen = 24
	// maxBTFTypes bounds the types read (a 6.12 vmlinux has 130 000).
	maxBTFTypes = 1 << 21
)

// ParseBTF reads raw BTF, a vmlinux's (base nil) or a module's split BTF
// on top of base. Either byte order is read.
func ParseBTF(data []byte, base *BTF) (*BTF, error) {
	if len(data) < btfHeaderLen {
		return nil, fmt.Errorf("btf: %d bytes, no header", len(data))
	}
	var bo binary.ByteOrder = binary.LittleEndian
	switch {
	case binary.LittleEndian.Uint16(data) == btfMagic:
	case binary.BigEndian.Uint16(data) == btfMagic:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("btf: magic %#x", binary.LittleEndian.Uint16(data))
	}
	hdrLen := uint64(bo.Uint32(data[4:]))
	typeOff, typeLen := uint64(bo.Uint32(data[8:])), uint64(bo.Uint32(data[12:]))
	strOff, strLen := uint64(bo.Uint32(data[16:])), uint64(bo.Uint32(data[20:]))
	if hdrLen < btfHeaderLen || hdrLen+typeOff+typeLen > uint64(len(data)) || hdrLen+strOff+strLen > uint64(len(data)) {
		return nil, errors.New("btf: sections past the end of the data")
	}
	types := data[hdrLen+typeOff:][:typeLen]
	b := &BTF{base: base, first: 1, strs: string(data[hdrLen+strOff:][:strLen])}
	if base != nil {
		b.first = base.first + uint32(len(base.types))
		b.baseStrs = base.strLen()
	}
	// A first pass counts the types and the members, so that each is one
	// allocation.
	count, members := 0, 0
	for at := 0; at < len(types); count++ {
		if count == maxBTFTypes {
			return nil, fmt.Errorf("btf: more than %d types", maxBTFTypes)
		}
		if at+12 > len(types) {
			return nil, errors.New("btf: a type cut short")
		}
		info := bo.Uint32(types[at+4:])
		kind, vlen := uint8(info>>24&0x1f), int(uint16(info))
		extra, err := btfExtra(kind, vlen)
		if err != nil {
			return nil, fmt.Errorf("btf: type %d: %w", b.first+uint32(count), err)
		}
		if kind == btfStruct || kind == btfUnion {
			members += vlen
		}
		at += 12 + extra
		if at > len(types) {
			return nil, errors.New("btf: a type cut short")
		}
	}
	b.types = make([]btfType, 0, count)
	b.sameName = make([]uint32, count)
	b.byName = make(map[string]uint32, count/4)
	b.members = make([]btfMember, 0, members)
	last := map[string]uint32{} // the last ID of each name seen twice
	for at := 0; at < len(types); {
		info := bo.Uint32(types[at+4:])
		t := btfType{nameOff: bo.Uint32(types[at:]), kind: uint8(info >> 24 & 0x1f), kflag: info>>31 != 0, vlen: uint16(info), sizeType: bo.Uint32(types[at+8:])}
		if t.nameOff >= b.strLen() {
			return nil, fmt.Errorf("btf: string offset %d", t.nameOff)
		}
		at += 12
		extra, _ := btfExtra(t.kind, int(t.vlen))
		rest := types[at : at+extra]
		switch t.kind {
		case btfArray:
			t.elem, t.nelems = bo.Uint32(rest), bo.Uint32(rest[8:])
		case btfStruct, btfUnion:
			t.firstMember = uint32(len(b.members))
			for i := range int(t.vlen) {
				m := rest[12*i:]
				mn := bo.Uint32(m)
				if mn >= b.strLen() {
					return nil, fmt.Errorf("btf: string offset %d", mn)
				}
				b.members = append(b.members, btfMember{nameOff: mn, typ: bo.Uint32(m[4:]), offset: bo.Uint32(m[8:])})
			}
		}
		at += extra
		id := b.first + uint32(len(b.types))
		b.types = append(b.types, t)
		if t.kind != btfVar && t.kind != btfStruct && t.kind != btfTypedef {
			continue // only variables and structures are looked up by name
		}
		name := b.name(t.nameOff)
		if name == "" {
			continue
		}
		prev, seen := b.byName[name]
		switch {
		case !seen:
			b.byName[name] = id
		default:
			if l, ok := last[name]; ok {
				prev = l
			}
			b.sameName[prev-b.first] = id
			last[name] = id
		}
	}
	return b, nil
}

// btfExtra is the size of the data that follows a type's common part.
func btfExtra(kind uint8, vlen int) (int, error) {
	switch kind {
	case btfInt, btfVar, btfDeclTag:
		return 4, nil
	case btfArray:
		return 12, nil
	case btfStruct, btfUnion, btfDatasec, btfEnum64:
		return 12 * vlen, nil
	case btfEnum, btfFuncProto:
		return 8 * vlen, nil
	case btfPtr, btfFwd, btfTypedef, btfVolatile, btfConst, btfRestrict, btfFunc, btfFloat, btfTypeTag:
		return 0, nil
	}
	return 0, fmt.Errorf("kind %d", kind)
}

// str and strLen serve a split BTF's string lookups into its base.
func (b *BTF) str(off uint32) (string, error) {
	if b.base != nil && off < b.baseStrs {
		return b.base.str(off)
	}
	o := uint64(off - b.baseStrs)
	if o >= uint64(len(b.strs)) {
		return "", fmt.Errorf("btf: string offset %d", off)
	}
	end := o
	for end < uint64(len(b.strs)) && b.strs[end] != 0 {
		end++
	}
	return b.strs[o:end], nil
}

func (b *BTF) strLen() uint32 { return b.baseStrs + uint32(len(b.strs)) }

// name is the string at an offset ParseBTF checked.
func (b *BTF) name(off uint32) string {
	s, _ := b.str(off)
	return s
}

// typOwner is typ and the BTF whose table holds the type (its base's
// for a base type): its members are that BTF's.
func (b *BTF) typOwner(id uint32) (*btfType, *BTF) {
	if id != 0 && id < b.first && b.base != nil {
		return b.base.typOwner(id)
	}
	return b.typ(id), b
}

// membersOf are the members of t, a structure or union of this BTF's.
func (b *BTF) membersOf(t *btfType) []btfMember {
	if t.kind != btfStruct && t.kind != btfUnion {
		return nil
	}
	return b.members[t.firstMember : t.firstMember+uint32(t.vlen)]
}

// typ is the type of an ID; nil for void (0) and unknown IDs.
func (b *BTF) typ(id uint32) *btfType {
	if id == 0 {
		return nil
	}
	if id < b.first {
		if b.base == nil {
			return nil
		}
		return b.base.typ(id)
	}
	if i := id - b.first; i < uint32(len(b.types)) {
		return &b.types[i]
	}
	return nil
}

// named lists the IDs of the types of a name: this BTF's first, then its
// base's.
func (b *BTF) named(name string) []uint32 {
	var ids []uint32
	for id := b.byName[name]; id != 0; id = b.sameName[id-b.first] {
		ids = append(ids, id)
	}
	if b.base != nil {
		ids = append(ids, b.base.named(name)...)
	}
	return ids
}

// PointerSize is 8: BTF is made for 64-bit kernels here.
func (b *BTF) PointerSize() int { return 8 }

// next is the type a type refers to on its chain, and whether it has one
// (makedumpfile's DW_AT_type): an array's element, a function's return.
func (t *btfType) next() (uint32, bool) {
	switch t.kind {
	case btfPtr, btfTypedef, btfVolatile, btfConst, btfRestrict, btfTypeTag, btfFuncProto, btfVar, btfFunc:
		return t.sizeType, true
	case btfArray:
		return t.elem, true
	}
	return 0, false
}

// size is a type's byte size as DWARF's DW_AT_byte_size would say: -1 for
// the kinds that have none.
func (b *BTF) size(t *btfType) int64 {
	switch t.kind {
	case btfInt, btfStruct, btfUnion, btfEnum, btfEnum64, btfFloat:
		return int64(t.sizeType)
	case btfPtr:
		return int64(b.PointerSize())
	}
	return -1
}

// chain follows id's type chain to its end, as makedumpfile follows
// DW_AT_type (see Type). An enumeration ends as DWARF's does, at its
// underlying integer type.
func (b *BTF) chain(id uint32) (Type, error) {
	t := Type{ArrayLen: -1}
	cur := b.typ(id)
	if cur == nil {
		return Type{}, fmt.Errorf("btf: type %d is not there", id)
	}
	var end *btfType
	for range maxChain {
		nid, ok := cur.next()
		if !ok {
			break
		}
		nxt := b.typ(nid)
		if nxt == nil {
			break // void
		}
		switch nxt.kind {
		case btfArray:
			t.Flags |= Array
		case btfPtr:
			t.Flags |= Ptr
		case btfStruct:
			t.Flags |= Struct
		case btfFwd:
			if !nxt.kflag { // a structure's declaration, not a union's
				t.Flags |= Struct
			}
		case btfInt, btfFloat, btfEnum, btfEnum64:
			t.Flags |= Base
		}
		end = nxt
		cur = nxt
	}
	if end == nil {
		return Type{}, fmt.Errorf("btf: type %d has no type", id)
	}
	t.Name, t.Size = b.name(end.nameOff), b.size(end)
	if end.kind == btfEnum || end.kind == btfEnum64 {
		t.Name = enumBase(end)
	}
	if t.Name == "" && t.Flags == Ptr {
		t.Name = "void"
	}
	return t, nil
}

// enumBase is the name of the integer type DWARF gives an enumeration:
// GCC's underlying type of its size and sign (unsigned char for a packed
// enumeration of one byte).
func enumBase(t *btfType) string {
	signed := t.kflag
	switch {
	case t.sizeType == 1 && signed:
		return "signed char"
	case t.sizeType == 1:
		return "unsigned char"
	case t.sizeType == 2 && signed:
		return "short int"
	case t.sizeType == 2:
		return "short unsigned int"
	case t.sizeType == 8 && signed:
		return "long int"
	case t.sizeType == 8:
		return "long unsigned int"
	case signed:
		return "int"
	}
	return "unsigned int"
}

// arrayLen is the first dimension of the type id refers to, through one
// const, when it is an array; -1 otherwise (and for a flexible array).
func (b *BTF) arrayLen(id uint32) int64 {
	t := b.typ(id)
	if t != nil && t.kind == btfConst {
		t = b.typ(t.sizeType)
	}
	if t == nil || t.kind != btfArray || t.nelems == 0 {
		return -1
	}
	return int64(t.nelems)
}

// Var is the type of the variable name. BTF has the types of the per-cpu
// variables, and of the others only where pahole's global_var was on.
func (b *BTF) Var(name string) (Type, error) {
	for _, id := range b.named(name) {
		if v := b.typ(id); v.kind == btfVar {
			t, err := b.chain(id)
			if err != nil {
				return Type{}, err
			}
			t.ArrayLen = b.arrayLen(v.sizeType)
			return t, nil
		}
	}
	whose, debug := "the kernel's", "-x VMLINUX has them all"
	if b.base != nil {
		whose, debug = "the module's", "-x VMLINUX with the module's debuginfo has them all"
	}
	return Type{}, fmt.Errorf("%s BTF has no type for variable %q (it holds the per-cpu variables only, unless pahole's global_var made it; %s): %w", whose, name, debug, ErrNotFound)
}

// structType finds the structure of a name: the first structure with a
// size, or typedef (of typedefs) of one; owner is the BTF that holds it.
func (b *BTF) structType(name string) (t *btfType, owner *BTF, err error) {
	for _, id := range b.named(name) {
		t, owner := b.typOwner(id)
		for n := 0; t != nil && t.kind == btfTypedef && n < maxChain; n++ {
			t, owner = b.typOwner(t.sizeType)
		}
		if t != nil && t.kind == btfStruct && t.sizeType > 0 {
			return t, owner, nil
		}
	}
	return nil, nil, notFound("structure", name)
}

// StructSize is the size of the structure named name.
func (b *BTF) StructSize(name string) (int64, error) {
	t, _, err := b.structType(name)
	if err != nil {
		return 0, err
	}
	return int64(t.sizeType), nil
}

// Member finds member in the structure named structName, as DWARF's
// Member does: the offset is the first member of the name that has a
// byte offset (a bitfield has none and is passed over, but in a union),
// the type the first member of the name, bitfield or not — two searches,
// as makedumpfile's, that differ where a bitfield of the name comes
// first (6.12's task_struct: dl.dl_server, a bit, before dl_server, a
// pointer).
func (b *BTF) Member(structName, member string) (Member, error) {
	s, owner, err := b.structType(structName)
	if err != nil {
		return Member{}, err
	}
	budget := maxMemberVisits
	off, _, found, err := b.searchMember(s, owner, member, 0, &budget, func(bitfield, union bool) bool { return union || !bitfield })
	if err != nil {
		return Member{}, err
	}
	if !found {
		return Member{}, fmt.Errorf("structure %q has no member %q: %w", structName, member, ErrNotFound)
	}
	budget = maxMemberVisits
	_, typ, _, err := b.searchMember(s, owner, member, 0, &budget, func(bool, bool) bool { return true })
	if err != nil {
		return Member{}, err
	}
	t, err := b.chainFrom(typ)
	if err != nil {
		return Member{}, err
	}
	return Member{Offset: off, Type: t}, nil
}

// searchMember searches s depth first for member, as DWARF's
// searchMember, taking the first of the name that accept takes; it
// returns the member's byte offset (its containers' added) and type.
func (b *BTF) searchMember(s *btfType, owner *BTF, member string, depth int, budget *int, accept func(bitfield, union bool) bool) (int64, uint32, bool, error) {
	if depth > maxDepth {
		return 0, 0, false, nil
	}
	for _, m := range owner.membersOf(s) {
		if *budget--; *budget < 0 {
			return 0, 0, false, errMemberSearch
		}
		bits, bitfield := m.offset, uint32(0)
		if s.kflag {
			bits, bitfield = m.offset&0xffffff, m.offset>>24
		}
		if b.name(m.nameOff) != member {
			t, o := b.typOwner(m.typ)
			if t != nil && (t.kind == btfStruct || t.kind == btfUnion) {
				off, typ, found, err := b.searchMember(t, o, member, depth+1, budget, accept)
				if err != nil || found {
					return off + int64(bits/8), typ, found, err
				}
			}
			continue
		}
		if !accept(bitfield != 0 || bits%8 != 0, s.kind == btfUnion) {
			continue
		}
		return int64(bits / 8), m.typ, true, nil
	}
	return 0, 0, false, nil
}

// chainFrom is the chain of a member of type id: as a DWARF member DIE's,
// it starts at the member's own type.
func (b *BTF) chainFrom(id uint32) (Type, error) {
	holder := btfType{kind: btfVar, sizeType: id}
	t, err := b.chainOf(&holder)
	if err != nil {
		return Type{}, err
	}
	t.ArrayLen = b.arrayLen(id)
	return t, nil
}

// chainOf is chain for a type that is not in the table (a member's holder).
func (b *BTF) chainOf(h *btfType) (Type, error) {
	b2 := &BTF{base: b, first: b.first + uint32(len(b.types)), types: []btfType{*h}, baseStrs: b.strLen()}
	return b2.chain(b2.first)
}
