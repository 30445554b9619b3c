package tui

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// greetTool is a bash tool in the user space: it greets, then exits with
// the code it is given.
const greetTool = `#!/bin/bash
# rex: executor_id: rex/core/runtimes/bash/bash
# rex: version: "1.0.0"
# rex: description: greet someone and exit with a code
echo "hello $REX_PARAM_NAME"
echo "to stderr" >&2
exit "${REX_PARAM_CODE:-0}"
`

// sortedLines is text's lines in order, so that stdout and stderr, which
// race, compare as sets.
func sortedLines(text string) string {
	l := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	slices.Sort(l)
	return strings.Join(l, "|")
}

// toolEnv is syncEnv with ops/greet in the user's tool space.
func toolEnv(t *testing.T) (*testEnv, *rexdFleet) {
	e, f := syncEnv(t)
	dir := filepath.Join(e.m.opts.ConfigDir, ".ai", "tools", "ops")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "greet.sh"), []byte(greetTool), 0o755); err != nil {
		t.Fatal(err)
	}
	return e, f
}

// TestToolCommands runs /tool's verbs: list and show answer in the
// message area or a pane, run opens a pane per target with the tool's
// output and exit status; mistakes are one sentence.
func TestToolCommands(t *testing.T) {
	tests := []struct {
		name  string
		setup []string
		line  string
		check func(t *testing.T, e *testEnv)
	}{
		{"list", nil, "/tool list", func(t *testing.T, e *testEnv) {
			text := e.message()
			if len(e.m.panes) == 1 {
				text = e.paneText(0)
			}
			for _, w := range []string{"ID", "ops/greet", "user", "greet someone and exit with a code", "rex/ops/disk"} {
				if !strings.Contains(text, w) {
					t.Errorf("/tool list lacks %q:\n%s", w, text)
				}
			}
		}},
		{"show", nil, "/tool show ops/greet", func(t *testing.T, e *testEnv) {
			text := e.message()
			if len(e.m.panes) == 1 {
				text = e.paneText(0)
			}
			for _, w := range []string{"1. tool ops/greet (user)", "runtime rex/core/runtimes/bash/bash", "valid", "parameters:", "example:"} {
				if !strings.Contains(text, w) {
					t.Errorf("/tool show lacks %q:\n%s", w, text)
				}
			}
		}},
		{"show trace", nil, "/tool show ops/greet --trace", func(t *testing.T, e *testEnv) {
			text := e.message()
			if len(e.m.panes) == 1 {
				text = e.paneText(0)
			}
			if !strings.Contains(text, "greet.sh") || !strings.Contains(text, "valid") {
				t.Errorf("/tool show --trace says:\n%s", text)
			}
		}},
		{"show unknown", nil, "/tool show ops/nosuch", func(t *testing.T, e *testEnv) {
			e.wantError("ops/nosuch")
		}},
		{"usage", nil, "/tool", func(t *testing.T, e *testEnv) {
			e.wantMessage("/tool list", "/tool run ID [--param K=V]...", "--target defaults to the current target")
			if strings.Contains(e.message(), "rex tool") {
				t.Errorf("the console's usage names the command line's verb:\n%s", e.message())
			}
		}},
		{"unknown verb", nil, "/tool lst", func(t *testing.T, e *testEnv) {
			e.wantError(`/tool has no verb "lst" (did you mean list?)`)
		}},
		{"run on the current target", nil, "/tool run ops/greet --param name=console", func(t *testing.T, e *testEnv) {
			if len(e.m.panes) != 1 || e.m.panes[0].Title() != "local" {
				t.Fatalf("panes: %d, want one for local", len(e.m.panes))
			}
			if text := e.paneText(0); sortedLines(text) != "hello console|to stderr" {
				t.Errorf("pane says %q", text)
			}
			if h := e.paneHeader(0); !strings.Contains(h, "tool ops/greet") || !strings.Contains(h, "exit 0") {
				t.Errorf("header %q", h)
			}
			e.wantMessage("tool ops/greet — 1 ok")
		}},
		{"run on a group", []string{"/target web"}, "/tool run ops/greet -p name=fleet --param code=3 --target web1,web2", func(t *testing.T, e *testEnv) {
			if len(e.m.panes) != 2 {
				t.Fatalf("%d panes, want web1 and web2", len(e.m.panes))
			}
			for i, name := range []string{"web1", "web2"} {
				if e.m.panes[i].Title() != name {
					t.Errorf("pane %d is %s", i, e.m.panes[i].Title())
				}
				if text := e.paneText(i); sortedLines(text) != "hello fleet|to stderr" {
					t.Errorf("%s pane says %q", name, text)
				}
				if h := e.paneHeader(i); !strings.Contains(h, "exit 3") {
					t.Errorf("%s header %q", name, h)
				}
			}
			e.wantMessage("0 ok, 2 failed")
		}},
		{"run with trace", nil, "/tool run ops/greet --trace", func(t *testing.T, e *testEnv) {
			text := e.paneText(0)
			trace, out, _ := strings.Cut(text, "\nship ")
			if !strings.HasPrefix(trace, "trace:\n") || !strings.Contains(trace, "greet.sh") || !strings.Contains(out, "hello \n") {
				t.Errorf("pane says %q", text)
			}
		}},
		{"run unreachable", nil, "/tool run ops/greet --target db1", func(t *testing.T, e *testEnv) {
			if h := e.paneHeader(0); !strings.Contains(h, "unreachable") {
				t.Errorf("header %q", h)
			}
			if text := e.paneText(0); !strings.Contains(text, "connection refused") {
				t.Errorf("pane says %q", text)
			}
		}},
		{"run unknown tool", nil, "/tool run ops/gret", func(t *testing.T, e *testEnv) {
			e.wantError("there is no tool ops/gret (did you mean ops/greet?); /tool list shows them")
			if len(e.m.panes) != 0 {
				t.Error("an unknown tool opened panes")
			}
		}},
		{"run without an id", nil, "/tool run --trace", func(t *testing.T, e *testEnv) {
			e.wantError("/tool run: which tool?", "usage: /tool run ID")
			if len(e.m.msg.lines) != 1 {
				t.Errorf("the error is %d lines", len(e.m.msg.lines))
			}
		}},
		{"run bad param", nil, "/tool run ops/greet --param name", func(t *testing.T, e *testEnv) {
			e.wantError(`--param "name": want KEY=VALUE`)
		}},
		{"run bad target", nil, "/tool run ops/greet --target wbe1", func(t *testing.T, e *testEnv) {
			e.wantError("/tool run --target wbe1:", "web1")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := toolEnv(t)
			for _, l := range tt.setup {
				e.submit(l)
			}
			if strings.HasPrefix(tt.line, "/tool list") || strings.HasPrefix(tt.line, "/tool show") {
				e.runDevice(tt.line) // a verb: runs in a command
			} else {
				e.submit(tt.line)
			}
			tt.check(t, e)
		})
	}
}

// TestToolCompletion completes tool ids from the tool spaces themselves.
func TestToolCompletion(t *testing.T) {
	e, _ := toolEnv(t)
	e.typeText("/tool run ops/g")
	e.press("tab")
	if got := e.m.input.Value(); got != "/tool run ops/greet " {
		t.Errorf("after tab: %q", got)
	}
	e.typeText("--tar")
	e.press("tab")
	e.typeText("web")
	e.press("tab")
	if got := e.m.input.Value(); got != "/tool run ops/greet --target web" {
		t.Errorf("after tabs: %q", got)
	}
	e.wantMessage("web  web1  web2  web3")
}
