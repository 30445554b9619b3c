package tui

import (
	"context"
	"strings"
	"testing"
)

// TestCommandIsOneLine: the agent's tool calls are shown in the target's
// panes (agentShowTask → showInTarget) headed by "❯ agent: COMMAND", the
// command as the model wrote it. engine.Transcript.Add builds that head
// line from the raw command (Line.Text is documented as "printable text
// only" but is not sanitised here), and the pane header cuts the raw
// command too. A multi-line bash command (a heredoc, a for loop: the
// usual thing a model sends) puts line breaks into one screen row, so the
// frame has more rows than the window and the whole screen shifts; an
// escape sequence in the command (a model told by a host's output to put
// one there) is written to the operator's terminal as is.
func TestCommandIsOneLine(t *testing.T) {
	const w, h = 100, 30
	e := newEnv(t, w, h, true)
	cmd := "for s in nginx sshd\ndo systemctl is-active $s\ndone\x1b]0;owned\x07\x1b[2J"
	m := e.m
	// As agentOptions' OnTool does for a bash call on web1.
	task := m.tasks.New(context.Background(), "agent: "+cmd, "web1", []string{"web1"}, m.now(), m.cfg.Scrollback, m.seed, m.signal.mark)
	m.showInTarget(task)
	m.Update(frameMsg{})
	content := m.View().Content
	if n := strings.Count(content, "\n") + 1; n != h {
		t.Errorf("the frame has %d rows for a %d-row window: the command's line breaks went into it", n, h)
	}
	if strings.Contains(content, "\x1b]0;owned") || strings.Contains(content, "\x1b[2J") {
		t.Errorf("the command's escape sequences (OSC 0 window title, clear screen) reach the operator's terminal")
	}
}
