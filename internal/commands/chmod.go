package commands

import (
	"io/fs"
	"strconv"
	"strings"
)

// ModeFunc maps the mode of a file (isDir false) or a directory to the one
// it is given, in Unix's octal layout (0o4000 setuid … 0o0777).
type ModeFunc func(isDir bool, perm fs.FileMode) fs.FileMode

// ParseChmod reads an rsync-style --chmod: comma-separated items, each
// with an optional D (directories only) or F (files only) prefix, then an
// octal mode ("644", "2775") or chmod's symbolic form ("u+x", "go-w",
// "a=rX", "u=rw,g=r,o="): who ([ugoa], none meaning all), then one or more
// operator ([+-=]) and permission ([rwxXst]) groups. X is execute for
// directories and for files that have some execute bit.
func ParseChmod(spec string) (ModeFunc, error) {
	type item struct {
		dirs, files bool
		apply       func(isDir bool, p fs.FileMode) fs.FileMode
	}
	var items []item
	for _, raw := range strings.Split(spec, ",") {
		it := item{dirs: true, files: true}
		s := raw
		switch {
		case strings.HasPrefix(s, "D"):
			it.files, s = false, s[1:]
		case strings.HasPrefix(s, "F"):
			it.dirs, s = false, s[1:]
		}
		bad := func(why string) (ModeFunc, error) {
			return nil, Usagef("--chmod %q: %q %s; write e.g. D755,F644 or u+x,go-w", spec, raw, why)
		}
		if s == "" {
			return bad("is empty")
		}
		if s[0] >= '0' && s[0] <= '7' {
			n, err := strconv.ParseUint(s, 8, 32)
			if err != nil || n > 0o7777 {
				return bad("is not an octal mode up to 7777")
			}
			m := fs.FileMode(n)
			it.apply = func(bool, fs.FileMode) fs.FileMode { return m }
			items = append(items, it)
			continue
		}
		who := strings.TrimLeft(s, "ugoa")
		whoSet := s[:len(s)-len(who)]
		if whoSet == "" || strings.Contains(whoSet, "a") {
			whoSet = "ugo"
		}
		var mask fs.FileMode // the bits of the classes named
		for _, c := range whoSet {
			mask |= map[rune]fs.FileMode{'u': 0o4700, 'g': 0o2070, 'o': 0o0007}[c]
		}
		if strings.ContainsRune(whoSet, 'o') || len(whoSet) == 3 {
			mask |= 0o1000 // sticky goes with "o" or "a"
		}
		rest := who
		type clause struct {
			op    byte
			perms string
		}
		var clauses []clause
		for rest != "" {
			op := rest[0]
			if op != '+' && op != '-' && op != '=' {
				return bad("needs +, - or = after the classes")
			}
			perms := strings.TrimLeft(rest[1:], "rwxXst")
			clauses = append(clauses, clause{op, rest[1 : len(rest)-len(perms)]})
			rest = perms
		}
		if len(clauses) == 0 {
			return bad("names no change")
		}
		it.apply = func(isDir bool, p fs.FileMode) fs.FileMode {
			for _, c := range clauses {
				var bits fs.FileMode
				for _, r := range c.perms {
					switch r {
					case 'r':
						bits |= 0o444
					case 'w':
						bits |= 0o222
					case 'x':
						bits |= 0o111
					case 'X':
						if isDir || p&0o111 != 0 {
							bits |= 0o111
						}
					case 's':
						bits |= 0o6000
					case 't':
						bits |= 0o1000
					}
				}
				bits &= mask
				switch c.op {
				case '+':
					p |= bits
				case '-':
					p &^= bits
				case '=':
					p = p&^mask | bits
				}
			}
			return p
		}
		items = append(items, it)
	}
	return func(isDir bool, p fs.FileMode) fs.FileMode {
		for _, it := range items {
			if isDir && it.dirs || !isDir && it.files {
				p = it.apply(isDir, p)
			}
		}
		return p & 0o7777
	}, nil
}
