package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/sshx"
)

// SSHConnector reaches devices and ad-hoc hosts over in-process SSH,
// bootstrapping rexd on them.
type SSHConnector struct{ Dialer *sshx.Dialer }

// Connect implements fanout.Connector.
func (c SSHConnector) Connect(ctx context.Context, t fanout.Target) (*fanout.Conn, error) {
	spec, become := t.Spec, ""
	if s, ok := spec.(SudoSpec); ok {
		spec, become = s.Target, s.User
	}
	dt, ok := spec.(devices.Target)
	if !ok {
		return nil, fmt.Errorf("connect %s: not an SSH target", t.Name)
	}
	st := SSHTarget(dt)
	st.ConnectTimeout = t.ConnectTimeout
	st.Become = become
	st.ResumeGrace = t.ResumeGrace
	st.First = t.First
	conn, err := c.Dialer.Connect(ctx, st)
	if err != nil {
		return nil, err
	}
	return &fanout.Conn{Session: conn.Session, Closer: conn, Resume: conn.Resume, OpenLane: func(ctx context.Context) (*fanout.Conn, error) {
		rc, s, err := conn.Lane(ctx)
		if errors.Is(err, sshx.ErrHostKeyChanged) {
			return nil, fanout.LaneUnsafe(err)
		}
		if err != nil {
			return nil, err
		}
		return &fanout.Conn{Session: s, Closer: rc}, nil
	}}, nil
}

// SSHTarget maps a resolved target to where sshx connects. A device's
// optional "jump" field is its ProxyJump; its roots become rexd's.
func SSHTarget(t devices.Target) sshx.Target {
	st := sshx.Target{Name: t.Name, User: t.User, Host: t.Host, Port: t.Port, KeyPath: t.KeyPath}
	var roots []string
	if t.Device != nil {
		roots = t.Device.Roots
	}
	st.RexdArgs = RootArgs(roots)
	if t.Device != nil {
		if raw, ok := t.Device.Extra()["jump"]; ok {
			var jump string
			if json.Unmarshal(raw, &jump) == nil {
				st.Jump = jump
			}
		}
	}
	return st
}

// SSHDeviceRemote implements the device verbs that need SSH.
type SSHDeviceRemote struct{ Dialer *sshx.Dialer }

var _ DeviceRemote = SSHDeviceRemote{}

// each runs fn on the SSH targets, fanout.DefaultConcurrency at a time (as
// `rex run` does: all of a big fleet at once starves the machine and its
// connect timeouts fire), and prints the lines in target order; local is
// answered without SSH.
func (r SSHDeviceRemote) each(ctx context.Context, o IO, targets []devices.Target,
	local func() string, fn func(ctx context.Context, t sshx.Target) (string, error)) error {
	connect := connectTimeoutFrom(ctx)
	lines := make([]string, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	sem := make(chan struct{}, fanout.DefaultConcurrency)
	for i, t := range targets {
		if t.Kind == devices.KindLocal {
			lines[i] = local()
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, t devices.Target) {
			defer wg.Done()
			defer func() { <-sem }()
			st := SSHTarget(t)
			st.ConnectTimeout = connect
			lines[i], errs[i] = fn(ctx, st)
		}(i, t)
	}
	wg.Wait()
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	failed := 0
	for i, t := range targets {
		if errs[i] != nil {
			failed++
			fmt.Fprintf(tw, "%s\tFAIL\t%v\n", t.Name, errs[i])
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\n", t.Name, lines[i])
	}
	tw.Flush()
	if failed > 0 {
		return &ExitError{Code: reachStatus(errs), Err: fmt.Errorf("%d of %d target(s) failed", failed, len(targets))}
	}
	return nil
}

// reachStatus is the exit status of a device verb whose targets failed
// with errs (nil for those that did not), by rex run's rule: 255 when any
// target could not be reached (address, connect, host key, login), else 1:
// every target failed after logging in (its shell, rexd's platform, cache
// directory or sudo), which is the verb's own work failing.
func reachStatus(errs []error) int {
	code := 0
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, sshx.ErrBootstrap), errors.Is(err, sshx.ErrUnsupported),
			errors.Is(err, sshx.ErrNoCacheDir), errors.Is(err, sshx.ErrBecome):
			code = 1
		default:
			return 255
		}
	}
	return code
}

// Check implements DeviceRemote.
func (r SSHDeviceRemote) Check(ctx context.Context, o IO, targets []devices.Target) error {
	return r.each(ctx, o, targets, func() string { return "ok\tthis machine" },
		func(ctx context.Context, t sshx.Target) (string, error) {
			c, err := r.Dialer.Check(ctx, t)
			if err != nil {
				return "", err
			}
			rexd := "no rexd cached (prepare uploads it)"
			switch {
			case c.Current:
				rexd = "rexd " + strings.TrimPrefix(c.RexdVersion, "rexd ")
			case c.RexdPath != "":
				rexd = "rexd outdated (" + c.RexdVersion + ")"
			}
			if len(rexd) > 40 {
				rexd = rexd[:40] + "…"
			}
			platform := c.Platform
			if !c.Supported {
				platform += " (unsupported: " + c.Uname + ")"
			}
			return fmt.Sprintf("ok\t%s@%s\t%s\t%s\thandshake %s\trtt %s", c.User, c.Addr, platform, rexd,
				c.Handshake.Round(time.Millisecond), c.RTT.Round(100*time.Microsecond)), nil
		})
}

// Prepare implements DeviceRemote.
func (r SSHDeviceRemote) Prepare(ctx context.Context, o IO, targets []devices.Target) error {
	return r.each(ctx, o, targets, func() string { return "ok\tlocal rexd ready" },
		func(ctx context.Context, t sshx.Target) (string, error) {
			conn, err := r.Dialer.Connect(ctx, t)
			if err != nil {
				return "", err
			}
			defer conn.Close()
			if conn.Info.Uploaded {
				return fmt.Sprintf("ok\tuploaded rexd (%s, %s) to %s", conn.Info.Platform, HumanBytes(conn.Info.BytesUploaded), conn.Info.RemotePath), nil
			}
			return "ok\trexd already in place at " + conn.Info.RemotePath, nil
		})
}

// Clean implements DeviceRemote.
func (r SSHDeviceRemote) Clean(ctx context.Context, o IO, targets []devices.Target) error {
	return r.each(ctx, o, targets, func() string { return "ok\tnothing to clean on this machine" },
		func(ctx context.Context, t sshx.Target) (string, error) {
			removed, err := r.Dialer.Clean(ctx, t)
			if err != nil {
				return "", err
			}
			if len(removed) == 0 {
				return "ok\tno cached rexd", nil
			}
			return "ok\tremoved " + strings.Join(removed, ", "), nil
		})
}

type connectTimeoutKey struct{}

// WithConnectTimeout carries a verb's --connect-timeout to a DeviceRemote.
func WithConnectTimeout(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	return context.WithValue(ctx, connectTimeoutKey{}, d)
}

func connectTimeoutFrom(ctx context.Context) time.Duration {
	d, _ := ctx.Value(connectTimeoutKey{}).(time.Duration)
	return d
}
