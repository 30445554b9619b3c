// Package themes holds the console's colour themes: the built-in ones,
// embedded as TOML data files, and the operator's own from
// $XDG_CONFIG_HOME/rex/themes/NAME.toml. A theme is a set of named colour
// tokens; the console builds all of its styles from them.
//
// A theme file looks like this (every key is optional in a user theme; a
// token it leaves out comes from its base, the built-in "dark" unless
// another built-in is named):
//
//	description = "My colours"
//	base = "light"
//	[colors]
//	accent = "#ff00aa"   # #rrggbb, #rgb, an ANSI colour 0-255, or "" for the terminal's own
package themes

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"image/color"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/charmbracelet/x/ansi"
)

// Default is the theme used when none is chosen.
const Default = "dark"

// Ext is the file name extension of theme files.
const Ext = ".toml"

// maxFileSize bounds a theme file; a real one is well under 2 KiB.
const maxFileSize = 64 << 10

//go:embed builtin/*.toml
var builtinFS embed.FS

// Colors are a theme's colour tokens. A nil colour means the terminal's own
// (default foreground or background).
type Colors struct {
	Background    color.Color // behind everything; nil keeps the terminal's
	Text          color.Color // ordinary text and task output
	Muted         color.Color // secondary text: hints, durations, idle states
	Border        color.Color // pane and sidebar borders
	Focus         color.Color // the focused pane's border, the cursor row
	Accent        color.Color // titles, the prompt's target
	Success       color.Color // exit 0, ready connections
	Warning       color.Color // running, connecting, bootstrapping
	Error         color.Color // failures, error messages
	Stderr        color.Color // standard error lines of a task
	SelectionText color.Color // the selected sidebar entry
	SelectionBg   color.Color
	MatchText     color.Color // search matches
	MatchBg       color.Color
	StatusText    color.Color // the status line
	StatusBg      color.Color
}

// Tokens are the token names a theme file uses, in display order.
func Tokens() []string {
	names := make([]string, len(tokenTable))
	for i, t := range tokenTable {
		names[i] = t.name
	}
	return names
}

var tokenTable = []struct {
	name string
	ptr  func(*Colors) *color.Color
}{
	{"background", func(c *Colors) *color.Color { return &c.Background }},
	{"text", func(c *Colors) *color.Color { return &c.Text }},
	{"muted", func(c *Colors) *color.Color { return &c.Muted }},
	{"border", func(c *Colors) *color.Color { return &c.Border }},
	{"focus", func(c *Colors) *color.Color { return &c.Focus }},
	{"accent", func(c *Colors) *color.Color { return &c.Accent }},
	{"success", func(c *Colors) *color.Color { return &c.Success }},
	{"warning", func(c *Colors) *color.Color { return &c.Warning }},
	{"error", func(c *Colors) *color.Color { return &c.Error }},
	{"stderr", func(c *Colors) *color.Color { return &c.Stderr }},
	{"selection_text", func(c *Colors) *color.Color { return &c.SelectionText }},
	{"selection_bg", func(c *Colors) *color.Color { return &c.SelectionBg }},
	{"match_text", func(c *Colors) *color.Color { return &c.MatchText }},
	{"match_bg", func(c *Colors) *color.Color { return &c.MatchBg }},
	{"status_text", func(c *Colors) *color.Color { return &c.StatusText }},
	{"status_bg", func(c *Colors) *color.Color { return &c.StatusBg }},
}

// Theme is a named set of colours.
type Theme struct {
	Name        string
	Description string
	// Dark says the theme is meant for a dark background; widgets that
	// have light and dark variants pick by it.
	Dark   bool
	Colors Colors
	// Path is the file a user theme came from; empty for a built-in one.
	Path string
}

// Info describes a theme without loading its colours.
type Info struct {
	Name        string
	Description string
	Path        string // empty for a built-in theme
}

// file is the shape of a theme file.
type file struct {
	Description string            `toml:"description"`
	Base        string            `toml:"base"`
	Dark        *bool             `toml:"dark"`
	Colors      map[string]string `toml:"colors"`
}

// Builtin returns the names of the built-in themes, sorted.
func Builtin() []string {
	entries, _ := fs.ReadDir(builtinFS, "builtin")
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), Ext); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// ValidateName checks a theme name: lower-case letters, digits, '-' and
// '_', starting with a letter or digit. Names become file names, so
// nothing else (no '/', no '.') is allowed.
func ValidateName(name string) error {
	if name == "" {
		return errors.New("the theme name is empty; name one such as dark, light or high-contrast")
	}
	if len(name) > 64 {
		return fmt.Errorf("the theme name is %d bytes long; use at most 64", len(name))
	}
	for i, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if i > 0 {
			ok = ok || c == '-' || c == '_'
		}
		if !ok {
			return fmt.Errorf("invalid theme name %q: use lower-case letters, digits, '-' and '_'", name)
		}
	}
	return nil
}

// Load returns the named theme: the user's file userDir/NAME.toml when it
// exists (so a user may also restyle a built-in name), else the built-in
// one. userDir may be empty.
func Load(name, userDir string) (Theme, error) {
	if err := ValidateName(name); err != nil {
		return Theme{}, err
	}
	if userDir != "" {
		path := filepath.Join(userDir, name+Ext)
		data, err := readFile(path)
		switch {
		case err == nil:
			t, err := Parse(name, data)
			if err != nil {
				return Theme{}, fmt.Errorf("theme file %s: %w", path, err)
			}
			t.Path = path
			return t, nil
		case !errors.Is(err, fs.ErrNotExist):
			return Theme{}, fmt.Errorf("read theme %s: %w", path, err)
		}
	}
	if t, ok := builtin(name); ok {
		return t, nil
	}
	return Theme{}, unknown(name, userDir)
}

// MustDefault returns the default built-in theme, which always parses
// (a test guards it).
func MustDefault() Theme {
	t, _ := builtin(Default)
	return t
}

func unknown(name, userDir string) error {
	var names []string
	infos, _ := List(userDir)
	for _, i := range infos {
		names = append(names, i.Name)
	}
	return fmt.Errorf("unknown theme %q; choose one of %s", name, strings.Join(names, ", "))
}

func builtin(name string) (Theme, bool) {
	data, err := builtinFS.ReadFile("builtin/" + name + Ext)
	if err != nil {
		return Theme{}, false
	}
	t, err := parse(name, data, true)
	if err != nil {
		return Theme{}, false
	}
	return t, true
}

// List returns the built-in themes and the user's themes in userDir
// (which may be empty or missing), sorted by name; a user theme hides a
// built-in one of the same name. Files with invalid names are skipped.
func List(userDir string) ([]Info, error) {
	byName := map[string]Info{}
	for _, n := range Builtin() {
		t, _ := builtin(n)
		byName[n] = Info{Name: n, Description: t.Description}
	}
	var err error
	if userDir != "" {
		entries, rerr := os.ReadDir(userDir)
		if rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = fmt.Errorf("list themes in %s: %w", userDir, rerr)
		}
		for _, e := range entries {
			n, ok := strings.CutSuffix(e.Name(), Ext)
			if !ok || e.IsDir() || ValidateName(n) != nil {
				continue
			}
			info := Info{Name: n, Path: filepath.Join(userDir, e.Name())}
			if data, rerr := readFile(info.Path); rerr == nil {
				var f file
				if _, derr := toml.Decode(string(data), &f); derr == nil {
					info.Description = f.Description
				}
			}
			byName[n] = info
		}
	}
	out := make([]Info, 0, len(byName))
	for _, i := range byName {
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, err
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, maxFileSize+1)); err != nil {
		return nil, err
	}
	if b.Len() > maxFileSize {
		return nil, fmt.Errorf("the file is larger than %d KiB; a theme file is a few lines", maxFileSize>>10)
	}
	return b.Bytes(), nil
}

// Parse reads a user theme file's contents. Tokens the file leaves out
// come from its base theme (a built-in one, "dark" by default).
func Parse(name string, data []byte) (Theme, error) {
	return parse(name, data, false)
}

func parse(name string, data []byte, isBuiltin bool) (Theme, error) {
	var f file
	md, err := toml.Decode(string(data), &f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return Theme{}, fmt.Errorf("line %d: %s; fix the TOML syntax", pe.Position.Line, pe.Message)
		}
		return Theme{}, fmt.Errorf("%v; a theme file holds description, base, dark and a [colors] table", err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		k := und[0]
		if len(k) == 2 && k[0] == "colors" {
			return Theme{}, fmt.Errorf("unknown colour %q; the colours are %s", k[1], strings.Join(Tokens(), ", "))
		}
		return Theme{}, fmt.Errorf("unknown key %q; a theme file holds description, base, dark and a [colors] table", k.String())
	}
	for _, k := range slices.Sorted(maps.Keys(f.Colors)) {
		if !slices.Contains(Tokens(), k) {
			return Theme{}, fmt.Errorf("unknown colour %q; the colours are %s", k, strings.Join(Tokens(), ", "))
		}
	}
	t := Theme{Name: name, Description: f.Description}
	if isBuiltin {
		if f.Base != "" {
			return Theme{}, errors.New("a built-in theme has no base")
		}
		for _, tok := range tokenTable {
			if _, ok := f.Colors[tok.name]; !ok {
				return Theme{}, fmt.Errorf("colour %q is missing", tok.name)
			}
		}
	} else {
		base := f.Base
		if base == "" {
			base = Default
		}
		b, ok := builtin(base)
		if !ok {
			return Theme{}, fmt.Errorf("unknown base theme %q; a base is one of the built-in themes: %s", base, strings.Join(Builtin(), ", "))
		}
		t.Colors, t.Dark = b.Colors, b.Dark
	}
	if f.Dark != nil {
		t.Dark = *f.Dark
	}
	for _, tok := range tokenTable {
		v, ok := f.Colors[tok.name]
		if !ok {
			continue
		}
		c, err := ParseColor(v)
		if err != nil {
			return Theme{}, fmt.Errorf("colour %s: %w", tok.name, err)
		}
		*tok.ptr(&t.Colors) = c
	}
	return t, nil
}

// ParseColor reads "#rrggbb", "#rgb", an ANSI colour number 0-255, or ""
// (nil: the terminal's own colour).
func ParseColor(s string) (color.Color, error) {
	if s == "" {
		return nil, nil
	}
	if hex, ok := strings.CutPrefix(s, "#"); ok {
		if len(hex) == 3 {
			hex = string([]byte{hex[0], hex[0], hex[1], hex[1], hex[2], hex[2]})
		}
		if len(hex) != 6 {
			return nil, fmt.Errorf("%q is not a colour; write #rrggbb, #rgb or an ANSI number 0-255", s)
		}
		v, err := strconv.ParseUint(hex, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a colour; write #rrggbb, #rgb or an ANSI number 0-255", s)
		}
		return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 255 || strings.TrimLeft(s, "0123456789") != "" {
		return nil, fmt.Errorf("%q is not a colour; write #rrggbb, #rgb or an ANSI number 0-255", s)
	}
	if n < 16 {
		return ansi.BasicColor(n), nil
	}
	return ansi.IndexedColor(n), nil
}
