// Package dialog holds the console's dialogs: components drawn over the
// main view that take the keys while they are in front. A Stack keeps
// them; the root model routes key presses to the front dialog and acts
// on the Action it returns (close it, quit, open a task). Dialogs are
// plain structs without Bubble Tea models of their own: the root model
// gives them their size in Update (SetSize) and draws them in View.
package dialog

import (
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// Dialog is one dialog.
type Dialog interface {
	// ID names the dialog, so that a caller can find and close it.
	ID() string
	// SetSize gives the dialog the room it may use, borders included;
	// it is called from Update only.
	SetSize(maxW, maxH int)
	// Update handles a key press while the dialog is in front; the
	// Action says what the caller must do (nil: nothing).
	Update(msg tea.KeyPressMsg) Action
	// View draws the dialog: lines of one width, within its size.
	View(st *Styles) []string
	// Help lists the dialog's keys, for the status line.
	Help() []key.Binding
}

// Action is what a dialog asks of its caller after a key.
type Action interface{ isAction() }

// Close asks the caller to close the dialog (esc, a cancel).
type Close struct{ ID string }

// Choose says which choice of a Confirm was taken.
type Choose struct {
	ID     string
	Choice int
}

// Select says which item of a List was picked (enter).
type Select struct {
	ID    string
	Index int
}

func (Close) isAction()  {}
func (Choose) isAction() {}
func (Select) isAction() {}

// Styles are the dialogs' styles, made by the console from its theme.
type Styles struct {
	Border       lipgloss.Style
	Title        lipgloss.Style
	Text         lipgloss.Style
	Muted        lipgloss.Style
	Button       lipgloss.Style
	ButtonActive lipgloss.Style
	Selected     lipgloss.Style
	// Tones colour list items by how they went.
	OK, Fail, Running lipgloss.Style
}

// Stack is the open dialogs, the front one last.
type Stack struct{ ds []Dialog }

// Push opens d in front of the others.
func (s *Stack) Push(d Dialog) { s.ds = append(s.ds, d) }

// Front is the dialog in front, or nil.
func (s *Stack) Front() Dialog {
	if len(s.ds) == 0 {
		return nil
	}
	return s.ds[len(s.ds)-1]
}

// Close closes the dialog id, wherever it is in the stack.
func (s *Stack) Close(id string) {
	for i, d := range s.ds {
		if d.ID() == id {
			s.ds = append(s.ds[:i:i], s.ds[i+1:]...)
			return
		}
	}
}

// Get returns the dialog id, or nil.
func (s *Stack) Get(id string) Dialog {
	for _, d := range s.ds {
		if d.ID() == id {
			return d
		}
	}
	return nil
}

// Len is how many dialogs are open.
func (s *Stack) Len() int { return len(s.ds) }

// All lists the open dialogs, the front one last.
func (s *Stack) All() []Dialog { return s.ds }
