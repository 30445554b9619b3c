package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
