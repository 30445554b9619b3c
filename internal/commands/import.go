package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rexconsole/rex/devices"
)

// ImportKinds are the inventories `rex device import` reads.
var ImportKinds = []string{"ssh-config", "ansible", "hosts"}

// ImportSpec is a parsed `rex device import KIND [FILE]`.
type ImportSpec struct {
	Kind   string
	File   string
	Force  bool
	DryRun bool
}

// Bind declares the flags of `rex device import`.
func (s *ImportSpec) Bind(fs *pflag.FlagSet) {
	fs.BoolVar(&s.Force, "force", false, "replace devices and groups of the same names")
	fs.BoolVarP(&s.DryRun, "dry-run", "n", false, "show what would be added, and change nothing")
}

// Args reads KIND [FILE].
func (s *ImportSpec) Args(args []string) error {
	if len(args) == 0 {
		return Usagef("import what? rex device import ssh-config [FILE] | ansible INVENTORY | hosts FILE")
	}
	s.Kind = args[0]
	switch {
	case s.Kind == "ssh-config" && len(args) <= 2:
	case (s.Kind == "ansible" || s.Kind == "hosts") && len(args) == 2:
	case s.Kind == "ansible" || s.Kind == "hosts":
		return Usagef("rex device import %s takes one FILE", s.Kind)
	case s.Kind == "ssh-config":
		return Usagef("rex device import ssh-config takes at most one FILE (default ~/.ssh/config)")
	default:
		return Usagef("rex device import reads ssh-config, ansible or hosts, not %q%s", s.Kind, didYouMean(s.Kind, ImportKinds...))
	}
	if len(args) == 2 {
		s.File = args[1]
	}
	return nil
}

// maxInventory bounds an inventory file.
const maxInventory = 16 << 20

// readInventory reads an inventory file of bounded size.
func readInventory(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxInventory+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxInventory {
		return nil, fmt.Errorf("%s is larger than %d MiB", name, maxInventory>>20)
	}
	return b, nil
}

// DeviceImport is `rex device import`: an inventory's hosts (and groups)
// into the registry, shown as they are added, in one locked save; names
// already taken fail it unless --force.
func DeviceImport(ctx context.Context, store *devices.Store, o IO, spec ImportSpec) error {
	inv, from, err := loadInventory(spec)
	if err != nil {
		return fmt.Errorf("import %s: %w", spec.Kind, err)
	}
	if len(inv.Devices) == 0 {
		for _, s := range inv.Skipped {
			fmt.Fprintf(o.Err, "skipped %s\n", s)
		}
		return fmt.Errorf("import %s: %s lists no host rex can add", spec.Kind, from)
	}
	var replaced []string
	// dropped: the old members of each replaced group that the
	// inventory's group leaves out (they stay registered).
	dropped := map[string][]string{}
	apply := func(r *devices.Registry) error {
		old := map[string][]string{}
		for _, g := range inv.Groups {
			if og, ok := r.Group(g.Name); ok {
				old[g.Name] = og.Members
			}
		}
		var err error
		replaced, err = r.Import(inv, spec.Force)
		for _, g := range inv.Groups {
			for _, m := range old[g.Name] {
				if !slices.Contains(g.Members, m) {
					dropped[g.Name] = append(dropped[g.Name], m)
				}
			}
		}
		return err
	}
	if spec.DryRun {
		r, err := store.Load()
		if err == nil {
			err = apply(r)
		}
		if err != nil {
			return fmt.Errorf("import %s: %w", spec.Kind, err)
		}
	} else if err := store.Update(ctx, apply); err != nil {
		return fmt.Errorf("import %s: %w", spec.Kind, err)
	}
	was := map[string]bool{}
	for _, n := range replaced {
		was[n] = true
	}
	verb := func(kind, name string) string {
		switch {
		case was[kind+" "+name] && spec.DryRun:
			return "would replace"
		case was[kind+" "+name]:
			return "replaced"
		case spec.DryRun:
			return "would add"
		}
		return "added"
	}
	fmt.Fprintf(o.Out, "from %s:\n", from)
	for _, d := range inv.Devices {
		extra := ""
		if j, ok := d.Extra()["jump"]; ok {
			extra = " via " + strings.Trim(string(j), `"`)
		}
		if d.SSHKey != "" {
			extra += " key " + d.SSHKey
		}
		fmt.Fprintf(o.Out, "  %s device %s (%s)%s\n", verb("device", d.Name), d.Name, Printable(d.Addr()), Printable(extra))
	}
	for _, g := range inv.Groups {
		drop := ""
		if d := dropped[g.Name]; len(d) > 0 {
			drop = fmt.Sprintf(" (dropped %s)", devices.Fold(d))
			if spec.DryRun {
				drop = fmt.Sprintf(" (would drop %s)", devices.Fold(d))
			}
		}
		fmt.Fprintf(o.Out, "  %s group %s: %s%s\n", verb("group", g.Name), g.Name, devices.Fold(g.Members), Printable(drop))
	}
	for _, s := range inv.Skipped {
		fmt.Fprintf(o.Err, "skipped %s\n", Printable(s))
	}
	n, m := len(inv.Devices), len(inv.Groups)
	summary := fmt.Sprintf("%d %s", n, plural(n, "device", "devices"))
	if m > 0 {
		summary += fmt.Sprintf(" and %d %s", m, plural(m, "group", "groups"))
	}
	if spec.DryRun {
		_, err = fmt.Fprintf(o.Out, "would import %s into %s (nothing changed: --dry-run)\n", summary, store.Path())
	} else {
		_, err = fmt.Fprintf(o.Out, "imported %s into %s\n", summary, store.Path())
	}
	return err
}

// loadInventory reads and parses the inventory spec names; from says
// where it came from, for people.
func loadInventory(spec ImportSpec) (devices.Inventory, string, error) {
	home, _ := os.UserHomeDir()
	switch spec.Kind {
	case "ssh-config":
		own := filepath.Join(home, ".ssh", "config")
		file := spec.File
		if file == "" {
			file = own
		}
		fi, err := os.Stat(file)
		if err != nil {
			return devices.Inventory{}, "", fmt.Errorf("read %s: %w", file, unwrapPath(err))
		}
		cfg, err := devices.ParseSSHConfig(file, home)
		if err != nil {
			return devices.Inventory{}, "", err
		}
		// The operator's own file keeps applying through the alias, by
		// whatever path it is named (a symlinked home, a relative path).
		ownFi, err := os.Stat(own)
		viaAlias := err == nil && os.SameFile(fi, ownFi)
		inv, err := devices.FromSSHConfig(cfg, viaAlias)
		from := file
		if viaAlias {
			from = "~/.ssh/config (each device is its Host alias, so ssh_config keeps applying)"
		}
		return inv, from, err
	case "ansible":
		data, err := readInventory(spec.File)
		if err != nil {
			return devices.Inventory{}, "", fmt.Errorf("read %s: %w", spec.File, unwrapPath(err))
		}
		if looksYAML(spec.File, data) {
			inv, err := devices.FromAnsibleYAML(data)
			return inv, "the Ansible inventory " + spec.File + " (YAML)", err
		}
		inv, err := devices.FromAnsibleINI(data)
		return inv, "the Ansible inventory " + spec.File + " (INI)", err
	case "hosts":
		data, err := readInventory(spec.File)
		if err != nil {
			return devices.Inventory{}, "", fmt.Errorf("read %s: %w", spec.File, unwrapPath(err))
		}
		inv, err := devices.FromHostsFile(data)
		return inv, spec.File, err
	}
	return devices.Inventory{}, "", Usagef("unknown inventory kind %q", spec.Kind)
}

// looksYAML tells a YAML inventory from an INI one: by its extension, else
// by its first meaningful line.
func looksYAML(name string, data []byte) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yml", ".yaml":
		return true
	case ".ini", ".cfg":
		return false
	}
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		return l == "---" || strings.HasSuffix(l, ":") && !strings.HasPrefix(l, "[")
	}
	return false
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
