package chain

import (
	"fmt"
	"strconv"
	"strings"
)

// semver is a strictly parsed semantic version (semver.org 2.0.0): no "v"
// prefix, no leading zeros, no missing components.
type semver struct {
	major, minor, patch uint64
	pre                 []string
	build               string
}

// parseSemver parses MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD] strictly.
func parseSemver(s string) (semver, error) {
	var v semver
	if s == "" {
		return v, fmt.Errorf("version is empty")
	}
	rest := s
	if i := strings.IndexByte(rest, '+'); i >= 0 {
		v.build = rest[i+1:]
		rest = rest[:i]
		if err := checkIdents(v.build, false); err != nil {
			return semver{}, fmt.Errorf("version %q: build metadata: %w", s, err)
		}
	}
	if i := strings.IndexByte(rest, '-'); i >= 0 {
		pre := rest[i+1:]
		rest = rest[:i]
		if err := checkIdents(pre, true); err != nil {
			return semver{}, fmt.Errorf("version %q: pre-release: %w", s, err)
		}
		v.pre = strings.Split(pre, ".")
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return semver{}, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", s)
	}
	nums := [3]*uint64{&v.major, &v.minor, &v.patch}
	for i, p := range parts {
		if !isNumeric(p) {
			return semver{}, fmt.Errorf("version %q: %q is not a number", s, p)
		}
		if len(p) > 1 && p[0] == '0' {
			return semver{}, fmt.Errorf("version %q: %q has a leading zero", s, p)
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return semver{}, fmt.Errorf("version %q: %q is too large", s, p)
		}
		*nums[i] = n
	}
	return v, nil
}

func isNumeric(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// checkIdents checks dot-separated identifiers of [0-9A-Za-z-]; numeric
// pre-release identifiers must not have leading zeros.
func checkIdents(s string, pre bool) error {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return fmt.Errorf("empty identifier")
		}
		for i := 0; i < len(id); i++ {
			c := id[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
				return fmt.Errorf("identifier %q contains %q", id, c)
			}
		}
		if pre && isNumeric(id) && len(id) > 1 && id[0] == '0' {
			return fmt.Errorf("identifier %q has a leading zero", id)
		}
	}
	return nil
}

// String renders the version in its canonical form.
func (v semver) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch)
	if len(v.pre) > 0 {
		s += "-" + strings.Join(v.pre, ".")
	}
	if v.build != "" {
		s += "+" + v.build
	}
	return s
}

// compare orders versions by semver precedence; build metadata is ignored.
func (v semver) compare(w semver) int {
	for _, p := range [][2]uint64{{v.major, w.major}, {v.minor, w.minor}, {v.patch, w.patch}} {
		if p[0] != p[1] {
			if p[0] < p[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(v.pre) == 0 && len(w.pre) == 0:
		return 0
	case len(v.pre) == 0:
		return 1
	case len(w.pre) == 0:
		return -1
	}
	for i := 0; i < len(v.pre) && i < len(w.pre); i++ {
		a, b := v.pre[i], w.pre[i]
		an, bn := isNumeric(a), isNumeric(b)
		switch {
		case an && bn:
			// Equal-length digit strings without leading zeros compare as text.
			if len(a) != len(b) {
				if len(a) < len(b) {
					return -1
				}
				return 1
			}
			if c := strings.Compare(a, b); c != 0 {
				return c
			}
		case an:
			return -1
		case bn:
			return 1
		default:
			if c := strings.Compare(a, b); c != 0 {
				return c
			}
		}
	}
	switch {
	case len(v.pre) < len(w.pre):
		return -1
	case len(v.pre) > len(w.pre):
		return 1
	}
	return 0
}
