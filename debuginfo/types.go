// Package debuginfo answers the questions a filter config asks about the
// crashed kernel's types and symbols — the type of a global variable, a
// structure's size, a member's offset and type — from either of two
// sources: the DWARF of a debug vmlinux and of module debuginfo files (-x,
// as makedumpfile reads them), or the kernel's own BTF and symbol tables
// inside the vmcore (kallsyms in VMCOREINFO, each module's symtab), which
// need no debuginfo at all.
//
// Both sources answer through Types, and answer as makedumpfile's DWARF
// search does, so that a config resolves to the same bytes either way:
// lookups are by name, a structure's member is searched depth first through
// its embedded structures and unions, and a type is described by the end of
// its chain of pointers, arrays, typedefs and qualifiers (Type).
package debuginfo

import (
	"errors"
	"fmt"
)

// Flags are what a type's chain passes through on its way to its end
// (makedumpfile's TYPE_BASE, TYPE_ARRAY, TYPE_PTR and TYPE_STRUCT).
type Flags uint8

const (
	Base   Flags = 1 << iota // a base type (int, char, …) is on the chain
	Array                    // an array is on the chain
	Ptr                      // a pointer is on the chain
	Struct                   // a structure is on the chain
)

func (f Flags) String() string {
	s := ""
	for i, n := range []string{"base", "array", "ptr", "struct"} {
		if f&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += n
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

// Type is a variable's or a member's type as makedumpfile's erase sees it:
// its chain of type references (pointers, arrays, typedefs, qualifiers, a
// function pointer's return type) followed to the end.
type Type struct {
	// Name is the end type's name ("" for an anonymous one); a chain of
	// pointers only, ending at nothing, is "void".
	Name string
	// Flags are the kinds met on the way (Ptr for a pointer to anything).
	Flags Flags
	// Size is the end type's size in bytes (a pointer's target, an
	// array's element); -1 when it has none (void, a declaration).
	Size int64
	// ArrayLen is the first dimension of the variable or member itself
	// when it is an array (directly or through one const); -1 when it is
	// not, or its length is not known.
	ArrayLen int64
}

// Member is what Types.Member finds: the member's offset in its structure
// (its embedded containers' offsets added) and its type.
type Member struct {
	Offset int64
	Type   Type
}

// Types answers a filter config's questions about one module's types:
// vmlinux's, or a kernel module's.
type Types interface {
	// Var is the type of the global variable name.
	Var(name string) (Type, error)
	// Member finds member in the structure named structName, searching
	// the structure's members in order and, before taking a member of
	// another name, the structures and unions it embeds (so an embedded
	// list_head's next is found before a later member named next, as
	// makedumpfile finds it).
	Member(structName, member string) (Member, error)
	// StructSize is the size of the structure named name.
	StructSize(name string) (int64, error)
	// PointerSize is the size of a pointer (8 on 64-bit kernels).
	PointerSize() int
}

// Symbols gives the addresses of the crashed kernel's symbols, where they
// are in its memory (relocated by KASLR).
type Symbols interface {
	Symbol(name string) (uint64, error)
}

// ErrNotFound is wrapped by the lookups when a name is not there.
var ErrNotFound = errors.New("not found")

// notFound is a lookup of what is not there.
func notFound(what, name string) error {
	return fmt.Errorf("%s %q: %w", what, name, ErrNotFound)
}
