package tui

import (
	"testing"
)

// TestTrimPassesOverARunningCommand: a target's pane keeps its transcript within
// the scrollback limit by dropping whole commands from the top
// (engine.Transcript.Trim), but Trim stops at the first command still
// running. One long-running command left in the pane (a tail -f, a
// sleep, a hung command) pins every command typed after it: their output
// is never trimmed, pinned from Tasks.Retain too (the pane shows them),
// so the console's memory grows with every command for the rest of the
// session instead of staying at the configured scrollback.
func TestTrimPassesOverARunningCommand(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	e.m.cfg.Scrollback = 100
	e.submit("/target web1")
	e.submit("sleep") // runs until cancelled
	for range 30 {
		e.submit("seq 100")
	}
	p := e.m.panes[0].(*outputPane)
	rd := p.read()
	n := rd.Len()
	rd.Done()
	if n > 2*e.m.cfg.Scrollback {
		t.Errorf("the pane holds %d lines with a scrollback of %d: nothing after the running command is ever trimmed", n, e.m.cfg.Scrollback)
	}
}
