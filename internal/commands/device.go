package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"charm.land/lipgloss/v2"
	"charm.land/lipgloss/v2/table"
	"github.com/spf13/pflag"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/textsafe"
)

// DeviceRemote runs the device verbs that need the SSH layer. Each method
// gets targets already resolved from TARGETS and writes one line per
// target to stdio.Out.
type DeviceRemote interface {
	// Check reports reachability, authentication, platform, the cached
	// rexd version and the round-trip time of each target.
	Check(ctx context.Context, stdio IO, targets []devices.Target) error
	// Prepare bootstraps rexd on each target without running anything.
	Prepare(ctx context.Context, stdio IO, targets []devices.Target) error
	// Clean removes the cached rexd from each target.
	Clean(ctx context.Context, stdio IO, targets []devices.Target) error
}

// Device runs "rex device ARGS..." (args excludes "rex device") against the
// registry in store. The check, prepare and clean verbs need a
// DeviceRemote and fail here; see DeviceWith.
func Device(ctx context.Context, store *devices.Store, stdio IO, args []string) error {
	return DeviceWith(ctx, store, nil, stdio, args)
}

// DeviceWith is Device with the SSH-backed verbs wired to remote, which may
// be nil. It parses the words with the flags the command line declares.
func DeviceWith(ctx context.Context, store *devices.Store, remote DeviceRemote, stdio IO, args []string) error {
	if len(args) == 0 {
		return deviceUsage(stdio, store)
	}
	verb, rest := args[0], args[1:]
	parse := func(name string, bind func(*pflag.FlagSet)) ([]string, error) {
		return ParseFlags("device "+name, rest, bind)
	}
	none := func(*pflag.FlagSet) {}
	var err error
	switch verb {
	case "help", "-h", "-help", "--help":
		return deviceUsage(stdio, store)
	case "add":
		var spec DeviceAddSpec
		var pos []string
		if pos, err = parse(verb, spec.Bind); err == nil {
			if err = spec.Args(pos); err == nil {
				return DeviceAdd(ctx, store, stdio, spec)
			}
		}
	case "remove":
		var pos []string
		if pos, err = parse(verb, none); err == nil {
			if len(pos) == 0 {
				return Usagef("rex device remove takes one or more device NAMEs")
			}
			return DeviceRemove(ctx, store, stdio, pos)
		}
	case "list":
		var asJSON bool
		var pos []string
		if pos, err = parse(verb, func(fs *pflag.FlagSet) { BindJSON(fs, &asJSON) }); err == nil {
			if len(pos) != 0 {
				return Usagef("rex device list takes no arguments; use rex device show NAME for one device")
			}
			return DeviceList(store, stdio, asJSON)
		}
	case "show":
		var asJSON bool
		var pos []string
		if pos, err = parse(verb, func(fs *pflag.FlagSet) { BindJSON(fs, &asJSON) }); err == nil {
			if len(pos) != 1 {
				return Usagef("rex device show takes one device NAME")
			}
			return DeviceShow(store, stdio, pos[0], asJSON)
		}
	case "group":
		err = deviceGroup(ctx, store, stdio, rest)
	case "import":
		var spec ImportSpec
		var pos []string
		if pos, err = parse(verb, spec.Bind); err == nil {
			if err = spec.Args(pos); err == nil {
				return DeviceImport(ctx, store, stdio, spec)
			}
		}
	case "check", "prepare", "clean":
		var connect time.Duration
		var excl TargetFlags
		var pos []string
		if pos, err = parse(verb, func(fs *pflag.FlagSet) {
			BindConnectTimeout(fs, &connect)
			excl.BindExclude(fs)
		}); err == nil {
			if len(pos) > 0 {
				pos = []string{excl.Spec(strings.Join(pos, ","))}
			}
			return DeviceReach(ctx, store, remote, stdio, verb, pos, connect)
		}
	default:
		return Usagef("unknown command %q for rex device%s; rex device help lists the commands",
			verb, didYouMean(verb, "add", "remove", "list", "show", "group", "import", "check", "prepare", "clean", "help"))
	}
	if errors.Is(err, ErrHelp) {
		return deviceUsage(stdio, store)
	}
	return err
}

const deviceUsageText = `usage: rex device COMMAND [ARGS]

  add NAME [USER@]HOST[:PORT] [--port N] [--key PATH] [--desc TEXT] [--force]
                               register a device; --force replaces one
  remove NAME...               unregister devices and drop them from their groups
  list [--json]                list the devices
  show NAME [--json]           show one device
  group create NAME            create an empty group
  group delete NAME            delete a group; its devices stay registered
  group add GROUP DEVICE...    add devices to a group
  group remove GROUP DEVICE... remove devices from a group
  group list [--json]          list the groups and their members
  import ssh-config [FILE] | ansible INVENTORY | hosts FILE [--force] [--dry-run]
                               add an inventory's hosts (and groups) at once
  check TARGETS [-x NAMES]     test reachability, login and the cached rexd
  prepare TARGETS [-x NAMES]   install rexd without running anything
  clean TARGETS [-x NAMES]     remove the cached rexd

NAME... and DEVICE... take separate words or comma-separated lists, ranges
included (web1,web2 or web[1-2]).
TARGETS is a comma-separated list of device and group names, all, local,
globs (web-*), ranges (node[1-16], node[01-16], n[1,3,5-7]) and hosts that
are not registered (user@host:port, [user@][ipv6]:port, ssh://host).
`

func deviceUsage(stdio IO, store *devices.Store) error {
	text := deviceUsageText
	if store != nil {
		text += "\nThe registry is " + store.Path() + ".\n"
	}
	_, err := io.WriteString(stdio.Out, text)
	return err
}

// didYouMean formats a suggestion for an unknown word among choices, or "".
func didYouMean(word string, choices ...string) string {
	best, bestD := "", 3
	for _, c := range choices {
		if d := devices.EditDistance(strings.TrimLeft(word, "-"), strings.TrimLeft(c, "-")); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return "; did you mean " + best + "?"
}

// DeviceAddSpec is a parsed `rex device add`.
type DeviceAddSpec struct {
	Name, Host string
	Port       int
	Key, Desc  string
	Force      bool
}

// Bind declares the flags of `rex device add`.
func (s *DeviceAddSpec) Bind(fs *pflag.FlagSet) {
	fs.Var(portValue{&s.Port}, "port", "SSH PORT (default: ssh_config's, else 22)")
	fs.StringVar(&s.Key, "key", "", "private key PATH (default: ssh-agent and ssh_config's IdentityFile)")
	fs.StringVar(&s.Desc, "desc", "", "a description shown in lists")
	fs.BoolVar(&s.Force, "force", false, "replace a device of the same name")
}

// Args reads NAME and HOST.
func (s *DeviceAddSpec) Args(args []string) error {
	if len(args) != 2 {
		return Usagef("rex device add takes NAME and [USER@]HOST, e.g. rex device add web1 root@10.0.0.5 --port 2222")
	}
	s.Name, s.Host = args[0], args[1]
	return nil
}

// portValue is a --port flag: 1 to 65535.
type portValue struct{ p *int }

func (v portValue) String() string {
	if v.p == nil || *v.p == 0 {
		return ""
	}
	return strconv.Itoa(*v.p)
}

func (v portValue) Set(s string) error {
	p, err := devices.ParsePort(s)
	if err != nil {
		return err
	}
	*v.p = p
	return nil
}

func (portValue) Type() string { return "port" }

// DeviceAdd is `rex device add`.
func DeviceAdd(ctx context.Context, store *devices.Store, stdio IO, spec DeviceAddSpec) error {
	name, host, port, key := spec.Name, spec.Host, spec.Port, spec.Key
	var err error
	if key != "" && !strings.HasPrefix(key, "~") && !filepath.IsAbs(key) {
		// A relative path means nothing to a later rex run elsewhere.
		if key, err = filepath.Abs(key); err != nil {
			return fmt.Errorf("add device %s: resolve key path: %w", name, err)
		}
	}
	d, err := devices.NewDevice(name, host, port, key, spec.Desc)
	if err != nil {
		return fmt.Errorf("add device %s: %w", name, err)
	}
	var replaced bool
	var old devices.Device
	err = store.Update(ctx, func(r *devices.Registry) error {
		var err error
		old, _ = r.Device(name)
		replaced, err = r.Add(d, spec.Force)
		return err
	})
	if err != nil {
		return fmt.Errorf("add device %s: %w", name, err)
	}
	// After the line that says what was added (the console shows both).
	defer warnMissingKey(stdio, name, d.SSHKey)
	if !replaced {
		_, err = fmt.Fprintf(stdio.Out, "added device %s (%s)\n", name, d.Addr())
		return err
	}
	// A replace says what it drops, as a removal says what it removes.
	var was []string
	if a := old.Addr(); a != d.Addr() {
		was = append(was, a)
	}
	if old.SSHKey != "" && old.SSHKey != d.SSHKey {
		was = append(was, "key "+old.SSHKey)
	}
	if old.Description != "" && old.Description != d.Description {
		was = append(was, fmt.Sprintf("description %q", old.Description))
	}
	msg := fmt.Sprintf("replaced device %s (%s)", name, d.Addr())
	if len(was) > 0 {
		msg += "; it was " + Printable(strings.Join(was, ", "))
	}
	_, err = fmt.Fprintln(stdio.Out, msg)
	return err
}

// warnMissingKey says on stderr that a device's key file is not there, as
// ssh does for -i: the device is kept (the key may be made later), but its
// first connect would otherwise be the first sign of a mistyped path.
func warnMissingKey(stdio IO, name, key string) {
	home, _ := os.UserHomeDir()
	path, err := devices.ExpandKeyPath(key, home)
	if err != nil || path == "" {
		return
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stdio.Err, "rex: warning: key %s does not exist; create it before connecting to %s, or add %s again with the right --key and --force\n",
			Printable(key), Printable(name), Printable(name))
	}
}

// DeviceRemove is `rex device remove`: every device named, or none.
func DeviceRemove(ctx context.Context, store *devices.Store, stdio IO, words []string) error {
	names, err := SplitNames(words)
	if err != nil {
		return fmt.Errorf("remove devices: %w", err)
	}
	names = dedupe(names)
	if len(names) == 0 {
		return Usagef("rex device remove takes one or more device NAMEs")
	}
	groups := make([][]string, len(names))
	err = store.Update(ctx, func(r *devices.Registry) error {
		if err := r.CheckDevices(names...); err != nil {
			return fmt.Errorf("nothing was removed: %w", err)
		}
		for i, name := range names {
			var err error
			if groups[i], err = r.Remove(name); err != nil {
				return fmt.Errorf("remove device %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var b strings.Builder
	for i, name := range names {
		if len(groups[i]) > 0 {
			fmt.Fprintf(&b, "removed device %s (also removed from groups: %s)\n", name, strings.Join(groups[i], ", "))
		} else {
			fmt.Fprintf(&b, "removed device %s\n", name)
		}
	}
	_, err = io.WriteString(stdio.Out, b.String())
	return err
}

// SplitNames reads device names written as separate words, comma lists
// or both ("web1,web2 db1"), with ranges (web[1-4]), as TARGETS reads its
// items (devices.ExpandNames): one syntax for a list of names everywhere.
func SplitNames(words []string) ([]string, error) {
	var out []string
	for _, w := range words {
		names, err := devices.ExpandNames(w)
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
	}
	return out, nil
}

// oneName refuses a list where `rex device VERB` takes one name.
func oneName(verb, what, name string) error {
	names, err := SplitNames([]string{name})
	if err != nil || len(names) < 2 {
		return nil // one name, valid or not: the verb says which
	}
	act := verb[strings.LastIndexByte(verb, ' ')+1:]
	return Usagef("rex device %s takes one %s NAME; %s %s and %s one at a time", verb, what, act,
		strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// deviceJSON is the stable --json form of a device.
type deviceJSON struct {
	Name string `json:"name"`
	// Host is the registry's "host" field as stored, "[user@]host".
	Host string `json:"host"`
	// User, Hostname and Port are where rex connects; Port 0 is unset.
	User        string                     `json:"user"`
	Hostname    string                     `json:"hostname"`
	Port        int                        `json:"port"`
	Address     string                     `json:"address"`
	SSHKey      string                     `json:"ssh_key"`
	Description string                     `json:"description"`
	Groups      []string                   `json:"groups"`
	Roots       []string                   `json:"roots"`
	Become      bool                       `json:"become"`
	BecomeUser  string                     `json:"become_user,omitempty"`
	Extra       map[string]json.RawMessage `json:"extra"`
}

func toJSON(r *devices.Registry, d devices.Device) deviceJSON {
	user, host, port, err := d.Endpoint()
	if err != nil {
		user, host = d.UserHost()
		port = d.Port
	}
	j := deviceJSON{
		Name: d.Name, Host: d.Host, User: user, Hostname: host, Port: port,
		Address: d.Addr(), SSHKey: d.SSHKey, Description: d.Description,
		Groups: r.GroupsOf(d.Name), Roots: d.Roots, Become: d.Become, BecomeUser: d.BecomeUser, Extra: d.Extra(),
	}
	if j.Roots == nil {
		j.Roots = []string{}
	}
	if j.Groups == nil {
		j.Groups = []string{}
	}
	if j.Extra == nil {
		j.Extra = map[string]json.RawMessage{}
	}
	return j
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// groupJSON is the stable --json form of a group.
type groupJSON struct {
	Name    string   `json:"name"`
	Members []string `json:"members"`
}

func groupsJSON(r *devices.Registry) []groupJSON {
	out := []groupJSON{}
	for _, g := range r.Groups() {
		out = append(out, groupJSON{g.Name, g.Members})
	}
	return out
}

// RegistryJSON is the whole registry in the shapes of `rex device list
// --json` and `rex device group list --json`, in one object: what `rex
// mcp` serves as rex://devices.
func RegistryJSON(r *devices.Registry) ([]byte, error) {
	out := struct {
		Devices []deviceJSON `json:"devices"`
		Groups  []groupJSON  `json:"groups"`
	}{Devices: []deviceJSON{}, Groups: groupsJSON(r)}
	for _, d := range r.Devices() {
		out.Devices = append(out.Devices, toJSON(r, d))
	}
	var b bytes.Buffer
	err := writeJSON(&b, out)
	return b.Bytes(), err
}

// DeviceList is `rex device list`.
func DeviceList(store *devices.Store, stdio IO, asJSON bool) error {
	r, err := store.Load()
	if err != nil {
		return fmt.Errorf("list devices: %w", err)
	}
	list := r.Devices()
	if asJSON {
		out := struct {
			Devices []deviceJSON `json:"devices"`
		}{Devices: []deviceJSON{}}
		for _, d := range list {
			out.Devices = append(out.Devices, toJSON(r, d))
		}
		return writeJSON(stdio.Out, out)
	}
	if len(list) == 0 {
		_, err := fmt.Fprintln(stdio.Out, "no devices yet; add one with rex device add NAME [USER@]HOST")
		return err
	}
	rows := make([][]string, 0, len(list))
	for _, d := range list {
		rows = append(rows, []string{d.Name, d.Addr(), d.SSHKey, strings.Join(r.GroupsOf(d.Name), ","), d.Description})
	}
	return renderTable(stdio, []string{"NAME", "ADDRESS", "KEY", "GROUPS", "DESCRIPTION"}, rows)
}

// DeviceShow is `rex device show`.
func DeviceShow(store *devices.Store, stdio IO, name string, asJSON bool) error {
	if err := oneName("show", "device", name); err != nil {
		return err
	}
	r, err := store.Load()
	if err != nil {
		return fmt.Errorf("show device %s: %w", name, err)
	}
	d, err := r.Lookup(name)
	if err != nil {
		return fmt.Errorf("show device: %w", err)
	}
	j := toJSON(r, d)
	if asJSON {
		return writeJSON(stdio.Out, j)
	}
	rows := [][]string{
		{"name", d.Name},
		{"address", d.Addr()},
		{"key", d.SSHKey},
		{"description", d.Description},
		{"groups", strings.Join(j.Groups, ", ")},
	}
	if len(d.Roots) > 0 {
		rows = append(rows, []string{"roots", strings.Join(d.Roots, ", ")})
	}
	if d.Become || d.BecomeUser != "" {
		how := "no (--sudo becomes " + d.SudoUser() + ")"
		if d.Become {
			how = "yes, as " + d.SudoUser()
		}
		rows = append(rows, []string{"become", how})
	}
	if _, _, _, err := d.Endpoint(); err != nil {
		rows = append(rows, []string{"problem", err.Error()})
	}
	for _, k := range d.ExtraKeys() {
		rows = append(rows, []string{k, string(j.Extra[k])})
	}
	return renderFields(stdio, rows)
}

// deviceGroup is `rex device group ARGS...` as the console gets it.
func deviceGroup(ctx context.Context, store *devices.Store, stdio IO, args []string) error {
	if len(args) == 0 {
		return Usagef("rex device group needs a command: create, delete, add, remove or list")
	}
	verb, rest := args[0], args[1:]
	var asJSON bool
	bind := func(*pflag.FlagSet) {}
	if verb == "list" {
		bind = func(fs *pflag.FlagSet) { BindJSON(fs, &asJSON) }
	}
	pos, err := ParseFlags("device group "+verb, rest, bind)
	if errors.Is(err, ErrHelp) {
		return deviceUsage(stdio, store)
	}
	if err != nil {
		return err
	}
	want := func(n int, shape string) error {
		if len(pos) != n && !(n < 0 && len(pos) >= -n) {
			return Usagef("rex device group %s takes %s", verb, shape)
		}
		return nil
	}
	switch verb {
	case "create":
		if err := want(1, "one group NAME"); err != nil {
			return err
		}
		return GroupCreate(ctx, store, stdio, pos[0])
	case "delete":
		if err := want(1, "one group NAME"); err != nil {
			return err
		}
		return GroupDelete(ctx, store, stdio, pos[0])
	case "add":
		if err := want(-2, "a GROUP and one or more DEVICE names"); err != nil {
			return err
		}
		return GroupAdd(ctx, store, stdio, pos[0], pos[1:])
	case "remove":
		if err := want(-2, "a GROUP and one or more DEVICE names"); err != nil {
			return err
		}
		return GroupRemove(ctx, store, stdio, pos[0], pos[1:])
	case "list":
		if err := want(0, "no arguments"); err != nil {
			return err
		}
		return GroupList(store, stdio, asJSON)
	}
	return Usagef("unknown command %q for rex device group%s; rex device help lists the commands",
		verb, didYouMean(verb, "create", "delete", "add", "remove", "list"))
}

// GroupCreate is `rex device group create`.
func GroupCreate(ctx context.Context, store *devices.Store, stdio IO, name string) error {
	if err := oneName("group create", "group", name); err != nil {
		return err
	}
	err := store.Update(ctx, func(r *devices.Registry) error { return r.CreateGroup(name) })
	if err != nil {
		return fmt.Errorf("create group %s: %w", name, err)
	}
	_, err = fmt.Fprintln(stdio.Out, "created group "+name)
	return err
}

// GroupDelete is `rex device group delete`.
func GroupDelete(ctx context.Context, store *devices.Store, stdio IO, name string) error {
	if err := oneName("group delete", "group", name); err != nil {
		return err
	}
	var members []string
	err := store.Update(ctx, func(r *devices.Registry) error {
		var err error
		members, err = r.DeleteGroup(name)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete group %s: %w", name, err)
	}
	msg := "deleted group " + name
	if n := len(members); n > 0 {
		msg += fmt.Sprintf(" (its %d %s registered)", n, plural(n, "device stays", "devices stay"))
	}
	_, err = fmt.Fprintln(stdio.Out, msg)
	return err
}

// GroupAdd is `rex device group add`.
func GroupAdd(ctx context.Context, store *devices.Store, stdio IO, group string, words []string) error {
	names, err := SplitNames(words)
	if err != nil {
		return fmt.Errorf("add to group %s: %w", group, err)
	}
	var added, already []string
	err = store.Update(ctx, func(r *devices.Registry) error {
		var err error
		added, already, err = r.AddToGroup(group, names...)
		return err
	})
	if err != nil {
		return fmt.Errorf("nothing was added to group %s: %w", group, err)
	}
	var msg string
	switch {
	case len(added) == 0:
		msg = fmt.Sprintf("%s %s already in group %s", strings.Join(already, ", "), plural(len(already), "is", "are"), group)
	case len(already) == 0:
		msg = fmt.Sprintf("added %s to group %s", strings.Join(added, ", "), group)
	default:
		msg = fmt.Sprintf("added %s to group %s (%s %s already in it)", strings.Join(added, ", "), group,
			strings.Join(already, ", "), plural(len(already), "was", "were"))
	}
	_, err = fmt.Fprintln(stdio.Out, msg)
	return err
}

// GroupRemove is `rex device group remove`.
func GroupRemove(ctx context.Context, store *devices.Store, stdio IO, group string, words []string) error {
	names, err := SplitNames(words)
	if err != nil {
		return fmt.Errorf("remove from group %s: %w", group, err)
	}
	err = store.Update(ctx, func(r *devices.Registry) error { return r.RemoveFromGroup(group, names...) })
	if err != nil {
		return fmt.Errorf("nothing was removed from group %s: %w", group, err)
	}
	_, err = fmt.Fprintf(stdio.Out, "removed %s from group %s\n", strings.Join(dedupe(names), ", "), group)
	return err
}

// GroupList is `rex device group list`.
func GroupList(store *devices.Store, stdio IO, asJSON bool) error {
	r, err := store.Load()
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	groups := r.Groups()
	if asJSON {
		out := struct {
			Groups []groupJSON `json:"groups"`
		}{Groups: groupsJSON(r)}
		return writeJSON(stdio.Out, out)
	}
	if len(groups) == 0 {
		_, err := fmt.Fprintln(stdio.Out, "no groups yet; create one with rex device group create NAME")
		return err
	}
	rows := make([][]string, 0, len(groups))
	for _, g := range groups {
		members := strings.Join(g.Members, ", ")
		if members == "" {
			members = "(none)"
		}
		rows = append(rows, []string{g.Name, members})
	}
	return renderTable(stdio, []string{"GROUP", "MEMBERS"}, rows)
}

// DeviceReach is `rex device check|prepare|clean TARGETS...`; several
// words are one list ("check web1 web2" is "check web1,web2").
func DeviceReach(ctx context.Context, store *devices.Store, remote DeviceRemote, stdio IO, verb string, words []string, connectTimeout time.Duration) error {
	if len(words) == 0 {
		return Usagef("rex device %s takes TARGETS, e.g. rex device %s web1,db-*", verb, verb)
	}
	r, err := store.Load()
	if err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	targets, err := r.ResolveWith(strings.Join(words, ","), SSHResolveOptions())
	if err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	for _, n := range devices.FoldNotes(targets) {
		fmt.Fprintln(stdio.Err, "rex: "+n)
	}
	if remote == nil {
		return fmt.Errorf("rex device %s needs the SSH layer, which this build of rex does not include yet; use a build that has it", verb)
	}
	ctx = WithConnectTimeout(ctx, connectTimeout)
	switch verb {
	case "check":
		return remote.Check(ctx, stdio, targets)
	case "prepare":
		return remote.Prepare(ctx, stdio, targets)
	case "clean":
		return remote.Clean(ctx, stdio, targets)
	}
	return Usagef("unknown command %q for rex device", verb)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func dedupe(s []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// Printable replaces control characters with '?', so that text from a
// shared, hand-edited registry or from the model (which a host's output can
// steer) cannot send escape sequences to the operator's terminal, nor break
// a table with a newline or a tab.
func Printable(s string) string { return textsafe.Line(s) }

// renderTable prints rows under headers: a bordered table on a terminal,
// aligned plain text when piped. Empty cells show as "-".
func renderTable(stdio IO, headers []string, rows [][]string) error {
	for _, row := range rows {
		for i, c := range row {
			if c == "" {
				c = "-"
			}
			row[i] = Printable(c)
		}
	}
	if stdio.Styled {
		header := lipgloss.NewStyle().Bold(true).Padding(0, 1)
		cell := lipgloss.NewStyle().Padding(0, 1)
		t := table.New().
			Border(lipgloss.RoundedBorder()).
			Headers(headers...).
			Rows(rows...).
			StyleFunc(func(row, _ int) lipgloss.Style {
				if row == table.HeaderRow {
					return header
				}
				return cell
			})
		_, err := fmt.Fprintln(stdio.Out, t.Render())
		return err
	}
	tw := tabwriter.NewWriter(stdio.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// renderFields prints name/value pairs, one per line; empty values are
// left out.
func renderFields(stdio IO, rows [][]string) error {
	key := lipgloss.NewStyle().Bold(true)
	tw := tabwriter.NewWriter(stdio.Out, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		if r[1] == "" {
			continue
		}
		k := r[0] + ":"
		if stdio.Styled {
			// Styling changes the byte width but not the column count
			// tabwriter sees for every row alike, so columns still align.
			k = key.Render(k)
		}
		fmt.Fprintf(tw, "%s\t%s\n", k, Printable(r[1]))
	}
	return tw.Flush()
}
