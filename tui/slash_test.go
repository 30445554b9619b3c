package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/rexconsole/rex/tui/engine"
)

// TestSlashCommands runs every slash command's happy path and its error
// against a model with the test fleet.
func TestSlashCommands(t *testing.T) {
	tests := []struct {
		name  string
		setup []string // lines submitted first
		line  string
		check func(t *testing.T, e *testEnv)
	}{
		{"device list", nil, "/device list", func(t *testing.T, e *testEnv) {
			e.wantMessage("web1", "root@10.0.0.1", "db1", "admin@10.0.0.9:2222")
		}},
		{"device add reloads the sidebar", nil, "/device add api1 deploy@10.0.1.1 --port 2200", func(t *testing.T, e *testEnv) {
			e.wantMessage("added device api1")
			if !strings.Contains(e.screen(), "api1") {
				t.Errorf("the sidebar does not list the new device:\n%s", e.screen())
			}
			if _, ok := e.m.reg.Device("api1"); !ok {
				t.Error("the registry snapshot was not reloaded")
			}
		}},
		{"device group add", nil, "/device group add web db1", func(t *testing.T, e *testEnv) {
			e.wantMessage("db1")
			if g, _ := e.m.reg.Group("web"); len(g.Members) != 4 {
				t.Errorf("group web = %v, want 4 members", g.Members)
			}
		}},
		{"device error", nil, "/device show nosuch", func(t *testing.T, e *testEnv) {
			e.wantError(`nosuch`)
			if len(e.m.msg.lines) != 1 {
				t.Errorf("error is %d lines, want one: %q", len(e.m.msg.lines), e.m.msg.lines)
			}
		}},
		{"device unknown verb", nil, "/device lsit", func(t *testing.T, e *testEnv) {
			e.wantError(`unknown command "lsit"`, "list")
		}},
		{"device help opens a pane", nil, "/device help", func(t *testing.T, e *testEnv) {
			// The usage is longer than the message area at 80x24.
			if len(e.m.panes) != 1 || e.m.panes[0].Title() != "/device help" {
				t.Fatalf("panes = %v, want one text pane", len(e.m.panes))
			}
			if !strings.Contains(e.paneText(0), "group create NAME") {
				t.Errorf("pane text = %q", e.paneText(0))
			}
			e.wantMessage("shown in a pane")
		}},
		{"device quoting", nil, `/device add api2 10.0.1.2 --desc "front end"`, func(t *testing.T, e *testEnv) {
			if d, _ := e.m.reg.Device("api2"); d.Description != "front end" {
				t.Errorf("description = %q, want the quoted words as one", d.Description)
			}
		}},
		{"target group", nil, "/target web", func(t *testing.T, e *testEnv) {
			if e.m.target != "web" || e.m.targetCount != 3 {
				t.Errorf("target = %q (%d)", e.m.target, e.m.targetCount)
			}
			e.wantMessage("3 machines", "web[1-3]")
			if !strings.Contains(e.screen(), "web (3) ❯") {
				t.Errorf("prompt does not show the target:\n%s", e.screen())
			}
		}},
		{"target device", nil, "/target web2", func(t *testing.T, e *testEnv) {
			if e.m.target != "web2" {
				t.Errorf("target = %q", e.m.target)
			}
		}},
		{"target local", []string{"/target web"}, "/target local", func(t *testing.T, e *testEnv) {
			if e.m.target != "local" || e.m.targetCount != 1 {
				t.Errorf("target = %q", e.m.target)
			}
		}},
		{"target show", nil, "/target", func(t *testing.T, e *testEnv) {
			e.wantMessage("the target is local")
		}},
		{"target error", nil, "/target wbe1", func(t *testing.T, e *testEnv) {
			e.wantError("wbe1", "web1")
			if e.m.target != "local" {
				t.Errorf("a bad target changed the target to %q", e.m.target)
			}
		}},
		{"run", nil, "/run web -- hostname", func(t *testing.T, e *testEnv) {
			if len(e.m.panes) != 3 {
				t.Fatalf("%d panes, want 3", len(e.m.panes))
			}
			for i, name := range []string{"web1", "web2", "web3"} {
				if e.m.panes[i].Title() != name || e.paneText(i) != name+"\n" {
					t.Errorf("pane %d = %s %q", i, e.m.panes[i].Title(), e.paneText(i))
				}
			}
			e.wantMessage("hostname — 3 ok in 2s")
		}},
		{"run with shell syntax", nil, "/run web1 -- 'echo a | wc -l'", func(t *testing.T, e *testEnv) {
			if got := e.fleet.runs[0]; got != "web1: echo a | wc -l" {
				t.Errorf("ran %q", got)
			}
		}},
		{"run gather", nil, "/run web --gather -- echo same", func(t *testing.T, e *testEnv) {
			if e.m.gather == nil {
				t.Fatal("--gather did not open the gathered view")
			}
		}},
		{"run error", nil, "/run web", func(t *testing.T, e *testEnv) {
			e.wantError("no command to run", "/run TARGETS")
		}},
		{"run bad target", nil, "/run nosuch -- ls", func(t *testing.T, e *testEnv) {
			e.wantError("nosuch")
			if len(e.m.panes) != 0 {
				t.Error("a failed /run opened panes")
			}
		}},
		{"run json", nil, "/run web --json -- ls", func(t *testing.T, e *testEnv) {
			e.wantError("--json is for scripts")
		}},
		{"run unclosed quote", nil, "/run web -- 'ls", func(t *testing.T, e *testEnv) {
			e.wantError("quote is not closed")
		}},
		{"kill", []string{"/run web1,web2 -- sleep"}, "/kill", func(t *testing.T, e *testEnv) {
			e.wantMessage("sleep — cancelled: 0 ok, 2 failed")
			e.settle()
			for i := range e.m.panes {
				if ph, _, r := e.m.panes[i].(*outputPane).current().Status(); ph != engine.Done || r.Err == nil {
					t.Errorf("pane %d did not end cancelled", i)
				}
			}
			if !strings.Contains(e.screen(), "cancelled") {
				t.Errorf("headers do not say cancelled:\n%s", e.screen())
			}
		}},
		{"kill nothing", []string{"echo hi"}, "/kill", func(t *testing.T, e *testEnv) {
			e.wantError("nothing is running")
		}},
		{"close", []string{"/run web1 -- echo a", "/run web2 -- echo b"}, "/close", func(t *testing.T, e *testEnv) {
			if len(e.m.panes) != 1 || e.m.focus != 0 {
				t.Errorf("%d panes, focus %d; want 1, 0", len(e.m.panes), e.m.focus)
			}
			if n := len(e.m.tasks.List()); n != 2 {
				t.Errorf("%d tasks on the list, want both (/tasks opens a closed one again)", n)
			}
		}},
		{"close all", []string{"/run web -- echo a", "/run web1 -- sleep"}, "/close all", func(t *testing.T, e *testEnv) {
			if len(e.m.panes) != 1 {
				t.Errorf("%d panes left, want only the running one", len(e.m.panes))
			}
			e.wantMessage("closed 3 panes; 1 pane is still running")
		}},
		{"close running", []string{"/run web1 -- sleep"}, "/close", func(t *testing.T, e *testEnv) {
			e.wantError("still running", "ctrl+c")
		}},
		{"close nothing", nil, "/close", func(t *testing.T, e *testEnv) {
			e.wantError("no pane to close")
		}},
		{"close bad arg", []string{"echo a"}, "/close everything", func(t *testing.T, e *testEnv) {
			e.wantError(`takes nothing or "all"`)
		}},
		{"clear", []string{"/run web -- echo a"}, "/clear", func(t *testing.T, e *testEnv) {
			if e.paneText(0) != "" || e.paneText(1) != "a\n" {
				t.Errorf("pane texts %q %q; want only the focused one cleared", e.paneText(0), e.paneText(1))
			}
		}},
		{"clear all", []string{"/run web -- echo a"}, "/clear all", func(t *testing.T, e *testEnv) {
			for i := range e.m.panes {
				if e.paneText(i) != "" {
					t.Errorf("pane %d = %q", i, e.paneText(i))
				}
			}
		}},
		{"clear bad arg", nil, "/clear x", func(t *testing.T, e *testEnv) {
			e.wantError("/clear takes")
		}},
		{"layout", nil, "/layout rows", func(t *testing.T, e *testEnv) {
			if e.m.layout != layoutRows {
				t.Errorf("layout = %q", e.m.layout)
			}
		}},
		{"layout error", nil, "/layout grdi", func(t *testing.T, e *testEnv) {
			e.wantError("grid, rows or columns", "did you mean grid")
		}},
		{"theme list", nil, "/theme", func(t *testing.T, e *testEnv) {
			e.wantMessage("* dark", "light", "high-contrast")
		}},
		{"theme", nil, "/theme high-contrast", func(t *testing.T, e *testEnv) {
			if e.m.st.Theme.Name != "high-contrast" {
				t.Errorf("theme = %q", e.m.st.Theme.Name)
			}
			data, err := os.ReadFile(filepath.Join(e.m.opts.ConfigDir, ConfigFile))
			if err != nil || !strings.Contains(string(data), `theme = "high-contrast"`) {
				t.Errorf("config.toml = %q, %v", data, err)
			}
		}},
		{"theme error", nil, "/theme solarized", func(t *testing.T, e *testEnv) {
			e.wantError(`unknown theme "solarized"`, "light")
			if e.m.st.Theme.Name != "dark" {
				t.Errorf("theme changed to %q", e.m.st.Theme.Name)
			}
		}},
		{"gather", []string{"/run web -- echo same"}, "/gather", func(t *testing.T, e *testEnv) {
			g := e.m.gather.pane.buf.Text()
			for _, want := range []string{"2 different results from 3 targets", "web[1-2] (2 of 3) · exit 0", "web3 (1 of 3) · exit 0 · differs", "different"} {
				if !strings.Contains(g, want) {
					t.Errorf("gathered view lacks %q:\n%s", want, g)
				}
			}
		}},
		{"gather error", []string{"echo a"}, "/gather", func(t *testing.T, e *testEnv) {
			e.wantError("several targets")
		}},
		{"zoom", []string{"/run web -- echo a"}, "/zoom", func(t *testing.T, e *testEnv) {
			if !e.m.zoom || len(e.m.geometry().panes) != 1 {
				t.Error("not zoomed")
			}
		}},
		{"zoom error", nil, "/zoom", func(t *testing.T, e *testEnv) {
			e.wantError("no pane to zoom")
		}},
		{"find", []string{"/run web1 -- seq 50"}, "/find 4", func(t *testing.T, e *testEnv) {
			e.wantMessage("match 14 of 14") // 4, 14, 24, 34, 40-49
		}},
		{"find error", nil, "/find x", func(t *testing.T, e *testEnv) {
			e.wantError("no pane to search")
		}},
		{"help", nil, "/help", func(t *testing.T, e *testEnv) {
			if !e.m.helpOpen || !strings.Contains(e.screen(), "/device VERB") {
				t.Errorf("help not shown:\n%s", e.screen())
			}
			// It scrolls to the rest, down to its last line.
			seen := map[string]bool{}
			for range 20 {
				s := e.screen()
				for _, want := range []string{"/layout grid|rows|columns", "esc closes this help"} {
					seen[want] = seen[want] || strings.Contains(s, want)
				}
				e.press("pgdown")
			}
			if len(seen) != 2 || !seen["/layout grid|rows|columns"] || !seen["esc closes this help"] {
				t.Errorf("scrolling the help never showed %v:\n%s", seen, e.screen())
			}
		}},
		{"unknown", nil, "/hepl", func(t *testing.T, e *testEnv) {
			e.wantError("unknown command /hepl", "did you mean /help?")
		}},
		{"path runs as a command", nil, "/usr/bin/uptime", func(t *testing.T, e *testEnv) {
			if len(e.fleet.runs) != 1 || e.fleet.runs[0] != "local: /usr/bin/uptime" {
				t.Errorf("runs = %q", e.fleet.runs)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 80, 24, true)
			for _, l := range tt.setup {
				e.runDevice(l)
				e.settle()
			}
			e.runDevice(tt.line)
			e.settle()
			tt.check(t, e)
			// Whatever happened, the console still draws.
			checkScreen(t, e, 80, 24)
			if e.m.quitting {
				t.Error("the console quit")
			}
		})
	}
}

func TestQuit(t *testing.T) {
	tests := []struct {
		name string
		do   func(e *testEnv) tea.Cmd
		quit bool
	}{
		{"slash", func(e *testEnv) tea.Cmd { e.typeText("/quit"); _, c := e.m.Update(keyMsg(e.t, "enter")); return c }, true},
		{"ctrl+q", func(e *testEnv) tea.Cmd { _, c := e.m.Update(keyMsg(e.t, "ctrl+q")); return c }, true},
		{"double ctrl+c", func(e *testEnv) tea.Cmd {
			e.press("ctrl+c")
			_, c := e.m.Update(keyMsg(e.t, "ctrl+c"))
			return c
		}, true},
		{"slow double ctrl+c", func(e *testEnv) tea.Cmd {
			e.press("ctrl+c")
			e.clock.Advance(2 * quitWindow)
			_, c := e.m.Update(keyMsg(e.t, "ctrl+c"))
			return c
		}, false},
		{"ctrl+c clears the line first", func(e *testEnv) tea.Cmd {
			e.typeText("ls")
			e.press("ctrl+c")
			_, c := e.m.Update(keyMsg(e.t, "ctrl+c"))
			return c
		}, false},
		{"ctrl+c burst that cancelled a task", func(e *testEnv) tea.Cmd {
			e.submit("/run web1 -- sleep")
			e.press("ctrl+c")
			e.settle()
			e.press("ctrl+c")
			_, c := e.m.Update(keyMsg(e.t, "ctrl+c"))
			return c
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 80, 24, true)
			cmd := tt.do(e)
			quit := false
			if cmd != nil {
				_, quit = cmd().(tea.QuitMsg)
			}
			if quit != tt.quit || e.m.quitting != tt.quit {
				t.Errorf("quit = %v (quitting %v), want %v; message %q", quit, e.m.quitting, tt.quit, e.message())
			}
		})
	}
}
