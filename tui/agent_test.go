package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/llmtest"
	"github.com/rexconsole/rex/tui/dialog"
)

func TestAgentWithoutAModelSaysHowToConfigureOne(t *testing.T) {
	e := newEnv(t, 120, 30, false)
	e.submit("? why is the disk full")
	e.wantError("no agent model is configured: add an [agent] table")
	if len(e.m.panes) != 0 {
		t.Errorf("a pane opened: %d", len(e.m.panes))
	}
	e.submit("/agent")
	e.wantMessage("no agent model is configured")
	// With a model but no connections (this test console has none), it
	// says so in one sentence too.
	os.MkdirAll(e.m.opts.ConfigDir, 0o700)
	os.WriteFile(filepath.Join(e.m.opts.ConfigDir, "config.toml"), []byte("[agent]\nmodel = \"m\"\n"), 0o600)
	e.submit("/agent")
	e.wantMessage("the agent is m on openai-compatible; ask with ? QUESTION")
	e.submit("? hello")
	e.wantError("the agent needs connections to targets")
	e.submit("/agent bogus")
	e.wantError("/agent bogus: use /agent on|off|new|resume [ID]|each GROUP -- TASK")
}

func TestYoloShowsInTheStatusBar(t *testing.T) {
	e := newEnv(t, 120, 30, false)
	if strings.Contains(e.screen(), "YOLO") {
		t.Fatal("YOLO without --yolo")
	}
	e.m.opts.Agent.Yolo = true
	e.settle()
	if !strings.Contains(e.screen(), "YOLO") {
		t.Errorf("no YOLO in the status bar:\n%s", e.screen())
	}
}

// pump runs frames until cond holds: the agent works on goroutines, and
// what it reports is taken in Update on the frame.
func (e *testEnv) pump(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.m.Update(frameMsg{})
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("waited in vain for %s; screen:\n%s", what, e.screen())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestAgentTurnInTheConsole runs a turn in the console's model against
// in-process rexds and the scripted server: the question shows with the
// call, the consent dialog answers it, the call's output lands in the
// target's host panes, the answer in the agent's pane.
func TestAgentTurnInTheConsole(t *testing.T) {
	e := newEnv(t, 160, 40, true)
	f := newRexdFleet(t, "db1")
	withRexdFleet(e, f)
	srv := llmtest.New(t,
		&llmtest.Reply{Text: []string{"Checking the roles."}, Calls: []llmtest.Call{llmtest.Bash("c1", "cat role")}},
		&llmtest.Reply{When: llmtest.AfterTool("c1"), Text: []string{"web1 and web2 serve **www**; web3 has none."}},
		&llmtest.Reply{When: llmtest.Mentions("wait a while"), Calls: []llmtest.Call{llmtest.Bash("c2", "echo up-$((40+2)); exec sleep 300")}},
	)
	os.MkdirAll(e.m.opts.ConfigDir, 0o700)
	os.WriteFile(filepath.Join(e.m.opts.ConfigDir, "config.toml"), []byte(fmt.Sprintf("[agent]\nmodel = \"m\"\nbase_url = %q\n", srv.URL)), 0o600)
	for _, h := range []string{"web1", "web2"} {
		os.MkdirAll(f.home(h), 0o755)
		os.WriteFile(filepath.Join(f.home(h), "role"), []byte("www\n"), 0o644)
	}
	e.submit("/target web")
	e.submit("? which roles do these hosts have")
	e.pump("the consent dialog", func() bool { _, ok := e.m.dialogs.Front().(*dialog.Consent); return ok })
	c := e.m.dialogs.Front().(*dialog.Consent)
	if info := c.Info(); info.Command != "cat role" || info.Target != "web" || info.Hosts != "web[1-3]" || info.NHosts != 3 {
		t.Errorf("the dialog asks about %+v", info)
	}
	if s := e.screen(); !strings.Contains(s, "The agent asks to run bash") || !strings.Contains(s, "⚙ bash cat role → web (web[1-3])") {
		t.Errorf("while asking:\n%s", s)
	}
	e.press("y")
	e.pump("the end of the turn", func() bool { return e.m.ag.turn == nil && !e.m.agentBusy() })
	if len(e.m.panes) != 4 || e.m.panes[0] != Pane(e.m.ag.pane) {
		t.Fatalf("%d panes; the agent's first: %v", len(e.m.panes), e.m.panes[0] == Pane(e.m.ag.pane))
	}
	for i, h := range []string{"web1", "web2", "web3"} {
		text := e.paneText(i + 1)
		want := "www"
		if h == "web3" {
			want = "No such file or directory"
		}
		if e.m.panes[i+1].Title() != h || !strings.Contains(text, want) || !strings.Contains(e.screen(), "╭─ "+h+" · agent: cat role") {
			t.Errorf("pane %d (%s): %q", i+1, e.m.panes[i+1].Title(), text)
		}
	}
	s := e.screen()
	if !strings.Contains(s, "web1 and web2 serve www; web3 has none.") || !strings.Contains(s, "✓ 2/3 ok; web3 exit 1") || !strings.Contains(s, "m 240 tok") {
		t.Errorf("after the turn:\n%s", s)
	}
	if e.m.focusedPane() != Pane(e.m.ag.pane) {
		t.Error("the focus left the agent's pane")
	}

	// ctrl+c on the agent's pane stops the turn and its commands.
	e.submit("? wait a while")
	e.pump("the second question", func() bool { _, ok := e.m.dialogs.Front().(*dialog.Consent); return ok })
	e.press("y")
	e.pump("the sleeps to start", func() bool { return strings.Count(e.screen(), "up-42") == 3 })
	e.press("ctrl+c")
	e.pump("the end of the turn", func() bool { return e.m.ag.turn == nil && !e.m.agentBusy() && len(e.m.tasks.Running()) == 0 })
	s = e.screen()
	if !strings.Contains(s, "cancelled; the request and every command") || strings.Count(s, "cancelled ·") < 3 {
		t.Errorf("after ctrl+c:\n%s", s)
	}
}
