package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/sshx"
	"github.com/rexconsole/rex/tui"
)

// sshConnector reaches devices and ad-hoc hosts over SSH, bootstrapping
// the rexd builds found next to this binary (rexd-GOOS-GOARCH) or embedded
// in it, and reports connection progress to the console's sidebar.
func sshConnector(states *tui.ConnStates) fanout.Connector {
	src := payload.Embedded()
	if exe, err := os.Executable(); err == nil {
		src = payload.Chain(payload.Dir(filepath.Dir(exe)), src)
	}
	d := sshx.NewDialer(sshx.Options{Payload: src, OnState: states.Report})
	return fanout.ConnectorFunc(func(ctx context.Context, t fanout.Target) (*fanout.Conn, error) {
		dt, ok := t.Spec.(devices.Target)
		if !ok {
			return nil, fmt.Errorf("connect %s: not an SSH target", t.Name)
		}
		c, err := d.Connect(ctx, sshx.Target{Name: t.Name, User: dt.User, Host: dt.Host, Port: dt.Port, KeyPath: dt.KeyPath})
		if err != nil {
			return nil, err
		}
		return &fanout.Conn{Session: c.Session, Closer: c}, nil
	})
}
