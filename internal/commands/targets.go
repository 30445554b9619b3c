package commands

import (
	"context"
	"fmt"

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

// Resolver resolves TARGETS through the device registry: `local` becomes
// the local target, devices and ad-hoc hosts become SSH targets whose Spec
// is their devices.Target.
func Resolver(store *devices.Store) func(spec string) ([]fanout.Target, error) {
	return func(spec string) ([]fanout.Target, error) {
		reg, err := store.Load()
		if err != nil {
			return nil, err
		}
		ts, err := reg.Resolve(spec)
		if err != nil {
			return nil, err
		}
		out := make([]fanout.Target, 0, len(ts))
		for _, t := range ts {
			if t.Kind == devices.KindLocal {
				out = append(out, LocalTarget())
				continue
			}
			out = append(out, fanout.Target{Name: t.Name, Key: string(t.Kind) + ":" + t.Name, Spec: t})
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
	for _, d := range reg.Devices() {
		names = append(names, d.Name)
	}
	for _, g := range reg.Groups() {
		names = append(names, g.Name)
	}
	return names, nil
}
