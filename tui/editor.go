package tui

import (
	"strings"
	"unicode"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// maxInput bounds the command line, so a runaway paste stays usable.
const maxInput = 8192

// lineEditor is the command line's one-line editor, with the usual
// readline keys (ctrl+a/e/b/f/u/k/w/d, alt+b/f/d, word moves with ctrl or
// alt and the arrows). It scrolls sideways when the line is wider than
// its field, and reports where the terminal cursor goes.
type lineEditor struct {
	value  []rune
	pos    int // cursor, in runes
	offset int // first rune shown
	width  int
}

func (e *lineEditor) Value() string { return string(e.value) }

// SetValue replaces the line and puts the cursor at its end.
func (e *lineEditor) SetValue(s string) {
	e.value = []rune(s)
	if len(e.value) > maxInput {
		e.value = e.value[:maxInput]
	}
	e.pos = len(e.value)
}

func (e *lineEditor) Position() int { return e.pos }

func (e *lineEditor) SetCursor(i int) { e.pos = min(max(0, i), len(e.value)) }

func (e *lineEditor) CursorEnd() { e.pos = len(e.value) }

func (e *lineEditor) SetWidth(w int) { e.width = w }

// insert puts text at the cursor, without control characters.
func (e *lineEditor) insert(s string) {
	rs := []rune(strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s))
	if room := maxInput - len(e.value); len(rs) > room {
		rs = rs[:max(0, room)]
	}
	v := make([]rune, 0, len(e.value)+len(rs))
	v = append(v, e.value[:e.pos]...)
	v = append(v, rs...)
	v = append(v, e.value[e.pos:]...)
	e.value = v
	e.pos += len(rs)
}

// wordLeft is where the word before the cursor starts.
func (e *lineEditor) wordLeft() int {
	i := e.pos
	for i > 0 && unicode.IsSpace(e.value[i-1]) {
		i--
	}
	for i > 0 && !unicode.IsSpace(e.value[i-1]) {
		i--
	}
	return i
}

// wordRight is where the word after the cursor ends.
func (e *lineEditor) wordRight() int {
	i := e.pos
	for i < len(e.value) && unicode.IsSpace(e.value[i]) {
		i++
	}
	for i < len(e.value) && !unicode.IsSpace(e.value[i]) {
		i++
	}
	return i
}

func (e *lineEditor) cutRange(from, to int) {
	e.value = append(e.value[:from:from], e.value[to:]...)
	e.pos = from
}

// Update edits the line for a key press or a paste; it reports whether
// the message was an editing key.
func (e *lineEditor) Update(msg tea.Msg) bool {
	switch msg := msg.(type) {
	case tea.PasteMsg:
		e.insert(msg.Content)
		return true
	case tea.KeyPressMsg:
		switch msg.String() {
		case "left", "ctrl+b":
			e.pos = max(0, e.pos-1)
		case "right", "ctrl+f":
			e.pos = min(len(e.value), e.pos+1)
		case "alt+left", "ctrl+left", "alt+b":
			e.pos = e.wordLeft()
		case "alt+right", "ctrl+right", "alt+f":
			e.pos = e.wordRight()
		case "home", "ctrl+a":
			e.pos = 0
		case "end", "ctrl+e":
			e.pos = len(e.value)
		case "backspace", "ctrl+h":
			if e.pos > 0 {
				e.cutRange(e.pos-1, e.pos)
			}
		case "delete", "ctrl+d":
			if e.pos < len(e.value) {
				e.cutRange(e.pos, e.pos+1)
			}
		case "ctrl+w", "alt+backspace", "ctrl+backspace":
			e.cutRange(e.wordLeft(), e.pos)
		case "alt+d", "alt+delete", "ctrl+delete":
			from := e.pos
			e.pos = e.wordRight()
			e.cutRange(from, e.pos)
		case "ctrl+u":
			e.cutRange(0, e.pos)
		case "ctrl+k":
			e.value = e.value[:e.pos]
		default:
			if msg.Text == "" || msg.Mod.Contains(tea.ModCtrl) || msg.Mod.Contains(tea.ModAlt) {
				return false
			}
			e.insert(msg.Text)
		}
		return true
	}
	return false
}

// scrollIntoView moves the field so that the cursor shows, with one cell
// for it at the end. Update calls it after edits and resizes; View only
// reads the offset.
func (e *lineEditor) scrollIntoView() {
	w := max(1, e.width)
	e.offset = min(e.offset, e.pos, len(e.value))
	for e.offset < e.pos && ansi.StringWidth(string(e.value[e.offset:e.pos])) > w-1 {
		e.offset++
	}
}

// View draws the visible part of the line, padded to the field's width,
// and the cursor's column in it.
func (e *lineEditor) View(render func(string) string) (string, int) {
	w := max(1, e.width)
	offset := min(e.offset, len(e.value))
	var b strings.Builder
	cw, x := 0, 0
	for i := offset; i < len(e.value); i++ {
		rw := ansi.StringWidth(string(e.value[i]))
		if cw+rw > w {
			break
		}
		if i == e.pos {
			x = cw
		}
		b.WriteRune(e.value[i])
		cw += rw
	}
	if e.pos >= len(e.value) {
		x = ansi.StringWidth(string(e.value[offset:e.pos]))
	}
	return render(b.String()) + spaces(w-cw), x
}
