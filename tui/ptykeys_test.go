package tui

import (
	"bytes"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

func TestEncodeKey(t *testing.T) {
	normal := termModes{}
	app := termModes{appCursor: true}
	keypad := termModes{appKeypad: true}
	tests := []struct {
		name  string
		key   tea.Key
		modes termModes
		want  string
	}{
		// Printable keys and shifted letters, as legacy terminals and the
		// kitty protocol report them.
		{"letter", tea.Key{Code: 'a', Text: "a"}, normal, "a"},
		{"shifted letter with text", tea.Key{Code: 'a', ShiftedCode: 'A', Mod: tea.ModShift, Text: "A"}, normal, "A"},
		{"shifted letter without text", tea.Key{Code: 'a', ShiftedCode: 'A', Mod: tea.ModShift}, normal, "A"},
		{"shifted letter, no shifted code", tea.Key{Code: 'q', Mod: tea.ModShift}, normal, "Q"},
		{"shifted symbol", tea.Key{Code: '1', ShiftedCode: '!', Mod: tea.ModShift}, normal, "!"},
		{"upper case from caps lock", tea.Key{Code: 'a', Mod: tea.ModCapsLock, Text: "A"}, normal, "A"},
		{"unicode", tea.Key{Code: 'é', Text: "é"}, normal, "é"},
		{"grapheme cluster", tea.Key{Code: tea.KeyExtended, Text: "👍🏽"}, normal, "👍🏽"},
		{"space", tea.Key{Code: tea.KeySpace, Text: " "}, normal, " "},

		// Alt prefixes ESC.
		{"alt+a", tea.Key{Code: 'a', Mod: tea.ModAlt}, normal, "\x1ba"},
		{"alt+shift+a", tea.Key{Code: 'a', ShiftedCode: 'A', Mod: tea.ModAlt | tea.ModShift}, normal, "\x1bA"},
		{"alt+.", tea.Key{Code: '.', Mod: tea.ModAlt}, normal, "\x1b."},
		{"alt+enter", tea.Key{Code: tea.KeyEnter, Mod: tea.ModAlt}, normal, "\x1b\r"},
		{"alt+backspace", tea.Key{Code: tea.KeyBackspace, Mod: tea.ModAlt}, normal, "\x1b\x7f"},
		{"meta as alt", tea.Key{Code: 'b', Mod: tea.ModMeta}, normal, "\x1bb"},

		// Control characters.
		{"ctrl+a", tea.Key{Code: 'a', Mod: tea.ModCtrl}, normal, "\x01"},
		{"ctrl+c", tea.Key{Code: 'c', Mod: tea.ModCtrl}, normal, "\x03"},
		{"ctrl+z", tea.Key{Code: 'z', Mod: tea.ModCtrl}, normal, "\x1a"},
		{"ctrl+shift+a", tea.Key{Code: 'a', Mod: tea.ModCtrl | tea.ModShift}, normal, "\x01"},
		{"ctrl+alt+a", tea.Key{Code: 'a', Mod: tea.ModCtrl | tea.ModAlt}, normal, "\x1b\x01"},
		{"ctrl+]", tea.Key{Code: ']', Mod: tea.ModCtrl}, normal, "\x1d"},
		{"ctrl+\\", tea.Key{Code: '\\', Mod: tea.ModCtrl}, normal, "\x1c"},
		{"ctrl+[", tea.Key{Code: '[', Mod: tea.ModCtrl}, normal, "\x1b"},
		{"ctrl+_", tea.Key{Code: '_', Mod: tea.ModCtrl}, normal, "\x1f"},
		{"ctrl+@", tea.Key{Code: '@', Mod: tea.ModCtrl}, normal, "\x00"},
		{"ctrl+space", tea.Key{Code: tea.KeySpace, Mod: tea.ModCtrl}, normal, "\x00"},
		{"ctrl+?", tea.Key{Code: '?', Mod: tea.ModCtrl}, normal, "\x7f"},
		{"ctrl on another layout", tea.Key{Code: 'й', BaseCode: 'q', Mod: tea.ModCtrl}, normal, "\x11"},
		{"ctrl+backspace", tea.Key{Code: tea.KeyBackspace, Mod: tea.ModCtrl}, normal, "\x08"},

		// Editing keys.
		{"enter", tea.Key{Code: tea.KeyEnter}, normal, "\r"},
		{"tab", tea.Key{Code: tea.KeyTab}, normal, "\t"},
		{"shift+tab", tea.Key{Code: tea.KeyTab, Mod: tea.ModShift}, normal, "\x1b[Z"},
		{"backspace", tea.Key{Code: tea.KeyBackspace}, normal, "\x7f"},
		{"esc", tea.Key{Code: tea.KeyEscape}, normal, "\x1b"},
		{"insert", tea.Key{Code: tea.KeyInsert}, normal, "\x1b[2~"},
		{"delete", tea.Key{Code: tea.KeyDelete}, normal, "\x1b[3~"},
		{"ctrl+delete", tea.Key{Code: tea.KeyDelete, Mod: tea.ModCtrl}, normal, "\x1b[3;5~"},
		{"pgup", tea.Key{Code: tea.KeyPgUp}, normal, "\x1b[5~"},
		{"pgdown", tea.Key{Code: tea.KeyPgDown}, app, "\x1b[6~"},
		{"shift+pgup", tea.Key{Code: tea.KeyPgUp, Mod: tea.ModShift}, normal, "\x1b[5;2~"},

		// Arrows in normal and application cursor mode (DECCKM).
		{"up", tea.Key{Code: tea.KeyUp}, normal, "\x1b[A"},
		{"down", tea.Key{Code: tea.KeyDown}, normal, "\x1b[B"},
		{"right", tea.Key{Code: tea.KeyRight}, normal, "\x1b[C"},
		{"left", tea.Key{Code: tea.KeyLeft}, normal, "\x1b[D"},
		{"up, application", tea.Key{Code: tea.KeyUp}, app, "\x1bOA"},
		{"down, application", tea.Key{Code: tea.KeyDown}, app, "\x1bOB"},
		{"right, application", tea.Key{Code: tea.KeyRight}, app, "\x1bOC"},
		{"left, application", tea.Key{Code: tea.KeyLeft}, app, "\x1bOD"},
		{"home", tea.Key{Code: tea.KeyHome}, normal, "\x1b[H"},
		{"end, application", tea.Key{Code: tea.KeyEnd}, app, "\x1bOF"},
		{"shift+up", tea.Key{Code: tea.KeyUp, Mod: tea.ModShift}, normal, "\x1b[1;2A"},
		{"shift+up, application", tea.Key{Code: tea.KeyUp, Mod: tea.ModShift}, app, "\x1b[1;2A"},
		{"alt+left", tea.Key{Code: tea.KeyLeft, Mod: tea.ModAlt}, normal, "\x1b[1;3D"},
		{"ctrl+right", tea.Key{Code: tea.KeyRight, Mod: tea.ModCtrl}, app, "\x1b[1;5C"},
		{"ctrl+shift+home", tea.Key{Code: tea.KeyHome, Mod: tea.ModCtrl | tea.ModShift}, normal, "\x1b[1;6H"},

		// Function keys.
		{"f1", tea.Key{Code: tea.KeyF1}, normal, "\x1bOP"},
		{"f2", tea.Key{Code: tea.KeyF2}, normal, "\x1bOQ"},
		{"f4", tea.Key{Code: tea.KeyF4}, normal, "\x1bOS"},
		{"f5", tea.Key{Code: tea.KeyF5}, normal, "\x1b[15~"},
		{"f6", tea.Key{Code: tea.KeyF6}, normal, "\x1b[17~"},
		{"f10", tea.Key{Code: tea.KeyF10}, normal, "\x1b[21~"},
		{"f11", tea.Key{Code: tea.KeyF11}, normal, "\x1b[23~"},
		{"f12", tea.Key{Code: tea.KeyF12}, normal, "\x1b[24~"},
		{"ctrl+f1", tea.Key{Code: tea.KeyF1, Mod: tea.ModCtrl}, normal, "\x1b[1;5P"},
		{"shift+f5", tea.Key{Code: tea.KeyF5, Mod: tea.ModShift}, normal, "\x1b[15;2~"},
		{"alt+f12", tea.Key{Code: tea.KeyF12, Mod: tea.ModAlt}, normal, "\x1b[24;3~"},

		// The keypad.
		{"keypad 5", tea.Key{Code: tea.KeyKp5}, normal, "5"},
		{"keypad 5, application", tea.Key{Code: tea.KeyKp5}, keypad, "\x1bOu"},
		{"keypad enter, application", tea.Key{Code: tea.KeyKpEnter}, keypad, "\x1bOM"},
		{"keypad enter", tea.Key{Code: tea.KeyKpEnter}, normal, "\r"},

		// Keys without an encoding.
		{"lone shift", tea.Key{Code: tea.KeyLeftShift, Mod: tea.ModShift}, normal, ""},
		{"media key", tea.Key{Code: tea.KeyMediaPlay}, normal, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := encodeKey(tt.key, tt.modes)
			if string(got) != tt.want {
				t.Errorf("encodeKey(%q) = %q, want %q", tea.KeyPressMsg(tt.key).String(), got, tt.want)
			}
		})
	}
}

func TestEncodePaste(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		bracketed bool
		want      string
	}{
		{"plain", "ls -l", false, "ls -l"},
		{"newlines as enter", "a\nb\r\nc", false, "a\rb\rc"},
		{"bracketed", "echo hi\n", true, "\x1b[200~echo hi\r\x1b[201~"},
		{"an end marker cannot end the paste early", "x\x1b[201~rm -rf ~\n", true, "\x1b[200~xrm -rf ~\r\x1b[201~"},
		{"a split end marker cannot either", "\x1b[20\x1b[201~1~", true, "\x1b[200~\x1b[201~"},
		{"empty, bracketed", "", true, "\x1b[200~\x1b[201~"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(encodePaste(tt.text, tt.bracketed))
			if got != tt.want {
				t.Errorf("encodePaste(%q, %v) = %q, want %q", tt.text, tt.bracketed, got, tt.want)
			}
			if tt.bracketed && bytes.Count([]byte(got), []byte(pasteEnd)) != 1 {
				t.Errorf("encodePaste(%q) has %d end markers, want 1", tt.text, bytes.Count([]byte(got), []byte(pasteEnd)))
			}
		})
	}
}

func TestEncodeMouse(t *testing.T) {
	left := tea.Mouse{Button: tea.MouseLeft}
	none := tea.Mouse{Button: tea.MouseNone}
	sgr := func(t mouseTracking) termModes { return termModes{mouse: t, mouseSGR: true} }
	legacy := func(t mouseTracking) termModes { return termModes{mouse: t} }
	tests := []struct {
		name  string
		kind  mouseKind
		ev    tea.Mouse
		x, y  int
		modes termModes
		want  string
	}{
		{"not asked for", mousePress, left, 3, 4, termModes{}, ""},
		{"press, sgr", mousePress, left, 3, 4, sgr(mouseNormal), "\x1b[<0;4;5M"},
		{"release, sgr", mouseRelease, left, 3, 4, sgr(mouseNormal), "\x1b[<0;4;5m"},
		{"right press with ctrl, sgr", mousePress, tea.Mouse{Button: tea.MouseRight, Mod: tea.ModCtrl}, 0, 0, sgr(mouseNormal), "\x1b[<18;1;1M"},
		{"wheel up, sgr", mouseWheel, tea.Mouse{Button: tea.MouseWheelUp}, 9, 1, sgr(mouseNormal), "\x1b[<64;10;2M"},
		{"press, legacy", mousePress, left, 3, 4, legacy(mouseNormal), "\x1b[M $%"},
		{"release, legacy", mouseRelease, left, 3, 4, legacy(mouseNormal), "\x1b[M#$%"},
		{"legacy past its range", mousePress, left, 230, 4, legacy(mouseNormal), ""},
		{"sgr past the legacy range", mousePress, left, 230, 4, sgr(mouseNormal), "\x1b[<0;231;5M"},
		{"x10 reports presses", mousePress, tea.Mouse{Button: tea.MouseLeft, Mod: tea.ModShift}, 0, 0, legacy(mouseX10), "\x1b[M !!"},
		{"x10 ignores releases", mouseRelease, left, 0, 0, legacy(mouseX10), ""},
		{"normal ignores motion", mouseMotion, left, 1, 1, sgr(mouseNormal), ""},
		{"button mode: drag", mouseMotion, left, 1, 1, sgr(mouseButton), "\x1b[<32;2;2M"},
		{"button mode: hover ignored", mouseMotion, none, 1, 1, sgr(mouseButton), ""},
		{"any mode: hover", mouseMotion, none, 1, 1, sgr(mouseAny), "\x1b[<35;2;2M"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(encodeMouse(tt.kind, tt.ev, tt.x, tt.y, tt.modes))
			if got != tt.want {
				t.Errorf("encodeMouse = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTermModes(t *testing.T) {
	var m termModes
	m.setMode(ansi.ModeCursorKeys, true)
	m.setMode(ansi.ModeBracketedPaste, true)
	m.setMode(ansi.ModeMouseButtonEvent, true)
	m.setMode(ansi.ModeMouseExtSgr, true)
	if !m.appCursor || !m.bracketed || m.mouse != mouseButton || !m.mouseSGR {
		t.Fatalf("after setting modes: %+v", m)
	}
	// Resetting a tracking mode that is not the current one keeps it.
	m.setMode(ansi.ModeMouseNormal, false)
	if m.mouse != mouseButton {
		t.Errorf("resetting ?1000 turned off ?1002: %+v", m)
	}
	m.setMode(ansi.ModeMouseButtonEvent, false)
	m.setMode(ansi.ModeCursorKeys, false)
	if m.appCursor || m.mouse != mouseOff {
		t.Errorf("after resetting modes: %+v", m)
	}
}

func TestKeyBytes(t *testing.T) {
	tests := []struct{ name, want string }{
		{"ctrl+]", "\x1d"},
		{"ctrl+\\", "\x1c"},
		{"ctrl+a", "\x01"},
		{"alt+x", "\x1bx"},
		{"f12", "\x1b[24~"},
		{"ctrl+f1", "\x1b[1;5P"},
		{"esc", "\x1b"},
		{"f99", ""},
		{"ctrl+nosuchkey", ""},
	}
	for _, tt := range tests {
		if got := string(keyBytes(tt.name)); got != tt.want {
			t.Errorf("keyBytes(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
