package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/server"
)

// TestStatusPrintsNoTerminalEscapes: what `rex ls` prints of the server's
// work (the agent's commands, which the model writes and a host's output
// can steer; its prompt; terminals' commands) sends no control characters
// to the operator's terminal: an OSC 52 there writes the clipboard.
func TestStatusPrintsNoTerminalEscapes(t *testing.T) {
	now := time.Now()
	osc := "\x1b]52;c;ZWNobyBwd25lZA==\x07"
	st := server.Status{
		Pid: 1, Version: "test", StartedAt: now, Target: "web",
		Tasks:     []server.TaskStatus{{Command: "agent: ls " + osc, Targets: []string{"h1"}, Running: 1, Since: now}},
		Terminals: []server.TerminalStatus{{Target: "h1", Command: "top" + osc}},
		Agent:     "fix it" + osc,
	}
	var b strings.Builder
	printStatus(&b, st, now)
	if strings.ContainsAny(b.String(), "\x1b\x07") {
		t.Fatalf("rex ls printed control characters: %q", b.String())
	}
}
