package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rexconsole/rex/internal/mcptest"
)

// TestMCPRuntimes: a tool on rex/core/runtimes/mcp/stdio starts the test
// MCP server on local and on a loopback sshd host (through rexd, its stdin
// and stdout carrying the protocol) and calls its tools; one on
// rex/core/runtimes/mcp/http calls the same server over streamable HTTP.
// A secret reaches the server as environment and is masked in its answer.
func TestMCPRuntimes(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	bin := mcptest.Binary(t)
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.Server() }, nil))
	defer srv.Close()
	project := filepath.Join(f.home, "work")
	dir := filepath.Join(project, ".ai", "tools", "mcp")
	os.MkdirAll(dir, 0o755)
	// One runtime per server; tools name the server's tool.
	os.WriteFile(filepath.Join(dir, "test-server.yaml"), []byte("tool_type: runtime\nexecutor_id: rex/core/runtimes/mcp/stdio\ndescription: the test MCP server\nsecrets: [MCP_TOKEN]\nconfig:\n  command: "+bin+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "echo.yaml"), []byte("executor_id: mcp/test-server\ndescription: echo a message\nconfig:\n  tool_name: echo\nconfig_schema:\n  type: object\n  properties: {message: {type: string}}\n  required: [message]\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "add.yaml"), []byte("executor_id: mcp/test-server\nconfig:\n  tool_name: add\nconfig_schema:\n  type: object\n  properties: {a: {type: integer}, b: {type: integer}}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "fail.yaml"), []byte("executor_id: mcp/test-server\nconfig:\n  tool_name: fail\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "web-add.yaml"), []byte("executor_id: rex/core/runtimes/mcp/http\nconfig:\n  url: "+srv.URL+"\n  tool_name: add\nconfig_schema:\n  type: object\n  properties: {a: {type: integer}, b: {type: integer}}\n"), 0o644)
	env := []string{"REX_SECRETS_BACKEND=file", "REX_SECRETS_PASSPHRASE=pw"}
	const token = "mcp-s3cret-9d1e"
	if out, errOut, code := f.runIn(project, token, env, "secret", "set", "MCP_TOKEN"); code != 0 {
		t.Fatalf("secret set: %s %s", out, errOut)
	}
	out, errOut, code := f.runIn(project, "", env, "tool", "run", "mcp/echo", "--param", "message=hello there", "--target", "local,h1")
	if code != 0 {
		t.Fatalf("mcp/echo: %d\n%s%s", code, out, errOut)
	}
	for _, h := range []string{"local", "h1"} {
		if !regexp.MustCompile(`(?m)^` + h + `: +echo: hello there \(token \*\*\*, 15 bytes\)$`).MatchString(out) {
			t.Errorf("mcp/echo on %s: %q", h, out)
		}
	}
	if strings.Contains(out+errOut, token) {
		t.Error("the secret's value is in the output")
	}
	out, errOut, code = f.runIn(project, "", env, "tool", "run", "mcp/add", "--param", "a=40", "--param", "b=2", "--target", "h1", "--json")
	if code != 0 || !strings.Contains(out, `"result":{"sum":42}`) {
		t.Errorf("mcp/add --json on h1: %d %q %q", code, out, errOut)
	}
	out, errOut, code = f.runIn(project, "", env, "tool", "run", "mcp/fail", "--param", "message=boom", "--target", "h1")
	if code != 1 || !strings.Contains(out, "h1! it failed: boom") {
		t.Errorf("mcp/fail: %d %q %q", code, out, errOut)
	}
	// rex calls an HTTP MCP server itself: once, from this machine,
	// whatever the target, recorded in rex's own audit log.
	out, errOut, code = f.runIn(project, "", env, "tool", "run", "mcp/web-add", "--param", "a=1", "--param", "b=2", "--json", "--target", "local,h1")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"target":"local"`) || !strings.Contains(out, `"result":{"sum":3}`) ||
		!strings.Contains(out, "called once, from rex's machine (local), for target h1,local") {
		t.Errorf("mcp/web-add: %d %q %q", code, out, errOut)
	}
	audit, err := os.ReadFile(filepath.Join(f.home, ".local", "state", "rex", "audit.log"))
	if err != nil || !strings.Contains(string(audit), `"client_name":"rex","method":"tool.mcp_http"`) || !strings.Contains(string(audit), `"tool":"mcp/web-add"`) {
		t.Errorf("rex's audit log: %v %s", err, audit)
	}
	// The server started for each call is gone afterwards.
	if out, _ := exec.Command("pgrep", "-f", bin).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("an MCP server is still running: %s", out)
	}
}

// TestStateGraph walks a graph of three nodes on two hosts: check runs on
// h1, and its JSON result decides whether fix runs on h2 before report
// does; the walk shows each node's status, and skipped nodes say so.
func TestStateGraph(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	project := filepath.Join(f.home, "work")
	dir := filepath.Join(project, ".ai", "tools", "flow")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "check.sh"), []byte(`#!/bin/sh
# rex: executor_id: rex/core/runtimes/sh/sh
# rex: config_schema: {type: object, properties: {limit: {type: integer}}, required: [limit]}
printf '{"used":50,"limit":%s,"host":"%s"}\n' "$REX_PARAM_LIMIT" "$HOME"
`), 0o755)
	os.WriteFile(filepath.Join(dir, "mark.sh"), []byte(`#!/bin/sh
# rex: executor_id: rex/core/runtimes/sh/sh
# rex: config_schema: {type: object, properties: {what: {type: string}}, required: [what]}
echo "$REX_PARAM_WHAT" >> "$HOME/marks"
echo "marked $REX_PARAM_WHAT"
`), 0o755)
	os.WriteFile(filepath.Join(dir, "tidy.yaml"), []byte(`executor_id: rex/core/runtimes/state-graph/walker
description: check on h1; fix on h2 when over the limit; report on h2
config_schema:
  type: object
  properties: {limit: {type: integer, default: 100}}
graph:
  start: check
  nodes:
    check: {tool: flow/check, target: h1, params: {limit: "{limit}"}}
    fix: {tool: flow/mark, target: h2, params: {what: fixed}}
    report: {tool: flow/mark, target: h2, params: {what: reported}}
  edges:
    - {from: check, to: fix, when: "check.result.used > check.result.limit"}
    - {from: check, to: report, when: "check.ok"}
    - {from: fix, to: report, when: "fix.ok"}
`), 0o644)
	marks := filepath.Join(f.hostHome("h2"), "marks")

	out, errOut, code := f.runIn(project, "", nil, "tool", "run", "flow/tidy")
	if code != 0 {
		t.Fatalf("tidy: %d\n%s%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(marks); string(b) != "reported\n" {
		t.Errorf("under the limit, h2's marks are %q, want reported only", b)
	}
	if !regexp.MustCompile(`(?m)^check@h1: +\{"used":50,"limit":100,"host":"`+regexp.QuoteMeta(f.hostHome("h1"))+`"\}$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^report@h2: +marked reported$`).MatchString(out) || strings.Contains(out, "fix@h2: ") {
		t.Errorf("output:\n%s", out)
	}
	for _, want := range []string{"graph: check (flow/check on check@h1)", "graph: check ok, exit 0", "graph: report ok, exit 0", "graph: fix skipped"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("status lacks %q:\n%s", want, errOut)
		}
	}
	os.Remove(marks)
	out, errOut, code = f.runIn(project, "", nil, "tool", "run", "flow/tidy", "--param", "limit=10")
	if b, _ := os.ReadFile(marks); code != 0 || string(b) != "fixed\nreported\n" {
		t.Errorf("over the limit: %d, h2's marks %q\n%s%s", code, b, out, errOut)
	}
	// Bad graphs are refused before anything runs.
	os.WriteFile(filepath.Join(dir, "loop.yaml"), []byte("executor_id: rex/core/runtimes/state-graph/walker\ngraph:\n  start: a\n  nodes:\n    a: {tool: flow/mark, params: {what: a}}\n    b: {tool: flow/mark, params: {what: b}}\n  edges:\n    - {from: a, to: b}\n    - {from: b, to: a, when: \"a.exit_code = 1\"}\n"), 0o644)
	out, _, code = f.runIn(project, "", nil, "tool", "check", "flow/loop")
	if code != 1 || !strings.Contains(out, "graph: the graph has a cycle: a → b → a") {
		t.Errorf("check of a cyclic graph: %d %q", code, out)
	}
	_, errOut, code = f.runIn(project, "", nil, "tool", "run", "flow/loop")
	if code == 0 || !strings.Contains(errOut, "the graph has a cycle") {
		t.Errorf("run of a cyclic graph: %d %q", code, errOut)
	}
}
