package agentview

import (
	"strings"
	"testing"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/internal/agent"
)

func plain(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimRight(ansi.Strip(l), " ") + "\n")
	}
	return b.String()
}

func TestTranscript(t *testing.T) {
	v := New(Styles{Prompt: lipgloss.NewStyle().Bold(true)})
	v.Prompt("what kernel runs on these hosts")
	for _, e := range []agent.Event{
		{Type: agent.EventTurnStart, Prompt: "what kernel runs on these hosts", Target: "fleet"},
		{Type: agent.EventText, Text: "Let me "},
		{Type: agent.EventText, Text: "check."},
		{Type: agent.EventToolCall, Tool: "bash", CallID: "c1"},
	} {
		v.Apply(e)
	}
	v.Asking(agent.Request{CallID: "c1", Tool: "bash", Command: "uname -r", Target: "fleet", Hosts: []string{"h1", "h2", "h3"}}, "")
	got := plain(v.Lines(60))
	if !strings.Contains(got, "? what kernel runs on these hosts\n") || !strings.Contains(got, "Let me check.\n") ||
		!strings.Contains(got, "⚙ bash uname -r → fleet (h[1-3])\n  waiting for your answer…\n") {
		t.Fatalf("while asking:\n%s", got)
	}
	ver := v.Version()
	for _, e := range []agent.Event{
		{Type: agent.EventConsent, CallID: "c1", Decision: agent.ConsentAsked},
		{Type: agent.EventToolStart, CallID: "c1", Tool: "bash", Command: "uname -r", Target: "fleet", Hosts: []string{"h1", "h2", "h3"}},
		{Type: agent.EventOutput, CallID: "c1", Host: "h1", Data: "6.1\n"},
		{Type: agent.EventToolResult, CallID: "c1", Tool: "bash", Summary: "2/3 ok; h3 exit 1", IsError: false},
		{Type: agent.EventText, Text: "**h1** and h2 run `6.1`; h3 failed."},
		{Type: agent.EventTurnEnd, Outcome: agent.OutcomeFinished},
	} {
		v.Apply(e)
	}
	if v.Version() == ver {
		t.Error("the version did not change")
	}
	got = plain(v.Lines(60))
	want := "? what kernel runs on these hosts\nLet me check.\n⚙ bash uname -r → fleet (h[1-3])\n  ✓ 2/3 ok; h3 exit 1\n"
	if !strings.HasPrefix(got, want) {
		t.Errorf("transcript:\n%s\nwant it to start:\n%s", got, want)
	}
	if !strings.Contains(got, "h1 and h2 run") || !strings.Contains(got, "6.1") || strings.Contains(got, "**") || strings.Contains(got, "`") {
		t.Errorf("the answer is not rendered Markdown:\n%s", got)
	}
	for _, l := range v.Lines(30) {
		if w := ansi.StringWidth(l); w > 30 {
			t.Errorf("a line of width %d at 30: %q", w, ansi.Strip(l))
		}
	}
	v.Apply(agent.Event{Type: agent.EventTurnEnd, Outcome: agent.OutcomeDenied, Error: "the operator refused rm -rf x on web; the turn stopped"})
	if got := plain(v.Lines(80)); !strings.HasSuffix(got, "the operator refused rm -rf x on web; the turn stopped\n") {
		t.Errorf("turn end:\n%s", got)
	}
}

func TestEachLoopsAreTagged(t *testing.T) {
	v := New(Styles{})
	v.Apply(agent.Event{Type: agent.EventText, Host: "h1", Text: "one"})
	v.Apply(agent.Event{Type: agent.EventText, Host: "h2", Text: "two"})
	v.Apply(agent.Event{Type: agent.EventText, Host: "h1", Text: " more"})
	got := plain(v.Lines(40))
	if !strings.Contains(got, "[h1] one more\n") || !strings.Contains(got, "[h2] two\n") {
		t.Errorf("loops:\n%s", got)
	}
}
