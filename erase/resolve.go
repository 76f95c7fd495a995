package erase

import (
	"errors"
	"fmt"

	"pagepipe/debuginfo"
)

// Memory is the crashed kernel's memory as a config's resolution reads it:
// its values (pointers, sizes, strings) by virtual address, and where a
// virtual address lies physically.
type Memory interface {
	ReadVirt(vaddr uint64, p []byte) error
	VtoP(vaddr uint64) (uint64, error)
}

// Section is what a config section's commands are resolved against: the
// types and symbols of vmlinux or of one module.
type Section struct {
	Types   debuginfo.Types
	Symbols debuginfo.Symbols
}

// Sections gives each section of a config its types and symbols.
type Sections interface {
	// Section returns the section of module ("vmlinux" or a module's
	// name); ErrNotLoaded when the module is not loaded in the dump (its
	// commands are then passed over, as makedumpfile passes them over).
	Section(module string) (*Section, error)
}

// ErrNotLoaded: a config section names a module the crashed kernel had
// not loaded.
var ErrNotLoaded = errors.New("module not loaded")

// ResolveError is a config command that cannot be resolved: the line and
// why (a symbol, member or structure the types do not have, a loop over
// something that is not a list).
type ResolveError struct {
	Line int
	Err  error
}

func (e *ResolveError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *ResolveError) Unwrap() error { return e.Err }

// maxStrlen is how much of a char * string is erased at most (makedumpfile's
// BUFSIZE).
const maxStrlen = 1024

// maxIterations bounds a loop over a list or array read from the dump (a
// corrupt list need not end).
const maxIterations = 1 << 20

// Resolve turns a config into the ranges to erase, reading the crashed
// kernel's memory as makedumpfile's erase_info.c reads it: each command's
// symbol and members are followed through pointers to the data, loops walk
// their arrays and lists, and every range found is kept once per start
// address (the longer one). A command whose symbol, member or structure is
// not there is an error (makedumpfile reports it and erases less); a NULL
// pointer on the way, an empty string or list, is not: there is nothing to
// erase. warn gets one line for each thing makedumpfile warns about.
func Resolve(cfg *Config, secs Sections, mem Memory, warn func(string)) (*Filter, error) {
	if warn == nil {
		warn = func(string) {}
	}
	f := &Filter{}
	cache := map[string]*Section{}
	for _, cmd := range cfg.Commands {
		sec, ok := cache[cmd.Module]
		if !ok {
			var err error
			sec, err = secs.Section(cmd.Module)
			switch {
			case errors.Is(err, ErrNotLoaded):
				sec = nil
			case err != nil:
				return nil, &ResolveError{cmd.Line, fmt.Errorf("[%s]: %w", cmd.Module, err)}
			}
			cache[cmd.Module] = sec
		}
		if sec == nil {
			continue
		}
		r := &resolver{sec: sec, mem: mem, filter: f, warn: warn, ptrSize: uint64(sec.Types.PointerSize())}
		var err error
		if cmd.Loop != nil {
			err = r.loop(cmd.Loop)
		} else {
			err = r.erase(newCommand(cmd.Erase, nil))
		}
		if err != nil {
			return nil, err
		}
	}
	return f, nil
}

// entry flags (makedumpfile's config_entry flags).
const (
	filterEntry uint16 = 1 << iota
	sizeEntry
	iterationEntry
	listEntry
	symbolEntry
	varEntry
	traversalEntry
	resolved uint16 = 0x8000
)

// listHead marks a list_head in an entry's type flags (TYPE_LIST_HEAD).
const listHead debuginfo.Flags = 0x10

// entry is one component of a config expression, with what its
// resolution found (makedumpfile's config_entry).
type entry struct {
	name     string
	typeName string // "" is makedumpfile's NULL: not (yet) known
	flag     uint16
	nullify  bool
	symAddr  uint64
	vaddr    uint64
	cmpAddr  uint64
	offset   uint64
	typeFlag debuginfo.Flags
	arrayLen int64
	index    int64
	size     int64
	line     int
	referTo  *entry
	next     *entry
	// The erase command's record in ERASEINFO (0: none yet).
	eraseIdx int
	expr     string
}

// newEntries builds the chain of entries of an expression's components.
func newEntries(path []string, flag uint16, line int) *entry {
	var head, prev *entry
	for i, c := range path {
		e := &entry{name: c, flag: flag, line: line}
		if i == 0 {
			e.flag |= symbolEntry
		}
		if prev == nil {
			head = e
		} else {
			prev.next = e
		}
		prev = e
	}
	return head
}

// command is one erase command as resolution holds it: the filter
// expression and the size expression (nil: from the type; a resolved
// number: size given in bytes).
type command struct {
	filter, size *entry
}

// newCommand builds an erase command's entries; inside a loop, iter is the
// iteration variable its expression (and a size expression naming it)
// refers to.
func newCommand(e *Erase, iter *entry) *command {
	c := &command{filter: newEntries(e.Path(), filterEntry, e.Line)}
	c.filter.expr = e.Expr
	c.filter.nullify = e.Nullify
	if iter != nil {
		c.filter.flag = c.filter.flag&^symbolEntry | varEntry
		c.filter.referTo = iter
	}
	if s := e.Size; s != nil {
		if s.Expr == "" {
			c.size = &entry{flag: sizeEntry | symbolEntry | resolved, size: s.Bytes, line: s.Line}
		} else {
			c.size = newEntries(s.Path(), sizeEntry, s.Line)
			if iter != nil && c.size.name == iter.name {
				c.size.flag = c.size.flag&^symbolEntry | varEntry
				c.size.referTo = iter
			}
		}
	}
	return c
}

type resolver struct {
	sec     *Section
	mem     Memory
	filter  *Filter
	warn    func(string)
	ptrSize uint64
}

func (r *resolver) errorf(line int, format string, a ...any) error {
	return &ResolveError{line, fmt.Errorf(format, a...)}
}

// readPointer reads a pointer; one that cannot be read is NULL, as
// makedumpfile takes it.
func (r *resolver) readPointer(vaddr uint64) uint64 {
	var b [8]byte
	p := b[:r.ptrSize]
	if err := r.mem.ReadVirt(vaddr, p); err != nil {
		r.warn(fmt.Sprintf("cannot read a pointer at %#x: %v", vaddr, err))
		return 0
	}
	return leUint(p)
}

func leUint(p []byte) uint64 {
	var v uint64
	for i := len(p) - 1; i >= 0; i-- {
		v = v<<8 | uint64(p[i])
	}
	return v
}

// strlen is the length of the string at vaddr, up to maxStrlen; 0 when it
// cannot be read whole.
func (r *resolver) strlen(vaddr uint64) int64 {
	var b [maxStrlen]byte
	if err := r.mem.ReadVirt(vaddr, b[:]); err != nil {
		return 0
	}
	for i, c := range b {
		if c == 0 {
			return int64(i)
		}
	}
	return maxStrlen
}

// resolve finds what the entry ce stands for, relative to the structure
// named baseStruct at baseVaddr for a member (makedumpfile's
// resolve_config_entry). done false: the expression resolves to nothing,
// without an error (makedumpfile's FALSE with no message).
func (r *resolver) resolve(ce *entry, baseVaddr uint64, baseStruct string) (done bool, err error) {
	switch {
	case ce.flag&symbolEntry != 0:
		addr, err := r.sec.Symbols.Symbol(ce.name)
		if err != nil {
			return false, r.errorf(ce.line, "symbol %q: %w", ce.name, err)
		}
		ce.symAddr = addr
		t, err := r.sec.Types.Var(ce.name)
		if err != nil {
			return false, r.errorf(ce.line, "the type of %q: %w", ce.name, err)
		}
		ce.typeName, ce.size, ce.typeFlag = t.Name, t.Size, t.Flags
		if t.Flags&debuginfo.Array != 0 {
			ce.arrayLen = max(t.ArrayLen, 0)
		}
	case ce.flag&varEntry != 0:
		ref := ce.referTo
		ce.vaddr, ce.symAddr, ce.size, ce.typeFlag = ref.vaddr, ref.symAddr, ref.size, ref.typeFlag
		if ce.typeName == "" {
			ce.typeName = ref.typeName
		}
		if ce.next != nil {
			ce.next.flag &^= resolved
		}
		return true, nil
	default:
		if baseStruct == "" {
			return false, r.errorf(ce.line, "%q: the expression before it is not a structure", ce.name)
		}
		m, err := r.sec.Types.Member(baseStruct, ce.name)
		if err != nil {
			return false, r.errorf(ce.line, "%w", err)
		}
		ce.offset = uint64(m.Offset)
		ce.symAddr = baseVaddr + ce.offset
		ce.typeName, ce.size, ce.typeFlag = m.Type.Name, m.Type.Size, m.Type.Flags
		if m.Type.Flags&debuginfo.Array != 0 {
			ce.arrayLen = max(m.Type.ArrayLen, 0)
		}
	}
	if ce.typeName == "" {
		return false, r.errorf(ce.line, "%q has an anonymous type", ce.name)
	}
	if ce.typeName == "list_head" {
		ce.typeFlag |= listHead
		if ce.flag&listEntry != 0 && ce.next != nil {
			if ce.next.next != nil {
				return false, r.errorf(ce.line, "only one member may follow the list_head %q of a loop", ce.name)
			}
			ce.next.flag |= traversalEntry
		}
	}
	ce.vaddr = ce.symAddr
	if ce.size < 0 {
		ce.size = 0
	}
	if ce.flag&listEntry != 0 && ce.next == nil {
		// The end of a loop's LIST: an array, a structure (reached through
		// a pointer or not) linked by a member, or a list_head.
		if ce.typeFlag&(debuginfo.Base|debuginfo.Array) == debuginfo.Base && ce.typeName != "void" {
			return false, r.errorf(ce.line, "%q is neither an array, a structure nor a list_head", ce.name)
		}
		if ce.typeFlag&listHead != 0 || ce.typeFlag&(debuginfo.Struct|debuginfo.Array) == debuginfo.Struct {
			if ce.flag&traversalEntry == 0 {
				ce.next = &entry{name: "next", flag: listEntry | traversalEntry, line: ce.line}
			}
		}
		if ce.flag&traversalEntry != 0 && baseStruct != ce.typeName {
			return false, r.errorf(ce.line, "member %q of %q does not point to a %s", ce.name, baseStruct, baseStruct)
		}
	}
	if ce.typeFlag&(debuginfo.Array|debuginfo.Ptr) == debuginfo.Ptr {
		ce.vaddr = r.readPointer(ce.symAddr)
		if ce.typeName == "void" {
			ce.size = 0
		}
	}
	if ce.typeFlag&debuginfo.Base != 0 && ce.typeFlag&debuginfo.Ptr != 0 && ce.typeFlag&debuginfo.Array == 0 && ce.typeName == "char" {
		ce.size = r.strlen(ce.vaddr)
	}
	if ce.next == nil && ce.flag&sizeEntry != 0 {
		if ce.typeFlag&(debuginfo.Array|debuginfo.Base) != debuginfo.Base || ce.size > 8 {
			return false, r.errorf(ce.line, "size %q is not an integer", ce.name)
		}
		b := make([]byte, ce.size)
		if err := r.mem.ReadVirt(ce.vaddr, b); err != nil {
			return false, r.errorf(ce.line, "size %q: %w", ce.name, err)
		}
		switch ce.size {
		case 1, 2, 4, 8:
			ce.size = int64(leUint(b))
		}
	}
	ce.flag |= resolved
	if ce.next != nil {
		ce.next.flag &^= resolved
	}
	return true, nil
}

// addr is where the expression ce points: the data to erase, or with
// nullify the pointer itself; 0 when it leads nowhere (a NULL pointer on
// the way).
func (r *resolver) addr(ce *entry, baseVaddr uint64, baseStruct string) (uint64, error) {
	if ce.flag&resolved == 0 {
		if ok, err := r.resolve(ce, baseVaddr, baseStruct); !ok {
			return 0, err
		}
	}
	switch {
	case ce.next != nil && ce.vaddr != 0:
		ce.next.nullify = ce.nullify
		return r.addr(ce.next, ce.vaddr, ce.typeName)
	case ce.next == nil && ce.nullify:
		if ce.typeFlag&debuginfo.Ptr != 0 {
			return ce.symAddr, nil
		}
		return 0, nil
	}
	return ce.vaddr, nil
}

// size is the size of what the expression ce stands for: its type's (an
// array's elements together, a string's length), or its value for a size
// expression.
func (r *resolver) size(ce *entry, baseVaddr uint64, baseStruct string) (int64, error) {
	if ce.flag&resolved == 0 {
		if ok, err := r.resolve(ce, baseVaddr, baseStruct); !ok {
			return 0, err
		}
	}
	if ce.next != nil && ce.vaddr != 0 {
		return r.size(ce.next, ce.vaddr, ce.typeName)
	}
	if ce.typeFlag&debuginfo.Array != 0 {
		if ce.typeFlag&debuginfo.Ptr != 0 {
			return ce.arrayLen * int64(r.ptrSize), nil
		}
		return ce.arrayLen * ce.size, nil
	}
	return ce.size, nil
}

// erase resolves one erase command (for the current element of a loop)
// into a range of the filter (makedumpfile's update_filter_info).
func (r *resolver) erase(c *command) error {
	at, err := r.addr(c.filter, 0, "")
	if err != nil || at == 0 {
		return err
	}
	var size int64
	switch {
	case c.filter.nullify:
		size = int64(r.ptrSize)
	case c.size != nil:
		size, err = r.size(c.size, 0, "")
	default:
		size, err = r.size(c.filter, 0, "")
	}
	if err != nil || size <= 0 {
		return err
	}
	paddr, err := r.mem.VtoP(at)
	if err != nil {
		r.warn(fmt.Sprintf("line %d: %s at %#x is not mapped: %v", c.filter.line, c.filter.expr, at, err))
		paddr = notMapped
	}
	r.filter.add(rangeNode{vaddr: at, paddr: paddr, size: size, nullify: c.filter.nullify}, c.filter)
	return nil
}

// loop resolves a loop: its LIST, its iteration variable, then its erase
// commands for every element (makedumpfile's process_config).
func (r *resolver) loop(l *Loop) error {
	list := newEntries(l.ListPath(), listEntry, l.Line)
	iter := &entry{name: l.Var, flag: iterationEntry | symbolEntry, line: l.Line}
	if l.Via != "" {
		last := list
		for last.next != nil {
			last = last.next
		}
		last.next = newEntries(splitPath(l.Via), listEntry, l.Line)
		last.next.flag = last.next.flag&^symbolEntry | traversalEntry
	}
	if l.WithinStruct != "" {
		iter.typeName = l.WithinStruct
		if l.WithinMember != "" {
			iter.next = &entry{name: l.WithinMember, flag: iterationEntry, line: l.Line}
		}
	}
	body := make([]*command, len(l.Body))
	for i := range l.Body {
		body[i] = newCommand(&l.Body[i], iter)
	}
	typeName, typeFlag, err := r.resolveList(list, 0, "")
	if err != nil {
		return err
	}
	if err := r.initIteration(iter, typeName, typeFlag); err != nil {
		return err
	}
	for n := 0; ; n++ {
		if n == maxIterations {
			return r.errorf(l.Line, "the list of 'for %s' has more than %d elements", l.Var, maxIterations)
		}
		more, err := r.nextElement(list, iter)
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
		for _, c := range body {
			if err := r.erase(c); err != nil {
				return err
			}
		}
	}
}

// resolveList resolves a loop's LIST down to its last component and
// returns that component's type (makedumpfile's resolve_list_entry).
func (r *resolver) resolveList(ce *entry, baseVaddr uint64, baseStruct string) (string, debuginfo.Flags, error) {
	if ce.flag&resolved == 0 {
		ok, err := r.resolve(ce, baseVaddr, baseStruct)
		if err != nil {
			return "", 0, err
		}
		if !ok {
			return "", 0, r.errorf(ce.line, "%q cannot be walked", ce.name)
		}
	}
	if ce.next != nil && ce.next.flag&traversalEntry != 0 && ce.typeFlag&debuginfo.Array != 0 {
		r.warn(fmt.Sprintf("line %d: 'via' is not needed for the array %q", ce.next.line, ce.name))
		ce.next = nil
	}
	if ce.typeFlag&listHead != 0 && ce.next != nil && ce.next.flag&traversalEntry != 0 {
		ce.next.cmpAddr = ce.symAddr
	}
	if ce.next != nil && ce.vaddr != 0 {
		return r.resolveList(ce.next, ce.vaddr, ce.typeName)
	}
	ce.index = 0
	return ce.typeName, ce.typeFlag, nil
}

// initIteration gives the iteration variable the type of the LIST's
// elements (makedumpfile's initialize_iteration_entry).
func (r *resolver) initIteration(ie *entry, typeName string, typeFlag debuginfo.Flags) error {
	if typeFlag&listHead == 0 {
		if ie.typeName != "" {
			r.warn(fmt.Sprintf("line %d: 'within' is not needed for an array or a structure", ie.line))
			ie.next = nil
		}
		ie.typeName = typeName
		ie.typeFlag = typeFlag &^ debuginfo.Array
		return nil
	}
	if ie.typeName == "" {
		return r.errorf(ie.line, "a loop over a list_head needs 'within STRUCT:MEMBER'")
	}
	if ie.next == nil {
		ie.next = &entry{name: "list", flag: iterationEntry, line: ie.line}
	}
	size, err := r.sec.Types.StructSize(ie.typeName)
	if err != nil {
		return r.errorf(ie.line, "%w", err)
	}
	ie.size = size
	if _, err := r.resolve(ie.next, 0, ie.typeName); err != nil {
		return err
	}
	if ie.next.typeName != "list_head" {
		return r.errorf(ie.line, "member %q of %s is not a list_head", ie.next.name, ie.typeName)
	}
	ie.typeFlag = debuginfo.Struct
	return nil
}

// element is the next element a LIST yields.
type element struct {
	symAddr, vaddr uint64
	size           int64
}

// nextElement moves the iteration variable to the LIST's next element;
// false at the end (makedumpfile's list_entry_empty).
func (r *resolver) nextElement(list, ie *entry) (bool, error) {
	var el element
	more, err := r.nextListEntry(list, 0, "", &el)
	if err != nil || !more {
		return false, err
	}
	if ie.next != nil {
		ie.next.vaddr = el.vaddr
		ie.vaddr = el.vaddr - ie.next.offset
	} else {
		ie.vaddr, ie.symAddr, ie.size = el.vaddr, el.symAddr, el.size
	}
	return true, nil
}

// nextListEntry yields the LIST's next element (makedumpfile's
// get_next_list_entry): an array's next element (its next non-NULL one
// for an array of pointers), a via list's next structure until NULL or
// back at the first, a list_head's next entry until back at the head.
func (r *resolver) nextListEntry(ce *entry, baseVaddr uint64, baseStruct string, out *element) (bool, error) {
	if ce.flag&listEntry == 0 {
		return false, nil
	}
	if ce.flag&resolved == 0 {
		if ok, err := r.resolve(ce, baseVaddr, baseStruct); !ok {
			return false, err
		}
	}
	if ce.next == nil {
		if ce.typeFlag&debuginfo.Array != 0 {
			if ce.index >= ce.arrayLen {
				return false, nil
			}
			if ce.typeFlag&debuginfo.Ptr != 0 {
				var v uint64
				for ; ce.index < ce.arrayLen; ce.index++ {
					if v = r.readPointer(ce.vaddr + uint64(ce.index)*r.ptrSize); v != 0 {
						break
					}
				}
				if ce.index == ce.arrayLen {
					return false, nil
				}
				out.symAddr = ce.vaddr + uint64(ce.index)*r.ptrSize
				out.vaddr = v
				if ce.typeName == "char" {
					out.size = r.strlen(v)
				} else {
					out.size = ce.size
				}
			} else {
				out.symAddr = ce.vaddr + uint64(ce.index*ce.size)
				out.vaddr = out.symAddr
				out.size = ce.size
			}
			ce.index++
			return true, nil
		}
		if ce.vaddr == ce.cmpAddr {
			return false, nil
		}
		out.vaddr = ce.vaddr
		ce.flag &^= resolved // resolved again for the next element
		return true, nil
	}
	if ce.next.next == nil && ce.next.typeFlag&debuginfo.Array == 0 {
		if ce.typeFlag&listHead == 0 {
			if ce.vaddr == 0 || ce.vaddr == ce.next.cmpAddr {
				return false, nil
			}
			if ce.next.cmpAddr == 0 {
				ce.next.cmpAddr = ce.vaddr // a circular list ends back here
			}
			out.vaddr, out.symAddr, out.size = ce.vaddr, ce.symAddr, ce.size
			ce.symAddr, ce.vaddr = ce.next.symAddr, ce.next.vaddr
			if ce.vaddr != 0 {
				if ok, err := r.resolve(ce.next, ce.vaddr, ce.typeName); !ok {
					return false, err
				}
			}
			return true, nil
		}
		ce.symAddr, ce.vaddr = ce.next.symAddr, ce.next.vaddr
	}
	if ce.next != nil && ce.vaddr != 0 {
		return r.nextListEntry(ce.next, ce.vaddr, ce.typeName, out)
	}
	return false, nil
}
