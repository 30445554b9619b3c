package chain

import "strings"

// lookupFunc finds a variable's value; ok is false when it is unset.
type lookupFunc func(name string) (value string, ok bool)

// maxExpandDepth bounds defaults nested inside defaults (${A:-${B:-...}}).
const maxExpandDepth = 8

// varRef is one parsed ${...} reference.
type varRef struct {
	name string
	op   string // "", ":-" or "-"
	def  string // the default's raw text, expanded only when used
	end  int    // index just past the closing brace
}

// scanVar parses the reference that starts at s[i] == '$', s[i+1] == '{'.
// It accepts ${NAME}, ${NAME:-default} and ${NAME-default}; braces inside
// the default nest. ok is false for anything else, which callers keep as
// literal text.
func scanVar(s string, i int) (varRef, bool) {
	if i+1 >= len(s) || s[i] != '$' || s[i+1] != '{' {
		return varRef{}, false
	}
	j := i + 2
	start := j
	for j < len(s) && isNameByte(s[j], j == start) {
		j++
	}
	if j == start || j >= len(s) {
		return varRef{}, false
	}
	ref := varRef{name: s[start:j]}
	switch {
	case s[j] == '}':
		ref.end = j + 1
		return ref, true
	case strings.HasPrefix(s[j:], ":-"):
		ref.op = ":-"
		j += 2
	case s[j] == '-':
		ref.op = "-"
		j++
	default:
		return varRef{}, false
	}
	depth := 0
	for k := j; k < len(s); k++ {
		switch s[k] {
		case '{':
			depth++
		case '}':
			if depth == 0 {
				ref.def = s[j:k]
				ref.end = k + 1
				return ref, true
			}
			depth--
		}
	}
	return varRef{}, false
}

func isNameByte(c byte, first bool) bool {
	if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		return true
	}
	return !first && c >= '0' && c <= '9'
}

// isName reports whether s is an identifier ([A-Za-z_][A-Za-z0-9_]*).
func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i], i == 0) {
			return false
		}
	}
	return true
}

// value resolves a parsed reference: an unset variable without a default
// expands to nothing, as in the shell.
func (r varRef) value(lookup lookupFunc, depth int) string {
	v, ok := lookup(r.name)
	switch r.op {
	case ":-":
		if !ok || v == "" {
			return expandDepth(r.def, lookup, depth+1)
		}
	case "-":
		if !ok {
			return expandDepth(r.def, lookup, depth+1)
		}
	}
	return v
}

// expandVars replaces ${NAME}, ${NAME:-default} and ${NAME-default} in s.
// Everything else, including a bare $NAME and malformed references, stays
// as written. The result is never scanned again.
func expandVars(s string, lookup lookupFunc) string {
	return expandDepth(s, lookup, 0)
}

func expandDepth(s string, lookup lookupFunc, depth int) string {
	if depth > maxExpandDepth || !strings.Contains(s, "${") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '$' {
			if ref, ok := scanVar(s, i); ok {
				b.WriteString(ref.value(lookup, depth))
				i = ref.end
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}
