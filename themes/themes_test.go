package themes

import (
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

func TestBuiltinThemesLoad(t *testing.T) {
	names := Builtin()
	for _, want := range []string{"dark", "light", "high-contrast", "ansi"} {
		if !slices.Contains(names, want) {
			t.Errorf("Builtin() = %v, missing %q", names, want)
		}
	}
	for _, n := range names {
		th, err := Load(n, "")
		if err != nil {
			t.Fatalf("Load(%q): %v", n, err)
		}
		if th.Name != n || th.Description == "" || th.Path != "" {
			t.Errorf("Load(%q) = name %q, description %q, path %q", n, th.Name, th.Description, th.Path)
		}
		// Every token but background and (for ansi) text must be set.
		for _, tok := range tokenTable {
			if tok.name == "background" || (n == "ansi" && tok.name == "text") {
				continue
			}
			if *tok.ptr(&th.Colors) == nil {
				t.Errorf("theme %s: colour %s is unset", n, tok.name)
			}
		}
	}
	if d := MustDefault(); d.Name != Default || d.Colors.Text == nil {
		t.Errorf("MustDefault() = %+v", d)
	}
}

// luminance is the WCAG relative luminance of c.
func luminance(c color.Color) float64 {
	r, g, b, _ := c.RGBA()
	lin := func(v uint32) float64 {
		s := float64(v) / 0xffff
		if s <= 0.03928 {
			return s / 12.92
		}
		return math.Pow((s+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(r) + 0.7152*lin(g) + 0.0722*lin(b)
}

func contrast(a, b color.Color) float64 {
	la, lb := luminance(a), luminance(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

// TestThemeContrast holds the themes to the WCAG ratios they promise:
// AAA (7:1) for high-contrast, AA (4.5:1) for the others. Dark keeps the
// terminal's background, so it is measured against a typical dark one.
func TestThemeContrast(t *testing.T) {
	typicalDark := color.RGBA{0x1a, 0x1b, 0x26, 0xff}
	tests := []struct {
		theme string
		min   float64
	}{
		{"high-contrast", 7},
		{"light", 4.5},
		{"dark", 4.5},
	}
	for _, tt := range tests {
		th, err := Load(tt.theme, "")
		if err != nil {
			t.Fatal(err)
		}
		c := th.Colors
		bg := c.Background
		if bg == nil {
			bg = typicalDark
		}
		pairs := map[string][2]color.Color{
			"text":      {c.Text, bg},
			"muted":     {c.Muted, bg},
			"accent":    {c.Accent, bg},
			"success":   {c.Success, bg},
			"warning":   {c.Warning, bg},
			"error":     {c.Error, bg},
			"stderr":    {c.Stderr, bg},
			"focus":     {c.Focus, bg},
			"selection": {c.SelectionText, c.SelectionBg},
			"match":     {c.MatchText, c.MatchBg},
			"status":    {c.StatusText, c.StatusBg},
		}
		for name, p := range pairs {
			if r := contrast(p[0], p[1]); r < tt.min {
				t.Errorf("theme %s: %s contrast %.2f, want at least %.1f", tt.theme, name, r, tt.min)
			}
		}
	}
}

func TestParseColor(t *testing.T) {
	tests := []struct {
		in      string
		want    color.Color
		wantErr bool
	}{
		{"", nil, false},
		{"#ff0080", color.RGBA{0xff, 0x00, 0x80, 0xff}, false},
		{"#F08", color.RGBA{0xff, 0x00, 0x88, 0xff}, false},
		{"1", ansi.BasicColor(1), false},
		{"15", ansi.BasicColor(15), false},
		{"16", ansi.IndexedColor(16), false},
		{"255", ansi.IndexedColor(255), false},
		{"256", nil, true},
		{"-1", nil, true},
		{"+3", nil, true},
		{"#12345", nil, true},
		{"#gg0000", nil, true},
		{"red", nil, true},
		{"#", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseColor(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseColor(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil && got != tt.want {
			t.Errorf("ParseColor(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
		if err != nil && !strings.Contains(err.Error(), "#rrggbb") {
			t.Errorf("ParseColor(%q) error %q does not say what to write", tt.in, err)
		}
	}
}

func TestUserThemes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("mine.toml", "description = \"pink\"\nbase = \"light\"\n[colors]\naccent = \"#ff00aa\"\n")
	write("dark.toml", "description = \"my dark\"\n[colors]\ntext = \"#ffffff\"\n")
	write("Bad Name.toml", "")
	write("notes.txt", "")

	light, _ := Load("light", "")
	mine, err := Load("mine", dir)
	if err != nil {
		t.Fatal(err)
	}
	if mine.Colors.Accent != (color.RGBA{0xff, 0x00, 0xaa, 0xff}) {
		t.Errorf("accent = %v, want the file's #ff00aa", mine.Colors.Accent)
	}
	if mine.Colors.Text != light.Colors.Text || mine.Colors.Background != light.Colors.Background || mine.Dark {
		t.Errorf("tokens not set in the file must come from the base theme light")
	}
	if mine.Path != filepath.Join(dir, "mine.toml") {
		t.Errorf("Path = %q", mine.Path)
	}

	// A user file shadows the built-in of the same name, based on the
	// built-in dark.
	dark, err := Load("dark", dir)
	if err != nil {
		t.Fatal(err)
	}
	builtinDark := MustDefault()
	if dark.Description != "my dark" || dark.Colors.Text != (color.RGBA{0xff, 0xff, 0xff, 0xff}) || dark.Colors.Accent != builtinDark.Colors.Accent {
		t.Errorf("user dark = %+v", dark)
	}

	infos, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
		if i.Name == "mine" && (i.Description != "pink" || i.Path == "") {
			t.Errorf("List: mine = %+v", i)
		}
	}
	if want := []string{"ansi", "dark", "high-contrast", "light", "mine"}; !slices.Equal(names, want) {
		t.Errorf("List = %v, want %v", names, want)
	}
	// A missing directory is no error: there are just no user themes.
	if infos, err := List(filepath.Join(dir, "missing")); err != nil || len(infos) != len(Builtin()) {
		t.Errorf("List(missing) = %v, %v", infos, err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"badcolor":  "[colors]\naccent = \"pink\"\n",
		"badtoken":  "[colors]\naccnet = \"#fff\"\n",
		"badkey":    "colour = 3\n",
		"badbase":   "base = \"solarized\"\n",
		"badsyntax": "[colors\n",
		"badtype":   "[colors]\naccent = 3\n",
		"huge":      "description = \"" + strings.Repeat("x", maxFileSize) + "\"\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name+".toml"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		want []string
	}{
		{"badcolor", []string{"badcolor.toml", "accent", "#rrggbb"}},
		{"badtoken", []string{`unknown colour "accnet"`, "accent"}},
		{"badkey", []string{`unknown key "colour"`}},
		{"badbase", []string{`unknown base theme "solarized"`, "high-contrast"}},
		{"badsyntax", []string{"line 2", "fix the TOML syntax"}},
		{"badtype", []string{"badtype.toml"}},
		{"huge", []string{"larger than"}},
		{"nosuch", []string{`unknown theme "nosuch"`, "dark, high-contrast, huge, light"}},
		{"../etc/passwd", []string{"invalid theme name"}},
		{"Dark", []string{"invalid theme name"}},
		{"", []string{"empty"}},
	}
	for _, tt := range tests {
		_, err := Load(tt.name, dir)
		if err == nil {
			t.Errorf("Load(%q) succeeded", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Load(%q) error %q does not contain %q", tt.name, err, w)
			}
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("description = \"x\"\nbase = \"light\"\n[colors]\naccent = \"#ff00aa\"\n"))
	f.Add([]byte("[colors]\ntext = \"12\"\nbackground = \"\"\n"))
	f.Add([]byte("dark = false\n"))
	f.Add([]byte("[colors\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		th, err := Parse("fuzz", data)
		if err != nil {
			return
		}
		// A theme that parses has every token its base has.
		if th.Colors.Text == nil && th.Colors.Muted == nil && th.Colors.Border == nil && th.Colors.Focus == nil {
			t.Fatalf("parsed theme lost its base colours: %+v", th)
		}
	})
}
