package chain

import (
	"fmt"
	"strings"
)

// envVar is one KEY=VALUE line of a .env file.
type envVar struct {
	Key, Value string
	Line       int
}

// parseDotEnv reads a .env file:
//
//	# comment
//	KEY=value                 unquoted: trimmed, " #..." starts a comment
//	export KEY=value          "export " is allowed and ignored
//	KEY='literal $value'      single quotes: nothing is special, may span lines
//	KEY="a\n${OTHER}"         double quotes: \n \r \t \\ \" \$ escapes, may span lines
//
// ${VAR} and ${VAR:-default} expand in unquoted and double-quoted values,
// from keys defined earlier in the file, then from lookup.
func parseDotEnv(src []byte, lookup lookupFunc) ([]envVar, error) {
	s := strings.ReplaceAll(string(src), "\r\n", "\n")
	s = strings.TrimPrefix(s, "\ufeff")
	var out []envVar
	seen := map[string]string{}
	look := func(name string) (string, bool) {
		if v, ok := seen[name]; ok {
			return v, true
		}
		if lookup != nil {
			return lookup(name)
		}
		return "", false
	}
	line := 1
	i := 0
	for i < len(s) {
		startLine := line
		// Skip leading blanks of the line.
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			break
		}
		if s[i] == '\n' {
			i++
			line++
			continue
		}
		if s[i] == '#' {
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		}
		if strings.HasPrefix(s[i:], "export ") || strings.HasPrefix(s[i:], "export\t") {
			i += len("export")
			for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
				i++
			}
		}
		k := i
		for i < len(s) && isNameByte(s[i], i == k) {
			i++
		}
		key := s[k:i]
		if key == "" {
			return nil, fmt.Errorf(".env line %d: expected KEY=VALUE with a KEY of letters, digits and '_'", startLine)
		}
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) || s[i] != '=' {
			return nil, fmt.Errorf(".env line %d: %s has no '='; write %s=VALUE", startLine, key, key)
		}
		i++
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		var val string
		switch {
		case i < len(s) && s[i] == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf(".env line %d: the single quote of %s is never closed", startLine, key)
			}
			val = s[i+1 : i+1+end]
			line += strings.Count(val, "\n")
			i += end + 2
		case i < len(s) && s[i] == '"':
			var b strings.Builder
			j := i + 1
			closed := false
			for j < len(s) {
				c := s[j]
				if c == '"' {
					closed = true
					j++
					break
				}
				if c == '\\' && j+1 < len(s) {
					switch s[j+1] {
					case 'n':
						b.WriteByte('\n')
					case 'r':
						b.WriteByte('\r')
					case 't':
						b.WriteByte('\t')
					case '\\', '"', '$':
						b.WriteByte(s[j+1])
					default:
						b.WriteByte('\\')
						b.WriteByte(s[j+1])
					}
					if s[j+1] == '\n' {
						line++
					}
					j += 2
					continue
				}
				if c == '$' {
					if ref, ok := scanVar(s, j); ok {
						b.WriteString(ref.value(look, 0))
						line += strings.Count(s[j:ref.end], "\n")
						j = ref.end
						continue
					}
				}
				if c == '\n' {
					line++
				}
				b.WriteByte(c)
				j++
			}
			if !closed {
				return nil, fmt.Errorf(".env line %d: the double quote of %s is never closed", startLine, key)
			}
			val = b.String()
			i = j
		default:
			j := i
			for j < len(s) && s[j] != '\n' {
				if s[j] == '#' && (j == i || s[j-1] == ' ' || s[j-1] == '\t') {
					break
				}
				j++
			}
			raw := strings.TrimRight(s[i:j], " \t")
			val = expandVars(raw, look)
			i = j
		}
		// After the value: blanks, an optional comment, then end of line.
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i < len(s) && s[i] == '#' {
			for i < len(s) && s[i] != '\n' {
				i++
			}
		}
		if i < len(s) && s[i] != '\n' {
			return nil, fmt.Errorf(".env line %d: unexpected text after the value of %s; quote the whole value", line, key)
		}
		seen[key] = val
		out = append(out, envVar{Key: key, Value: val, Line: startLine})
	}
	return out, nil
}
