package commands

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/sshx"
)

// LocalName is the reserved target for the operator's own machine.
const LocalName = "local"

// LocalSpec is the Spec of the local target.
type LocalSpec struct{}

// LocalTarget is the operator's own machine.
func LocalTarget() fanout.Target {
	return fanout.Target{Name: LocalName, Key: LocalName, Spec: LocalSpec{}}
}

// SudoSpec is the Spec of a target whose rexd runs through sudo as User:
// the target Spec wraps (a LocalSpec or a devices.Target). Its connection
// is pooled apart from the plain one.
type SudoSpec struct {
	Target any
	User   string
}

// WithSudo returns the targets with their rexd started through sudo: as
// the device's become_user, else root. Targets that already are stay.
func WithSudo(ts []fanout.Target) []fanout.Target {
	out := make([]fanout.Target, len(ts))
	for i, t := range ts {
		out[i] = t
		if _, ok := t.Spec.(SudoSpec); ok {
			continue
		}
		user := "root"
		if dt, ok := t.Spec.(devices.Target); ok && dt.Device != nil {
			user = dt.Device.SudoUser()
		}
		out[i] = sudoTarget(t, user)
	}
	return out
}

func sudoTarget(t fanout.Target, user string) fanout.Target {
	key := t.Key
	if key == "" {
		key = t.Name
	}
	return fanout.Target{Name: t.Name, Key: key + "#sudo:" + user, Group: t.Group, Spec: SudoSpec{Target: t.Spec, User: user}}
}

// Connectors routes a target to the connector for its kind.
type Connectors struct {
	Local fanout.Connector
	SSH   fanout.Connector
}

// Connect implements fanout.Connector.
func (c Connectors) Connect(ctx context.Context, t fanout.Target) (*fanout.Conn, error) {
	spec := t.Spec
	if s, ok := spec.(SudoSpec); ok {
		spec = s.Target
	}
	switch spec.(type) {
	case LocalSpec:
		return c.Local.Connect(ctx, t)
	default:
		if c.SSH == nil {
			return nil, fmt.Errorf("connect %s: SSH targets are not available in this build", t.Name)
		}
		return c.SSH.Connect(ctx, t)
	}
}

// Resolver resolves TARGETS through the device registry and the explicit
// Host aliases of ~/.ssh/config: `local` becomes the local target,
// devices, aliases and ad-hoc hosts become SSH targets whose Spec is their
// devices.Target (in a SudoSpec for a device with "become"). Names that
// reach one machine are folded into the first (devices.ResolveWith);
// notice, when set, is told each FoldNotes line.
func Resolver(store *devices.Store, notice func(msg string)) func(spec string) ([]fanout.Target, error) {
	return func(spec string) ([]fanout.Target, error) {
		reg, err := store.Load()
		if err != nil {
			return nil, err
		}
		ts, err := reg.ResolveWith(spec, SSHResolveOptions())
		if err != nil {
			return nil, err
		}
		if notice != nil {
			for _, n := range devices.FoldNotes(ts) {
				notice(n)
			}
		}
		out := make([]fanout.Target, 0, len(ts))
		for _, t := range ts {
			if t.Kind == devices.KindLocal {
				lt := LocalTarget()
				lt.Group = t.Group
				out = append(out, lt)
				continue
			}
			ft := fanout.Target{Name: t.Name, Key: string(t.Kind) + ":" + t.Name, Group: t.Group, Spec: t}
			if t.Device != nil && t.Device.Become {
				ft = sudoTarget(ft, t.Device.SudoUser())
			}
			out = append(out, ft)
		}
		return out, nil
	}
}

// TargetNames are the words TARGETS knows by name, for completion: the
// registry's devices and groups, all and local.
func TargetNames(store *devices.Store) ([]string, error) {
	reg, err := store.Load()
	if err != nil {
		return nil, err
	}
	names := []string{devices.All, LocalName}
	names = append(names, SSHAliases()...)
	for _, d := range reg.Devices() {
		names = append(names, d.Name)
	}
	for _, g := range reg.Groups() {
		names = append(names, g.Name)
	}
	return names, nil
}

// SSHAliases lists the explicit Host aliases of ~/.ssh/config, or none when
// it cannot be read (dialing reports a broken file).
func SSHAliases() []string {
	cfg := userSSHConfig()
	if cfg == nil {
		return nil
	}
	return cfg.Aliases()
}

// SSHResolveOptions are what TARGETS reads of ~/.ssh/config: its Host
// aliases, and for a host the login user, host name and port that sshx
// will dial (User, HostName, Port, the local user and 22 as defaults), so
// that folding and exclusions compare machines as they are reached, not
// as they are spelled. Each is read once, when first needed.
func SSHResolveOptions() devices.ResolveOptions {
	var (
		once sync.Once
		cfg  *devices.SSHConfig
	)
	load := func() *devices.SSHConfig {
		once.Do(func() { cfg = userSSHConfig() })
		return cfg
	}
	addr := dialedAddresses()
	return devices.ResolveOptions{
		Aliases: func() []string {
			if c := load(); c != nil {
				return c.Aliases()
			}
			return nil
		},
		Port:     func(host string) int { return addr(host).port },
		HostName: func(host string) string { return addr(host).host },
		User:     func(host string) string { return addr(host).user },
	}
}

// dialedAddress is where sshx dials a host named without user or port.
type dialedAddress struct {
	user, host string
	port       int
}

// dialedAddresses looks hosts up as sshx dials them (one Dialer, so
// ~/.ssh/config is read once), each host once. A host ssh_config cannot
// give an address for (a bad Port, say) gets none here: dialing reports
// why.
func dialedAddresses() func(host string) dialedAddress {
	var (
		mu    sync.Mutex
		d     *sshx.Dialer
		known = map[string]dialedAddress{}
	)
	return func(host string) dialedAddress {
		mu.Lock()
		defer mu.Unlock()
		if a, ok := known[host]; ok {
			return a
		}
		if d == nil {
			d = sshx.NewDialer(sshx.Options{})
		}
		var a dialedAddress
		if user, h, port, err := d.Address(sshx.Target{Host: host}); err == nil {
			a = dialedAddress{user: user, host: h, port: port}
		}
		known[host] = a
		return a
	}
}

// userSSHConfig is ~/.ssh/config, or nil when it cannot be read.
func userSSHConfig() *devices.SSHConfig {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	cfg, err := devices.ParseSSHConfig(filepath.Join(home, ".ssh", "config"), home)
	if err != nil {
		return nil
	}
	return cfg
}

// RootArgs are the rexd arguments for a device's roots: --root for each,
// or --root / without any (what the login user can reach, as with ssh).
func RootArgs(roots []string) []string {
	if len(roots) == 0 {
		return []string{"--root", "/"}
	}
	var args []string
	for _, r := range roots {
		args = append(args, "--root", r)
	}
	return args
}
