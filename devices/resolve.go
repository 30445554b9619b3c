package devices

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
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
	// Group is the group TARGETS chose this target through ("all" for
	// all), "" when it was named on its own.
	Group string
	// Folded names the targets written after this one that reach the
	// same machine as the same user (see ResolveWith), in the order
	// written: they were left out, so that it runs there once.
	Folded []string
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

// ResolveOptions are what Resolve reads besides the registry.
type ResolveOptions struct {
	// Aliases lists the explicit Host aliases of the operator's ssh_config;
	// it is called only when a bare word names no device or group. Nil
	// means none.
	Aliases func() []string
	// ReadFile reads a ^FILE host list; nil reads the file system (at most
	// MaxHostFile bytes).
	ReadFile func(name string) ([]byte, error)
	// Port is the port ssh_config gives host (0 when it gives none), for a
	// target whose port is unset: folding and exclusions compare the port
	// rex will dial, which is 22 only when ssh_config sets no other. Nil
	// means none is set anywhere.
	Port func(host string) int
	// HostName is the host name ssh_config gives host ("" when it gives
	// none): an alias with HostName 10.0.0.2 reaches the machine a device
	// at 10.0.0.2 does. Nil means none is set anywhere.
	HostName func(host string) string
	// User is who rex logs in as on host for a target that names no user:
	// ssh_config's User, else the local user ("" when unknown), so that
	// host and root@host are one login when that is root. Nil leaves an
	// unset user a login of its own.
	User func(host string) string
}

// MaxHostFile bounds a ^FILE host list.
const MaxHostFile = 1 << 20

// Resolve is ResolveWith without ssh_config aliases.
func (r *Registry) Resolve(targets string) ([]Target, error) {
	return r.ResolveWith(targets, ResolveOptions{})
}

// ResolveWith turns a TARGETS list into targets, in the order written,
// without duplicates. The list is comma-separated (commas inside [...]
// belong to a range); spaces around items and empty items are ignored.
// Each item is:
//
//   - "local": this machine; "all": every device, sorted by name;
//   - a device name, or a group name (its members, in group order);
//   - a range, expanded first: node[1-16], node[01-16] (zero-padded to the
//     width of the first bound), n[1,3,5-7], rack[1-2]-n[1-3];
//   - a glob over device names: web-*, db?, web[ab]; it must match one;
//   - an ad-hoc host: [user@]host[:port] or [user@][ipv6]:port, or
//     ssh://[user@]host[:port] for any host name (ranges expand in it);
//   - an explicit Host alias of ssh_config (opts.Aliases), by its bare name;
//   - ^FILE: the lines of FILE, one item each ('#' starts a comment), where
//     a bare word that names nothing is a host name (in an exclusion, only
//     when a chosen target has that name; otherwise it is unknown);
//   - !ITEM: an exclusion. Whatever ITEM names (a glob: whatever target it
//     matches by name; an address: every target that would connect there)
//     is left out of the list, wherever the exclusion is written, and so
//     is every other name of a machine it leaves out (the names folding
//     would run once; two registered devices stay two).
//
// A device or group name always wins, then an ssh_config alias. Otherwise a
// word that contains '@', '.' or ':' (so every IP address) is an ad-hoc
// host, and a bare word is an unknown name: an error that suggests the
// closest names, since a typo of a device name must not turn into a
// connection to some other machine (nor a typo in an exclusion into a run
// on the machine meant to be left out). A bare host that is neither
// registered nor an alias is written ssh://host.
//
// Names produced by a range follow the same rule word by word: node[1-3]
// needs devices node1..node3, while root@node[1-3] or node[1-3].lan are
// three ad-hoc hosts. A range that yields unregistered bare names fails,
// listing them.
//
// Every target chosen through a group (or all) carries that group's name.
func (r *Registry) ResolveWith(targets string, opts ResolveOptions) ([]Target, error) {
	items, err := splitTargets(targets)
	if err != nil {
		return nil, fmt.Errorf("targets %q: %w", targets, err)
	}
	if len(items) == 0 {
		return nil, errors.New("no targets given; name a device, a group, all or local")
	}
	home, _ := os.UserHomeDir()
	rs := resolver{reg: r, home: home, opts: opts, seen: map[string]bool{}}
	var excludes []string
	for _, item := range items {
		if ex, ok := strings.CutPrefix(item, "!"); ok {
			if ex = strings.TrimSpace(ex); ex == "" {
				return nil, errors.New(`"!" names nothing to leave out; write !NAME, !GLOB or !^FILE`)
			}
			excludes = append(excludes, ex)
			continue
		}
		if err := rs.item(item); err != nil {
			return nil, err
		}
	}
	if len(excludes) == 0 {
		return rs.fold(rs.out), nil
	}
	if len(rs.out) == 0 {
		return nil, errors.New("the targets only leave machines out; name what to run on too, as in all,!web3")
	}
	drop, named, err := rs.excluded(excludes)
	if err != nil {
		return nil, err
	}
	// A machine left out under one name is left out under every name
	// that reaches it as the same login (what folding would run once):
	// `web2,root@10.0.0.2,!web2` leaves the machine out, as the operator
	// meant, rather than running there under its other name. Two
	// registered devices stay apart here as in folding.
	droppedAny, droppedAdhoc := map[string]bool{}, map[string]bool{}
	for _, t := range append(named, rs.out...) {
		if k := rs.machineKey(t); k != "" && drop(t) {
			droppedAny[k] = true
			if t.Kind != KindDevice {
				droppedAdhoc[k] = true
			}
		}
	}
	kept := rs.out[:0:0]
	for _, t := range rs.out {
		if drop(t) {
			continue
		}
		if k := rs.machineKey(t); k != "" && (t.Kind == KindDevice && droppedAdhoc[k] || t.Kind != KindDevice && droppedAny[k]) {
			continue
		}
		kept = append(kept, t)
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("the exclusions leave out every one of the %d targets; nothing would run", len(rs.out))
	}
	return rs.fold(kept), nil
}

// port is the port rex dials t on: its own, else ssh_config's for its
// host (opts.Port), else 22.
func (rs *resolver) port(t Target) int {
	if t.Port != 0 {
		return t.Port
	}
	if rs.opts.Port != nil {
		if p := rs.opts.Port(t.Host); p > 0 {
			return p
		}
	}
	return 22
}

// hostName is the host rex dials for t: ssh_config's HostName for its
// host (opts.HostName), else its host, in lower case.
func (rs *resolver) hostName(t Target) string {
	if rs.opts.HostName != nil {
		if h := rs.opts.HostName(t.Host); h != "" {
			return strings.ToLower(h)
		}
	}
	return strings.ToLower(t.Host)
}

// user is who rex logs in as on t: its own user, else the one ssh_config
// or the local account gives (opts.User), else "" (unknown).
func (rs *resolver) user(t Target) string {
	if t.User == "" && rs.opts.User != nil {
		return rs.opts.User(t.Host)
	}
	return t.User
}

// machineKey says which machine and login t reaches: its user (see user),
// host name (see hostName), port (see port), jump host and, for a device
// with "become", sudo user. It is "" for local. An unset user that no
// lookup fills is not any user: host and root@host have two keys.
func (rs *resolver) machineKey(t Target) string {
	if t.Kind == KindLocal {
		return ""
	}
	key := rs.user(t) + "\x00" + rs.hostName(t) + "\x00" + strconv.Itoa(rs.port(t))
	if t.Device != nil {
		if j, ok := t.Device.extra["jump"]; ok {
			key += "\x00jump:" + string(j)
		}
		if t.Device.Become {
			key += "\x00sudo:" + t.Device.SudoUser()
		}
	}
	return key
}

// fold keeps one target per machine and login (machineKey): of the
// targets with one key, the first written stays and lists the others in
// Folded. Two registered devices are both kept, as Ansible keeps two
// inventory hosts with one address: the operator registered both (as
// containers behind one address, say).
func (rs *resolver) fold(ts []Target) []Target {
	first := map[string]int{}
	out := ts[:0:0]
	for _, t := range ts {
		key := rs.machineKey(t)
		if key == "" {
			out = append(out, t)
			continue
		}
		if i, ok := first[key]; ok && !(out[i].Kind == KindDevice && t.Kind == KindDevice) {
			out[i].Folded = append(out[i].Folded, t.Name)
			continue
		}
		if _, ok := first[key]; !ok {
			first[key] = len(out)
		}
		out = append(out, t)
	}
	return out
}

// FoldNotes says, one line per target that others were folded into, which
// names reached the same machine and that the command runs there once.
func FoldNotes(ts []Target) []string {
	var notes []string
	for _, t := range ts {
		if len(t.Folded) == 0 {
			continue
		}
		verb := "reaches"
		if len(t.Folded) > 1 {
			verb = "reach"
		}
		as := t.Name
		if addr := t.Addr(); addr != t.Name {
			as += " (" + addr + ")"
		}
		notes = append(notes, fmt.Sprintf("%s %s the same machine as %s; it runs there once, as %s", orAndList(t.Folded), verb, as, t.Name))
	}
	return notes
}

// orAndList joins "a", "a and b", "a, b and c".
func orAndList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

type resolver struct {
	reg  *Registry
	home string
	opts ResolveOptions
	out  []Target
	seen map[string]bool

	group    string // the group being expanded, for Target.Group
	hostFile bool   // reading a ^FILE: bare words are host names
	// excluding: resolving exclusions, where an empty group (a drain
	// group with nobody in it right now) leaves nothing out, and a bare
	// word in a host file must name something (chosen holds the names of
	// the targets chosen), so that a typo never keeps a machine in.
	excluding bool
	chosen    map[string]bool
	aliases   map[string]bool
}

func (rs *resolver) add(t Target) error {
	key := string(t.Kind) + "\x00" + t.Name
	if rs.seen[key] {
		return nil
	}
	if len(rs.out) >= MaxTargets {
		return fmt.Errorf("the targets name more than %d machines; narrow the list", MaxTargets)
	}
	t.Group = rs.group
	rs.seen[key] = true
	rs.out = append(rs.out, t)
	return nil
}

// excluded resolves the exclusions into a predicate over targets. The name
// of a chosen target excludes it; a glob matches the names of the targets
// chosen; anything else resolves as a target would, with the same rules
// (an unknown name is an error), into named.
func (rs *resolver) excluded(items []string) (drop func(Target) bool, named []Target, err error) {
	chosen := map[string]bool{}
	for _, t := range rs.out {
		chosen[t.Name] = true
	}
	sub := resolver{reg: rs.reg, home: rs.home, opts: rs.opts, seen: map[string]bool{}, excluding: true, chosen: chosen}
	byName := map[string]bool{}
	var globs []string
	var addrs []Target
	for _, item := range items {
		if chosen[item] {
			// The name of a target in the list (a host from a ^FILE, say);
			// when it is a host, it is an address too.
			byName[item] = true
			for _, t := range rs.out {
				if t.Name == item && t.Kind == KindAdhoc {
					addrs = append(addrs, t)
				}
			}
			continue
		}
		if isGlob(item) {
			if rest, ok := strings.CutPrefix(item, "ssh://"); ok {
				// Names carry no scheme: this glob would leave nothing out.
				return nil, nil, fmt.Errorf("!%s: a pattern matches the names of the chosen targets, which carry no ssh://; write !%s", item, rest)
			}
			if _, err := path.Match(item, ""); err != nil {
				return nil, nil, fmt.Errorf("!%s is not a valid pattern; use * and ? as wildcards and [a-z] for one character of a set", item)
			}
			globs = append(globs, item)
			continue
		}
		if err := sub.item(item); err != nil {
			return nil, nil, fmt.Errorf("!%s: %w", item, err)
		}
	}
	// A machine left out by its address ([user@]host[:port], pdsh's and
	// clush's habit) is left out under any name that reaches it.
	for _, x := range sub.out {
		if x.Kind == KindAdhoc {
			addrs = append(addrs, x)
		}
	}
	return func(t Target) bool {
		if byName[t.Name] || sub.seen[string(t.Kind)+"\x00"+t.Name] {
			return true
		}
		for _, a := range addrs {
			if rs.atAddress(a, t) {
				return true
			}
		}
		for _, g := range globs {
			if ok, _ := path.Match(g, t.Name); ok {
				return true
			}
		}
		return false
	}, sub.out, nil
}

// atAddress reports whether the target t is at the address a names: the
// same host as dialed (see hostName), and the user and port a gives when
// it gives them (t's being the ones rex dials, see user and port).
func (rs *resolver) atAddress(a, t Target) bool {
	if t.Kind == KindLocal || rs.hostName(a) != rs.hostName(t) {
		return false
	}
	if a.User != "" && a.User != rs.user(t) {
		return false
	}
	return a.Port == 0 || a.Port == rs.port(t)
}

// isGlob reports an item with wildcards that are not numeric ranges.
func isGlob(item string) bool {
	if strings.ContainsAny(item, "*?") {
		return true
	}
	words, err := expandRanges(item, MaxTargets)
	return err == nil && len(words) == 1 && strings.Contains(words[0], "[") && !isBracketedIPv6(item)
}

func (rs *resolver) item(item string) error {
	switch {
	case strings.HasPrefix(item, "^"):
		return rs.hostList(item[1:])
	case item == Local:
		return rs.add(Target{Name: Local, Kind: KindLocal})
	case item == All:
		if len(rs.reg.devices) == 0 {
			return errors.New(`"all" names no device because none is registered; add one with rex device add NAME [USER@]HOST`)
		}
		defer rs.inGroup(All)()
		for _, name := range sortedKeys(rs.reg.devices) {
			if err := rs.device(rs.reg.devices[name]); err != nil {
				return err
			}
		}
		return nil
	case strings.HasPrefix(item, "ssh://"):
		spec := strings.TrimSuffix(strings.TrimPrefix(item, "ssh://"), "/")
		if isBracketedIPv6(spec) {
			return rs.adhoc(item, spec)
		}
		// ssh://node[1-3] is three hosts, as root@node[1-3] is.
		words, err := expandRanges(spec, MaxTargets)
		if err != nil {
			return fmt.Errorf("target %q: %w", item, err)
		}
		for _, w := range words {
			if err := rs.adhoc(item, w); err != nil {
				return err
			}
		}
		return nil
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
		return fmt.Errorf("%s expands to names that are not devices or groups (%s); register them with rex device add, or write hosts as user@%s or ssh://%s",
			item, Fold(unknown), item, item)
	}
}

// inGroup marks the targets added until the returned func runs as chosen
// through group (the outermost group wins).
func (rs *resolver) inGroup(group string) func() {
	if rs.group != "" {
		return func() {}
	}
	rs.group = group
	return func() { rs.group = "" }
}

// hostList adds the items of a ^FILE, one per line.
func (rs *resolver) hostList(name string) error {
	if rs.hostFile {
		return fmt.Errorf("^%s: a host file cannot name another (^) host file", name)
	}
	if name == "" {
		return errors.New(`"^" names no file; write ^FILE, as in ^hosts.txt`)
	}
	file := name
	if rest, ok := strings.CutPrefix(file, "~/"); ok {
		if rs.home == "" {
			return fmt.Errorf("^%s: the home directory is unknown; give the file's full path", name)
		}
		file = filepath.Join(rs.home, rest)
	}
	read := rs.opts.ReadFile
	if read == nil {
		read = readHostFile
	}
	data, err := read(file)
	if err != nil {
		return fmt.Errorf("read the host list ^%s: %w", name, unwrapPathError(err))
	}
	rs.hostFile = true
	defer func() { rs.hostFile = false }()
	for n, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		items, err := splitTargets(line)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, n+1, err)
		}
		for _, item := range items {
			if strings.HasPrefix(item, "!") {
				return fmt.Errorf("%s:%d: a host file lists hosts; write exclusions (!%s) on the command line", name, n+1, item[1:])
			}
			if err := rs.item(item); err != nil {
				return fmt.Errorf("%s:%d: %w", name, n+1, err)
			}
		}
	}
	return nil
}

// readHostFile reads a host list of at most MaxHostFile bytes.
func readHostFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() && st.Mode()&os.ModeNamedPipe == 0 {
		return nil, fmt.Errorf("%s is not a file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxHostFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxHostFile {
		return nil, fmt.Errorf("it is larger than %d bytes", MaxHostFile)
	}
	return data, nil
}

// unwrapPathError drops the path from an *os.PathError, which the caller
// names already.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// word resolves one name after range expansion. It reports false for a
// bare word that names nothing.
func (rs *resolver) word(w string) (bool, error) {
	if d, ok := rs.reg.devices[w]; ok {
		return true, rs.device(d)
	}
	if members, ok := rs.reg.groups[w]; ok {
		if len(members) == 0 {
			if rs.excluding {
				return true, nil
			}
			return true, fmt.Errorf("group %q has no devices; add some with rex device group add %s DEVICE...", w, w)
		}
		defer rs.inGroup(w)()
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
	if rs.alias(w) || rs.hostFile && (!rs.excluding || rs.chosen[w]) {
		// An ssh_config alias, or a host name in a host file: ssh_config
		// applies to it as to `ssh w`. In an exclusion's host file, only
		// the name of a chosen host is one: anything else may be a typo
		// of the machine meant to be left out.
		return true, rs.adhoc(w, w)
	}
	return false, nil
}

// alias reports whether w is an explicit Host alias of ssh_config.
func (rs *resolver) alias(w string) bool {
	if rs.aliases == nil {
		rs.aliases = map[string]bool{}
		if rs.opts.Aliases != nil {
			for _, a := range rs.opts.Aliases() {
				rs.aliases[a] = true
			}
		}
	}
	return rs.aliases[w]
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
	c = append(c, sortedKeys(rs.reg.groups)...)
	rs.alias("")
	return append(c, sortedKeys(rs.aliases)...)
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

// ExpandNames reads a list of names as TARGETS writes it, for the verbs
// that take several device names: comma-separated (commas inside [...]
// belong to a range), spaces around an item and empty items dropped, and
// numeric ranges expanded (web[1-4], n[01-10], n[1,3,5-7]). It reads
// names only: whatever else an item is (a glob, a group, an address) stays
// as written, for the caller to look up and refuse.
func ExpandNames(list string) ([]string, error) {
	items, err := splitTargets(list)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", list, err)
	}
	var out []string
	for _, item := range items {
		words, err := expandRanges(item, MaxTargets)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", item, err)
		}
		if len(out)+len(words) > MaxTargets {
			return nil, fmt.Errorf("%s names more than %d names; narrow the ranges", list, MaxTargets)
		}
		out = append(out, words...)
	}
	return out, nil
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
		return nil, errors.New("'[' has no matching ']'; close every range as in node[1-4]")
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
