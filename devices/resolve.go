package devices

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
)

// Kind says what a Target is.
type Kind string

const (
	// KindDevice is a registered device.
	KindDevice Kind = "device"
	// KindLocal is the operator's own machine, reached without SSH.
	KindLocal Kind = "local"
	// KindAdhoc is a host named directly in TARGETS, not registered.
	KindAdhoc Kind = "adhoc"
)

// Target is one machine a command runs on.
type Target struct {
	// Name is the device name, "local", or the normalised ad-hoc spec
	// ("root@10.0.0.5:2222"). It is unique within a resolved list.
	Name string
	Kind Kind
	// User, Host and Port say where to connect (Host has no brackets).
	// Empty User and zero Port are unset: ~/.ssh/config or the defaults
	// fill them. All three are empty for KindLocal.
	User string
	Host string
	Port int
	// KeyPath is the device's key with "~/" expanded; empty when none.
	KeyPath string
	// Device is the registry entry for KindDevice, nil otherwise; it
	// carries the fields rex does not interpret (Device.Extra).
	Device *Device
}

// Addr is the target's address for people: user@host:port, or "local".
func (t Target) Addr() string {
	if t.Kind == KindLocal {
		return Local
	}
	return FormatAddr(t.User, t.Host, t.Port)
}

// MaxTargets bounds how many targets one TARGETS list may produce, so a
// typo such as node[1-1000000] fails fast instead of exhausting memory.
const MaxTargets = 10000

// Resolve turns a TARGETS list into targets, in the order written, without
// duplicates. The list is comma-separated (commas inside [...] belong to a
// range); spaces around items and empty items are ignored. Each item is:
//
//   - "local": this machine; "all": every device, sorted by name;
//   - a device name, or a group name (its members, in group order);
//   - a range, expanded first: node[1-16], node[01-16] (zero-padded to the
//     width of the first bound), n[1,3,5-7], rack[1-2]-n[1-3];
//   - a glob over device names: web-*, db?, web[ab]; it must match one;
//   - an ad-hoc host: [user@]host[:port] or [user@][ipv6]:port, or
//     ssh://[user@]host[:port] for any host name.
//
// A device or group name always wins. Otherwise a word that contains '@',
// '.' or ':' (so every IP address) is an ad-hoc host, and a bare word is an
// unknown name: an error that suggests the closest names, since a typo of a
// device name must not turn into a connection to some other machine. A
// bare host that is not registered is written ssh://host.
//
// Names produced by a range follow the same rule word by word: node[1-3]
// needs devices node1..node3, while root@node[1-3] or node[1-3].lan are
// three ad-hoc hosts. A range that yields unregistered bare names fails,
// listing them.
func (r *Registry) Resolve(targets string) ([]Target, error) {
	items, err := splitTargets(targets)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, errors.New("no targets given; name a device, a group, all or local")
	}
	home, _ := os.UserHomeDir()
	rs := resolver{reg: r, home: home, seen: map[string]bool{}}
	for _, item := range items {
		if err := rs.item(item); err != nil {
			return nil, err
		}
	}
	return rs.out, nil
}

type resolver struct {
	reg  *Registry
	home string
	out  []Target
	seen map[string]bool
}

func (rs *resolver) add(t Target) error {
	key := string(t.Kind) + "\x00" + t.Name
	if rs.seen[key] {
		return nil
	}
	if len(rs.out) >= MaxTargets {
		return fmt.Errorf("the targets name more than %d machines; narrow the list", MaxTargets)
	}
	rs.seen[key] = true
	rs.out = append(rs.out, t)
	return nil
}

func (rs *resolver) item(item string) error {
	switch {
	case item == Local:
		return rs.add(Target{Name: Local, Kind: KindLocal})
	case item == All:
		if len(rs.reg.devices) == 0 {
			return errors.New(`"all" names no device because none is registered; add one with rex device add NAME [USER@]HOST`)
		}
		for _, name := range sortedKeys(rs.reg.devices) {
			if err := rs.device(rs.reg.devices[name]); err != nil {
				return err
			}
		}
		return nil
	case strings.HasPrefix(item, "ssh://"):
		return rs.adhoc(item, strings.TrimPrefix(item, "ssh://"))
	case isBracketedIPv6(item):
		return rs.adhoc(item, item)
	}
	if _, ok := rs.reg.devices[item]; ok {
		return rs.device(rs.reg.devices[item])
	}
	words, err := expandRanges(item, MaxTargets)
	if err != nil {
		return fmt.Errorf("target %q: %w", item, err)
	}
	var unknown []string
	for _, w := range words {
		known, err := rs.word(w)
		if err != nil {
			return err
		}
		if !known {
			unknown = append(unknown, w)
		}
	}
	switch {
	case len(unknown) == 0:
		return nil
	case len(words) == 1 && words[0] == item:
		return &UnknownError{What: "device or group", Name: item, Suggestions: suggest(item, rs.candidates())}
	default:
		shown := unknown
		more := ""
		if len(shown) > 5 {
			more = fmt.Sprintf(" and %d more", len(shown)-5)
			shown = shown[:5]
		}
		return fmt.Errorf("%s expands to names that are not devices or groups (%s%s); register them with rex device add, or write hosts as user@%s or ssh://%s",
			item, strings.Join(shown, ", "), more, item, item)
	}
}

// word resolves one name after range expansion. It reports false for a
// bare word that names nothing.
func (rs *resolver) word(w string) (bool, error) {
	if d, ok := rs.reg.devices[w]; ok {
		return true, rs.device(d)
	}
	if members, ok := rs.reg.groups[w]; ok {
		if len(members) == 0 {
			return true, fmt.Errorf("group %q has no devices; add some with rex device group add %s DEVICE...", w, w)
		}
		for _, m := range members {
			d, ok := rs.reg.devices[m]
			if !ok {
				return true, fmt.Errorf("group %q lists %q, which is not a device; add it with rex device add %s HOST or drop it with rex device group remove %s %s", w, m, m, w, m)
			}
			if err := rs.device(d); err != nil {
				return true, err
			}
		}
		return true, nil
	}
	if strings.ContainsAny(w, "*?[") {
		matched := false
		for _, name := range sortedKeys(rs.reg.devices) {
			ok, err := path.Match(w, name)
			if err != nil {
				return true, fmt.Errorf("target %q is not a valid pattern; use * and ? as wildcards and [a-z] for one character of a set", w)
			}
			if ok {
				matched = true
				if err := rs.device(rs.reg.devices[name]); err != nil {
					return true, err
				}
			}
		}
		if !matched {
			return true, fmt.Errorf("no device matches %q; rex device list shows the devices", w)
		}
		return true, nil
	}
	if strings.ContainsAny(w, "@.:") {
		return true, rs.adhoc(w, w)
	}
	return false, nil
}

func (rs *resolver) device(d Device) error {
	user, host, port, err := d.Endpoint()
	if err != nil {
		return fmt.Errorf("device %q cannot be used: %w; fix it in devices.json or with rex device add %s [USER@]HOST --force", d.Name, err, d.Name)
	}
	key, err := ExpandKeyPath(d.SSHKey, rs.home)
	if err != nil {
		return fmt.Errorf("device %q: %w", d.Name, err)
	}
	d = d.clone()
	return rs.add(Target{Name: d.Name, Kind: KindDevice, User: user, Host: host, Port: port, KeyPath: key, Device: &d})
}

func (rs *resolver) adhoc(item, spec string) error {
	user, host, port, err := ParseHost(spec)
	if err != nil {
		return fmt.Errorf("target %q: %w", item, err)
	}
	return rs.add(Target{Name: FormatAddr(user, host, port), Kind: KindAdhoc, User: user, Host: host, Port: port})
}

func (rs *resolver) candidates() []string {
	c := []string{All, Local}
	c = append(c, sortedKeys(rs.reg.devices)...)
	return append(c, sortedKeys(rs.reg.groups)...)
}

// isBracketedIPv6 reports [user@][addr]... where addr holds a ':', which
// tells an IPv6 literal from a range or a glob class.
func isBracketedIPv6(item string) bool {
	rest := item[strings.LastIndexByte(item, '@')+1:]
	if !strings.HasPrefix(rest, "[") {
		return false
	}
	end := strings.IndexByte(rest, ']')
	return end > 0 && strings.Contains(rest[1:end], ":")
}

// splitTargets splits at commas outside brackets and drops empty items.
func splitTargets(s string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	flush := func(end int) {
		if it := strings.TrimSpace(s[start:end]); it != "" {
			items = append(items, it)
		}
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				flush(i)
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("targets %q: '[' has no matching ']'; close every range as in node[1-4]", s)
	}
	flush(len(s))
	return items, nil
}

// expandRanges expands every numeric bracket ([1-3], [01-10], [1,3,5-7])
// in word into the cartesian product of names. Other brackets are glob
// character classes and are kept as written.
func expandRanges(word string, limit int) ([]string, error) {
	out := []string{""}
	appendAll := func(s string) {
		for i := range out {
			out[i] += s
		}
	}
	for i := 0; i < len(word); {
		j := strings.IndexByte(word[i:], '[')
		if j < 0 {
			appendAll(word[i:])
			break
		}
		j += i
		appendAll(word[i:j])
		k := strings.IndexByte(word[j:], ']')
		if k < 0 {
			return nil, errors.New("'[' has no matching ']'; close every range as in node[1-4]")
		}
		k += j
		vals, isRange, err := rangeValues(word[j+1:k], limit)
		if err != nil {
			return nil, err
		}
		if !isRange {
			appendAll(word[j : k+1])
		} else {
			if len(out)*len(vals) > limit {
				return nil, fmt.Errorf("it expands to more than %d names; narrow the ranges", limit)
			}
			next := make([]string, 0, len(out)*len(vals))
			for _, o := range out {
				for _, v := range vals {
					next = append(next, o+v)
				}
			}
			out = next
		}
		i = k + 1
	}
	return out, nil
}

// rangeValues parses the inside of a numeric range. isRange is false when
// body is not one (then it is a glob character class).
func rangeValues(body string, limit int) (vals []string, isRange bool, err error) {
	if body == "" {
		return nil, false, nil
	}
	parts := strings.Split(body, ",")
	for _, p := range parts {
		lo, hi, isSpan := strings.Cut(p, "-")
		if !isDigits(lo) || isSpan && !isDigits(hi) {
			return nil, false, nil
		}
	}
	for _, p := range parts {
		lo, hi, isSpan := strings.Cut(p, "-")
		if !isSpan {
			hi = lo
		}
		a, _ := strconv.Atoi(lo) // isDigits bounds the length: no overflow
		b, _ := strconv.Atoi(hi)
		if a > b {
			return nil, true, fmt.Errorf("the range [%s] runs backwards; write [%s-%s]", p, hi, lo)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		if len(vals)+(b-a+1) > limit {
			return nil, true, fmt.Errorf("it expands to more than %d names; narrow the ranges", limit)
		}
		for n := a; n <= b; n++ {
			vals = append(vals, fmt.Sprintf("%0*d", width, n))
		}
	}
	return vals, true, nil
}

func isDigits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// suggest returns up to three candidates closest to name by edit distance
// (with transpositions, ignoring case), plus those it is a prefix of.
func suggest(name string, candidates []string) []string {
	if name == "" || len(name) > 4*maxName {
		return nil
	}
	maxD := min(max(len(name)/3, 1), 3)
	lname := strings.ToLower(name)
	type scored struct {
		s string
		d int
	}
	var best []scored
	for _, c := range candidates {
		lc := strings.ToLower(c)
		var d int
		switch {
		case len(lname) >= 3 && strings.HasPrefix(lc, lname):
			d = maxD
		case abs(len(lc)-len(lname)) > maxD:
			continue
		default:
			d = EditDistance(lname, lc)
		}
		if d <= maxD {
			best = append(best, scored{c, d})
		}
	}
	// Insertion sort: the list is short and this keeps ties in name order.
	for i := 1; i < len(best); i++ {
		for j := i; j > 0 && (best[j].d < best[j-1].d || best[j].d == best[j-1].d && best[j].s < best[j-1].s); j-- {
			best[j], best[j-1] = best[j-1], best[j]
		}
	}
	var out []string
	for _, b := range best {
		if len(out) == 3 {
			break
		}
		out = append(out, b.s)
	}
	return out
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// EditDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and adjacent transpositions, on bytes.
func EditDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
