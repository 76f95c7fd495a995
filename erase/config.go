package erase

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Config is a parsed filter config (makedumpfile.conf(5), --config): the
// filter commands in file order, each tagged with its section.
type Config struct {
	Commands []Command
}

// Command is one filter command: an erase command, or a loop whose erase
// commands run for every element of an array or list.
type Command struct {
	// Module is the section the command is in: "vmlinux" (also for
	// commands before any section header) or a module's name.
	Module string
	// Line is the line of the command's first token, for messages.
	Line int
	// Erase is the erase command, nil for a loop.
	Erase *Erase
	// Loop is the loop, nil for an erase command.
	Loop *Loop
}

// Erase is one `erase` command.
type Erase struct {
	Line int
	// Expr is the symbol and its members, SYM[.member…] (inside a loop,
	// the iteration variable and its members), as written: ERASEINFO
	// records it verbatim.
	Expr string
	// Size is the size argument, nil when none is given (the size then
	// comes from the type).
	Size *Size
	// Nullify sets the pointer itself to zero instead of erasing what it
	// points at.
	Nullify bool
}

// Path is Expr's components: the symbol (or iteration variable) and its
// members, empty components dropped as makedumpfile drops them.
func (e *Erase) Path() []string { return splitPath(e.Expr) }

// Size is an erase command's `size` argument: a byte count (N, NK or NM),
// or an expression SYM[.member…] (inside a loop also ID[.member…]) whose
// integer value in the dump is the count.
type Size struct {
	Line int
	// Bytes is the count when it is given as a number; Expr is then "".
	Bytes int64
	Expr  string
}

// Path is the size expression's components (empty for a number).
func (s *Size) Path() []string { return splitPath(s.Expr) }

// Loop is a `for ID in LIST … endfor` construct: LIST is an array
// (`for ID in ARRAY`), a structure reached through a pointer or by name and
// linked by one of its members (`for ID in STRUCTVAR via NEXTMEMBER`), or a
// list_head whose entries are embedded in a structure (`for ID in
// LISTHEAD within STRUCT:MEMBER`, MEMBER defaulting to "list").
type Loop struct {
	Line int
	Var  string
	// List is the LIST expression, SYM[.member…].
	List string
	// Via is the NEXTMEMBER of `via` ("" without it; it may be dotted).
	Via string
	// WithinStruct and WithinMember are `within STRUCT:MEMBER`'s parts
	// (WithinStruct "" without `within`; WithinMember "" when no ':member'
	// is given).
	WithinStruct, WithinMember string
	// Body are the erase commands, each starting with Var.
	Body []Erase
}

// ListPath is List's components.
func (l *Loop) ListPath() []string { return splitPath(l.List) }

// Symbols are the symbols the commands of module's section start from
// (their expressions' and size expressions' first components that are no
// loop's variable), each once, in file order: all a resolution asks the
// section's symbol table for.
func (c *Config) Symbols(module string) []string {
	var syms []string
	seen := map[string]bool{}
	add := func(path []string, iter string) {
		if len(path) > 0 && path[0] != iter && !seen[path[0]] {
			seen[path[0]] = true
			syms = append(syms, path[0])
		}
	}
	addErase := func(e *Erase, iter string) {
		add(e.Path(), iter)
		if e.Size != nil {
			add(e.Size.Path(), iter)
		}
	}
	for _, cmd := range c.Commands {
		switch {
		case cmd.Module != module:
		case cmd.Erase != nil:
			addErase(cmd.Erase, "")
		case cmd.Loop != nil:
			add(cmd.Loop.ListPath(), "")
			for i := range cmd.Loop.Body {
				addErase(&cmd.Loop.Body[i], cmd.Loop.Var)
			}
		}
	}
	return syms
}

// SyntaxError is a filter config that cannot be read: the line and what
// is wrong with it.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// maxLineBytes bounds a config line; makedumpfile reads lines of up to
// 1023 bytes with fgets and takes a longer one as several.
const maxLineBytes = 1 << 16

// maxSizeBytes bounds a size given as a number (an erase past a terabyte
// of memory is a mistake, not a config).
const maxSizeBytes = 1 << 40

// keywords cannot stand where a symbol is expected.
var keywords = map[string]bool{"erase": true, "size": true, "nullify": true, "for": true, "in": true, "within": true, "endfor": true}

// Parse reads a filter config. Its grammar is makedumpfile's: '#' starts a
// comment, tokens are separated by blanks and a command may continue on
// the next lines, a line starting with '[' opens a section. Where
// makedumpfile reports a mistake and goes on with what it read so far
// (its dump then erases less than the config asks), Parse refuses the
// whole config with the line at fault.
func Parse(r io.Reader) (*Config, error) {
	toks, err := tokenize(r)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	cfg := &Config{}
	for !p.done() {
		t := p.next()
		var cmd Command
		switch t.text {
		case "erase":
			e, err := p.erase(t, "")
			if err != nil {
				return nil, err
			}
			cmd = Command{Module: t.module, Line: t.line, Erase: e}
		case "for":
			l, err := p.loop(t)
			if err != nil {
				return nil, err
			}
			cmd = Command{Module: t.module, Line: t.line, Loop: l}
		default:
			return nil, &SyntaxError{t.line, fmt.Sprintf("%q: want erase or for", t.text)}
		}
		cfg.Commands = append(cfg.Commands, cmd)
	}
	return cfg, nil
}

// token is one word of the config, with where it stands.
type token struct {
	text   string
	line   int
	module string
	// first: the first token of its section (a command cannot run on
	// across a section header).
	first bool
}

// tokenize splits the config into tokens, with their lines and sections.
func tokenize(r io.Reader) ([]token, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxLineBytes)
	module, first := "vmlinux", true
	var toks []token
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if strings.HasPrefix(line, "[") {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				return nil, &SyntaxError{n, fmt.Sprintf("section %q has no closing ']'", strings.TrimSpace(line))}
			}
			module = strings.TrimSpace(line[1:end])
			if module == "" {
				return nil, &SyntaxError{n, "section [] names no module"}
			}
			if rest := strings.TrimSpace(line[end+1:]); rest != "" {
				return nil, &SyntaxError{n, fmt.Sprintf("%q after the section header", rest)}
			}
			first = true
			continue
		}
		for _, w := range strings.Fields(line) {
			toks = append(toks, token{text: w, line: n, module: module, first: first})
			first = false
		}
	}
	if err := sc.Err(); err != nil {
		if err == bufio.ErrTooLong {
			return nil, fmt.Errorf("a line is longer than %d bytes", maxLineBytes)
		}
		return nil, err
	}
	return toks, nil
}

// parser walks the tokens; a command's tokens never cross into the next
// section.
type parser struct {
	toks []token
	at   int
}

func (p *parser) done() bool { return p.at >= len(p.toks) }

func (p *parser) next() token {
	t := p.toks[p.at]
	p.at++
	return t
}

// peek returns the next token of the same section, if any.
func (p *parser) peek() (token, bool) {
	if p.done() || p.toks[p.at].first {
		return token{}, false
	}
	return p.toks[p.at], true
}

// accept consumes the next token when it is word.
func (p *parser) accept(word string) bool {
	if t, ok := p.peek(); ok && t.text == word {
		p.at++
		return true
	}
	return false
}

// operand takes the next token, which must not be a keyword.
func (p *parser) operand(after token, what string) (token, error) {
	t, ok := p.peek()
	if !ok || keywords[t.text] {
		return token{}, &SyntaxError{after.line, fmt.Sprintf("%s expected after %q", what, after.text)}
	}
	p.at++
	return t, nil
}

// erase reads an erase command after its keyword; inside a loop, iter is
// the iteration variable the expression must start with.
func (p *parser) erase(kw token, iter string) (*Erase, error) {
	t, err := p.operand(kw, "a symbol")
	if err != nil {
		return nil, err
	}
	path := splitPath(t.text)
	if err := checkPath(t, path); err != nil {
		return nil, err
	}
	if iter != "" && path[0] != iter {
		return nil, &SyntaxError{t.line, fmt.Sprintf("%q does not start with the iteration variable %q", t.text, iter)}
	}
	e := &Erase{Line: t.line, Expr: t.text}
	switch {
	case p.accept("nullify"):
		e.Nullify = true
	case p.accept("size"):
		st, err := p.operand(p.toks[p.at-1], "a size")
		if err != nil {
			return nil, err
		}
		if e.Size, err = parseSize(st); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// loop reads a loop after its `for`.
func (p *parser) loop(kw token) (*Loop, error) {
	v, err := p.operand(kw, "an iteration variable")
	if err != nil {
		return nil, err
	}
	if len(splitPath(v.text)) != 1 || strings.Contains(v.text, ".") {
		return nil, &SyntaxError{v.line, fmt.Sprintf("iteration variable %q is not a plain name", v.text)}
	}
	l := &Loop{Line: kw.line, Var: v.text}
	if !p.accept("in") {
		return nil, &SyntaxError{v.line, fmt.Sprintf("'in' expected after 'for %s'", v.text)}
	}
	list, err := p.operand(p.toks[p.at-1], "an array or list")
	if err != nil {
		return nil, err
	}
	if err := checkPath(list, splitPath(list.text)); err != nil {
		return nil, err
	}
	l.List = list.text
	switch {
	case p.accept("via"):
		m, err := p.operand(p.toks[p.at-1], "a member")
		if err != nil {
			return nil, err
		}
		if err := checkPath(m, splitPath(m.text)); err != nil {
			return nil, err
		}
		l.Via = m.text
	case p.accept("within"):
		w, err := p.operand(p.toks[p.at-1], "STRUCT:MEMBER")
		if err != nil {
			return nil, err
		}
		s, m, colon := strings.Cut(w.text, ":")
		if s == "" {
			return nil, &SyntaxError{w.line, fmt.Sprintf("%q names no structure before ':'", w.text)}
		}
		if colon && m == "" {
			return nil, &SyntaxError{w.line, fmt.Sprintf("%q names no list_head member after ':'", w.text)}
		}
		if strings.Contains(m, ".") {
			return nil, &SyntaxError{w.line, fmt.Sprintf("list_head member %q is not a plain name", m)}
		}
		l.WithinStruct, l.WithinMember = s, m
	}
	for {
		t, ok := p.peek()
		if !ok {
			return nil, &SyntaxError{lastLine(p, kw), fmt.Sprintf("no 'endfor' for the 'for %s' of line %d", l.Var, kw.line)}
		}
		p.at++
		switch t.text {
		case "endfor":
			return l, nil
		case "erase":
			e, err := p.erase(t, l.Var)
			if err != nil {
				return nil, err
			}
			l.Body = append(l.Body, *e)
		default:
			return nil, &SyntaxError{t.line, fmt.Sprintf("%q inside a loop: want erase or endfor", t.text)}
		}
	}
}

// lastLine is the line of the last token read, for an error at the end of
// a section or file.
func lastLine(p *parser, kw token) int {
	if p.at > 0 {
		return p.toks[p.at-1].line
	}
	return kw.line
}

// parseSize reads a size argument: N, NK or NM (case-insensitive), or an
// expression.
func parseSize(t token) (*Size, error) {
	s := t.text
	if c := s[0]; c < '0' || c > '9' {
		if c == '-' || c == '+' {
			return nil, &SyntaxError{t.line, fmt.Sprintf("size %q: want a positive number of bytes", s)}
		}
		path := splitPath(s)
		if err := checkPath(t, path); err != nil {
			return nil, err
		}
		return &Size{Line: t.line, Expr: s}, nil
	}
	mult := int64(1)
	switch s[len(s)-1] {
	case 'k', 'K':
		mult, s = 1<<10, s[:len(s)-1]
	case 'm', 'M':
		mult, s = 1<<20, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxSizeBytes/mult {
		return nil, &SyntaxError{t.line, fmt.Sprintf("size %q: want N, NK or NM bytes", t.text)}
	}
	return &Size{Line: t.line, Bytes: n * mult}, nil
}

// splitPath cuts SYM.member.member into its components; empty ones (a
// doubled or trailing '.') are dropped, as makedumpfile drops them.
func splitPath(expr string) []string {
	var out []string
	for _, c := range strings.Split(expr, ".") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// checkPath refuses an expression with no name or with a component that
// cannot be a C identifier.
func checkPath(t token, path []string) error {
	if len(path) == 0 {
		return &SyntaxError{t.line, fmt.Sprintf("%q names no symbol", t.text)}
	}
	for _, c := range path {
		if !isIdent(c) {
			return &SyntaxError{t.line, fmt.Sprintf("%q: %q is not a C identifier", t.text, c)}
		}
	}
	return nil
}

func isIdent(s string) bool {
	for i, c := range s {
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}
