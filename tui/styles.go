package tui

import (
	"image/color"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"
	uv "github.com/charmbracelet/ultraviolet"

	"github.com/rexconsole/rex/themes"
	"github.com/rexconsole/rex/tui/dialog"
	"github.com/rexconsole/rex/tui/engine"
)

// Styles are every style the console draws with, built from one theme's
// colour tokens by NewStyles. Nothing else in the package picks colours.
type Styles struct {
	Theme themes.Theme
	// gen changes with every NewStyles, so cached renderings made with
	// older styles are redrawn.
	gen int

	Text    lipgloss.Style
	Muted   lipgloss.Style
	Accent  lipgloss.Style
	Success lipgloss.Style
	Warning lipgloss.Style
	Error   lipgloss.Style

	Pane struct {
		Border        lipgloss.Style
		BorderFocused lipgloss.Style
		Title         lipgloss.Style
		TitleFocused  lipgloss.Style
		Command       lipgloss.Style
		// CommandLine heads a command in a target's pane: "❯ free -m · 14:02:11".
		CommandLine lipgloss.Style
		Stdout      lipgloss.Style
		Stderr      lipgloss.Style
		Heading     lipgloss.Style // a group heading in the gathered view
		HeadingOdd  lipgloss.Style // a group that differs from the most common output
		Info        lipgloss.Style
		Match       lipgloss.Style
		Running     lipgloss.Style
		ExitOK      lipgloss.Style
		ExitFail    lipgloss.Style
		// Broadcast marks the terminal panes that receive every keystroke.
		Broadcast lipgloss.Style
	}

	Sidebar struct {
		Section  lipgloss.Style
		Item     lipgloss.Style
		Selected lipgloss.Style
		Border   lipgloss.Style
		Detail   lipgloss.Style
		Error    lipgloss.Style
		// States colour a connection state's glyph and word; failures
		// take Failure.
		States  map[engine.State]lipgloss.Style
		Failure lipgloss.Style
	}

	Prompt       lipgloss.Style
	PromptTarget lipgloss.Style
	Message      lipgloss.Style
	MessageError lipgloss.Style
	Status       lipgloss.Style
	StatusRight  lipgloss.Style
	Overlay      lipgloss.Style
	OverlayTitle lipgloss.Style

	Input       lipgloss.Style
	Placeholder lipgloss.Style

	Help help.Styles

	// Dialog styles the dialogs over the main view.
	Dialog dialog.Styles

	// lines are the line kinds' styles as raw escape sequences, so that a
	// line is drawn by concatenation: lipgloss's Render is general and
	// costs more than the rest of a frame.
	lines [engine.Kinds]sgr

	// colors says how the colours programs print are drawn.
	colors programColors
}

// programColors is how a task pane draws the colours in command output.
type programColors int

const (
	colorsKept  programColors = iota // as the program chose them
	colorsBasic                      // mapped to the 16 colours of the terminal's palette (theme ansi)
	colorsNone                       // none (NO_COLOR); bold, underline and the like stay
)

// programStyle is the SGR sequence that draws a program's style under the
// console's colour policy.
func (s *Styles) programStyle(ps uv.Style) string {
	switch s.colors {
	case colorsNone:
		ps.Fg, ps.Bg, ps.UnderlineColor = nil, nil, nil
	case colorsBasic:
		conv := func(c color.Color) color.Color {
			if c == nil {
				return nil
			}
			return colorprofile.ANSI.Convert(c)
		}
		ps.Fg, ps.Bg, ps.UnderlineColor = conv(ps.Fg), conv(ps.Bg), conv(ps.UnderlineColor)
	}
	if ps.IsZero() {
		return ""
	}
	return ps.String()
}

// stateStyle is the colour of a connection state.
func (s *Styles) stateStyle(st engine.State) lipgloss.Style {
	if st.Failure() {
		return s.Sidebar.Failure
	}
	return s.Sidebar.States[st]
}

// sgr is a style as the escape sequences before and after styled text.
type sgr struct{ pre, post string }

func (s sgr) wrap(text string) string { return s.pre + text + s.post }

// sgrOf extracts a simple style's (colours, bold, italic) sequences.
func sgrOf(st lipgloss.Style) sgr {
	out := st.Render("x")
	i := strings.IndexByte(out, 'x')
	if i < 0 {
		return sgr{}
	}
	return sgr{pre: out[:i], post: out[i+1:]}
}

// NewStyles builds the console's styles from t. Programs' colours are
// kept, but mapped to the terminal's own 16 under the ansi theme (whose
// point is the terminal's palette), and dropped when noColor is set
// (NO_COLOR).
func NewStyles(t themes.Theme, gen int, noColor bool) *Styles {
	c := t.Colors
	fg := func(col color.Color) lipgloss.Style {
		if col == nil {
			return lipgloss.NewStyle()
		}
		return lipgloss.NewStyle().Foreground(col)
	}
	bg := func(s lipgloss.Style, col color.Color) lipgloss.Style {
		if col == nil {
			return s
		}
		return s.Background(col)
	}
	s := &Styles{Theme: t, gen: gen}
	switch {
	case noColor:
		s.colors = colorsNone
	case t.Name == "ansi":
		s.colors = colorsBasic
	}
	s.Text = fg(c.Text)
	s.Muted = fg(c.Muted)
	s.Accent = fg(c.Accent)
	s.Success = fg(c.Success)
	s.Warning = fg(c.Warning)
	s.Error = fg(c.Error)

	s.Pane.Border = fg(c.Border)
	s.Pane.BorderFocused = fg(c.Focus)
	s.Pane.Title = fg(c.Text).Bold(true)
	s.Pane.TitleFocused = fg(c.Focus).Bold(true)
	s.Pane.Command = fg(c.Muted)
	s.Pane.CommandLine = fg(c.Accent).Bold(true)
	s.Pane.Stdout = fg(c.Text)
	s.Pane.Stderr = fg(c.Stderr)
	s.Pane.Heading = fg(c.Accent).Bold(true)
	s.Pane.HeadingOdd = fg(c.Warning).Bold(true)
	s.Pane.Info = fg(c.Muted).Italic(true)
	s.Pane.Match = bg(fg(c.MatchText), c.MatchBg)
	s.Pane.Running = fg(c.Warning)
	s.Pane.ExitOK = fg(c.Success).Bold(true)
	s.Pane.ExitFail = fg(c.Error).Bold(true)
	s.Pane.Broadcast = fg(c.Warning).Bold(true)

	s.Sidebar.Section = fg(c.Muted).Bold(true)
	s.Sidebar.Item = fg(c.Text)
	s.Sidebar.Selected = bg(fg(c.SelectionText), c.SelectionBg).Bold(true)
	s.Sidebar.Border = fg(c.Border)
	s.Sidebar.Detail = fg(c.Muted)
	s.Sidebar.Error = fg(c.Error)
	s.Sidebar.States = map[engine.State]lipgloss.Style{
		engine.Idle:          fg(c.Muted),
		engine.Connecting:    fg(c.Warning),
		engine.Bootstrapping: fg(c.Warning),
		engine.Ready:         fg(c.Success),
	}
	s.Sidebar.Failure = fg(c.Error)

	s.Prompt = fg(c.Muted)
	s.PromptTarget = fg(c.Accent).Bold(true)
	s.Message = fg(c.Text)
	s.MessageError = fg(c.Error)
	s.Status = bg(fg(c.StatusText), c.StatusBg)
	s.StatusRight = bg(fg(c.StatusText), c.StatusBg).Bold(true)
	s.Overlay = fg(c.Text)
	s.OverlayTitle = fg(c.Accent).Bold(true)

	s.Help = help.DefaultStyles(t.Dark)
	s.Help.ShortKey = bg(fg(c.StatusText), c.StatusBg).Bold(true)
	s.Help.ShortDesc = bg(fg(c.StatusText), c.StatusBg)
	s.Help.ShortSeparator = bg(fg(c.StatusText), c.StatusBg)
	s.Help.Ellipsis = bg(fg(c.StatusText), c.StatusBg)
	s.Help.FullKey = fg(c.Accent)
	s.Help.FullDesc = fg(c.Text)
	s.Help.FullSeparator = fg(c.Border)

	for k := range engine.Kinds {
		s.lines[k] = sgrOf(lineStyle(s, k))
	}

	s.Dialog = dialog.Styles{
		Border:       fg(c.Focus),
		Title:        fg(c.Accent).Bold(true),
		Text:         fg(c.Text),
		Muted:        fg(c.Muted),
		Button:       bg(fg(c.StatusText), c.StatusBg),
		ButtonActive: bg(fg(c.SelectionText), c.SelectionBg).Bold(true),
		Selected:     bg(fg(c.SelectionText), c.SelectionBg).Bold(true),
		OK:           fg(c.Success),
		Fail:         fg(c.Error),
		Running:      fg(c.Warning),
	}

	s.Input = fg(c.Text)
	s.Placeholder = fg(c.Muted).Italic(true)
	return s
}
