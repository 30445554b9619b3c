package tui

import (
	"strings"
	"testing"
)

// headers are the command lines of pane i.
func (e *testEnv) headers(i int) []string {
	var out []string
	for _, l := range e.paneLines(i) {
		if strings.HasPrefix(l, "❯ ") {
			out = append(out, l)
		}
	}
	return out
}

// TestTargetPanes: commands on the current target append to one pane per
// host, reused while the target stays (and again when it comes back);
// /run elsewhere opens panes of its own.
func TestTargetPanes(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	e.submit("/target web")
	e.submit("echo one")
	e.submit("hostname")
	e.submit("/run web -- echo three") // /run on the current target: the same panes
	if len(e.m.panes) != 3 {
		t.Fatalf("%d panes after three commands on 3 hosts, want 3", len(e.m.panes))
	}
	want := []string{"❯ echo one · 12:00:00", "❯ hostname · 12:00:00", "❯ echo three · 12:00:00"}
	for i, host := range []string{"web1", "web2", "web3"} {
		if e.m.panes[i].Title() != host {
			t.Errorf("pane %d is %s, want %s", i, e.m.panes[i].Title(), host)
		}
		if got := e.headers(i); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s's headers %q, want %q", host, got, want)
		}
	}
	if got := strings.Join(e.paneLines(1), "|"); got != "❯ echo one · 12:00:00|one|✓ exit 0 · 1.5s|❯ hostname · 12:00:00|web2|✓ exit 0 · 1.5s|❯ echo three · 12:00:00|three|✓ exit 0 · 1.5s" {
		t.Errorf("web2 reads %q", got)
	}
	// The screen says which command each block came from.
	if s := e.screen(); strings.Count(s, "❯ hostname") != 3 {
		t.Errorf("the panes do not show their headers:\n%s", s)
	}

	// A command elsewhere: its own pane.
	e.submit("/run db1 -- echo x")
	if len(e.m.panes) != 4 || e.m.panes[3].Title() != "db1" || e.m.focus != 3 {
		t.Fatalf("/run db1: %d panes, focus %d", len(e.m.panes), e.m.focus)
	}
	// Another target, then back: web's panes take the next command.
	e.submit("/target web1")
	e.submit("uptime")
	if len(e.m.panes) != 5 || e.m.panes[4].Title() != "web1" {
		t.Fatalf("a command on web1: %d panes", len(e.m.panes))
	}
	e.submit("/target web")
	e.submit("echo again")
	if len(e.m.panes) != 5 || len(e.headers(0)) != 4 {
		t.Errorf("back on web: %d panes, web1's pane has %d commands", len(e.m.panes), len(e.headers(0)))
	}
	if e.m.focus != 0 {
		t.Errorf("focus %d, want web's first pane", e.m.focus)
	}
}

// TestGatherStaysOn: the gathered view, once on, applies to each new
// command on several targets until it is turned off.
func TestGatherStaysOn(t *testing.T) {
	e := newEnv(t, 120, 40, true)
	e.submit("/target web")
	e.submit("echo same")
	e.press("ctrl+g")
	if e.m.gather == nil {
		t.Fatal("ctrl+g did not gather")
	}
	e.submit("hostname")
	if e.m.gather == nil || e.m.gather.task.Command != "hostname" {
		t.Fatalf("the next command is not gathered: %+v", e.m.gather)
	}
	if s := e.screen(); !strings.Contains(s, "gathered · hostname") || !strings.Contains(s, "3 different results from 3 targets") {
		t.Errorf("the gathered view of hostname does not show:\n%s", s)
	}
	e.press("ctrl+g")
	e.submit("echo off")
	if e.m.gather != nil {
		t.Error("the gathered view came back after ctrl+g turned it off")
	}
}
