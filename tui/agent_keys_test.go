package tui

import (
	"context"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/tui/agentview"
)

// TestAgentCallLeavesTheKeys: while the agent works (a long turn, an
// /agent each run), each tool call it makes is shown in the target's
// panes (agentFrame → agentShowTask → showInTarget → setFocus(i, false)),
// and setFocus with attach unset took the keys from every terminal pane.
// The operator typing in a remote terminal at that moment went on typing
// into the console's command line: the rest of the line, and the enter
// that ends it, ran as a command on the current target (here every host
// of "web"), not in the terminal. Now the keys and layout stay.
func TestAgentCallLeavesTheKeys(t *testing.T) {
	e := newEnv(t, 160, 40, true)
	f := e.withTerms()
	e.submit("/target web")
	p := e.attach("/attach web1")[0]
	if e.m.keyPane() != p {
		t.Fatal("web1's terminal does not have the keys")
	}
	// The agent, asked earlier, makes a call on the target in the
	// background (what onTool queues for the frame).
	m := e.m
	m.ag = &agentConsole{view: agentview.New(m.agentStyles()), calls: map[string]*agentCall{}, asks: map[string]*agentAsk{}}
	m.ag.target.Store(m.target)
	call := m.tasks.New(context.Background(), "agent: df -h", "web", []string{"web1", "web2", "web3"}, m.now(), m.cfg.Scrollback, m.seed, m.signal.mark)
	call.Start(func(context.Context, func(fanout.Event)) *fanout.Summary { return fanout.Summarize(nil, 0) }, m.now, m.signal.mark)
	m.ag.push(agentItem{show: call}, m.signal.mark)
	m.Update(frameMsg{})

	e.typeText("uptime")
	e.press("enter")
	e.settle()
	e.fleet.mu.Lock()
	runs := strings.Join(e.fleet.runs, "\n")
	e.fleet.mu.Unlock()
	if strings.Contains(runs, "uptime") {
		t.Errorf("keys typed into web1's terminal ran on the target instead: %q", runs)
	}
	f.term(t, "web1", 0).settled(t, p, "uptime\r")
}
