package mcpcall

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rexconsole/rex/internal/mcptest"
)

// TestStdio calls the test server as a real process over its stdin and
// stdout.
func TestStdio(t *testing.T) {
	bin := mcptest.Binary(t)
	call := func(tool string, args map[string]any) (*Result, error) {
		cmd := exec.Command(bin)
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		return Stdio(t.Context(), out, in, tool, args)
	}
	res, err := call("echo", map[string]any{"message": "hi there"})
	if err != nil || res.Text != "echo: hi there" || res.IsError {
		t.Fatalf("echo: %+v %v", res, err)
	}
	res, err = call("add", map[string]any{"a": 2, "b": 40})
	if err != nil || string(res.JSON()) != `{"sum":42}` {
		t.Fatalf("add: %+v %v", res, err)
	}
	res, err = call("fail", map[string]any{"message": "x"})
	if err != nil || !res.IsError || !strings.Contains(res.Text, "it failed: x") {
		t.Fatalf("fail: %+v %v", res, err)
	}
	_, err = call("nope", nil)
	if err == nil || !strings.Contains(err.Error(), "the MCP server has no tool nope; it has: add, echo, fail") {
		t.Fatalf("unknown tool: %v", err)
	}
}

// TestHTTP calls the test server over streamable HTTP on loopback.
func TestHTTP(t *testing.T) {
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.Server() }, nil))
	defer srv.Close()
	res, err := HTTP(t.Context(), srv.URL, srv.Client(), "add", map[string]any{"a": 1, "b": 2})
	if err != nil || string(res.JSON()) != `{"sum":3}` {
		t.Fatalf("add over http: %+v %v", res, err)
	}
	_, err = HTTP(t.Context(), "http://127.0.0.1:1/mcp", nil, "add", nil)
	if err == nil || !strings.Contains(err.Error(), "connect to the MCP server at http://127.0.0.1:1/mcp") {
		t.Fatalf("no server: %v", err)
	}
}
