package chain

import (
	"fmt"
	"path"
	"strings"
)

// within reports whether p is base or lies inside it. Both are cleaned and
// compared component by component, never as strings: /base2 is not inside
// /base. An absolute path is never inside a relative one or the reverse.
func within(base, p string) bool {
	base, p = path.Clean(base), path.Clean(p)
	if path.IsAbs(base) != path.IsAbs(p) {
		return false
	}
	if base == p || base == "/" {
		return true
	}
	if base == "." {
		return p != ".." && !strings.HasPrefix(p, "../")
	}
	bs, ps := strings.Split(base, "/"), strings.Split(p, "/")
	if len(ps) < len(bs) {
		return false
	}
	for i := range bs {
		if bs[i] != ps[i] {
			return false
		}
	}
	return true
}

// cleanRel validates a relative slash path taken from a metadata file and
// returns it cleaned. It refuses absolute paths, paths that climb out with
// "..", empty paths and NUL bytes.
func cleanRel(what, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%s is empty", what)
	}
	if strings.ContainsRune(p, 0) || strings.Contains(p, `\`) {
		return "", fmt.Errorf("%s %q contains a NUL byte or a backslash", what, p)
	}
	if path.IsAbs(p) {
		return "", fmt.Errorf("%s %q is absolute; make it relative", what, p)
	}
	c := path.Clean(p)
	if !within(".", c) {
		return "", fmt.Errorf("%s %q climbs out with ..", what, p)
	}
	return c, nil
}
