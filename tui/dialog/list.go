package dialog

import (
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// Tone colours a list item by how the thing it stands for went.
type Tone int

const (
	Plain Tone = iota
	OK
	Fail
	Running
	Muted
)

// Item is one row of a List: plain text and its tone.
type Item struct {
	Text string
	Tone Tone
}

// List is a scrolling list to pick one item from (the task list).
type List struct {
	id, title string
	empty     string // what the list says when it has no item
	foot      string
	items     []Item
	sel, top  int
	w, h      int
	keys      struct{ Up, Down, PageUp, PageDown, Home, End, Pick, Close key.Binding }
}

// NewList returns an empty list; empty is what it says while it has no
// item, foot the help in its bottom border.
func NewList(id, title, empty, foot string) *List {
	l := &List{id: id, title: title, empty: empty, foot: foot}
	l.keys.Up = key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/↓", "select"))
	l.keys.Down = key.NewBinding(key.WithKeys("down", "j"))
	l.keys.PageUp = key.NewBinding(key.WithKeys("pgup"))
	l.keys.PageDown = key.NewBinding(key.WithKeys("pgdown"))
	l.keys.Home = key.NewBinding(key.WithKeys("home", "g"))
	l.keys.End = key.NewBinding(key.WithKeys("end", "G"))
	l.keys.Pick = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open"))
	l.keys.Close = key.NewBinding(key.WithKeys("esc", "q"), key.WithHelp("esc", "close"))
	return l
}

// ID implements Dialog.
func (l *List) ID() string { return l.id }

// SetTitle changes the title.
func (l *List) SetTitle(t string) { l.title = t }

// SetItems replaces the items; the selection stays where it was, within
// the new items.
func (l *List) SetItems(items []Item) {
	l.items = items
	l.moveTo(l.sel)
}

// Selected is the selected item's index, -1 with no item.
func (l *List) Selected() int {
	if len(l.items) == 0 {
		return -1
	}
	return l.sel
}

// Select moves the selection to item i.
func (l *List) Select(i int) { l.moveTo(i) }

// rows is how many items show at once.
func (l *List) rows() int { return max(1, min(len(l.items), l.h-4)) }

func (l *List) moveTo(i int) {
	l.sel = min(max(i, 0), max(0, len(l.items)-1))
	if l.sel < l.top {
		l.top = l.sel
	}
	if n := l.rows(); l.sel >= l.top+n {
		l.top = l.sel - n + 1
	}
	l.top = min(l.top, max(0, len(l.items)-l.rows()))
}

// SetSize implements Dialog.
func (l *List) SetSize(maxW, maxH int) {
	l.w, l.h = maxW, maxH
	l.moveTo(l.sel)
}

// Update implements Dialog.
func (l *List) Update(msg tea.KeyPressMsg) Action {
	page := max(1, l.rows()-1)
	switch {
	case key.Matches(msg, l.keys.Up):
		l.moveTo(l.sel - 1)
	case key.Matches(msg, l.keys.Down):
		l.moveTo(l.sel + 1)
	case key.Matches(msg, l.keys.PageUp):
		l.moveTo(l.sel - page)
	case key.Matches(msg, l.keys.PageDown):
		l.moveTo(l.sel + page)
	case key.Matches(msg, l.keys.Home):
		l.moveTo(0)
	case key.Matches(msg, l.keys.End):
		l.moveTo(len(l.items) - 1)
	case key.Matches(msg, l.keys.Pick):
		if len(l.items) > 0 {
			return Select{ID: l.id, Index: l.sel}
		}
	case key.Matches(msg, l.keys.Close):
		return Close{ID: l.id}
	}
	return nil
}

func (st *Styles) tone(t Tone) lipgloss.Style {
	switch t {
	case OK:
		return st.OK
	case Fail:
		return st.Fail
	case Running:
		return st.Running
	case Muted:
		return st.Muted
	}
	return st.Text
}

// View implements Dialog.
func (l *List) View(st *Styles) []string {
	widest := ansi.StringWidth(l.empty)
	for _, it := range l.items {
		widest = max(widest, ansi.StringWidth(it.Text))
	}
	w := min(l.w, max(60, widest+4, ansi.StringWidth(l.title)+8))
	inner := w - 4
	if inner < 8 || l.h < 5 {
		return nil
	}
	var body []string
	if len(l.items) == 0 {
		body = append(body, styled(st.Muted, l.empty, inner))
	}
	for i := l.top; i < len(l.items) && len(body) < l.rows(); i++ {
		it := l.items[i]
		style := st.tone(it.Tone)
		if i == l.sel {
			style = st.Selected
		}
		body = append(body, styled(style, it.Text, inner))
	}
	foot := l.foot
	if len(l.items) > l.rows() {
		foot = strings.TrimSpace(foot + " · " + strconv.Itoa(l.top+1) + "-" + strconv.Itoa(l.top+len(body)) + " of " + strconv.Itoa(len(l.items)))
	}
	return frame(st, w, l.title, foot, body)
}

// Help implements Dialog.
func (l *List) Help() []key.Binding { return []key.Binding{l.keys.Up, l.keys.Pick, l.keys.Close} }
