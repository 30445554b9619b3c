package commands

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/fanout"
)

// LocalName is the reserved target for the operator's own machine.
const LocalName = "local"

// LocalSpec is the Spec of the local target.
type LocalSpec struct{}

// LocalTarget is the operator's own machine.
func LocalTarget() fanout.Target {
	return fanout.Target{Name: LocalName, Key: LocalName, Spec: LocalSpec{}}
}

// Connectors routes a target to the connector for its kind.
type Connectors struct {
	Local fanout.Connector
	SSH   fanout.Connector
}

// Connect implements fanout.Connector.
func (c Connectors) Connect(ctx context.Context, t fanout.Target) (*fanout.Conn, error) {
	switch t.Spec.(type) {
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
// devices.Target.
func Resolver(store *devices.Store) func(spec string) ([]fanout.Target, error) {
	return func(spec string) ([]fanout.Target, error) {
		reg, err := store.Load()
		if err != nil {
			return nil, err
		}
		ts, err := reg.ResolveWith(spec, devices.ResolveOptions{Aliases: SSHAliases})
		if err != nil {
			return nil, err
		}
		out := make([]fanout.Target, 0, len(ts))
		for _, t := range ts {
			if t.Kind == devices.KindLocal {
				lt := LocalTarget()
				lt.Group = t.Group
				out = append(out, lt)
				continue
			}
			out = append(out, fanout.Target{Name: t.Name, Key: string(t.Kind) + ":" + t.Name, Group: t.Group, Spec: t})
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
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	cfg, err := devices.ParseSSHConfig(filepath.Join(home, ".ssh", "config"), home)
	if err != nil {
		return nil
	}
	return cfg.Aliases()
}
