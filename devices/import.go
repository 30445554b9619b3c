package devices

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Inventory is what an import found: devices and groups, in the order
// the source lists them.
type Inventory struct {
	Devices []Device
	Groups  []Group
	// Skipped says what was left out and why, one line each.
	Skipped []string
}

// SetExtra sets a field rex does not interpret (such as "jump") to a JSON
// value.
func (d *Device) SetExtra(key string, v json.RawMessage) {
	if d.extra == nil {
		d.extra = map[string]json.RawMessage{}
	}
	d.extra[key] = slices.Clone(v)
}

// maxImport bounds the hosts one import may produce.
const maxImport = MaxTargets

// FromSSHConfig turns the explicit Host aliases of an ssh_config into
// devices. With viaAlias, each device's host is the alias itself, so the
// file keeps applying when rex connects, as with `ssh ALIAS` (for the
// operator's own ~/.ssh/config); otherwise HostName, User, Port,
// IdentityFile and ProxyJump are copied into the device.
func FromSSHConfig(c *SSHConfig, viaAlias bool) (Inventory, error) {
	var inv Inventory
	for _, alias := range c.Aliases() {
		if err := ValidateName(alias); err != nil {
			inv.Skipped = append(inv.Skipped, fmt.Sprintf("Host %s: %v", alias, err))
			continue
		}
		if viaAlias {
			d, err := NewDevice(alias, alias, 0, "", "")
			if err != nil {
				inv.Skipped = append(inv.Skipped, fmt.Sprintf("Host %s: %v", alias, err))
				continue
			}
			inv.Devices = append(inv.Devices, d)
			continue
		}
		host := c.Get(alias, "HostName")
		if host == "" {
			host = alias
		}
		host, ok := expandHostToken(host, alias)
		if !ok {
			inv.Skipped = append(inv.Skipped, fmt.Sprintf("Host %s: HostName %q uses %% tokens rex cannot fill in", alias, c.Get(alias, "HostName")))
			continue
		}
		spec := host
		if u := c.Get(alias, "User"); u != "" {
			spec = u + "@" + host
		}
		if strings.Contains(host, ":") {
			spec = strings.TrimSuffix(spec, host) + "[" + host + "]"
		}
		port := 0
		if p := c.Get(alias, "Port"); p != "" {
			n, err := ParsePort(p)
			if err != nil {
				inv.Skipped = append(inv.Skipped, fmt.Sprintf("Host %s: %v", alias, err))
				continue
			}
			port = n
		}
		key, err := c.identityFile(alias, host, port)
		if err != nil {
			inv.Skipped = append(inv.Skipped, fmt.Sprintf("Host %s: %v", alias, err))
			continue
		}
		d, err := NewDevice(alias, spec, port, key, "")
		if err != nil {
			inv.Skipped = append(inv.Skipped, fmt.Sprintf("Host %s: %v", alias, err))
			continue
		}
		if j := c.Get(alias, "ProxyJump"); j != "" && !strings.EqualFold(j, "none") {
			b, _ := json.Marshal(j)
			d.SetExtra("jump", b)
		}
		inv.Devices = append(inv.Devices, d)
	}
	return inv, nil
}

// expandHostToken fills %h (the alias) and %% in a HostName; other tokens
// make it unusable here.
func expandHostToken(v, alias string) (string, bool) {
	out, err := expandTokens(v, map[byte]func() (string, error){'h': func() (string, error) { return alias, nil }})
	return out, err == nil
}

// identityFile is alias's IdentityFile with the tokens OpenSSH fills in
// there: %d (the local home; a leading "%d/" is kept as "~/", which rex
// expands the same way, so that the registry stays portable), %u (the
// local user), %h (the HostName, host), %n (the alias), %r (the remote
// user: User, else the local user), %p (the port, 22 when unset) and %%.
func (c *SSHConfig) identityFile(alias, host string, port int) (string, error) {
	v := c.Get(alias, "IdentityFile")
	if !strings.Contains(v, "%") {
		return v, nil
	}
	local := func() (string, error) {
		u, err := user.Current()
		if err != nil || u.Username == "" {
			return "", errors.New("names the local user, who is unknown here; write the path without %u or %r")
		}
		return u.Username, nil
	}
	remote := func() (string, error) {
		if u := c.Get(alias, "User"); u != "" {
			return u, nil
		}
		return local()
	}
	if port == 0 {
		port = 22
	}
	in := v
	if rest, ok := strings.CutPrefix(v, "%d/"); ok {
		in = "~/" + rest
	}
	out, err := expandTokens(in, map[byte]func() (string, error){
		'd': func() (string, error) {
			if !filepath.IsAbs(c.home) {
				return "", errors.New("names the home directory, which is unknown here; write the full path")
			}
			return c.home, nil
		},
		'u': local,
		'r': remote,
		'h': func() (string, error) { return host, nil },
		'n': func() (string, error) { return alias, nil },
		'p': func() (string, error) { return strconv.Itoa(port), nil },
	})
	if err != nil {
		return "", fmt.Errorf("IdentityFile %q %w", v, err)
	}
	return out, nil
}

// tokenError is a % token expandTokens cannot fill in.
type tokenError struct {
	token byte // 0 for a lone % at the end
	err   error
}

func (e *tokenError) Error() string {
	switch {
	case e.err != nil:
		return e.err.Error()
	case e.token == 0:
		return "ends in a lone %; write %% for a % sign"
	}
	return fmt.Sprintf("uses %%%c, which rex cannot fill in; write the path without it", e.token)
}

// expandTokens fills ssh_config's % tokens in v from vals (a token's
// letter to its value) and %% with '%'. A token vals lacks, or a lone '%'
// at the end, is a *tokenError.
func expandTokens(v string, vals map[byte]func() (string, error)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b.WriteByte(v[i])
			continue
		}
		if i+1 >= len(v) {
			return "", &tokenError{}
		}
		i++
		if v[i] == '%' {
			b.WriteByte('%')
			continue
		}
		fill, ok := vals[v[i]]
		if !ok {
			return "", &tokenError{token: v[i]}
		}
		s, err := fill()
		if err != nil {
			return "", &tokenError{token: v[i], err: err}
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// FromHostsFile reads /etc/hosts lines ("ADDRESS NAME [ALIAS...]"): each
// entry becomes a device named NAME reaching ADDRESS. Loopback, multicast
// and the localhost and ip6-* names are left out.
func FromHostsFile(data []byte) (Inventory, error) {
	var inv Inventory
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 {
			return inv, fmt.Errorf("line %d: %q names no host; a hosts file line is ADDRESS NAME [ALIAS...]", n, strings.TrimSpace(line))
		}
		addr, err := netip.ParseAddr(f[0])
		if err != nil {
			return inv, fmt.Errorf("line %d: %q is not an IP address; a hosts file line is ADDRESS NAME [ALIAS...]", n, f[0])
		}
		name := f[1]
		switch {
		case addr.IsLoopback() || addr.IsMulticast() || addr.IsUnspecified() || addr.IsLinkLocalMulticast():
			inv.Skipped = append(inv.Skipped, fmt.Sprintf("line %d: %s is %s", n, name, addrKind(addr)))
			continue
		case name == "localhost" || strings.HasPrefix(name, "localhost.") || strings.HasPrefix(name, "ip6-"):
			inv.Skipped = append(inv.Skipped, fmt.Sprintf("line %d: %s is this machine's own name", n, name))
			continue
		case seen[name]:
			inv.Skipped = append(inv.Skipped, fmt.Sprintf("line %d: %s is listed already", n, name))
			continue
		}
		if len(inv.Devices) >= maxImport {
			return inv, fmt.Errorf("more than %d hosts; import fewer at a time", maxImport)
		}
		spec := addr.String()
		if addr.Is6() {
			spec = "[" + spec + "]"
		}
		d, err := NewDevice(name, spec, 0, "", "")
		if err != nil {
			return inv, fmt.Errorf("line %d: %w", n, err)
		}
		seen[name] = true
		inv.Devices = append(inv.Devices, d)
	}
	return inv, sc.Err()
}

func addrKind(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case a.IsUnspecified():
		return "the unspecified address"
	}
	return "a multicast address"
}

// ansibleInventory collects hosts and groups while an inventory is read.
type ansibleInventory struct {
	hosts    []string
	vars     map[string]map[string]string // host variables
	groups   []string
	members  map[string][]string // direct hosts of a group
	children map[string][]string
	gvars    map[string]map[string]string // group variables
}

func newAnsibleInventory() *ansibleInventory {
	return &ansibleInventory{vars: map[string]map[string]string{}, members: map[string][]string{},
		children: map[string][]string{}, gvars: map[string]map[string]string{}}
}

func (a *ansibleInventory) group(name string) {
	if _, ok := a.members[name]; !ok {
		a.members[name] = nil
		a.groups = append(a.groups, name)
	}
}

func (a *ansibleInventory) host(group, name string, vars map[string]string) error {
	if _, ok := a.vars[name]; !ok {
		if len(a.hosts) >= maxImport {
			return fmt.Errorf("more than %d hosts; import fewer at a time", maxImport)
		}
		a.hosts = append(a.hosts, name)
		a.vars[name] = map[string]string{}
	}
	for k, v := range vars {
		a.vars[name][k] = v
	}
	if group != "" {
		a.group(group)
		if !slices.Contains(a.members[group], name) {
			a.members[group] = append(a.members[group], name)
		}
	}
	return nil
}

// FromAnsibleINI reads an Ansible inventory in INI form: hosts with their
// variables, [group] sections, [group:children] and [group:vars].
func FromAnsibleINI(data []byte) (Inventory, error) {
	a := newAnsibleInventory()
	section, kind := "ungrouped", ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				return Inventory{}, fmt.Errorf("line %d: %q: a section header is [NAME], [NAME:children] or [NAME:vars]", n, line)
			}
			section, kind, _ = strings.Cut(line[1:end], ":")
			if kind != "" && kind != "children" && kind != "vars" {
				return Inventory{}, fmt.Errorf("line %d: [%s:%s]: only :children and :vars follow a group name", n, section, kind)
			}
			a.group(section)
			continue
		}
		switch kind {
		case "vars":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return Inventory{}, fmt.Errorf("line %d: %q: a variable is NAME=VALUE", n, line)
			}
			if a.gvars[section] == nil {
				a.gvars[section] = map[string]string{}
			}
			a.gvars[section][strings.TrimSpace(k)] = unquote(strings.TrimSpace(v))
		case "children":
			child := strings.Fields(line)[0]
			a.group(child)
			a.children[section] = append(a.children[section], child)
		default:
			fields, err := splitINIFields(line)
			if err != nil {
				return Inventory{}, fmt.Errorf("line %d: %w", n, err)
			}
			vars := map[string]string{}
			for _, f := range fields[1:] {
				k, v, ok := strings.Cut(f, "=")
				if !ok {
					return Inventory{}, fmt.Errorf("line %d: %q: host variables are NAME=VALUE", n, f)
				}
				vars[k] = v
			}
			pattern := withAnsiblePort(fields[0], vars)
			names, err := expandAnsible(pattern)
			if err != nil {
				return Inventory{}, fmt.Errorf("line %d: %w", n, err)
			}
			for _, name := range names {
				if err := a.host(section, name, vars); err != nil {
					return Inventory{}, fmt.Errorf("line %d: %w", n, err)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Inventory{}, err
	}
	return a.inventory()
}

// splitINIFields splits a host line at spaces outside quotes.
func splitINIFields(line string) ([]string, error) {
	var out []string
	var cur strings.Builder
	quote := byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && (c == ' ' || c == '\t'):
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		case quote == 0 && c == '#':
			i = len(line)
		default:
			cur.WriteByte(c)
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: a quote is not closed", line)
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q names no host", line)
	}
	return out, nil
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// withAnsiblePort takes the port off a host pattern written
// "host.example.com:5309", as Ansible writes a non-standard SSH port, and
// sets it in vars as ansible_port unless vars sets that already (a
// variable on the same line wins, as in Ansible). A pattern with another
// ':' outside a range (an IPv6 address) is returned as it is.
func withAnsiblePort(pattern string, vars map[string]string) string {
	i := strings.LastIndexByte(pattern, ':')
	if i < 0 || strings.LastIndexByte(pattern, ']') > i {
		return pattern
	}
	host, port := pattern[:i], pattern[i+1:]
	if port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
		return pattern
	}
	depth := 0
	for _, c := range host {
		switch {
		case c == '[':
			depth++
		case c == ']' && depth > 0:
			depth--
		case c == ':' && depth == 0:
			return pattern
		}
	}
	_, ok1 := vars["ansible_port"]
	_, ok2 := vars["ansible_ssh_port"]
	if !ok1 && !ok2 {
		vars["ansible_port"] = port
	}
	return host
}

// expandAnsible expands Ansible's host patterns: www[01:50].lan,
// db-[a:f], n[1:9:2].
func expandAnsible(pattern string) ([]string, error) {
	i := strings.IndexByte(pattern, '[')
	if i < 0 {
		return []string{pattern}, nil
	}
	j := strings.IndexByte(pattern[i:], ']')
	if j < 0 {
		return nil, fmt.Errorf("%q: '[' has no matching ']'", pattern)
	}
	j += i
	parts := strings.Split(pattern[i+1:j], ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("%q: a range is [START:END] or [START:END:STEP]", pattern)
	}
	step := 1
	if len(parts) == 3 {
		s, err := strconv.Atoi(parts[2])
		if err != nil || s < 1 {
			return nil, fmt.Errorf("%q: the step of a range is a positive number", pattern)
		}
		step = s
	}
	var vals []string
	lo, hi := parts[0], parts[1]
	if a, err1 := strconv.Atoi(lo); err1 == nil {
		b, err2 := strconv.Atoi(hi)
		if err2 != nil || b < a || a < 0 {
			return nil, fmt.Errorf("%q: the range runs from a number to a larger one", pattern)
		}
		if (b-a)/step+1 > maxImport {
			return nil, fmt.Errorf("%q expands to more than %d hosts", pattern, maxImport)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		for n := a; n <= b; n += step {
			vals = append(vals, fmt.Sprintf("%0*d", width, n))
		}
	} else if len(lo) == 1 && len(hi) == 1 && lo[0] <= hi[0] && isLetter(lo[0]) && isLetter(hi[0]) {
		for c := int(lo[0]); c <= int(hi[0]); c += step {
			vals = append(vals, string(rune(c)))
		}
	} else {
		return nil, fmt.Errorf("%q: a range is of numbers ([01:20]) or of letters ([a:f])", pattern)
	}
	rest, err := expandAnsible(pattern[j+1:])
	if err != nil {
		return nil, err
	}
	if len(vals)*len(rest) > maxImport {
		return nil, fmt.Errorf("%q expands to more than %d hosts", pattern, maxImport)
	}
	var out []string
	for _, v := range vals {
		for _, r := range rest {
			out = append(out, pattern[:i]+v+r)
		}
	}
	return out, nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// FromAnsibleYAML reads an Ansible inventory in YAML form: groups with
// hosts (and their variables), children and vars, from the top group
// (usually all).
func FromAnsibleYAML(data []byte) (Inventory, error) {
	var top map[string]yaml.Node
	if err := yaml.Unmarshal(data, &top); err != nil {
		return Inventory{}, fmt.Errorf("not a YAML inventory: %w", err)
	}
	a := newAnsibleInventory()
	var walk func(name string, n *yaml.Node, depth int) error
	walk = func(name string, n *yaml.Node, depth int) error {
		if depth > 32 {
			return fmt.Errorf("group %s: groups nest deeper than 32", name)
		}
		a.group(name)
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i].Value, n.Content[i+1]
			switch key {
			case "hosts":
				if val.Kind != yaml.MappingNode {
					continue
				}
				for j := 0; j+1 < len(val.Content); j += 2 {
					vars := scalarMap(val.Content[j+1])
					names, err := expandAnsible(withAnsiblePort(val.Content[j].Value, vars))
					if err != nil {
						return fmt.Errorf("group %s: %w", name, err)
					}
					for _, h := range names {
						if err := a.host(name, h, vars); err != nil {
							return err
						}
					}
				}
			case "children":
				if val.Kind != yaml.MappingNode {
					continue
				}
				for j := 0; j+1 < len(val.Content); j += 2 {
					child := val.Content[j].Value
					a.children[name] = append(a.children[name], child)
					if err := walk(child, val.Content[j+1], depth+1); err != nil {
						return err
					}
				}
			case "vars":
				if a.gvars[name] == nil {
					a.gvars[name] = map[string]string{}
				}
				for k, v := range scalarMap(val) {
					a.gvars[name][k] = v
				}
			}
		}
		return nil
	}
	names := make([]string, 0, len(top))
	for k := range top {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, g := range names {
		n := top[g]
		if err := walk(g, &n, 0); err != nil {
			return Inventory{}, err
		}
	}
	return a.inventory()
}

// scalarMap is a YAML mapping's scalar values.
func scalarMap(n *yaml.Node) map[string]string {
	m := map[string]string{}
	if n == nil || n.Kind != yaml.MappingNode {
		return m
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if v := n.Content[i+1]; v.Kind == yaml.ScalarNode {
			m[n.Content[i].Value] = v.Value
		}
	}
	return m
}

// inventory turns what was read into devices and groups. Variables come
// from the host, then its groups (children's before parents', all last).
func (a *ansibleInventory) inventory() (Inventory, error) {
	var inv Inventory
	// A host's groups, nearest first.
	parents := map[string][]string{}
	for g, cs := range a.children {
		for _, c := range cs {
			parents[c] = append(parents[c], g)
		}
	}
	groupsOf := map[string][]string{}
	for _, g := range a.groups {
		for _, h := range a.members[g] {
			groupsOf[h] = append(groupsOf[h], g)
		}
	}
	lookup := func(host, key string) string {
		if v, ok := a.vars[host][key]; ok {
			return v
		}
		seen := map[string]bool{}
		queue := append([]string(nil), groupsOf[host]...)
		for len(queue) > 0 {
			g := queue[0]
			queue = queue[1:]
			if seen[g] {
				continue
			}
			seen[g] = true
			if v, ok := a.gvars[g][key]; ok {
				return v
			}
			queue = append(queue, parents[g]...)
		}
		return a.gvars["all"][key]
	}
	first := func(host string, keys ...string) string {
		for _, k := range keys {
			if v := lookup(host, k); v != "" {
				return v
			}
		}
		return ""
	}
	ok := map[string]bool{}
	for _, h := range a.hosts {
		if err := ValidateName(h); err != nil {
			inv.Skipped = append(inv.Skipped, fmt.Sprintf("host %s: %v", h, err))
			continue
		}
		addr := first(h, "ansible_host", "ansible_ssh_host")
		if addr == "" {
			addr = h
		}
		if strings.Contains(addr, ":") {
			addr = "[" + addr + "]"
		}
		if u := first(h, "ansible_user", "ansible_ssh_user"); u != "" {
			addr = u + "@" + addr
		}
		port := 0
		if p := first(h, "ansible_port", "ansible_ssh_port"); p != "" {
			n, err := ParsePort(p)
			if err != nil {
				return inv, fmt.Errorf("host %s: ansible_port: %w", h, err)
			}
			port = n
		}
		d, err := NewDevice(h, addr, port, first(h, "ansible_ssh_private_key_file", "ansible_private_key_file"), "")
		if err != nil {
			return inv, fmt.Errorf("host %s: %w", h, err)
		}
		ok[h] = true
		inv.Devices = append(inv.Devices, d)
	}
	// Groups with every host below them, children flattened; Ansible's
	// implicit all and ungrouped are not groups here (all is rex's own).
	var members func(g string, seen map[string]bool) []string
	members = func(g string, seen map[string]bool) []string {
		if seen[g] {
			return nil
		}
		seen[g] = true
		var out []string
		for _, h := range a.members[g] {
			if ok[h] {
				out = append(out, h)
			}
		}
		for _, c := range a.children[g] {
			out = append(out, members(c, seen)...)
		}
		return out
	}
	for _, g := range a.groups {
		if g == "all" || g == "ungrouped" {
			continue
		}
		if err := ValidateName(g); err != nil {
			inv.Skipped = append(inv.Skipped, fmt.Sprintf("group %s: %v", g, err))
			continue
		}
		if err := groupNameIsAddress(g); err != nil {
			inv.Skipped = append(inv.Skipped, fmt.Sprintf("group %s: %v", g, err))
			continue
		}
		var m []string
		for _, h := range members(g, map[string]bool{}) {
			if !slices.Contains(m, h) {
				m = append(m, h)
			}
		}
		if len(m) == 0 {
			inv.Skipped = append(inv.Skipped, fmt.Sprintf("group %s: no hosts", g))
			continue
		}
		inv.Groups = append(inv.Groups, Group{Name: g, Members: m})
	}
	return inv, nil
}

// inventoryNames lists the inventory's device names, then its group names.
func inventoryNames(inv Inventory) []string {
	var out []string
	for _, d := range inv.Devices {
		out = append(out, d.Name)
	}
	for _, g := range inv.Groups {
		out = append(out, g.Name)
	}
	return out
}

// Import adds an inventory to the registry: every device and group, or
// none. A name that is taken already (by a device or a group) fails the
// whole import unless force is set; then devices are replaced (keeping
// what the inventory cannot say) and groups get the inventory's members.
// It returns the names that were replaced.
func (r *Registry) Import(inv Inventory, force bool) (replaced []string, err error) {
	var clashes []string
	names := map[string]string{}
	// Names the registry would refuse together (Web1 beside web1) fail the
	// import before anything is added, as a device and group of one name do.
	folded := map[string]string{}
	for _, n := range inventoryNames(inv) {
		if prev, ok := folded[strings.ToLower(n)]; ok && prev != n {
			return nil, fmt.Errorf("%s and %s are both in the inventory and differ only in case, which rex does not tell apart; rename one", prev, n)
		}
		folded[strings.ToLower(n)] = n
	}
	for _, d := range inv.Devices {
		if prev, dup := names[d.Name]; dup {
			return nil, fmt.Errorf("%s is both a %s and a device in the inventory; rename one", d.Name, prev)
		}
		names[d.Name] = "device"
		if _, ok := r.devices[d.Name]; ok {
			clashes = append(clashes, "device "+d.Name)
		} else if _, ok := r.groups[d.Name]; ok {
			return nil, fmt.Errorf("%s is a group in the registry and a device in the inventory; rename one", d.Name)
		}
	}
	for _, g := range inv.Groups {
		if prev, dup := names[g.Name]; dup {
			return nil, fmt.Errorf("%s is both a %s and a group in the inventory; rename one", g.Name, prev)
		}
		names[g.Name] = "group"
		if _, ok := r.groups[g.Name]; ok {
			clashes = append(clashes, "group "+g.Name)
		} else if _, ok := r.devices[g.Name]; ok {
			return nil, fmt.Errorf("%s is a device in the registry and a group in the inventory; rename one", g.Name)
		}
	}
	if len(clashes) > 0 && !force {
		return nil, &ClashError{Names: clashes}
	}
	for _, d := range inv.Devices {
		if _, err := r.Add(d, force); err != nil {
			return nil, fmt.Errorf("device %s: %w", d.Name, err)
		}
	}
	for _, g := range inv.Groups {
		if _, ok := r.groups[g.Name]; ok {
			r.groups[g.Name] = []string{}
		} else if err := r.CreateGroup(g.Name); err != nil {
			return nil, fmt.Errorf("group %s: %w", g.Name, err)
		}
		if _, _, err := r.AddToGroup(g.Name, g.Members...); err != nil {
			return nil, fmt.Errorf("group %s: %w", g.Name, err)
		}
	}
	return clashes, nil
}

// ClashError lists the names an import would take that exist already.
type ClashError struct{ Names []string }

func (e *ClashError) Error() string {
	shown := e.Names
	more := ""
	if len(shown) > 8 {
		more = fmt.Sprintf(" and %d more", len(shown)-8)
		shown = shown[:8]
	}
	return fmt.Sprintf("%s%s %s in the registry already; nothing was imported; add --force to replace them",
		strings.Join(shown, ", "), more, map[bool]string{true: "is", false: "are"}[len(e.Names) == 1])
}
