package tui

import (
	"fmt"
	"sort"
	"strings"

	"charm.land/bubbles/v2/key"
)

// KeyMap is every key the console answers, in groups; it also feeds the
// status line and the help overlay. Keys can be changed in the [keys]
// table of config.toml, by action name (see Actions).
type KeyMap struct {
	// Console
	Quit   key.Binding
	Cancel key.Binding
	Help   key.Binding
	Escape key.Binding
	Tasks  key.Binding

	// Command line
	Submit      key.Binding
	Complete    key.Binding
	HistoryPrev key.Binding
	HistoryNext key.Binding

	// Panes
	NextPane key.Binding
	PrevPane key.Binding
	Zoom     key.Binding
	Gather   key.Binding
	Search   key.Binding
	Clear    key.Binding
	PageUp   key.Binding
	PageDown key.Binding
	LineUp   key.Binding
	LineDown key.Binding
	Top      key.Binding
	Bottom   key.Binding

	// Sidebar
	TargetPrev key.Binding
	TargetNext key.Binding

	// Terminal panes (/attach). While a terminal pane has the keys, every
	// key goes to its program except Detach; the others act from the
	// command line on the focused terminal pane.
	Detach         key.Binding
	EnterPane      key.Binding
	Broadcast      key.Binding
	FullScreen     key.Binding
	TermScrollUp   key.Binding
	TermScrollDown key.Binding
}

// DefaultKeyMap is the key map without configuration.
func DefaultKeyMap() KeyMap {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	return KeyMap{
		Quit:   b("ctrl+q", "quit", "ctrl+q"),
		Cancel: b("ctrl+c", "cancel task", "ctrl+c"),
		Help:   b("f1", "help", "f1"),
		Escape: b("esc", "close / back", "esc"),
		Tasks:  b("f3", "task list", "f3"),

		Submit:      b("enter", "run", "enter"),
		Complete:    b("tab", "complete", "tab"),
		HistoryPrev: b("↑", "older command", "up"),
		HistoryNext: b("↓", "newer command", "down"),

		NextPane: b("tab", "next pane (empty line)", "tab"),
		PrevPane: b("shift+tab", "previous pane", "shift+tab"),
		Zoom:     b("ctrl+o", "zoom pane", "ctrl+o"),
		Gather:   b("ctrl+g", "gathered view", "ctrl+g"),
		Search:   b("ctrl+f", "search pane", "ctrl+f"),
		Clear:    b("ctrl+l", "clear pane", "ctrl+l"),
		PageUp:   b("pgup", "page up", "pgup"),
		PageDown: b("pgdn", "page down", "pgdown"),
		LineUp:   b("shift+↑", "line up", "shift+up"),
		LineDown: b("shift+↓", "line down", "shift+down"),
		Top:      b("ctrl+home", "oldest line", "ctrl+home"),
		Bottom:   b("ctrl+end", "newest line, follow", "ctrl+end"),

		TargetPrev: b("alt+↑", "previous target", "alt+up"),
		TargetNext: b("alt+↓", "next target", "alt+down"),

		Detach:         b("ctrl+]", "back to the command line (the one key a terminal does not get)", "ctrl+]"),
		EnterPane:      b("enter", "type in the focused terminal, or reopen it", "enter"),
		Broadcast:      b("ctrl+x", "broadcast keys to all terminals of its /attach, on/off", "ctrl+x"),
		FullScreen:     b("ctrl+t", "focused terminal on the whole screen", "ctrl+t"),
		TermScrollUp:   b("shift+pgup", "focused terminal's history up (pgup too)", "shift+pgup"),
		TermScrollDown: b("shift+pgdn", "focused terminal's history down (pgdn too)", "shift+pgdown"),
	}
}

// ShortHelp is the status line's list.
func (k KeyMap) ShortHelp() []key.Binding {
	tab := k.NextPane
	tab.SetHelp(bindingHelp(k.NextPane), "complete/next pane")
	return []key.Binding{k.Help, k.Quit, k.Cancel, tab, k.Zoom, k.Gather, k.Search, k.PageUp}
}

// FullHelp is the help overlay's columns.
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Submit, k.Complete, k.HistoryPrev, k.HistoryNext, k.Cancel, k.Help, k.Tasks, k.Escape, k.Quit},
		{k.NextPane, k.PrevPane, k.Zoom, k.Gather, k.Search, k.Clear},
		{k.PageUp, k.PageDown, k.LineUp, k.LineDown, k.Top, k.Bottom, k.TargetPrev, k.TargetNext},
		{k.Detach, k.EnterPane, k.Broadcast, k.FullScreen, k.TermScrollUp, k.TermScrollDown},
	}
}

func bindingHelp(b key.Binding) string { return b.Help().Key }

// actions names the bindings config.toml may change.
func (k *KeyMap) actions() map[string]*key.Binding {
	return map[string]*key.Binding{
		"quit": &k.Quit, "cancel": &k.Cancel, "help": &k.Help, "escape": &k.Escape, "tasks": &k.Tasks,
		"submit": &k.Submit, "complete": &k.Complete,
		"history_prev": &k.HistoryPrev, "history_next": &k.HistoryNext,
		"next_pane": &k.NextPane, "prev_pane": &k.PrevPane, "zoom": &k.Zoom,
		"gather": &k.Gather, "search": &k.Search, "clear": &k.Clear,
		"page_up": &k.PageUp, "page_down": &k.PageDown, "line_up": &k.LineUp,
		"line_down": &k.LineDown, "top": &k.Top, "bottom": &k.Bottom,
		"target_prev": &k.TargetPrev, "target_next": &k.TargetNext,
		"detach": &k.Detach, "enter_pane": &k.EnterPane, "broadcast": &k.Broadcast,
		"fullscreen": &k.FullScreen, "term_scroll_up": &k.TermScrollUp, "term_scroll_down": &k.TermScrollDown,
	}
}

// Actions lists the action names of the [keys] table, sorted.
func Actions() []string {
	var k KeyMap
	var names []string
	for n := range k.actions() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// apply rebinds actions from config.toml's [keys] table: each action maps
// to the keys that trigger it, as Bubble Tea names them ("ctrl+q", "f2",
// "alt+z").
func (k *KeyMap) apply(bind map[string][]string) error {
	acts := k.actions()
	names := make([]string, 0, len(bind))
	for n := range bind {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		keys := bind[name]
		b, ok := acts[name]
		if !ok {
			return fmt.Errorf("[keys]: unknown action %q; the actions are %s", name, strings.Join(Actions(), ", "))
		}
		if len(keys) == 0 {
			return fmt.Errorf("[keys]: %s has no keys; give at least one, such as [\"ctrl+q\"]", name)
		}
		for _, s := range keys {
			if err := validKeyName(s); err != nil {
				return fmt.Errorf("[keys]: %s: %w", name, err)
			}
		}
		b.SetKeys(keys...)
		b.SetHelp(strings.Join(keys, "/"), b.Help().Desc)
	}
	return nil
}

// validKeyName accepts what a key press's String() can be: modifiers
// joined by '+' before a key name or one character.
func validKeyName(s string) error {
	if s == "" || len(s) > 32 || strings.ContainsAny(s, " \t\n") {
		return fmt.Errorf("%q is not a key; write keys as Bubble Tea names them, such as ctrl+q, alt+z or f2", s)
	}
	parts := strings.Split(s, "+")
	for _, p := range parts[:len(parts)-1] {
		switch p {
		case "ctrl", "alt", "shift", "meta", "hyper", "super":
		default:
			return fmt.Errorf("%q: unknown modifier %q; use ctrl, alt or shift", s, p)
		}
	}
	if parts[len(parts)-1] == "" && s != "+" {
		return fmt.Errorf("%q ends with '+'; name the key after the modifiers", s)
	}
	return nil
}
