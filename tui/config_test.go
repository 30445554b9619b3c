package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		check   func(Config) bool
		wantErr string
	}{
		{"empty", "", func(c Config) bool { return c.Theme == "dark" && c.Scrollback == DefaultScrollback && c.mouse() }, ""},
		{"all", "theme = \"light\"\nlayout = \"rows\"\nconcurrency = 8\nscrollback = 500\nmouse = false\n[keys]\nzoom = [\"f2\"]\n",
			func(c Config) bool {
				return c.Theme == "light" && c.Layout == "rows" && c.Concurrency == 8 && c.Scrollback == 500 && !c.mouse() && c.Keys["zoom"][0] == "f2"
			}, ""},
		{"syntax", "theme = \n", nil, "line 1"},
		{"unknown", "colour = 1\n", nil, `unknown setting "colour"`},
		{"bad layout", "layout = \"tiles\"\n", nil, "grid, rows or columns"},
		{"bad scrollback", "scrollback = 5\n", nil, "scrollback 5"},
		{"huge scrollback", "scrollback = 99999999\n", nil, "from 100 to 1000000"},
		{"terminal scrollback", "terminal_scrollback = 500\n", func(c Config) bool { return c.TermScrollback == 500 && c.Scrollback == DefaultScrollback }, ""},
		{"bad terminal scrollback", "terminal_scrollback = 1\n", nil, "terminal_scrollback 1: use a number of lines from 100 to 100000"},
		{"bad concurrency", "concurrency = 0\n", nil, "concurrency 0"},
		{"bad theme name", "theme = \"../x\"\n", nil, "invalid theme name"},
		{"bad action", "[keys]\nzoomm = [\"f2\"]\n", nil, `unknown action "zoomm"`},
		{"no keys", "[keys]\nzoom = []\n", nil, "has no keys"},
		{"bad key", "[keys]\nzoom = [\"cmd+z\"]\n", nil, `unknown modifier "cmd"`},
		{"wrong type", "mouse = \"yes\"\n", nil, "fix it"},
		{"idle timeout by default", "", func(c Config) bool { return c.IdleTimeout == 10*time.Minute }, ""},
		{"idle timeout", "idle_timeout = \"90s\"\n", func(c Config) bool { return c.IdleTimeout == 90*time.Second }, ""},
		{"idle timeout off", "idle_timeout = \"0s\"\n", func(c Config) bool { return c.IdleTimeout == 0 }, ""},
		{"negative idle timeout", "idle_timeout = \"-1m\"\n", nil, "idle_timeout -1m0s"},
		{"bad idle timeout", "idle_timeout = \"soon\"\n", nil, "fix it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				if c.Theme != "dark" || c.Scrollback != DefaultScrollback {
					t.Errorf("a bad file must give the defaults, got %+v", c)
				}
				return
			}
			if err != nil || !tt.check(c) {
				t.Errorf("parseConfig = %+v, %v", c, err)
			}
		})
	}
}

// TestBadConfigStillOpens: a broken config.toml is reported in the
// console, which opens with the defaults.
func TestBadConfigStillOpens(t *testing.T) {
	e := newEnv(t, 80, 24, false)
	if err := os.MkdirAll(e.m.opts.ConfigDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.m.opts.ConfigDir, ConfigFile), []byte("theme = \"nosuch\"\nscrollback = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := newModel(e.m.ctx, e.m.opts, e.fleet.run, e.clock.Now)
	if m.cfg.Scrollback != DefaultScrollback || m.st.Theme.Name != "dark" || m.msg.kind != msgError {
		t.Errorf("cfg %+v theme %s message %q", m.cfg, m.st.Theme.Name, m.msg.lines)
	}
	if !strings.Contains(strings.Join(m.msg.lines, " "), "scrollback 1") {
		t.Errorf("message %q does not name the bad setting", m.msg.lines)
	}
	// A good file with an unknown theme falls back too, and says so.
	os.WriteFile(filepath.Join(e.m.opts.ConfigDir, ConfigFile), []byte("theme = \"nosuch\"\n"), 0o600)
	m = newModel(e.m.ctx, e.m.opts, e.fleet.run, e.clock.Now)
	if m.st.Theme.Name != "dark" || !strings.Contains(strings.Join(m.msg.lines, " "), `unknown theme "nosuch"`) {
		t.Errorf("theme %s message %q", m.st.Theme.Name, m.msg.lines)
	}
}

func TestConfigKeysAndLayout(t *testing.T) {
	e := newEnv(t, 80, 24, false)
	os.MkdirAll(e.m.opts.ConfigDir, 0o700)
	os.WriteFile(filepath.Join(e.m.opts.ConfigDir, ConfigFile), []byte("layout = \"columns\"\nscrollback = 100\n[keys]\nzoom = [\"f2\"]\nquit = [\"ctrl+x\"]\n"), 0o600)
	e.m = newModel(e.m.ctx, e.m.opts, e.fleet.run, e.clock.Now)
	e.m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	if e.m.layout != layoutColumns {
		t.Errorf("layout %q", e.m.layout)
	}
	e.submit("seq 300")
	if n := strings.Count(e.paneText(0), "\n"); n != 100 {
		t.Errorf("pane keeps %d lines, want the configured 100", n)
	}
	e.press("f2")
	if !e.m.zoom {
		t.Error("f2 did not zoom")
	}
	e.press("ctrl+o")
	if !e.m.zoom {
		t.Error("ctrl+o still zooms after zoom was rebound")
	}
	if !strings.Contains(e.screen(), "ctrl+x quit") {
		t.Errorf("the status line does not show the rebound quit key:\n%s", e.screen())
	}
}

func TestSaveTheme(t *testing.T) {
	tests := []struct {
		name string
		in   string // "" and absent differ: absent is "-"
		want string
	}{
		{"no file", "-", "theme = \"light\"\n"},
		{"empty", "", "theme = \"light\"\n"},
		{"replace", "# my settings\ntheme = \"dark\" # was dark\nscrollback = 500\n", "# my settings\ntheme = \"light\"\nscrollback = 500\n"},
		{"before tables", "scrollback = 500\n[keys]\nzoom = [\"f2\"]\n", "scrollback = 500\ntheme = \"light\"\n[keys]\nzoom = [\"f2\"]\n"},
		{"append", "# comment\nmouse = false", "# comment\nmouse = false\ntheme = \"light\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rex")
			path := filepath.Join(dir, ConfigFile)
			if tt.in != "-" {
				os.MkdirAll(dir, 0o700)
				if err := os.WriteFile(path, []byte(tt.in), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			if err := saveTheme(dir, "light"); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil || string(data) != tt.want {
				t.Errorf("config.toml = %q, want %q (%v)", data, tt.want, err)
			}
			if c, err := parseConfig(data); err != nil || c.Theme != "light" {
				t.Errorf("saved file reads back as %+v, %v", c, err)
			}
			fi, _ := os.Stat(path)
			if want := os.FileMode(0o600); tt.in != "-" {
				want = 0o640
				if fi.Mode().Perm() != want {
					t.Errorf("mode %v, want the file's own %v", fi.Mode().Perm(), want)
				}
			}
		})
	}
	if err := saveTheme(t.TempDir(), "../../etc"); err == nil {
		t.Error("saveTheme accepted a path as a theme name")
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("theme = \"light\"\n[keys]\nzoom = [\"f2\"]\n"))
	f.Add([]byte("scrollback = 100\nmouse = false\n"))
	f.Add([]byte("[keys\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseConfig(data)
		// Whatever the file, the result is usable.
		if c.Scrollback < minScrollback || c.Scrollback > maxScrollback || c.Concurrency < 1 || !validLayout(c.Layout) {
			t.Fatalf("parseConfig gave an unusable config %+v (error %v)", c, err)
		}
	})
}

func TestConfigLeavesAgentTableToTheAgent(t *testing.T) {
	cfg, err := parseConfig([]byte("theme = \"dark\"\n[agent]\nmodel = \"llama3.1\"\nmax_steps = 10\n"))
	if err != nil || cfg.Theme != "dark" {
		t.Errorf("[agent] in config.toml: %+v, %v", cfg, err)
	}
	if _, err := parseConfig([]byte("[agnet]\nmodel = \"x\"\n")); err == nil {
		t.Error("a misspelt table was accepted")
	}
}
