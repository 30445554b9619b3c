// Package devices is rex's device registry: the devices.json file of named
// machines and groups, its safe editing by many processes at once, and the
// resolution of TARGETS lists ("web1,db-*,node[1-4],root@10.0.0.9") into
// concrete targets.
//
// The file is one operators also edit by hand, share and keep in dotfiles:
// any file in the documented shape loads, fields rex does not know survive
// every save, a malformed file is reported with its line and column and is
// never rewritten, and saves are atomic under an inter-process lock.
package devices

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Registry is an in-memory snapshot of devices.json. Load one with
// Store.Load (read-only) or change the file with Store.Update. A Registry
// is not safe for concurrent mutation; readers may share one that is no
// longer being changed.
type Registry struct {
	devices map[string]Device
	groups  map[string][]string
	// extra keeps unknown top-level fields verbatim.
	extra map[string]json.RawMessage
}

// Group is a named list of device names, in the order they were added.
type Group struct {
	Name    string
	Members []string
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{
		devices: map[string]Device{},
		groups:  map[string][]string{},
		extra:   map[string]json.RawMessage{},
	}
}

// Devices returns every device, sorted by name.
func (r *Registry) Devices() []Device {
	out := make([]Device, 0, len(r.devices))
	for _, name := range sortedKeys(r.devices) {
		out = append(out, r.devices[name].clone())
	}
	return out
}

// Device returns the named device.
func (r *Registry) Device(name string) (Device, bool) {
	d, ok := r.devices[name]
	return d.clone(), ok
}

// Lookup returns the named device, or an *UnknownError that suggests the
// closest device names.
func (r *Registry) Lookup(name string) (Device, error) {
	d, ok := r.devices[name]
	if !ok {
		return Device{}, r.unknownDevice(name)
	}
	return d.clone(), nil
}

// LookupGroup returns the named group, or an *UnknownError that suggests
// the closest group names.
func (r *Registry) LookupGroup(name string) (Group, error) {
	m, ok := r.groups[name]
	if !ok {
		return Group{}, r.unknownGroup(name)
	}
	return Group{Name: name, Members: slices.Clone(m)}, nil
}

// Groups returns every group, sorted by name.
func (r *Registry) Groups() []Group {
	out := make([]Group, 0, len(r.groups))
	for _, name := range sortedKeys(r.groups) {
		out = append(out, Group{Name: name, Members: slices.Clone(r.groups[name])})
	}
	return out
}

// Group returns the named group.
func (r *Registry) Group(name string) (Group, bool) {
	m, ok := r.groups[name]
	return Group{Name: name, Members: slices.Clone(m)}, ok
}

// GroupsOf returns the names of the groups that list device, sorted.
func (r *Registry) GroupsOf(device string) []string {
	var out []string
	for _, name := range sortedKeys(r.groups) {
		if slices.Contains(r.groups[name], device) {
			out = append(out, name)
		}
	}
	return out
}

// Names returns every device and group name, sorted; useful for completion.
func (r *Registry) Names() []string {
	out := append(sortedKeys(r.devices), sortedKeys(r.groups)...)
	sort.Strings(out)
	return out
}

// Add registers d. An existing device of that name is an error unless
// force is set; a forced replace keeps the old entry's unknown fields,
// since the command line cannot set them and must not lose them.
func (r *Registry) Add(d Device, force bool) (replaced bool, err error) {
	if err := d.Validate(); err != nil {
		return false, err
	}
	if _, ok := r.groups[d.Name]; ok {
		return false, fmt.Errorf("%q is already a group name; choose another name for the device", d.Name)
	}
	if err := r.caseClash(d.Name); err != nil {
		return false, err
	}
	old, exists := r.devices[d.Name]
	if exists && !force {
		return false, fmt.Errorf("device %q already exists (%s); add --force to replace it", d.Name, old.Addr())
	}
	d = d.clone()
	if exists {
		merged := maps.Clone(old.extra)
		if merged == nil {
			merged = map[string]json.RawMessage{}
		}
		maps.Copy(merged, d.extra)
		d.extra = merged
		// What `device add` cannot say stays as it was.
		if d.Roots == nil {
			d.Roots = slices.Clone(old.Roots)
		}
		if !d.Become && d.BecomeUser == "" {
			d.Become, d.BecomeUser = old.Become, old.BecomeUser
		}
	}
	r.devices[d.Name] = d
	return exists, nil
}

// groupNameIsAddress refuses a group named like an IP address: rex run
// with that word would reach the group, not the address.
func groupNameIsAddress(name string) error {
	if _, err := netip.ParseAddr(name); err == nil {
		return fmt.Errorf("the name %q is an IP address, so rex run %s would reach this group's devices instead of that address; choose a name that is not an address", name, name)
	}
	return nil
}

// caseClash refuses a new name that equals a device or group name but for
// case: "Web1" beside "web1" would read as one machine (ssh matches hosts
// regardless of case, and so do the reserved words). Lookups stay exact,
// so a registry written by hand with such names still works.
func (r *Registry) caseClash(name string) error {
	if n := caseTwin(r.devices, name); n != "" {
		return fmt.Errorf("the device %q exists and differs from %q only in case; use %s, or choose a name that differs in more than case", n, name, n)
	}
	if n := caseTwin(r.groups, name); n != "" {
		return fmt.Errorf("the group %q exists and differs from %q only in case; use %s, or choose a name that differs in more than case", n, name, n)
	}
	return nil
}

// caseTwin returns the smallest key of m that equals name but for case
// and is not name itself, or "".
func caseTwin[V any](m map[string]V, name string) string {
	found := ""
	for n := range m {
		// Names are ASCII (ValidateName): equal but for case means equal
		// length, a cheap test before EqualFold.
		if len(n) == len(name) && n != name && strings.EqualFold(n, name) && (found == "" || n < found) {
			found = n
		}
	}
	return found
}

// Remove unregisters a device and drops it from every group. It returns
// the groups it was removed from, sorted.
func (r *Registry) Remove(name string) (fromGroups []string, err error) {
	if _, ok := r.devices[name]; !ok {
		return nil, r.unknownDevice(name)
	}
	delete(r.devices, name)
	for _, g := range sortedKeys(r.groups) {
		if members := r.groups[g]; slices.Contains(members, name) {
			r.groups[g] = slices.DeleteFunc(members, func(m string) bool { return m == name })
			fromGroups = append(fromGroups, g)
		}
	}
	return fromGroups, nil
}

// CreateGroup adds an empty group.
func (r *Registry) CreateGroup(name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if _, ok := r.groups[name]; ok {
		return fmt.Errorf("group %q already exists; add devices to it with rex device group add %s DEVICE...", name, name)
	}
	if _, ok := r.devices[name]; ok {
		return fmt.Errorf("%q is already a device name; choose another name for the group", name)
	}
	if err := groupNameIsAddress(name); err != nil {
		return err
	}
	if err := r.caseClash(name); err != nil {
		return err
	}
	r.groups[name] = []string{}
	return nil
}

// DeleteGroup removes a group; its devices stay registered. It returns the
// members it had.
func (r *Registry) DeleteGroup(name string) (members []string, err error) {
	m, ok := r.groups[name]
	if !ok {
		return nil, r.unknownGroup(name)
	}
	delete(r.groups, name)
	return m, nil
}

// AddToGroup appends devices to a group. Every name must be a registered
// device, or nothing changes. Devices already in the group are reported in
// already and left where they are.
func (r *Registry) AddToGroup(group string, names ...string) (added, already []string, err error) {
	members, ok := r.groups[group]
	if !ok {
		return nil, nil, r.unknownGroup(group)
	}
	if len(names) == 0 {
		return nil, nil, errors.New("no devices given; name at least one device to add")
	}
	if err := r.CheckDevices(names...); err != nil {
		return nil, nil, err
	}
	for _, n := range names {
		switch {
		case slices.Contains(added, n) || slices.Contains(already, n):
			// named twice on one command line
		case slices.Contains(members, n):
			already = append(already, n)
		default:
			members = append(members, n)
			added = append(added, n)
		}
	}
	r.groups[group] = members
	return added, already, nil
}

// RemoveFromGroup drops devices from a group. Every name must be a member,
// or nothing changes. A name that is not a device (a dangling entry written
// by hand) can still be removed.
func (r *Registry) RemoveFromGroup(group string, names ...string) error {
	members, ok := r.groups[group]
	if !ok {
		return r.unknownGroup(group)
	}
	if len(names) == 0 {
		return errors.New("no devices given; name at least one device to remove")
	}
	var not []string
	for _, n := range names {
		if !slices.Contains(members, n) && !slices.Contains(not, n) {
			not = append(not, n)
		}
	}
	switch {
	case len(not) == 1:
		return fmt.Errorf("%q is not in group %q; rex device group list shows its members", not[0], group)
	case len(not) > 1:
		return fmt.Errorf("%s are not in group %q; rex device group list shows its members", quotedList(not), group)
	}
	r.groups[group] = slices.DeleteFunc(slices.Clone(members), func(m string) bool {
		return slices.Contains(names, m)
	})
	return nil
}

// CheckDevices refuses the names that are not devices, every one of them
// in one error (an *UnknownError, with suggestions, when one is unknown),
// so that a verb given several names can change nothing when one is wrong.
func (r *Registry) CheckDevices(names ...string) error {
	var unknown []string
	for _, n := range names {
		if _, ok := r.devices[n]; !ok && !slices.Contains(unknown, n) {
			unknown = append(unknown, n)
		}
	}
	switch len(unknown) {
	case 0:
		return nil
	case 1:
		return r.unknownDevice(unknown[0])
	}
	if len(unknown) > 5 {
		return fmt.Errorf("%s are not devices; rex device list shows the devices", Fold(unknown))
	}
	return fmt.Errorf("no device is named %s; rex device list shows the devices", orList(quoted(unknown)))
}

// quotedList is "a" and "b", or the folded names (web[3-40]) past five.
func quotedList(names []string) string {
	if len(names) > 5 {
		return Fold(names)
	}
	return orAndList(quoted(names))
}

func quoted(names []string) []string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return q
}

func (r *Registry) unknownDevice(name string) error {
	return &UnknownError{What: "device", Name: name, Suggestions: suggest(name, sortedKeys(r.devices))}
}

func (r *Registry) unknownGroup(name string) error {
	return &UnknownError{What: "group", Name: name, Suggestions: suggest(name, sortedKeys(r.groups))}
}

// UnknownError reports a name that is not registered, with the closest
// registered names.
type UnknownError struct {
	// What is "device", "group" or "device or group".
	What        string
	Name        string
	Suggestions []string
}

func (e *UnknownError) Error() string {
	if len(e.Suggestions) > 0 {
		return fmt.Sprintf("no %s is named %q; did you mean %s?", e.What, e.Name, orList(e.Suggestions))
	}
	switch e.What {
	case "group":
		return fmt.Sprintf("no group is named %q; rex device group list shows the groups", e.Name)
	case "device":
		return fmt.Sprintf("no device is named %q; rex device list shows the devices", e.Name)
	}
	if _, _, _, err := ParseHost(e.Name); err != nil {
		// Not a host name either: ssh://NAME would fail in turn.
		return fmt.Sprintf("no %s is named %q; rex device list shows them", e.What, e.Name)
	}
	return fmt.Sprintf("no %s is named %q; rex device list shows them, and a host that is not registered is written ssh://%s or user@%s", e.What, e.Name, e.Name, e.Name)
}

func orList(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Bytes encodes the registry as devices.json: two-space indented, keys in
// a fixed order (known fields first, then unknown ones sorted), a final
// newline, and no HTML escaping, so diffs of a dotfile stay small.
func (r *Registry) Bytes() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"devices":{`)
	for i, name := range sortedKeys(r.devices) {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, name)
		b.WriteByte(':')
		writeDevice(&b, r.devices[name])
	}
	b.WriteString(`},"groups":{`)
	for i, name := range sortedKeys(r.groups) {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, name)
		b.WriteString(":[")
		for j, m := range r.groups[name] {
			if j > 0 {
				b.WriteByte(',')
			}
			writeString(&b, m)
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	for _, k := range sortedKeys(r.extra) {
		b.WriteByte(',')
		writeString(&b, k)
		b.WriteByte(':')
		b.Write(r.extra[k])
	}
	b.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("encode devices registry: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func writeDevice(b *bytes.Buffer, d Device) {
	b.WriteByte('{')
	n := 0
	field := func(k string) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		writeString(b, k)
		b.WriteByte(':')
	}
	field("host")
	writeString(b, d.Host)
	if d.Port != 0 {
		field("port")
		fmt.Fprintf(b, "%d", d.Port)
	}
	if d.SSHKey != "" {
		field("ssh_key")
		writeString(b, d.SSHKey)
	}
	if d.Description != "" {
		field("description")
		writeString(b, d.Description)
	}
	if d.Roots != nil {
		field("roots")
		b.WriteByte('[')
		for i, r := range d.Roots {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, r)
		}
		b.WriteByte(']')
	}
	if d.Become {
		field("become")
		b.WriteString("true")
	}
	if d.BecomeUser != "" {
		field("become_user")
		writeString(b, d.BecomeUser)
	}
	for _, k := range sortedKeys(d.extra) {
		field(k)
		b.Write(d.extra[k])
	}
	b.WriteByte('}')
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	// Encoding a string cannot fail; invalid UTF-8 becomes U+FFFD.
	_ = enc.Encode(s)
	b.Truncate(b.Len() - 1) // drop Encode's newline
}
