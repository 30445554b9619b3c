package tui

import (
	"errors"
	"testing"
)

// TestBroadcastReachesTheOpeningPane: keys typed into a terminal that is
// still opening are kept and sent once it is open
// (TestPTYTypingWhileConnecting), and while broadcasting too: keyTargets
// returned only the task's live panes, so the pane that had the keys,
// reconnecting after its connection dropped, is left out and what the
// operator typed (into it, and to the others) never reached its host.
// The other hosts ran the command; the one the operator looked at did not.
func TestBroadcastReachesTheOpeningPane(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	f := e.withTerms()
	panes := e.attach("/attach web")
	e.press("ctrl+]", "ctrl+x") // broadcast on; web1 has the keys
	if e.m.broadcast == nil || e.m.keyPane() != panes[0] {
		t.Fatalf("broadcast %v, key pane %v", e.m.broadcast, e.m.keyPane())
	}
	// web1's connection drops; enter opens a new terminal, which takes a
	// while to open.
	f.term(t, "web1", 0).end(nil, errors.New("ssh: connection reset by peer"))
	e.waitPhase(panes[0], termLost)
	f.mu.Lock()
	f.hold = make(chan struct{})
	f.mu.Unlock()
	e.press("enter")
	if panes[0].phase() != termOpening || e.m.keyPane() != panes[0] {
		t.Fatalf("web1 is in phase %d; key pane %v", panes[0].phase(), e.m.keyPane())
	}
	e.typeText("uptime")
	e.press("enter")
	f.term(t, "web2", 0).waitTyped(t, "uptime\r")
	close(f.hold)
	e.waitPhase(panes[0], termLive)
	// What was typed while web1 was opening must reach it, as it does
	// without broadcast.
	f.term(t, "web1", 1).settled(t, panes[0], "uptime\r")
}
