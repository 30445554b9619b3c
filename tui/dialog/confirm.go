package dialog

import (
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// Choice is one answer of a Confirm: its label, and the keys that take
// it at once (optional; the arrows and enter reach every choice).
type Choice struct {
	Label string
	Keys  key.Binding
}

// Confirm asks a question with a few answers: quit with running work,
// allow an agent's call. The selection starts on the safe answer the
// caller names; esc cancels.
type Confirm struct {
	id, title string
	text      []string // paragraphs
	choices   []Choice
	sel       int
	w, h      int
	keys      struct{ Next, Prev, Choose, Cancel key.Binding }
}

// NewConfirm returns a confirm dialog whose selection starts on choice
// def.
func NewConfirm(id, title string, text []string, choices []Choice, def int) *Confirm {
	c := &Confirm{id: id, title: title, text: text, choices: choices, sel: min(max(def, 0), len(choices)-1)}
	c.keys.Next = key.NewBinding(key.WithKeys("right", "tab", "l"), key.WithHelp("←/→", "choose"))
	c.keys.Prev = key.NewBinding(key.WithKeys("left", "shift+tab", "h"))
	c.keys.Choose = key.NewBinding(key.WithKeys("enter", "space"), key.WithHelp("enter", "confirm"))
	c.keys.Cancel = key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel"))
	return c
}

// ID implements Dialog.
func (c *Confirm) ID() string { return c.id }

// Selected is the choice the selection is on.
func (c *Confirm) Selected() int { return c.sel }

// SetText replaces the text (what runs changed while the dialog is open).
func (c *Confirm) SetText(text []string) { c.text = text }

// SetSize implements Dialog.
func (c *Confirm) SetSize(maxW, maxH int) { c.w, c.h = maxW, maxH }

// Update implements Dialog.
func (c *Confirm) Update(msg tea.KeyPressMsg) Action {
	for i, ch := range c.choices {
		if len(ch.Keys.Keys()) > 0 && key.Matches(msg, ch.Keys) {
			return Choose{ID: c.id, Choice: i}
		}
	}
	switch {
	case key.Matches(msg, c.keys.Next):
		c.sel = (c.sel + 1) % len(c.choices)
	case key.Matches(msg, c.keys.Prev):
		c.sel = (c.sel + len(c.choices) - 1) % len(c.choices)
	case key.Matches(msg, c.keys.Choose):
		return Choose{ID: c.id, Choice: c.sel}
	case key.Matches(msg, c.keys.Cancel):
		return Close{ID: c.id}
	}
	return nil
}

// buttons draws the choices on one row, and its width.
func (c *Confirm) buttons(st *Styles) (string, int) {
	var parts []string
	w := 0
	for i, ch := range c.choices {
		label := " " + ch.Label + " "
		if hk := ch.Keys.Help().Key; hk != "" {
			label = " " + ch.Label + " (" + hk + ") "
		}
		style := st.Button
		if i == c.sel {
			style = st.ButtonActive
		}
		parts = append(parts, style.Render(label))
		w += ansi.StringWidth(label)
	}
	w += 2 * (len(parts) - 1)
	return strings.Join(parts, "  "), w
}

// View implements Dialog.
func (c *Confirm) View(st *Styles) []string {
	row, rw := c.buttons(st)
	w := min(c.w, max(64, rw+4, ansi.StringWidth(c.title)+8))
	inner := w - 4
	if inner < 8 || c.h < 5 {
		return nil
	}
	var body []string
	body = append(body, strings.Repeat(" ", inner))
	for i, p := range c.text {
		if i > 0 {
			body = append(body, strings.Repeat(" ", inner))
		}
		for _, l := range wrap(p, inner) {
			body = append(body, styled(st.Text, l, inner))
		}
	}
	// Room for the blank line and the buttons; the text gives way.
	if max := c.h - 2 - 2; len(body) > max {
		body = body[:max]
		body[max-1] = styled(st.Muted, "…", inner)
	}
	body = append(body, strings.Repeat(" ", inner))
	if rw > inner {
		row, rw = ansi.Truncate(row, inner, ""), inner
	}
	body = append(body, center(row, rw, inner))
	return frame(st, w, c.title, "←/→ choose · enter confirm · esc cancel", body)
}

// Help implements Dialog.
func (c *Confirm) Help() []key.Binding {
	return []key.Binding{c.keys.Next, c.keys.Choose, c.keys.Cancel}
}
