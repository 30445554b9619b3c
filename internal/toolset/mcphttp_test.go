package toolset_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rexconsole/rex/internal/fleettest"
	"github.com/rexconsole/rex/internal/toolset"
)

// TestMCPHTTPToolIsOneAuditedCall: a chain tool over
// rex/core/runtimes/mcp/http is called by rex itself, from the operator's
// machine, not by any host's rexd. On a target of two hosts it is one
// call of the server (one ticket opened, not one per host) with one
// result, reported as local and saying so; and rex's own audit log, which
// is the only one that sees it, records it under the agent's name. A call
// whose audit entry cannot be recorded is not made.
func TestMCPHTTPToolIsOneAuditedCall(t *testing.T) {
	var calls atomic.Int32
	s := mcp.NewServer(&mcp.Implementation{Name: "tickets", Version: "1"}, nil)
	type in struct {
		Message string `json:"message"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "ticket", Description: "open a ticket"}, func(_ context.Context, _ *mcp.CallToolRequest, i in) (*mcp.CallToolResult, any, error) {
		n := calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("ticket %d: %s", n, i.Message)}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer srv.Close()

	f := fleettest.New(t, fleettest.Options{Hosts: 2})
	p := filepath.Join(f.App.ConfigDir, ".ai", "tools", "tk", "open.yaml")
	os.MkdirAll(filepath.Dir(p), 0o755)
	tool := "executor_id: rex/core/runtimes/mcp/http\ndescription: open a ticket\nconfig:\n  url: " + srv.URL + "\n  tool_name: ticket\n" +
		"config_schema:\n  type: object\n  properties: {message: {type: string}}\n  required: [message]\n"
	if err := os.WriteFile(p, []byte(tool), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := newToolset(t, f, toolset.Options{ChainTools: true})
	ctx := fleettest.Context(t)
	call := toolset.Call{Tool: "tk_open", Target: "h1,h2", Input: input(t, map[string]any{"message": "disk full"})}
	a, err := ts.Prepare(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(a.Hosts, ",") != "h1,h2" || !strings.Contains(a.Detail, "once") {
		t.Errorf("consent is asked for %v with detail %q", a.Hosts, a.Detail)
	}
	if !strings.Contains(a.Tool.Description, "runs once, from the operator's machine") {
		t.Errorf("the model is told: %q", a.Tool.Description)
	}
	res := ts.Run(ctx, a, nil)
	t.Logf("result:\n%s", res.Text)
	if n := calls.Load(); n != 1 {
		t.Errorf("one call of an HTTP MCP tool made %d calls of its server", n)
	}
	if res.IsError || len(res.PerHost) != 1 || res.PerHost[0].Host != "local" ||
		!strings.Contains(res.Text, "local · exit 0") || !strings.Contains(res.Text, "ticket 1: disk full") ||
		!strings.Contains(res.Text, "called once, from rex's machine (local), for target h[1-2]") || strings.Contains(res.Text, "ticket 2") {
		t.Errorf("result of the call:\n%s", res.Text)
	}

	fi, err := os.Stat(f.App.AuditPath())
	if err != nil {
		t.Fatalf("rex's audit log: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("rex's audit log has mode %v", fi.Mode().Perm())
	}
	var got []fleettest.AuditEntry
	for _, e := range f.RexAudit(t) {
		if e.Method == "tool.mcp_http" {
			got = append(got, e)
		}
	}
	if len(got) != 1 {
		t.Fatalf("rex's audit log records %d HTTP MCP calls: %+v", len(got), got)
	}
	e := got[0]
	args, _ := json.Marshal(e.Params["arguments"])
	res2, _ := json.Marshal(e.Result)
	if e.ClientName != "rex-agent" || e.Params["tool"] != "tk/open" || e.Params["url"] != srv.URL || e.Params["tool_name"] != "ticket" ||
		string(args) != `{"message":"disk full"}` || !strings.Contains(string(res2), `"ok"`) || e.Error != nil {
		t.Errorf("audit entry: %+v", e)
	}

	// An audit log that cannot be opened refuses the call before it is made.
	block := filepath.Join(t.TempDir(), "file")
	os.WriteFile(block, nil, 0o600)
	f.App.StateDir = filepath.Join(block, "rex")
	res = ts.Do(ctx, call, nil)
	if n := calls.Load(); n != 1 {
		t.Errorf("a call that could not be audited was made (%d calls)", n)
	}
	if !res.IsError || !strings.Contains(res.Text, "audit log") {
		t.Errorf("unaudited call's result:\n%s", res.Text)
	}
}
