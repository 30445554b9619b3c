package tui

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/sshx"
	"github.com/rexconsole/rex/tui/engine"
)

// sidebarScene has a device in every state the sidebar shows, each
// reached the way the dialer and the pool report it.
func sidebarScene(t *testing.T, w, h int) *testEnv {
	e := newEnv(t, w, h, true)
	err := e.store.Update(context.Background(), func(r *devices.Registry) error {
		for _, name := range []string{"api1", "api2", "cache1"} {
			d, err := devices.NewDevice(name, "root@10.0.1.1", 0, "", "")
			if err != nil {
				return err
			}
			if _, err := r.Add(d, false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.m.Update(registryChangedMsg{})
	ssh := func(target, state string, err error) { e.m.states.Report(engine.FromSSH, target, state, err) }
	// /device check: web1 answered; db1 refused; web2 took no key; web3's
	// key changed; api1 is being dialled; api2 is being set up.
	ssh("web1", sshx.StateConnecting, nil)
	ssh("web1", sshx.StateReady, nil)
	ssh("db1", sshx.StateConnecting, nil)
	ssh("db1", sshx.StateFailed, &sshx.Error{Kind: sshx.ErrUnreachable, Msg: "connect db1 (10.0.0.9:2222): connection refused; is sshd running there?",
		Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}})
	ssh("web2", sshx.StateConnecting, nil)
	ssh("web2", sshx.StateFailed, &sshx.Error{Kind: sshx.ErrAuth, Msg: "log in to web2 as root: the server took none of the keys offered"})
	ssh("web3", sshx.StateConnecting, nil)
	ssh("web3", sshx.StateFailed, &sshx.Error{Kind: sshx.ErrHostKeyChanged, Msg: "the host key of web3 changed"})
	ssh("api1", sshx.StateConnecting, nil)
	ssh("api2", sshx.StateConnecting, nil)
	ssh("api2", sshx.StateBootstrapping, nil)
	e.m.Update(frameMsg{})
	return e
}

// TestSidebarStatesGolden: every state, as the sidebar names it at two
// widths.
func TestSidebarStatesGolden(t *testing.T) {
	for _, sz := range []struct{ w, h int }{{80, 24}, {120, 40}} {
		t.Run(fmt.Sprintf("%dx%d", sz.w, sz.h), func(t *testing.T) {
			e := sidebarScene(t, sz.w, sz.h)
			e.submit("/target db1")
			golden.RequireEqual(t, checkScreen(t, e, sz.w, sz.h))
		})
	}
}

// TestSidebarTellsTheTruth: the states come from the last real contact;
// connecting lasts only while a dial is in flight.
func TestSidebarTellsTheTruth(t *testing.T) {
	e := sidebarScene(t, 120, 40)
	row := func(name string) string {
		for _, l := range strings.Split(e.screen(), "\n") {
			if side := l[:strings.Index(l, "│")]; strings.Contains(side, " "+name+" ") {
				return strings.Join(strings.Fields(side), " ")
			}
		}
		return ""
	}
	for name, want := range map[string]string{
		"web1": "● web1 ready", "db1": "✗ db1 unreachable", "web2": "✗ web2 auth failed",
		"web3": "✗ web3 key changed", "api1": "◌ api1 connecting", "api2": "◍ api2 bootstrapping",
		"cache1": "○ cache1 idle",
	} {
		if got := row(name); got != want {
			t.Errorf("row %q, want %q", got, want)
		}
	}
	// The selected device's details say why, in full.
	e.submit("/target db1")
	var side []string
	for _, l := range strings.Split(e.screen(), "\n") {
		if i := strings.Index(l, "│"); i > 0 {
			side = append(side, l[:i])
		}
	}
	detail := strings.Join(strings.Fields(strings.Join(side, " ")), " ")
	if !strings.Contains(detail, "unreachable: connection refused · 12:00:00") {
		t.Errorf("db1's details do not say why:\n%s", e.screen())
	}
	// api1's dial ends: no more connecting.
	e.m.states.Report(engine.FromSSH, "api1", sshx.StateFailed, &sshx.Error{Kind: sshx.ErrTimeout, Msg: "connect api1: no answer within 10s"})
	if got := row("api1"); got != "✗ api1 unreachable" {
		t.Errorf("after the dial: %q", got)
	}
	if got := e.m.states.Get("api1").Label(); got != "unreachable: no answer" {
		t.Errorf("api1 is %q", got)
	}
}

// TestRegistryChangedElsewhere: a device added by another rex process
// shows when the watch says the file changed.
func TestRegistryChangedElsewhere(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	other := devices.NewStore(e.store.Path())
	err := other.Update(context.Background(), func(r *devices.Registry) error {
		d, err := devices.NewDevice("late1", "root@10.0.2.1", 0, "", "")
		if err != nil {
			return err
		}
		if _, err := r.Add(d, false); err != nil {
			return err
		}
		_, _, err = r.AddToGroup("web", "late1")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.submit("/target web")
	if s := e.screen(); strings.Contains(s, "DEVICES 5") || strings.Contains(s, " late1 ") {
		t.Fatalf("the sidebar shows the device before the change is noticed:\n%s", s)
	}
	e.m.Update(registryChangedMsg{})
	s := e.screen()
	if !strings.Contains(s, "late1") || !strings.Contains(s, "DEVICES 5") || !strings.Contains(s, "web (4) ❯") {
		t.Errorf("after the change: the sidebar or the prompt lacks late1:\n%s", s)
	}
}
