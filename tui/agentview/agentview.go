// Package agentview keeps and draws the console's agent transcript: the
// operator's prompts, the answer as Markdown rendered to styled lines
// (parsed with goldmark, drawn here) while it streams, each tool call as it starts (the tool, the command,
// the target and its hosts) and how it ended, consent decisions, retries
// and the reason a turn stopped. The console feeds it agent events in
// Update and asks for lines of a width there too; drawing them is the
// pane's job.
package agentview

import (
	"fmt"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/yuin/goldmark/parser"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/agent"
	"github.com/rexconsole/rex/tui/engine"
)

// Styles are the transcript's styles, made by the console from its theme.
type Styles struct {
	Prompt  lipgloss.Style // the operator's prompt
	Tool    lipgloss.Style // a tool call's line
	Command lipgloss.Style
	Target  lipgloss.Style
	Running lipgloss.Style
	OK      lipgloss.Style
	Fail    lipgloss.Style
	Muted   lipgloss.Style
	Notice  lipgloss.Style
	// The answer's Markdown; a link's URL is Muted.
	Heading   lipgloss.Style
	Emph      lipgloss.Style
	Strong    lipgloss.Style
	Strike    lipgloss.Style
	Code      lipgloss.Style // inline code
	CodeBlock lipgloss.Style
	Link      lipgloss.Style
	Quote     lipgloss.Style // a block quote's bar
	Rule      lipgloss.Style
	// Plain renders Markdown without colours or attributes (NO_COLOR).
	Plain bool
}

// maxEntries bounds the transcript; the oldest entries go first.
const maxEntries = 2000

type kind int

const (
	kindPrompt kind = iota
	kindText
	kindTool
	kindNotice
	kindBlock // preformatted (the /agent each table)
)

// entry is one item of the transcript.
type entry struct {
	kind kind
	text string // prompt, markdown, notice, block
	host string // the /agent each loop it belongs to

	// A tool call.
	callID  string
	tool    string
	command string
	target  string
	hosts   []string
	state   string // "asking", "running", "done", "refused"
	summary string
	failed  bool
	job     string

	// Rendered lines and the width they were made for.
	lines []string
	width int
	dirty bool
}

// View is the transcript.
type View struct {
	st      Styles
	entries []*entry
	// open is the text entry the answer streams into, per loop host.
	open map[string]*entry
	// calls finds a tool call's entry by call id.
	calls map[string]*entry
	// version changes with every change, so a pane knows to redraw.
	version uint64

	// md parses the answers; made on first use, as most processes never
	// draw a transcript.
	md parser.Parser
}

// New returns an empty transcript.
func New(st Styles) *View {
	return &View{st: st, open: map[string]*entry{}, calls: map[string]*entry{}}
}

// SetStyles changes the styles (a theme change); everything is redrawn.
func (v *View) SetStyles(st Styles) {
	v.st = st
	for _, e := range v.entries {
		e.dirty = true
	}
	v.version++
}

// Version changes whenever the transcript does.
func (v *View) Version() uint64 { return v.version }

// Len is the number of entries.
func (v *View) Len() int { return len(v.entries) }

func (v *View) add(e *entry) *entry {
	e.dirty = true
	v.entries = append(v.entries, e)
	if len(v.entries) > maxEntries {
		drop := v.entries[:len(v.entries)-maxEntries]
		for _, d := range drop {
			delete(v.calls, d.callID)
			if v.open[d.host] == d {
				delete(v.open, d.host)
			}
		}
		v.entries = append([]*entry(nil), v.entries[len(drop):]...)
	}
	v.version++
	return e
}

// Prompt adds the operator's prompt.
func (v *View) Prompt(text string) {
	delete(v.open, "")
	v.add(&entry{kind: kindPrompt, text: text})
}

// Notice adds a line from the console (a /agent command's answer).
func (v *View) Notice(text string) {
	v.add(&entry{kind: kindNotice, text: text})
}

// Block adds preformatted text (a table).
func (v *View) Block(text string) {
	v.add(&entry{kind: kindBlock, text: text})
}

// Clear empties the transcript (a new conversation).
func (v *View) Clear() {
	v.entries = nil
	v.open = map[string]*entry{}
	v.calls = map[string]*entry{}
	v.version++
}

// Apply adds an agent event.
func (v *View) Apply(e agent.Event) {
	loop := ""
	if e.Type == agent.EventText || e.Type == agent.EventToolCall || e.Type == agent.EventTurnStart || e.Type == agent.EventTurnEnd ||
		e.Type == agent.EventConsent || e.Type == agent.EventToolStart || e.Type == agent.EventToolResult || e.Type == agent.EventRetry {
		// In /agent each, Host names the loop; output events' Host is the
		// host that printed, which is not shown here.
		loop = e.Host
	}
	switch e.Type {
	case agent.EventText:
		t := v.open[loop]
		if t == nil {
			t = v.add(&entry{kind: kindText, host: loop})
			v.open[loop] = t
		}
		t.text += e.Text
		t.dirty = true
		v.version++
	case agent.EventToolCall:
		delete(v.open, loop)
	case agent.EventConsent:
		c := v.call(e, loop)
		if e.Decision == agent.ConsentRefused {
			c.state, c.failed, c.summary = "refused", true, "refused"
		}
		c.dirty = true
		v.version++
	case agent.EventToolStart:
		c := v.call(e, loop)
		c.command, c.target, c.hosts, c.state = oneLine(e.Command), oneLine(e.Target), e.Hosts, "running"
		c.dirty = true
		v.version++
	case agent.EventToolResult:
		c := v.call(e, loop)
		if c.state != "refused" {
			c.state, c.summary, c.failed, c.job = "done", oneLine(e.Summary), e.IsError, e.JobID
			if c.target == "" {
				c.target = oneLine(e.Target)
			}
		}
		c.dirty = true
		v.version++
	case agent.EventRetry:
		v.add(&entry{kind: kindNotice, host: loop, text: fmt.Sprintf("%s; trying again in %s", e.Error, ms(e.DelayMS))})
	case agent.EventSummarised:
		v.add(&entry{kind: kindNotice, host: loop, text: "older turns were summarised to fit the context window"})
	case agent.EventTurnEnd:
		delete(v.open, loop)
		if e.Error != "" {
			v.add(&entry{kind: kindNotice, host: loop, text: e.Error, failed: e.Outcome != agent.OutcomeStepCap})
		}
	}
}

// Asking marks a call as waiting for the operator's answer.
func (v *View) Asking(r agent.Request, host string) {
	c := v.call(agent.Event{CallID: r.CallID, Tool: r.Tool}, host)
	c.command, c.target, c.hosts, c.state = oneLine(r.Command), oneLine(r.Target), r.Hosts, "asking"
	c.dirty = true
	v.version++
}

// call finds or adds a tool call's entry.
func (v *View) call(e agent.Event, loop string) *entry {
	key := loop + "\x00" + e.CallID
	if c := v.calls[key]; c != nil {
		return c
	}
	delete(v.open, loop)
	c := v.add(&entry{kind: kindTool, callID: key, tool: e.Tool, command: oneLine(e.Command), target: oneLine(e.Target), hosts: e.Hosts, host: loop})
	v.calls[key] = c
	return c
}

// Lines renders the transcript at a width, reusing what did not change.
func (v *View) Lines(width int) []string {
	width = max(width, 10)
	var out []string
	for _, e := range v.entries {
		if e.dirty || e.width != width {
			e.lines, e.width, e.dirty = v.render(e, width), width, false
		}
		out = append(out, e.lines...)
	}
	return out
}

func (v *View) render(e *entry, width int) []string {
	prefix := ""
	if e.host != "" {
		prefix = v.st.Muted.Render("[" + e.host + "] ")
	}
	pw := ansi.StringWidth(prefix)
	switch e.kind {
	case kindPrompt:
		return wrapStyled(v.st.Prompt, "? "+e.text, width, "")
	case kindText:
		return prefixed(prefix, v.markdown(e.text, width-pw))
	case kindTool:
		return prefixed(prefix, v.toolLines(e, width-pw))
	case kindNotice:
		st := v.st.Notice
		if e.failed {
			st = v.st.Fail
		}
		return prefixed(prefix, wrapStyled(st, e.text, width-pw, ""))
	case kindBlock:
		var out []string
		for _, l := range strings.Split(strings.TrimRight(e.text, "\n"), "\n") {
			out = append(out, ansi.Truncate(l, width, "…"))
		}
		return out
	}
	return nil
}

// toolLines draws a call: "⚙ bash `uname -r` → fleet (h[1-3])", then its
// state.
func (v *View) toolLines(e *entry, width int) []string {
	where := e.target
	if len(e.hosts) > 0 && !(len(e.hosts) == 1 && e.hosts[0] == e.target) {
		where += " (" + devices.Fold(e.hosts) + ")"
	}
	cmd := e.command
	if cmd == "" {
		cmd = e.tool
	}
	head := v.st.Tool.Render("⚙ "+e.tool) + " " + v.st.Command.Render(cmd)
	if where != "" {
		head += v.st.Muted.Render(" → ") + v.st.Target.Render(where)
	}
	lines := []string{ansi.Truncate(head, width, "…")}
	var state string
	switch e.state {
	case "asking":
		state = v.st.Running.Render("  waiting for your answer…")
	case "running":
		state = v.st.Running.Render("  running…")
	case "refused":
		state = v.st.Fail.Render("  ✗ refused")
	case "done":
		if e.failed {
			state = v.st.Fail.Render("  ✗ " + e.summary)
		} else {
			state = v.st.OK.Render("  ✓ " + e.summary)
		}
		if e.job != "" {
			state += v.st.Muted.Render(" · still running as job " + e.job)
		}
	}
	if state != "" {
		lines = append(lines, ansi.Truncate(state, width, "…"))
	}
	return lines
}

// markdown renders the answer.
func (v *View) markdown(text string, width int) []string {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	if v.md == nil {
		v.md = newMarkdownParser()
	}
	return renderMarkdown(v.md, v.st, text, width)
}

func prefixed(prefix string, lines []string) []string {
	if prefix == "" {
		return lines
	}
	pad := strings.Repeat(" ", ansi.StringWidth(prefix))
	for i := range lines {
		if i == 0 {
			lines[i] = prefix + lines[i]
		} else {
			lines[i] = pad + lines[i]
		}
	}
	return lines
}

// wrapStyled wraps text to width and styles each line.
func wrapStyled(st lipgloss.Style, text string, width int, indent string) []string {
	var out []string
	for _, para := range strings.Split(text, "\n") {
		w := ansi.Wrap(para, max(width-len(indent), 1), "")
		for _, l := range strings.Split(w, "\n") {
			out = append(out, st.Render(indent+l))
		}
	}
	return out
}

// oneLine is a tool call's text (the model's command, a summary that
// quotes it) as it is kept: one line with no control characters, which
// would reach the operator's terminal.
func oneLine(s string) string { return engine.OneLine(s) }

func ms(d int64) string {
	if d < 1000 {
		return fmt.Sprintf("%dms", d)
	}
	return fmt.Sprintf("%.1fs", float64(d)/1000)
}
