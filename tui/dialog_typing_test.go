package tui

import (
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/commands"
)

// TestDialogWaitsWhileTyping: a dialog that opens while a live remote
// terminal has the keys waits for ctrl+]; it took the next keystroke
// (onKey routed to dialogs before the terminal pane with the keys),
// whatever the operator meant it for. Dialogs open by themselves: a host key question from a
// connection made in the background (a /run, the agent), the agent's
// consent question. The operator typing "yum update" into web1's shell
// answers the host key question of another host with its "y": the key is
// trusted and recorded in known_hosts, and the shell gets "um update".
// The consent dialog is the same ("s" of "systemctl" allows the agent's
// command for the whole session).
func TestDialogWaitsWhileTyping(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	f := e.withTerms()
	p := e.attach("/attach web1")[0]
	if e.m.keyPane() != p {
		t.Fatal("web1's terminal does not have the keys")
	}
	// A connection in the background meets a new host key.
	reply := make(chan bool, 1)
	e.m.Update(hostKeyAskMsg{q: commands.HostKeyQuestion{Target: "web9", Addr: "10.0.0.9:22", KeyType: "ssh-ed25519",
		Fingerprint: "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", File: "/home/op/.ssh/known_hosts"}, reply: reply})
	// answer is the reply given so far, if any.
	answer := func() (trusted, answered bool) {
		select {
		case ok := <-reply:
			return ok, true
		default:
			return false, false
		}
	}
	// The operator goes on typing in web1's shell.
	e.typeText("yum update")
	e.press("enter")
	if trusted, answered := answer(); answered {
		t.Errorf("a key typed into web1's terminal answered web9's host key question (trusted: %v)", trusted)
	}
	f.term(t, "web1", 0).settled(t, p, "yum update\r")
	if !strings.Contains(e.screen(), "a question waits") {
		t.Errorf("the status line does not say a question waits:\n%s", e.screen())
	}
	// ctrl+] gives the keys back, and the question has them.
	e.press("ctrl+]")
	e.press("n")
	if trusted, answered := answer(); !answered || trusted {
		t.Errorf("after ctrl+], n answered %v and trusted %v", answered, trusted)
	}
}
