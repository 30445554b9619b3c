package tui

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// Terminal panes speak to the remote program as an xterm would: the
// console decodes the operator's keys (whatever protocol the real terminal
// used) and a PTY pane encodes them again as the bytes an xterm sends,
// following the modes the remote program set on its terminal.

// termModes are the input modes a remote program has set on its terminal.
type termModes struct {
	appCursor   bool // DECCKM (?1): arrows and home/end as SS3 sequences
	appKeypad   bool // DECNKM (?66): the keypad sends SS3 sequences
	bracketed   bool // ?2004: pastes are bracketed
	focusEvents bool // ?1004: focus in and out are reported
	mouse       mouseTracking
	mouseSGR    bool // ?1006: mouse reports in SGR form
}

// mouseTracking is what mouse events a program asked for.
type mouseTracking uint8

const (
	mouseOff    mouseTracking = iota
	mouseX10                  // ?9: button presses only
	mouseNormal               // ?1000 (and ?1001): presses and releases
	mouseButton               // ?1002: and motion while a button is held
	mouseAny                  // ?1003: and every motion
)

// setMode records a mode the program set or reset.
func (m *termModes) setMode(mode ansi.Mode, on bool) {
	track := func(t mouseTracking) {
		switch {
		case on:
			m.mouse = t
		case m.mouse == t:
			m.mouse = mouseOff
		}
	}
	switch mode {
	case ansi.ModeCursorKeys:
		m.appCursor = on
	case ansi.ModeNumericKeypad:
		m.appKeypad = on
	case ansi.ModeBracketedPaste:
		m.bracketed = on
	case ansi.ModeFocusEvent:
		m.focusEvents = on
	case ansi.ModeMouseExtSgr:
		m.mouseSGR = on
	case ansi.ModeMouseX10:
		track(mouseX10)
	case ansi.ModeMouseNormal, ansi.ModeMouseHighlight:
		track(mouseNormal)
	case ansi.ModeMouseButtonEvent:
		track(mouseButton)
	case ansi.ModeMouseAnyEvent:
		track(mouseAny)
	}
}

// xtermMod is xterm's modifier parameter: 1 plus shift 1, alt 2, ctrl 4.
func xtermMod(mod tea.KeyMod) int {
	p := 1
	if mod&tea.ModShift != 0 {
		p++
	}
	if mod&(tea.ModAlt|tea.ModMeta) != 0 {
		p += 2
	}
	if mod&tea.ModCtrl != 0 {
		p += 4
	}
	return p
}

// csiKey is "CSI 1;mod final", or the unmodified form: SS3 final in
// application mode, else CSI final.
func csiKey(final byte, mod int, app bool) []byte {
	switch {
	case mod > 1:
		return []byte("\x1b[1;" + strconv.Itoa(mod) + string(final))
	case app:
		return []byte{0x1b, 'O', final}
	}
	return []byte{0x1b, '[', final}
}

// tildeKey is "CSI n ~" or "CSI n;mod ~".
func tildeKey(n, mod int) []byte {
	s := "\x1b[" + strconv.Itoa(n)
	if mod > 1 {
		s += ";" + strconv.Itoa(mod)
	}
	return []byte(s + "~")
}

// functionKeys are F5..F20 as "CSI n ~" numbers (F1..F4 are SS3 P..S).
var functionKeys = [...]int{15, 17, 18, 19, 20, 21, 23, 24, 25, 26, 28, 29, 31, 32, 33, 34}

// keypadKeys are the keypad's characters in numeric mode and its final
// bytes (after SS3) in application mode.
var keypadKeys = map[rune]struct {
	text string
	app  byte
}{
	tea.KeyKp0: {"0", 'p'}, tea.KeyKp1: {"1", 'q'}, tea.KeyKp2: {"2", 'r'}, tea.KeyKp3: {"3", 's'},
	tea.KeyKp4: {"4", 't'}, tea.KeyKp5: {"5", 'u'}, tea.KeyKp6: {"6", 'v'}, tea.KeyKp7: {"7", 'w'},
	tea.KeyKp8: {"8", 'x'}, tea.KeyKp9: {"9", 'y'}, tea.KeyKpEqual: {"=", 'X'}, tea.KeyKpMultiply: {"*", 'j'},
	tea.KeyKpPlus: {"+", 'k'}, tea.KeyKpComma: {",", 'l'}, tea.KeyKpMinus: {"-", 'm'},
	tea.KeyKpDecimal: {".", 'n'}, tea.KeyKpDivide: {"/", 'o'}, tea.KeyKpSep: {",", 'l'},
}

// withAlt prefixes ESC when alt is held: how xterm sends alt+key.
func withAlt(mod tea.KeyMod, b []byte) []byte {
	if mod&(tea.ModAlt|tea.ModMeta) != 0 && len(b) > 0 {
		return append([]byte{0x1b}, b...)
	}
	return b
}

// ctrlByte is the control character ctrl+r sends, if it has one.
func ctrlByte(r rune) (byte, bool) {
	switch {
	case r >= 'a' && r <= 'z':
		return byte(r - 'a' + 1), true
	case r >= 'A' && r <= 'Z':
		return byte(r - 'A' + 1), true
	}
	switch r {
	case '@', ' ', '2':
		return 0x00, true
	case '[', '3':
		return 0x1b, true
	case '\\', '4':
		return 0x1c, true
	case ']', '5':
		return 0x1d, true
	case '^', '6', '~':
		return 0x1e, true
	case '_', '7', '/':
		return 0x1f, true
	case '?', '8':
		return 0x7f, true
	}
	return 0, false
}

// encodeKey is what an xterm sends for k with the program's modes; nil
// for a key with no encoding (a lone modifier, a media key).
func encodeKey(k tea.Key, m termModes) []byte {
	mod := k.Mod & (tea.ModShift | tea.ModAlt | tea.ModCtrl | tea.ModMeta)
	xm := xtermMod(mod)
	switch k.Code {
	case tea.KeyUp, tea.KeyKpUp:
		return csiKey('A', xm, m.appCursor)
	case tea.KeyDown, tea.KeyKpDown:
		return csiKey('B', xm, m.appCursor)
	case tea.KeyRight, tea.KeyKpRight:
		return csiKey('C', xm, m.appCursor)
	case tea.KeyLeft, tea.KeyKpLeft:
		return csiKey('D', xm, m.appCursor)
	case tea.KeyHome, tea.KeyKpHome:
		return csiKey('H', xm, m.appCursor)
	case tea.KeyEnd, tea.KeyKpEnd:
		return csiKey('F', xm, m.appCursor)
	case tea.KeyBegin, tea.KeyKpBegin:
		return csiKey('E', xm, m.appCursor)
	case tea.KeyInsert, tea.KeyKpInsert:
		return tildeKey(2, xm)
	case tea.KeyDelete, tea.KeyKpDelete:
		return tildeKey(3, xm)
	case tea.KeyPgUp, tea.KeyKpPgUp:
		return tildeKey(5, xm)
	case tea.KeyPgDown, tea.KeyKpPgDown:
		return tildeKey(6, xm)
	case tea.KeyF1, tea.KeyF2, tea.KeyF3, tea.KeyF4:
		return csiKey(byte('P'+k.Code-tea.KeyF1), xm, true)
	case tea.KeyEnter:
		return withAlt(mod, []byte{'\r'})
	case tea.KeyKpEnter:
		if m.appKeypad {
			return []byte("\x1bOM")
		}
		return withAlt(mod, []byte{'\r'})
	case tea.KeyTab:
		if mod&tea.ModShift != 0 {
			return []byte("\x1b[Z")
		}
		return withAlt(mod, []byte{'\t'})
	case tea.KeyBackspace:
		if mod&tea.ModCtrl != 0 {
			return withAlt(mod, []byte{0x08})
		}
		return withAlt(mod, []byte{0x7f})
	case tea.KeyEscape:
		return withAlt(mod, []byte{0x1b})
	case tea.KeySpace:
		if mod&tea.ModCtrl != 0 {
			return withAlt(mod, []byte{0})
		}
		return withAlt(mod, []byte{' '})
	}
	if k.Code >= tea.KeyF5 && k.Code <= tea.KeyF20 {
		return tildeKey(functionKeys[k.Code-tea.KeyF5], xm)
	}
	if kp, ok := keypadKeys[k.Code]; ok {
		if m.appKeypad {
			return []byte{0x1b, 'O', kp.app}
		}
		return withAlt(mod, []byte(kp.text))
	}
	if mod&tea.ModCtrl != 0 {
		// The control character of the key's base letter (the US layout
		// key when the terminal reports one).
		r := k.Code
		if k.BaseCode != 0 && (r > unicode.MaxASCII) {
			r = k.BaseCode
		}
		if b, ok := ctrlByte(r); ok {
			return withAlt(mod, []byte{b})
		}
	}
	text := k.Text
	if text == "" && k.Code > 0 && k.Code < tea.KeyExtended && unicode.IsPrint(k.Code) {
		r := k.Code
		if mod&tea.ModShift != 0 {
			if k.ShiftedCode != 0 {
				r = k.ShiftedCode
			} else {
				r = unicode.ToUpper(r)
			}
		}
		text = string(r)
	}
	if text == "" || !utf8.ValidString(text) {
		return nil
	}
	return withAlt(mod, []byte(text))
}

// Bracketed paste markers.
const (
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"
)

// encodePaste is what a terminal sends for pasted text: newlines as
// enter (carriage returns), bracketed when the program asked for it. A
// paste can never end the bracket early: an end marker inside it is
// dropped.
func encodePaste(s string, bracketed bool) []byte {
	s = strings.ReplaceAll(s, "\r\n", "\r")
	s = strings.ReplaceAll(s, "\n", "\r")
	if !bracketed {
		return []byte(s)
	}
	for strings.Contains(s, pasteEnd) {
		s = strings.ReplaceAll(s, pasteEnd, "")
	}
	return []byte(pasteStart + s + pasteEnd)
}

// mouseKind is what happened to the mouse.
type mouseKind uint8

const (
	mousePress mouseKind = iota
	mouseRelease
	mouseMotion
	mouseWheel
)

// encodeMouse is the report of a mouse event at cell x, y (from 0) of the
// terminal, in the tracking mode and encoding the program asked for; nil
// when it did not ask for this event.
func encodeMouse(kind mouseKind, ev tea.Mouse, x, y int, m termModes) []byte {
	switch m.mouse {
	case mouseOff:
		return nil
	case mouseX10:
		if kind != mousePress && kind != mouseWheel {
			return nil
		}
		ev.Mod = 0
	case mouseNormal:
		if kind == mouseMotion {
			return nil
		}
	case mouseButton:
		if kind == mouseMotion && ev.Button == tea.MouseNone {
			return nil
		}
	}
	if x < 0 || y < 0 {
		return nil
	}
	button := ev.Button
	if kind == mouseRelease && !m.mouseSGR {
		button = tea.MouseNone // legacy reports say "released", not which
	}
	b := ansi.EncodeMouseButton(button, kind == mouseMotion,
		ev.Mod&tea.ModShift != 0, ev.Mod&(tea.ModAlt|tea.ModMeta) != 0, ev.Mod&tea.ModCtrl != 0)
	if b == 0xff {
		return nil
	}
	if m.mouseSGR {
		return []byte(ansi.MouseSgr(b, x, y, kind == mouseRelease))
	}
	// The legacy form carries each number as one byte offset by 32:
	// positions past 222 cannot be reported.
	if x > 222 || y > 222 || b > 222 {
		return nil
	}
	return []byte{0x1b, '[', 'M', b + 32, byte(x + 33), byte(y + 33)}
}

// keyBytes is the byte sequence a key name (as config.toml writes keys:
// "ctrl+]") sends in a plain terminal, for watching the real terminal's
// input during a full-screen attach; nil when it has none.
func keyBytes(name string) []byte {
	parts := strings.Split(name, "+")
	base := parts[len(parts)-1]
	if base == "" && name != "" { // "ctrl++"
		base = "+"
	}
	var k tea.Key
	for _, p := range parts[:len(parts)-1] {
		switch p {
		case "ctrl":
			k.Mod |= tea.ModCtrl
		case "alt":
			k.Mod |= tea.ModAlt
		case "shift":
			k.Mod |= tea.ModShift
		}
	}
	named := map[string]rune{
		"enter": tea.KeyEnter, "tab": tea.KeyTab, "esc": tea.KeyEscape, "space": tea.KeySpace,
		"backspace": tea.KeyBackspace, "up": tea.KeyUp, "down": tea.KeyDown, "left": tea.KeyLeft,
		"right": tea.KeyRight, "home": tea.KeyHome, "end": tea.KeyEnd, "pgup": tea.KeyPgUp,
		"pgdown": tea.KeyPgDown, "insert": tea.KeyInsert, "delete": tea.KeyDelete,
	}
	switch r, n := utf8.DecodeRuneInString(base); {
	case named[base] != 0:
		k.Code = named[base]
	case len(base) >= 2 && base[0] == 'f' && base[1] >= '1' && base[1] <= '9':
		f, err := strconv.Atoi(base[1:])
		if err != nil || f < 1 || f > 20 {
			return nil
		}
		k.Code = tea.KeyF1 + rune(f-1)
	case n == len(base):
		k.Code = r
	default:
		return nil
	}
	return encodeKey(k, termModes{})
}
