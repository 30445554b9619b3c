package tui

import (
	"context"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
)

// TestHostKeyQuestion: a host key question opens a yes/no dialog with the
// fingerprint; the answer goes back to the dialer, and esc is no.
func TestHostKeyQuestion(t *testing.T) {
	e := newEnv(t, 120, 30, false)
	q := commands.HostKeyQuestion{Target: "web1", Addr: "10.0.0.5:22", KeyType: "ED25519", Fingerprint: "SHA256:abcdef", File: "~/.ssh/known_hosts"}
	for _, tt := range []struct {
		keys []string
		want bool
	}{{[]string{"y"}, true}, {[]string{"n"}, false}, {[]string{"esc"}, false}, {[]string{"left", "enter"}, true}} {
		reply := make(chan bool, 1)
		e.m.Update(hostKeyAskMsg{q: q, reply: reply})
		scr := e.screen()
		for _, want := range []string{"New host key", "The authenticity of host", "'web1 (10.0.0.5:22)'", "ED25519 key fingerprint is SHA256:abcdef."} {
			if !strings.Contains(scr, want) {
				t.Fatalf("the dialog lacks %q:\n%s", want, scr)
			}
		}
		e.press(tt.keys...)
		select {
		case got := <-reply:
			if got != tt.want {
				t.Errorf("%v answered %v, want %v", tt.keys, got, tt.want)
			}
		default:
			t.Fatalf("%v gave no answer", tt.keys)
		}
		if e.m.dialogs.Len() != 0 {
			t.Errorf("%v left a dialog open", tt.keys)
		}
	}
	// Notices show in the message area.
	e.m.Update(noticeMsg{"added web1 (10.0.0.5:22) ED25519 SHA256:abcdef to ~/.ssh/known_hosts"})
	e.wantMessage("added web1 (10.0.0.5:22) ED25519")

	// Before the console runs, a question is refused, not left hanging.
	var p Prompts
	if ok, err := p.AskHostKey(context.Background(), q); ok || err == nil {
		t.Errorf("AskHostKey without a console = %v, %v", ok, err)
	}
}

// TestTargetFoldNotice: a target list naming one machine twice (web1 and
// its address) says, under /target's answer, that it runs there once;
// once per console, however often the list resolves again.
func TestTargetFoldNotice(t *testing.T) {
	e := newEnv(t, 160, 30, true)
	e.submit("/target web1,root@10.0.0.1:22")
	note := "root@10.0.0.1:22 reaches the same machine as web1 (root@10.0.0.1); it runs there once, as web1"
	e.wantMessage("target web1,root@10.0.0.1:22: command lines now run on 1 machine (web1)", note)
	if e.m.targetCount != 1 {
		t.Errorf("the target counts %d machines, want 1", e.m.targetCount)
	}
	e.submit("/target web1,root@10.0.0.1:22")
	if got := strings.Count(e.message(), note); got != 0 {
		t.Errorf("the note shows again (%d times): %q", got, e.message())
	}
}

// TestTargetNoticesAreTheResolvers: what the console says a TARGETS list
// folded is what its Resolver told the notice it was given (the CLI's
// path), queued and shown under the answer of the command that resolved,
// once per console; the console computes no notes of its own.
func TestTargetNoticesAreTheResolvers(t *testing.T) {
	e := newEnv(t, 160, 30, false)
	const note = "a note only the resolver knows"
	opts := e.m.opts
	opts.Resolver = func(notice func(string)) func(string) ([]fanout.Target, error) {
		return func(spec string) ([]fanout.Target, error) {
			if spec == "h.lan" {
				notice(note)
			}
			return []fanout.Target{commands.LocalTarget()}, nil
		}
	}
	e.m = newModel(context.Background(), opts, e.fleet.run, e.clock.Now)
	e.m.Update(tea.WindowSizeMsg{Width: 160, Height: 30})
	e.submit("/target h.lan")
	e.wantMessage("target h.lan: ", note)
	e.submit("/target h.lan")
	if got := strings.Count(e.message(), note); got != 0 {
		t.Errorf("the note shows again (%d times): %q", got, e.message())
	}
}
