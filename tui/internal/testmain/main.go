// Command testmain opens the console the way `rex` with no arguments does,
// for the console's end-to-end tests: a local rexd found next to this
// binary, SSH through sshx, the device registry and the XDG directories of
// the environment.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/adrg/xdg"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/tui"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "rex: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	store, err := devices.OpenDefault()
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find rexd: %w", err)
	}
	states := &tui.ConnStates{}
	dialer := newDialer(states)
	connectors := commands.Connectors{
		Local: fanout.LocalConnector(filepath.Join(filepath.Dir(exe), "rexd"), fanout.OperatorLimits()...),
		SSH:   commands.SSHConnector{Dialer: dialer},
	}
	return tui.Run(ctx, tui.Options{
		Store:     store,
		Connector: connectors,
		Resolve:   commands.Resolver(store),
		ConfigDir: filepath.Join(xdg.ConfigHome, "rex"),
		StateDir:  filepath.Join(xdg.StateHome, "rex"),
		DeviceVerb: func(ctx context.Context, o commands.IO, args []string) error {
			return commands.DeviceWith(ctx, store, commands.SSHDeviceRemote{Dialer: dialer}, o, args)
		},
		States: states,
	})
}
