package dialog

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// Consent answers, the Choice of a Consent dialog.
const (
	ConsentOnce = iota
	ConsentSession
	ConsentAll
	ConsentDeny
)

// ConsentInfo is what an agent asks to do, as the operator must see it.
type ConsentInfo struct {
	Tool    string
	Command string
	// Detail is a diff (lines starting with + and -) or the start of a
	// file's new content.
	Detail string
	Target string
	// Hosts is every host the call reaches, folded (web[1-3],db2), and
	// how many they are.
	Hosts  string
	NHosts int
	// Reason says why it asks although a rule allows it (a deny pattern).
	Reason string
	// Each offers "allow on all", for /agent each runs.
	Each bool
	// Loop is the /agent each loop that asks.
	Loop string
}

// Consent asks whether an agent's call may run: the exact command or diff,
// the target and every host, and allow once, allow for this session, (in
// /agent each) allow on all, or deny. The selection starts on deny, so a
// stray enter never runs anything; esc denies too.
type Consent struct {
	id   string
	info ConsentInfo
	sel  int
	w, h int
	keys struct {
		Once, Session, All, Deny, Next, Prev, Choose key.Binding
	}
}

// NewConsent returns a consent dialog.
func NewConsent(id string, info ConsentInfo) *Consent {
	c := &Consent{id: id, info: info, sel: ConsentDeny}
	c.keys.Once = key.NewBinding(key.WithKeys("y", "o"), key.WithHelp("y", "allow once"))
	c.keys.Session = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "allow for this session"))
	c.keys.All = key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "allow on all hosts"))
	c.keys.Deny = key.NewBinding(key.WithKeys("n", "d", "esc"), key.WithHelp("n", "deny"))
	c.keys.Next = key.NewBinding(key.WithKeys("right", "tab", "l"), key.WithHelp("←/→", "choose"))
	c.keys.Prev = key.NewBinding(key.WithKeys("left", "shift+tab", "h"))
	c.keys.Choose = key.NewBinding(key.WithKeys("enter", "space"), key.WithHelp("enter", "confirm"))
	return c
}

// ID implements Dialog.
func (c *Consent) ID() string { return c.id }

// Info is what the dialog asks about.
func (c *Consent) Info() ConsentInfo { return c.info }

// SetSize implements Dialog.
func (c *Consent) SetSize(maxW, maxH int) { c.w, c.h = maxW, maxH }

// choices are the answers offered, in order.
func (c *Consent) choices() []int {
	if c.info.Each {
		return []int{ConsentOnce, ConsentSession, ConsentAll, ConsentDeny}
	}
	return []int{ConsentOnce, ConsentSession, ConsentDeny}
}

// Update implements Dialog: an answer is a Choose with one of the Consent
// constants.
func (c *Consent) Update(msg tea.KeyPressMsg) Action {
	switch {
	case key.Matches(msg, c.keys.Once):
		return Choose{ID: c.id, Choice: ConsentOnce}
	case key.Matches(msg, c.keys.Session):
		return Choose{ID: c.id, Choice: ConsentSession}
	case c.info.Each && key.Matches(msg, c.keys.All):
		return Choose{ID: c.id, Choice: ConsentAll}
	case key.Matches(msg, c.keys.Deny):
		return Choose{ID: c.id, Choice: ConsentDeny}
	case key.Matches(msg, c.keys.Choose):
		return Choose{ID: c.id, Choice: c.sel}
	case key.Matches(msg, c.keys.Next, c.keys.Prev):
		ch := c.choices()
		i := 0
		for j, v := range ch {
			if v == c.sel {
				i = j
			}
		}
		d := 1
		if key.Matches(msg, c.keys.Prev) {
			d = len(ch) - 1
		}
		c.sel = ch[(i+d)%len(ch)]
	}
	return nil
}

func (c *Consent) label(choice int) (string, key.Binding) {
	switch choice {
	case ConsentOnce:
		return "Allow once", c.keys.Once
	case ConsentSession:
		return "Allow for this session", c.keys.Session
	case ConsentAll:
		return "Allow on all hosts", c.keys.All
	}
	return "Deny", c.keys.Deny
}

// View implements Dialog.
func (c *Consent) View(st *Styles) []string {
	var parts []string
	rw := 0
	for _, ch := range c.choices() {
		l, k := c.label(ch)
		text := " " + l + " (" + k.Help().Key + ") "
		style := st.Button
		if ch == c.sel {
			style = st.ButtonActive
		}
		parts = append(parts, style.Render(text))
		rw += ansi.StringWidth(text)
	}
	rw += 2 * (len(parts) - 1)
	row := strings.Join(parts, "  ")
	w := min(c.w, max(72, rw+4))
	inner := w - 4
	if inner < 12 || c.h < 8 {
		return nil
	}
	var body []string
	add := func(st lipgloss.Style, s string) {
		for _, l := range wrap(s, inner) {
			body = append(body, st.Render(fit(l, inner)))
		}
	}
	blank := func() { body = append(body, strings.Repeat(" ", inner)) }
	blank()
	where := c.info.Target
	switch {
	case c.info.NHosts > 1:
		where += " — " + strconv.Itoa(c.info.NHosts) + " hosts: " + c.info.Hosts
	case c.info.Hosts != "" && c.info.Hosts != c.info.Target:
		where += " — " + c.info.Hosts
	}
	add(st.Muted, "Runs on "+where)
	blank()
	var cmd []string
	for _, l := range strings.Split(visible(c.info.Command), "\n") {
		cmd = append(cmd, cutLines(l, inner)...)
	}
	// The command is what runs: one too long for the dialog shows its
	// start and its end with the count of lines left out, never a silent
	// cut of its end.
	after := 2 // a blank line and the buttons
	if c.info.Detail != "" {
		after += 2
	}
	if c.info.Reason != "" {
		after += 1 + len(wrap("Asks because "+c.info.Reason+".", inner))
	}
	if room := max(c.h-2-len(body)-after, 3); len(cmd) > room {
		tail := max(1, (room-1)/3)
		head := room - 1 - tail
		mark := fmt.Sprintf("… %d more lines of the command …", len(cmd)-head-tail)
		cmd = append(append(cmd[:head:head], mark), cmd[len(cmd)-tail:]...)
	}
	for _, l := range cmd {
		body = append(body, st.Title.Render(fit(l, inner)))
	}
	if c.info.Detail != "" {
		blank()
		lines := strings.Split(strings.TrimRight(c.info.Detail, "\n"), "\n")
		// The command, the buttons and the host line come first; the
		// detail gets what is left.
		room := c.h - 2 - len(body) - 6
		if c.info.Reason != "" {
			room -= 2
		}
		room = max(room, 3)
		if len(lines) > room {
			lines = append(lines[:room-1], "…")
		}
		for _, l := range lines {
			style := st.Text
			switch {
			case strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++"):
				style = st.OK
			case strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "---"):
				style = st.Fail
			case strings.HasPrefix(l, "@@"):
				style = st.Muted
			}
			body = append(body, style.Render(fit(visible(l), inner)))
		}
	}
	if c.info.Reason != "" {
		blank()
		add(st.Fail, "Asks because "+c.info.Reason+".")
	}
	blank()
	if rw > inner {
		row, rw = ansi.Truncate(row, inner, ""), inner
	}
	body = append(body, center(row, rw, inner))
	if max := c.h - 2; len(body) > max {
		body = append(body[:max-1], body[len(body)-1])
	}
	title := "The agent asks to run " + c.info.Tool
	if c.info.Loop != "" {
		title += " (loop " + c.info.Loop + ")"
	}
	return frame(st, w, title, "y once · s session · n deny · output from hosts never answers this", body)
}

// visible writes the control characters of s other than newline and tab
// as Go escapes (\x1b, \r): the operator sees the bytes that will run, and
// none reaches the terminal as a control sequence that could paint other
// text over them.
func visible(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			fmt.Fprintf(&b, `\x%02x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// cutLines breaks a long line into pieces of w cells.
func cutLines(l string, w int) []string {
	var out []string
	for ansi.StringWidth(l) > w {
		out = append(out, ansi.Truncate(l, w, ""))
		l = ansi.TruncateLeft(l, w, "")
	}
	return append(out, l)
}

// Help implements Dialog.
func (c *Consent) Help() []key.Binding {
	h := []key.Binding{c.keys.Once, c.keys.Session}
	if c.info.Each {
		h = append(h, c.keys.All)
	}
	return append(h, c.keys.Deny, c.keys.Next)
}
