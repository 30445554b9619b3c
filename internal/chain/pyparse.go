package chain

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file reads top-level assignments of literal values from Python source
// without running Python:
//
//	NAME = <literal>
//	NAME: <annotation> = <literal>
//
// where a literal is a string (any quoting, adjacent strings concatenated),
// an int or float (with an optional sign), True, False, None, or a list,
// tuple or dict of literals. Anything else assigned at top level (a call,
// an f-string, an expression, a set, a later augmented assignment) makes the
// name "skipped" with a reason, so callers can say why a value is missing.
// Assignments inside functions, classes and compound statements are not top
// level and are ignored.

// pyModule is what parsePython found.
type pyModule struct {
	Doc     string            // the module docstring, if any
	Values  map[string]any    // name → value of its last top-level assignment
	Lines   map[string]int    // name → line of that assignment
	Skipped map[string]pySkip // names whose last top-level binding was not a literal
	Stopped string            // non-empty when reading stopped early, and why
}

type pySkip struct {
	Line   int
	Reason string
}

// maxPyNesting bounds literal nesting, so hostile input cannot exhaust the stack.
const maxPyNesting = 64

type pyTokKind int

const (
	pyName pyTokKind = iota
	pyNumber
	pyString
	pyOp
)

type pyTok struct {
	kind   pyTokKind
	text   string // names, numbers, operators: source text; strings: decoded value
	prefix string // strings: lower-cased prefix letters
	bad    string // strings: why the value cannot be used (f-string, bytes, \N{...})
	line   int
}

type pyLine struct {
	toks     []pyTok
	indented bool
	line     int
}

// lexPython splits src into logical lines of tokens. On a lexical error it
// returns the lines complete so far and the error.
func lexPython(src []byte) ([]pyLine, error) {
	s := string(src)
	s = strings.TrimPrefix(s, "\ufeff")
	var lines []pyLine
	var cur pyLine
	depth := 0
	line, lineStart := 1, 0
	flush := func() {
		if len(cur.toks) > 0 {
			lines = append(lines, cur)
		}
		cur = pyLine{}
	}
	add := func(t pyTok, col int) {
		if len(cur.toks) == 0 {
			cur.indented = col > 0
			cur.line = t.line
		}
		cur.toks = append(cur.toks, t)
	}
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\n' || c == '\r':
			if c == '\r' && i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			i++
			line++
			lineStart = i
			if depth == 0 {
				flush()
			}
			continue
		case c == ' ' || c == '\t' || c == '\f':
			i++
			continue
		case c == '#':
			for i < len(s) && s[i] != '\n' && s[i] != '\r' {
				i++
			}
			continue
		case c == '\\':
			j := i + 1
			if j < len(s) && (s[j] == '\n' || s[j] == '\r') {
				if s[j] == '\r' && j+1 < len(s) && s[j+1] == '\n' {
					j++
				}
				i = j + 1
				line++
				lineStart = i
				continue
			}
			flush()
			return lines, fmt.Errorf("line %d: unexpected backslash", line)
		}
		col := i - lineStart
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '_' || unicode.IsLetter(r):
			j := i + size
			for j < len(s) {
				r2, sz := utf8.DecodeRuneInString(s[j:])
				if r2 != '_' && !unicode.IsLetter(r2) && !unicode.IsDigit(r2) {
					break
				}
				j += sz
			}
			word := s[i:j]
			if j < len(s) && (s[j] == '\'' || s[j] == '"') && isStringPrefix(word) {
				tok, end, nl, err := lexString(s, j, strings.ToLower(word), line)
				if err != nil {
					flush()
					return lines, err
				}
				add(tok, col)
				line += nl
				if nl > 0 {
					lineStart = strings.LastIndexAny(s[:end], "\n\r") + 1
				}
				i = end
				continue
			}
			add(pyTok{kind: pyName, text: word, line: line}, col)
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i
			for j < len(s) {
				d := s[j]
				if d >= '0' && d <= '9' || d >= 'a' && d <= 'z' || d >= 'A' && d <= 'Z' || d == '_' || d == '.' {
					j++
					continue
				}
				if (d == '+' || d == '-') && (s[j-1] == 'e' || s[j-1] == 'E') && !isHexPrefixed(s[i:j]) {
					j++
					continue
				}
				break
			}
			add(pyTok{kind: pyNumber, text: s[i:j], line: line}, col)
			i = j
		case c == '\'' || c == '"':
			tok, end, nl, err := lexString(s, i, "", line)
			if err != nil {
				flush()
				return lines, err
			}
			add(tok, col)
			line += nl
			if nl > 0 {
				lineStart = strings.LastIndexAny(s[:end], "\n\r") + 1
			}
			i = end
		default:
			op := lexOp(s[i:])
			switch op {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				if depth > 0 {
					depth--
				}
			}
			add(pyTok{kind: pyOp, text: op, line: line}, col)
			i += len(op)
		}
	}
	flush()
	return lines, nil
}

func isHexPrefixed(s string) bool {
	return len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')
}

func isStringPrefix(w string) bool {
	switch strings.ToLower(w) {
	case "r", "u", "b", "f", "t", "br", "rb", "fr", "rf", "tr", "rt":
		return true
	}
	return false
}

// lexOp returns the longest Python operator at the start of s.
func lexOp(s string) string {
	for _, op := range [...]string{
		"**=", "//=", ">>=", "<<=", "...",
		"->", ":=", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "@=", "**", "//", "<<", ">>",
	} {
		if strings.HasPrefix(s, op) {
			return op
		}
	}
	_, size := utf8.DecodeRuneInString(s)
	return s[:size]
}

// lexString reads the string literal whose opening quote is at s[i]. It
// returns the token, the index after the closing quote and the number of
// newlines inside.
func lexString(s string, i int, prefix string, line int) (pyTok, int, int, error) {
	q := s[i]
	closer := s[i : i+1]
	if i+3 <= len(s) && s[i+1] == q && s[i+2] == q {
		closer = s[i : i+3]
	}
	triple := len(closer) == 3
	open := len(closer)
	j := i + open
	nl := 0
	for {
		if j >= len(s) {
			return pyTok{}, 0, 0, fmt.Errorf("line %d: string is never closed", line)
		}
		c := s[j]
		if c == '\\' {
			if j+1 < len(s) && (s[j+1] == '\n' || s[j+1] == '\r') {
				nl++
				if s[j+1] == '\r' && j+2 < len(s) && s[j+2] == '\n' {
					j++
				}
			}
			j += 2
			continue
		}
		if c == '\n' || c == '\r' {
			if !triple {
				return pyTok{}, 0, 0, fmt.Errorf("line %d: string is never closed on its line", line)
			}
			if c == '\r' && j+1 < len(s) && s[j+1] == '\n' {
				j++
			}
			nl++
			j++
			continue
		}
		if c == q && (!triple || strings.HasPrefix(s[j:], closer)) {
			break
		}
		j++
	}
	body := s[i+open : j]
	end := j + open
	tok := pyTok{kind: pyString, prefix: prefix, line: line}
	raw := strings.ContainsRune(prefix, 'r')
	bytesLit := strings.ContainsRune(prefix, 'b')
	switch {
	case strings.ContainsAny(prefix, "ft"):
		tok.bad = "an f-string is computed when the module runs"
	case bytesLit:
		tok.bad = "a bytes literal is not text"
	}
	// Triple-quoted strings normalise their newlines to \n, as Python does.
	body = strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\r", "\n")
	if raw {
		tok.text = body
	} else {
		v, bad := decodeEscapes(body)
		tok.text = v
		if bad != "" && tok.bad == "" {
			tok.bad = bad
		}
	}
	return tok, end, nl, nil
}

// decodeEscapes interprets Python's backslash escapes in a str literal.
func decodeEscapes(s string) (string, string) {
	if !strings.Contains(s, `\`) {
		return s, ""
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		e := s[i]
		switch e {
		case '\n':
			// backslash-newline continues the string on the next line
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'f':
			b.WriteByte(12)
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte(11)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 32)
			b.WriteRune(rune(n))
			i = j - 1
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+1+width > len(s) {
				return "", fmt.Sprintf(`truncated \%c escape`, e)
			}
			hex := s[i+1 : i+1+width]
			n, err := strconv.ParseUint(hex, 16, 32)
			if err != nil {
				return "", fmt.Sprintf(`invalid \%c escape`, e)
			}
			if n > unicode.MaxRune {
				return "", fmt.Sprintf(`\%c escape is beyond Unicode`, e)
			}
			b.WriteRune(rune(n))
			i += width
		case 'N':
			return "", `\N{...} escapes are not supported; write the character itself`
		default:
			// Python keeps unknown escapes as written.
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String(), ""
}

// isCompoundKeyword reports whether a word starts a statement whose body is
// not top level.
func isCompoundKeyword(w string) bool {
	switch w {
	case "if", "elif", "else", "for", "while", "try", "except", "finally", "with",
		"def", "class", "async", "match", "case":
		return true
	}
	return false
}

// parsePython reads the top-level literal assignments of a Python module.
func parsePython(src []byte) *pyModule {
	m := &pyModule{Values: map[string]any{}, Lines: map[string]int{}, Skipped: map[string]pySkip{}}
	lines, err := lexPython(src)
	if err != nil {
		m.Stopped = err.Error()
	}
	first := true
	for _, ln := range lines {
		if ln.indented {
			first = false
			continue
		}
		stmts := splitStatements(ln.toks)
		if len(stmts) == 0 {
			continue
		}
		head := stmts[0]
		if head[0].kind == pyName && isCompoundKeyword(head[0].text) && !(len(head) > 1 && head[1].kind == pyOp && (head[1].text == "=" || head[1].text == ":")) {
			// def/class rebind a name; anything else opens a block.
			if (head[0].text == "def" || head[0].text == "class") && len(head) > 1 && head[1].kind == pyName {
				m.skip(head[1].text, head[1].line, "redefined by a "+head[0].text+" statement")
			}
			first = false
			continue
		}
		for _, st := range stmts {
			if first {
				first = false
				if doc, ok := docstring(st); ok {
					m.Doc = doc
					continue
				}
			}
			m.statement(st)
		}
	}
	return m
}

func (m *pyModule) skip(name string, line int, reason string) {
	delete(m.Values, name)
	delete(m.Lines, name)
	m.Skipped[name] = pySkip{Line: line, Reason: reason}
}

func (m *pyModule) set(name string, line int, v any) {
	delete(m.Skipped, name)
	m.Values[name] = v
	m.Lines[name] = line
}

// splitStatements splits a logical line at top-level semicolons.
func splitStatements(toks []pyTok) [][]pyTok {
	var out [][]pyTok
	depth, start := 0, 0
	for i, t := range toks {
		if t.kind != pyOp {
			continue
		}
		switch t.text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
		case ";":
			if depth == 0 {
				if i > start {
					out = append(out, toks[start:i])
				}
				start = i + 1
			}
		}
	}
	if start < len(toks) {
		out = append(out, toks[start:])
	}
	return out
}

func docstring(st []pyTok) (string, bool) {
	var b strings.Builder
	for _, t := range st {
		if t.kind != pyString || t.bad != "" {
			return "", false
		}
		b.WriteString(t.text)
	}
	return b.String(), true
}

// topLevelIndex returns the index of the first operator op outside brackets.
func topLevelIndex(toks []pyTok, op string) int {
	depth := 0
	for i, t := range toks {
		if t.kind != pyOp {
			continue
		}
		switch t.text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
		default:
			if depth == 0 && t.text == op {
				return i
			}
		}
	}
	return -1
}

func isAugmented(op string) bool {
	return len(op) >= 2 && strings.HasSuffix(op, "=") && op != "==" && op != "!=" && op != "<=" && op != ">="
}

// statement records one top-level simple statement.
func (m *pyModule) statement(st []pyTok) {
	if st[0].kind != pyName {
		return
	}
	name, line := st[0].text, st[0].line
	if len(st) < 2 || st[1].kind != pyOp {
		return
	}
	switch op := st[1].text; {
	case op == "=":
		rest := st[2:]
		if topLevelIndex(rest, "=") >= 0 {
			m.skip(name, line, "chained assignment")
			return
		}
		m.assign(name, line, rest)
	case op == ":":
		eq := topLevelIndex(st, "=")
		if eq < 0 {
			return // a bare annotation binds nothing
		}
		m.assign(name, line, st[eq+1:])
	case isAugmented(op) || op == ":=":
		m.skip(name, line, "changed by "+op)
	case op == "[" || op == ".":
		// NAME[...] = ... or NAME.attr = ... mutates the value.
		for _, t := range st[2:] {
			if t.kind == pyOp && (t.text == "=" || isAugmented(t.text)) {
				m.skip(name, line, "changed by an item or attribute assignment")
				return
			}
		}
	case op == ",":
		if topLevelIndex(st, "=") >= 0 {
			m.skip(name, line, "unpacking assignment")
		}
	}
}

func (m *pyModule) assign(name string, line int, toks []pyTok) {
	if len(toks) == 0 {
		m.skip(name, line, "assignment has no value")
		return
	}
	p := &litParser{toks: toks}
	v, reason := p.top()
	if reason != "" {
		m.skip(name, line, reason)
		return
	}
	m.set(name, line, v)
}

// litParser parses a literal from tokens.
type litParser struct {
	toks  []pyTok
	pos   int
	depth int
}

func (p *litParser) peek() (pyTok, bool) {
	if p.pos >= len(p.toks) {
		return pyTok{}, false
	}
	return p.toks[p.pos], true
}

func (p *litParser) isOp(text string) bool {
	t, ok := p.peek()
	return ok && t.kind == pyOp && t.text == text
}

// top parses a whole assignment value: a literal, or a bare tuple a, b, c.
func (p *litParser) top() (any, string) {
	v, reason := p.value()
	if reason != "" {
		return nil, reason
	}
	if p.isOp(",") {
		items := []any{v}
		for p.isOp(",") {
			p.pos++
			if _, ok := p.peek(); !ok {
				break
			}
			w, reason := p.value()
			if reason != "" {
				return nil, reason
			}
			items = append(items, w)
		}
		v = items
	}
	if t, ok := p.peek(); ok {
		return nil, fmt.Sprintf("not a literal: %q follows the value", t.text)
	}
	return v, ""
}

func (p *litParser) value() (any, string) {
	t, ok := p.peek()
	if !ok {
		return nil, "value is missing"
	}
	if p.depth >= maxPyNesting {
		return nil, "literal is nested too deeply"
	}
	switch t.kind {
	case pyString:
		var b strings.Builder
		for {
			t, ok := p.peek()
			if !ok || t.kind != pyString {
				break
			}
			if t.bad != "" {
				return nil, t.bad
			}
			b.WriteString(t.text)
			p.pos++
		}
		return b.String(), ""
	case pyNumber:
		p.pos++
		return parsePyNumber(t.text, false)
	case pyName:
		p.pos++
		switch t.text {
		case "True":
			return true, ""
		case "False":
			return false, ""
		case "None":
			return nil, ""
		}
		if p.isOp("(") {
			return nil, fmt.Sprintf("not a literal: a call to %s", t.text)
		}
		return nil, fmt.Sprintf("not a literal: the name %s", t.text)
	}
	switch t.text {
	case "-", "+":
		neg := false
		for n := 0; p.isOp("-") || p.isOp("+"); n++ {
			if n > maxPyNesting {
				return nil, "too many signs"
			}
			if p.isOp("-") {
				neg = !neg
			}
			p.pos++
		}
		nt, ok := p.peek()
		if !ok || nt.kind != pyNumber {
			return nil, "not a literal: a sign without a number"
		}
		p.pos++
		return parsePyNumber(nt.text, neg)
	case "[":
		p.pos++
		p.depth++
		defer func() { p.depth-- }()
		items, reason := p.items("]")
		if reason != "" {
			return nil, reason
		}
		return items, ""
	case "(":
		p.pos++
		p.depth++
		defer func() { p.depth-- }()
		if p.isOp(")") {
			p.pos++
			return []any{}, ""
		}
		first, reason := p.value()
		if reason != "" {
			return nil, reason
		}
		if p.isOp(")") {
			p.pos++
			return first, ""
		}
		if !p.isOp(",") {
			return nil, "not a literal: an expression in parentheses"
		}
		p.pos++
		rest, reason := p.items(")")
		if reason != "" {
			return nil, reason
		}
		return append([]any{first}, rest...), ""
	case "{":
		p.pos++
		p.depth++
		defer func() { p.depth-- }()
		return p.dict()
	}
	return nil, fmt.Sprintf("not a literal: %q", t.text)
}

// items parses comma-separated values up to the closing bracket.
func (p *litParser) items(closer string) ([]any, string) {
	out := []any{}
	for {
		if p.isOp(closer) {
			p.pos++
			return out, ""
		}
		v, reason := p.value()
		if reason != "" {
			return nil, reason
		}
		out = append(out, v)
		switch {
		case p.isOp(","):
			p.pos++
		case p.isOp(closer):
		default:
			return nil, "not a literal: expected , or " + closer
		}
	}
}

func (p *litParser) dict() (any, string) {
	out := map[string]any{}
	first := true
	for {
		if p.isOp("}") {
			p.pos++
			return out, ""
		}
		kt, _ := p.peek()
		k, reason := p.value()
		if reason != "" {
			return nil, reason
		}
		if !p.isOp(":") {
			if first {
				return nil, "a set literal has no JSON form"
			}
			return nil, "not a literal: expected : after a dict key"
		}
		first = false
		ks, ok := k.(string)
		if !ok || kt.kind != pyString {
			return nil, "a dict key is not a string"
		}
		p.pos++
		v, reason := p.value()
		if reason != "" {
			return nil, reason
		}
		out[ks] = v
		switch {
		case p.isOp(","):
			p.pos++
		case p.isOp("}"):
		default:
			return nil, "not a literal: expected , or }"
		}
	}
}

// parsePyNumber converts a Python int or float literal.
func parsePyNumber(text string, neg bool) (any, string) {
	if strings.HasSuffix(text, "j") || strings.HasSuffix(text, "J") {
		return nil, "a complex number has no JSON form"
	}
	if !validUnderscores(text) {
		return nil, fmt.Sprintf("%q is not a number", text)
	}
	t := strings.ReplaceAll(text, "_", "")
	if len(t) > 2 && t[0] == '0' {
		base := 0
		switch t[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			u, err := strconv.ParseUint(t[2:], base, 64)
			if err != nil {
				return nil, fmt.Sprintf("%q is not a number that fits 64 bits", text)
			}
			return signedInt(u, neg, text)
		}
	}
	if strings.ContainsAny(t, ".eE") {
		if !validPyFloat(t) {
			return nil, fmt.Sprintf("%q is not a number", text)
		}
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Sprintf("%q is out of range", text)
		}
		if neg {
			f = -f
		}
		return f, ""
	}
	if !isNumeric(t) {
		return nil, fmt.Sprintf("%q is not a number", text)
	}
	if len(t) > 1 && t[0] == '0' && strings.Trim(t, "0") != "" {
		return nil, fmt.Sprintf("%q has a leading zero", text)
	}
	u, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return nil, fmt.Sprintf("%q is too large", text)
	}
	return signedInt(u, neg, text)
}

func signedInt(u uint64, neg bool, text string) (any, string) {
	if neg {
		if u > 1<<63 {
			return nil, fmt.Sprintf("-%s is too small", text)
		}
		return int64(-u), "" // u <= 1<<63: -u wraps to the right value
	}
	if u > math.MaxInt64 {
		return nil, fmt.Sprintf("%q is too large", text)
	}
	return int64(u), ""
}

// validUnderscores checks that underscores only sit between digits (or right
// after a base prefix), as Python requires.
func validUnderscores(t string) bool {
	for i := 0; i < len(t); i++ {
		if t[i] != '_' {
			continue
		}
		if i == 0 || i == len(t)-1 || t[i+1] == '_' {
			return false
		}
		prev, next := t[i-1], t[i+1]
		if !isHexDigit(prev) && !(i == 2 && t[0] == '0' && strings.ContainsRune("xXoObB", rune(prev))) {
			return false
		}
		if !isHexDigit(next) {
			return false
		}
	}
	return true
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// validPyFloat accepts digits [. digits] [e [+-] digits] with at least one
// digit in the mantissa; it rejects the words strconv also accepts (inf, nan)
// and hexadecimal floats.
func validPyFloat(t string) bool {
	i, digits := 0, 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
		digits++
	}
	if i < len(t) && t[i] == '.' {
		i++
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
		i++
		if i < len(t) && (t[i] == '+' || t[i] == '-') {
			i++
		}
		exp := 0
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i++
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(t)
}
