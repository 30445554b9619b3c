package sshx

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ParseTarget reads an ad-hoc target, "[user@]host[:port]" (an IPv6 host in
// brackets when a port follows, "ssh://" allowed), as typed on a command
// line or in ProxyJump. Name is the spec itself.
func ParseTarget(spec string) (Target, error) {
	t, err := parseHop(spec)
	if err != nil {
		return Target{}, err
	}
	t.Name = spec
	return t, nil
}

func parseHop(spec string) (Target, error) {
	bad := func(why string) (Target, error) {
		return Target{}, fmt.Errorf("%q is not a valid target (%s); write [user@]host[:port]", spec, why)
	}
	s := strings.TrimPrefix(spec, "ssh://")
	s = strings.TrimSuffix(s, "/")
	if s == "" {
		return bad("empty")
	}
	var t Target
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		t.User, s = s[:i], s[i+1:]
		if t.User == "" {
			return bad("the user is empty")
		}
	}
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return bad("an unclosed [")
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return bad("text after ]")
			}
			port = p
		}
	case strings.Count(s, ":") == 1:
		host, port, _ = strings.Cut(s, ":")
	case strings.Count(s, ":") > 1:
		// a bare IPv6 address, no port
		if _, err := netip.ParseAddr(s); err != nil {
			return bad("too many colons")
		}
	}
	if host == "" {
		return bad("the host is empty")
	}
	if !validHost(host) {
		return bad("the host may hold only letters, digits, '.', '-', '_' and ':'")
	}
	if !validUser(t.User) {
		return bad("the user may hold only letters, digits and . _ - + @ $")
	}
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return bad("the port is not a number from 1 to 65535")
		}
		t.Port = p
	}
	t.Host = host
	return t, nil
}

// maxJumps bounds a ProxyJump chain (and loops through ssh_config).
const maxJumps = 8

// parseJump splits a ProxyJump value into hops, first hop first.
func parseJump(v string) ([]Target, error) {
	parts := strings.Split(v, ",")
	if len(parts) > maxJumps {
		return nil, fmt.Errorf("ProxyJump %q has more than %d hops", v, maxJumps)
	}
	hops := make([]Target, 0, len(parts))
	for _, p := range parts {
		h, err := parseHop(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		h.Name = strings.TrimSpace(p)
		hops = append(hops, h)
	}
	return hops, nil
}

// joinJump writes hops back as a ProxyJump value.
func joinJump(hops []Target) string {
	parts := make([]string, len(hops))
	for i, h := range hops {
		parts[i] = h.Name
	}
	return strings.Join(parts, ",")
}

// validHost accepts DNS names, IPv4 and IPv6 addresses (with a zone).
func validHost(h string) bool {
	if h == "" || len(h) > 255 || h[0] == '-' {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-_:%", c)) {
			return false
		}
	}
	return true
}

// validUser accepts the user names systems use, "" included (the default).
func validUser(u string) bool {
	if len(u) > 255 || strings.HasPrefix(u, "-") {
		return false
	}
	for _, c := range u {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-+@$", c)) {
			return false
		}
	}
	return true
}
