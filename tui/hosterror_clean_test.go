package tui

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/tui/engine"
)

// TestHostTextIsPrintable: strings a host (or whatever answers at its
// address) sends are drawn without engine.Sanitize in two places:
//
//   - the sidebar's detail of a failed target prints the connection
//     error's text (engine.Contacts keeps err.Error()); when the remote
//     shell fails during bootstrap that text quotes the host's stderr
//     (sshx oneSentence: "(remote said: ...)", whitespace folded, escape
//     sequences kept), e.g. a login profile's coloured messages;
//   - the signal name of an exit status, which rexd reports, goes into
//     the transcript's status line ("✗ signal NAME", engine.Transcript.ended)
//     and the pane header (resultSegs).
//
// Either way an escape sequence reaches the operator's terminal; in the
// sidebar, wrapped mid-sequence, as an OSC left open that eats the rest
// of the frame up to the next BEL.
func TestHostTextIsPrintable(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	e.submit("/target db1")
	e.setState("db1", engine.Failed, errors.New("check db1: the remote shell failed: exit status 1 (remote said: \x1b[31m/etc/profile: line 3: oops\x1b]0;owned-by-db1\x07); check that /bin/sh works for that account"))
	m := e.m
	task := m.tasks.New(context.Background(), "uptime", "db1", []string{"db1"}, m.now(), m.cfg.Scrollback, m.seed, m.signal.mark)
	m.showInTarget(task)
	sig := "KILL\x1b[2J\x1b]0;owned-by-signal\x07"
	task.Start(func(ctx context.Context, on func(fanout.Event)) *fanout.Summary {
		on(fanout.Event{Target: "db1", Kind: fanout.EventStart})
		res := &fanout.Result{Target: "db1", Signal: sig}
		on(fanout.Event{Target: "db1", Kind: fanout.EventResult, Result: res})
		return fanout.Summarize([]*fanout.Result{res}, 0)
	}, m.now, m.signal.mark)
	<-task.Exited()
	m.Update(frameMsg{})
	content := m.View().Content
	// The sidebar wraps the text by bytes, so the sequence arrives cut:
	// an unterminated OSC, which swallows what follows it in the frame.
	if strings.Contains(content, "oops\x1b]0;") {
		t.Error("the sidebar writes the host's stderr quoted in a bootstrap error to the operator's terminal as is")
	}
	if strings.Contains(content, "\x1b]0;owned-by-signal") || strings.Contains(content, "\x1b[2J") {
		t.Error("a signal name from rexd reaches the operator's terminal as is (status line, pane header)")
	}
}
