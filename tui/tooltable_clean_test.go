package tui

import (
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/themes"
)

// TestToolTableIsPrintable: the table view of a /tool run (ctrl+g on a tool
// whose hosts print JSON) builds engine.Lines straight from what the
// hosts printed: JSON keys, string values and error text go into
// Line.Text through tableLine without engine.Sanitize, and ansi.Truncate
// (the cell clip) keeps escape sequences whole. A host whose JSON says
// {"version":"\u001b]0;owned\u0007\u001b[2J"} writes those sequences to
// the operator's terminal; a "\n" in a value breaks the pane's rows.
// Every other way host output reaches the screen is sanitised.
func TestToolTableIsPrintable(t *testing.T) {
	rows := tableRows([]string{"web1", "web2"}, []commands.ToolResult{
		result("web1", 0, `{"version":"1.2\u001b]0;owned\u0007\u001b[2J","k\u001b[31m":"x"}`),
		result("web2", 0, `{"version":"1.2\nsecond row"}`),
	})
	th, err := themes.Load("dark", "")
	if err != nil {
		t.Fatal(err)
	}
	st := NewStyles(th, 1, false)
	var drawn []string
	for _, l := range toolTableLines(rows) {
		drawn = append(drawn, renderLine(st, &l, 100)...)
	}
	out := strings.Join(drawn, "\n")
	for _, bad := range []string{"\x1b]0;owned", "\x1b[2J", "\x1b[31m"} {
		if strings.Contains(out, bad) {
			t.Errorf("a host's JSON puts %q on the operator's terminal", bad)
		}
	}
	for i, row := range drawn {
		if strings.Contains(row, "\n") {
			t.Errorf("row %d holds a line break from a host's JSON: %q", i, row)
		}
	}
}
