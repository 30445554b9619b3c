package tui

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/themes"
	"github.com/rexconsole/rex/tui/engine"
)

// DefaultScrollback is how many lines a task pane keeps unless
// config.toml says otherwise.
const DefaultScrollback = engine.DefaultScrollback

// DefaultTermScrollback is how many lines of history a terminal pane
// keeps unless config.toml says otherwise.
const DefaultTermScrollback = 2000

// ConfigFile is the console's settings file in the config dir.
const ConfigFile = "config.toml"

// Config is config.toml:
//
//	theme = "dark"          # a built-in theme or one in themes/
//	layout = "grid"         # grid, rows or columns
//	concurrency = 64        # targets a command runs on at once
//	scrollback = 10000      # lines kept per pane
//	terminal_scrollback = 2000  # lines of history per terminal pane (/attach)
//	mouse = true            # wheel scrolling and click to focus
//	idle_timeout = "10m"    # close a connection unused that long; "0s" keeps it
//	resume_grace = "10m"    # how long rexd keeps what runs when a connection drops; "0s": v1
//	[keys]                  # action = [keys...]; see the help overlay
//	zoom = ["ctrl+o", "f2"]
type Config struct {
	Theme       string `toml:"theme"`
	Layout      string `toml:"layout"`
	Concurrency int    `toml:"concurrency"`
	Scrollback  int    `toml:"scrollback"`
	// TermScrollback is the history of a terminal pane: kept as styled
	// cells, a line costs the emulator far more than a task pane's line.
	TermScrollback int   `toml:"terminal_scrollback"`
	Mouse          *bool `toml:"mouse"`
	// IdleTimeout closes a target's connection (and its rexd) once no
	// pane, task or terminal has used it for that long; 0 keeps it.
	IdleTimeout time.Duration `toml:"idle_timeout"`
	// ResumeGrace is how long rexd keeps a connection's processes and
	// their output when the connection drops, for the console to
	// reconnect and resume (capped by rexd's own limit); 0 keeps REXD
	// v1's rule: a dropped connection stops them.
	ResumeGrace time.Duration       `toml:"resume_grace"`
	Keys        map[string][]string `toml:"keys"`
	// Agent is the [agent] table, which the agent reads and checks itself.
	Agent toml.Primitive `toml:"agent"`
}

// Limits of the numeric settings.
const (
	minScrollback  = 100
	maxScrollback  = 1000000
	maxTermHistory = 100000
	maxConcurrency = 4096
)

// defaultConfig is the configuration without a file.
func defaultConfig() Config {
	return Config{
		Theme:          themes.Default,
		Layout:         layoutGrid,
		Concurrency:    fanout.DefaultConcurrency,
		Scrollback:     DefaultScrollback,
		TermScrollback: DefaultTermScrollback,
		IdleTimeout:    fanout.DefaultIdleTimeout,
		ResumeGrace:    DefaultResumeGrace,
	}
}

// DefaultResumeGrace is resume_grace's default: rexd's own default cap.
const DefaultResumeGrace = 10 * time.Minute

// mouse reports whether mouse support is on (it is unless turned off).
func (c Config) mouse() bool { return c.Mouse == nil || *c.Mouse }

// loadConfig reads dir/config.toml. A missing file gives the defaults; a
// bad one gives the defaults and an error to show, so the console always
// opens.
func loadConfig(dir string) (Config, error) {
	cfg := defaultConfig()
	if dir == "" {
		return cfg, nil
	}
	path := filepath.Join(dir, ConfigFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, fmt.Errorf("read %s: %w", path, err)
	}
	parsed, err := parseConfig(data)
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return parsed, nil
}

// parseConfig reads config.toml's contents over the defaults.
func parseConfig(data []byte) (Config, error) {
	cfg := defaultConfig()
	md, err := toml.Decode(string(data), &cfg)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return defaultConfig(), fmt.Errorf("line %d: %s; fix it, rex uses the defaults until then", pe.Position.Line, pe.Message)
		}
		return defaultConfig(), fmt.Errorf("%v; fix it, rex uses the defaults until then", err)
	}
	for _, k := range md.Undecoded() {
		// [agent] belongs to the agent (internal/agent.LoadConfig checks it).
		if k[0] == "agent" {
			continue
		}
		return defaultConfig(), fmt.Errorf("unknown setting %q; the settings are theme, layout, concurrency, scrollback, terminal_scrollback, mouse, idle_timeout, resume_grace, [keys] and [agent]", k.String())
	}
	if err := themes.ValidateName(cfg.Theme); err != nil {
		return defaultConfig(), fmt.Errorf("theme: %w", err)
	}
	if !validLayout(cfg.Layout) {
		return defaultConfig(), fmt.Errorf("layout %q: use grid, rows or columns", cfg.Layout)
	}
	if cfg.Concurrency < 1 || cfg.Concurrency > maxConcurrency {
		return defaultConfig(), fmt.Errorf("concurrency %d: use a number from 1 to %d", cfg.Concurrency, maxConcurrency)
	}
	if cfg.Scrollback < minScrollback || cfg.Scrollback > maxScrollback {
		return defaultConfig(), fmt.Errorf("scrollback %d: use a number of lines from %d to %d", cfg.Scrollback, minScrollback, maxScrollback)
	}
	if cfg.TermScrollback < minScrollback || cfg.TermScrollback > maxTermHistory {
		return defaultConfig(), fmt.Errorf("terminal_scrollback %d: use a number of lines from %d to %d", cfg.TermScrollback, minScrollback, maxTermHistory)
	}
	if cfg.IdleTimeout < 0 {
		return defaultConfig(), fmt.Errorf("idle_timeout %s: use a duration such as \"10m\", or \"0s\" to keep connections open", cfg.IdleTimeout)
	}
	if cfg.ResumeGrace < 0 {
		return defaultConfig(), fmt.Errorf("resume_grace %s: use a duration such as \"10m\", or \"0s\" for REXD v1's rule", cfg.ResumeGrace)
	}
	keys := DefaultKeyMap()
	if err := keys.apply(cfg.Keys); err != nil {
		return defaultConfig(), err
	}
	return cfg, nil
}

// isThemeSetting reports whether l is a `theme = ...` line.
func isThemeSetting(l string) bool {
	rest, ok := strings.CutPrefix(strings.TrimSpace(l), "theme")
	return ok && strings.HasPrefix(strings.TrimSpace(rest), "=")
}

// saveTheme records the chosen theme in dir/config.toml, changing only
// that one line so the operator's comments and order survive. The file is
// replaced atomically.
func saveTheme(dir, name string) error {
	if err := themes.ValidateName(name); err != nil {
		return err
	}
	path := filepath.Join(dir, ConfigFile)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("save theme in %s: %w", path, err)
	}
	setting := "theme = " + strconv.Quote(name)
	lines := strings.Split(string(data), "\n")
	done := false
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") {
			// Tables start; a top-level setting must come before them.
			lines = append(lines[:i], append([]string{setting}, lines[i:]...)...)
			done = true
			break
		}
		if isThemeSetting(l) {
			lines[i] = setting
			done = true
			break
		}
	}
	if !done {
		if len(data) == 0 {
			lines = []string{setting, ""}
		} else {
			if lines[len(lines)-1] == "" {
				lines = lines[:len(lines)-1]
			}
			lines = append(lines, setting, "")
		}
	}
	out := []byte(strings.Join(lines, "\n"))
	// Never write a file this console could not read back.
	if _, err := parseConfig(out); err != nil && len(data) > 0 {
		if _, before := parseConfig(data); before == nil {
			return fmt.Errorf("save theme in %s: the edit would break the file (%v); set theme there by hand", path, err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save theme: %w", err)
	}
	return writeAtomic(path, out)
}

// writeAtomic replaces path with data through a temporary file.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = bytes.NewReader(data).WriteTo(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	mode := fs.FileMode(0o600)
	if fi, serr := os.Stat(path); serr == nil {
		mode = fi.Mode().Perm()
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
