package tui

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/zalando/go-keyring"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/tui/engine"
)

func result(target string, code int, js string) commands.ToolResult {
	r := commands.ToolResult{Target: target, ExitCode: &code}
	if js != "" {
		var v any
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			panic(err)
		}
		r.Result = v
	}
	return r
}

// TestToolTable: a row per host, a column per field, the cells that differ
// from what most hosts share marked; columns where no two hosts agree mark
// nothing; hosts still running, failing or not printing JSON say so.
func TestToolTable(t *testing.T) {
	rows := tableRows([]string{"web1", "web2", "web3", "web4", "db1"}, []commands.ToolResult{
		result("web1", 0, `{"os":"debian","kernel":"6.1","load1":0.5,"mounts":[{"m":"/"}],"over":["/var"]}`),
		result("web2", 0, `{"os":"debian","kernel":"6.1","load1":0.7,"mounts":[{"m":"/"}],"over":[]}`),
		result("web3", 1, `{"os":"alpine","kernel":"6.1","load1":2.5,"mounts":[{"m":"/"},{"m":"/srv"}],"over":[]}`),
		{Target: "db1", Error: "unreachable: connection refused\nmore", Unreachable: true},
	})
	lines := toolTableLines(rows)
	var text []string
	for _, l := range lines {
		text = append(text, l.Text)
	}
	want := []string{
		"HOST  kernel  load1  mounts   os      over  STATUS",
		"web1  6.1     0.5    1 items  debian  /var  exit 0",
		"web2  6.1     0.7    1 items  debian  -     exit 0",
		"web3  6.1     2.5    2 items  alpine  -     exit 1",
		"web4                                        running",
		"db1                                         unreachable: connection refused",
		"5 hosts, 2 differ from the rest (marked)",
	}
	if strings.Join(text, "\n") != strings.Join(want, "\n") {
		t.Fatalf("table:\n%s\nwant:\n%s", strings.Join(text, "\n"), strings.Join(want, "\n"))
	}
	kinds := []engine.Kind{engine.Head, engine.HeadOdd, engine.Out, engine.HeadOdd, engine.Out, engine.Err, engine.Note}
	for i, l := range lines {
		if l.Kind != kinds[i] {
			t.Errorf("line %d %q is kind %d, want %d", i, l.Text, l.Kind, kinds[i])
		}
	}
	// The marked cells: web1's over, web3's mounts and os. load1 differs on
	// every host, so nothing there is marked.
	marked := func(l engine.Line) []string {
		var out []string
		for _, s := range l.Spans {
			if s.Style.Attrs&uv.AttrReverse == 0 {
				t.Errorf("a span that is not the mark: %+v", s)
			}
			out = append(out, l.Text[s.Start:s.End])
		}
		return out
	}
	if got := marked(lines[1]); strings.Join(got, ",") != "/var" {
		t.Errorf("web1 marks %q", got)
	}
	if got := marked(lines[3]); strings.Join(got, ",") != "2 items,alpine" {
		t.Errorf("web3 marks %q", got)
	}
	if got := marked(lines[2]); len(got) != 0 {
		t.Errorf("web2 marks %q", got)
	}
}

const factsTool = `#!/bin/sh
# rex: executor_id: rex/core/runtimes/sh/sh
# rex: description: a few facts as JSON
# The test's rexd hosts share one HOME; each host's own home holds the tool.
home=${0%%/.cache/rex/tools/*}
printf '{"release":"%s","home":"%s","cpus":2}\n' "$(cat "$home/release")" "$home"
`

// TestToolTableInConsole: /tool run --json on a group opens the table of
// the results, the host that differs marked.
func TestToolTableInConsole(t *testing.T) {
	e, f := toolEnv(t)
	os.WriteFile(filepath.Join(e.m.opts.ConfigDir, ".ai", "tools", "ops", "facts.sh"), []byte(factsTool), 0o755)
	for _, h := range []string{"web1", "web2", "web3"} {
		rel := "12"
		if h == "web3" {
			rel = "13"
		}
		os.MkdirAll(f.home(h), 0o755)
		if err := os.WriteFile(filepath.Join(f.home(h), "release"), []byte(rel), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.submit("/tool run ops/facts --json --target web1,web2,web3")
	if e.m.gather == nil || e.m.gather.pane == nil || e.m.gather.table == nil {
		t.Fatal("no table view")
	}
	e.m.gather.refresh(e.m.now(), &e.m.keys, e.m)
	p := e.m.gather.pane
	if p.Title() != "table · tool ops/facts" {
		t.Errorf("title %q", p.Title())
	}
	rd := p.read()
	defer rd.Done()
	var text []string
	var web3 engine.Line
	for i := range rd.Len() {
		l := rd.Line(i)
		text = append(text, l.Text)
		if strings.HasPrefix(l.Text, "web3") {
			web3 = *l
		}
	}
	all := strings.Join(text, "\n")
	if !strings.HasPrefix(all, "HOST  cpus  home") || !strings.Contains(all, "release  STATUS") || !strings.Contains(all, "3 hosts, 1 differ from the rest (marked)") {
		t.Errorf("table:\n%s", all)
	}
	if web3.Kind != engine.HeadOdd || len(web3.Spans) != 1 || web3.Text[web3.Spans[0].Start:web3.Spans[0].End] != "13" {
		t.Errorf("web3's row %+v", web3)
	}
}

// TestStateGraphInConsole: a state graph shows a pane per node and node
// target, each saying how its node ended; the node the walk skipped says
// so.
func TestStateGraphInConsole(t *testing.T) {
	e, _ := toolEnv(t)
	dir := filepath.Join(e.m.opts.ConfigDir, ".ai", "tools", "flow")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "check.sh"), []byte("#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\necho '{\"n\": 5}'\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "mark.sh"), []byte("#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\necho \"marked $REX_PARAM_WHAT\"\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "tidy.yaml"), []byte(`executor_id: rex/core/runtimes/state-graph/walker
graph:
  start: check
  nodes:
    check: {tool: flow/check, target: web1}
    fix: {tool: flow/mark, target: web2, params: {what: fixed}}
    report: {tool: flow/mark, target: web2, params: {what: reported}}
  edges:
    - {from: check, to: fix, when: "check.result.n > 10"}
    - {from: check, to: report, when: "check.ok"}
    - {from: fix, to: report}
`), 0o644)
	e.submit("/tool run flow/tidy")
	var titles []string
	for _, p := range e.m.panes {
		titles = append(titles, p.Title())
	}
	if strings.Join(titles, " ") != "check@web1 fix@web2 report@web2" {
		t.Fatalf("panes %q", titles)
	}
	if h := e.paneHeader(0); !strings.Contains(h, "exit 0") {
		t.Errorf("check's header %q", h)
	}
	if text := e.paneText(0); !strings.Contains(text, `{"n": 5}`) {
		t.Errorf("check's pane %q", text)
	}
	if text := e.paneText(1); !strings.Contains(text, "skipped: the walk did not take an edge to this node") {
		t.Errorf("fix's pane %q", text)
	}
	if h, text := e.paneHeader(2), e.paneText(2); !strings.Contains(h, "exit 0") || !strings.Contains(text, "marked reported") {
		t.Errorf("report's pane %q %q", h, text)
	}
}

// TestSecretMaskedInPanes: a tool that echoes a secret shows *** in its
// pane; the value is in no pane, title or message of the console.
func TestSecretMaskedInPanes(t *testing.T) {
	// The store is go-keyring's in-memory keyring: this test is about the
	// panes (the encrypted file is tested in cmd/rex and internal/secrets).
	keyring.MockInit()
	t.Setenv("REX_SECRETS_BACKEND", "keyring")
	e, _ := toolEnv(t)
	const value = "console-s3cret-value"
	st, err := e.m.app.SecretStore()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Set("API_TOKEN", value); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(e.m.opts.ConfigDir, ".ai", "tools", "ops", "leaky.sh"), []byte("#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\n# rex: secrets: [API_TOKEN]\necho \"the token is $API_TOKEN\"\necho \"$API_TOKEN\" >&2\n"), 0o755)
	e.submit("/tool run ops/leaky --target web1,web2")
	if len(e.m.panes) != 2 {
		t.Fatalf("%d panes", len(e.m.panes))
	}
	for i := range e.m.panes {
		text, head := e.paneText(i), e.paneHeader(i)
		if !strings.Contains(text, "the token is ***") || strings.Contains(text+head+e.m.panes[i].Title(), value) {
			t.Errorf("pane %d: %q %q", i, head, text)
		}
	}
	if strings.Contains(strings.Join(e.m.msg.lines, "\n"), value) {
		t.Error("the message area shows the value")
	}
}
