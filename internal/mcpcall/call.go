// Package mcpcall calls one tool of an MCP server with the official Go
// SDK's client: over a server's stdin and stdout (however the server was
// started: locally, or on a target through rexd) or over streamable HTTP.
// It is what the rex/core/runtimes/mcp runtimes run on.
package mcpcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rexconsole/rex/internal/version"
)

// Result is a tool call's answer.
type Result struct {
	// Text is the text content, one block per line group.
	Text string
	// Structured is the structured content, when the tool returns one.
	Structured any
	// IsError reports that the tool itself failed (its message in Text).
	IsError bool
}

// JSON renders the result for a caller that asked for JSON: the
// structured content, else {"content": TEXT}.
func (r *Result) JSON() []byte {
	v := r.Structured
	if v == nil {
		v = map[string]any{"content": r.Text, "is_error": r.IsError}
	}
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"content": r.Text})
	}
	return b
}

func client() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "rex", Version: version.Version}, nil)
}

// Stdio calls tool with args on the server whose stdout is r and stdin is
// w. It closes both when done.
func Stdio(ctx context.Context, r io.ReadCloser, w io.WriteCloser, tool string, args map[string]any) (*Result, error) {
	return call(ctx, &mcp.IOTransport{Reader: r, Writer: w}, "the MCP server", tool, args)
}

// HTTP calls tool with args on the streamable HTTP endpoint url.
func HTTP(ctx context.Context, url string, hc *http.Client, tool string, args map[string]any) (*Result, error) {
	return call(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, "the MCP server at "+url, tool, args)
}

func call(ctx context.Context, t mcp.Transport, what, tool string, args map[string]any) (*Result, error) {
	cs, err := client().Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", what, err)
	}
	defer cs.Close()
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		if ctx.Err() == nil {
			if names, lerr := toolNames(ctx, cs); lerr == nil && !contains(names, tool) {
				return nil, fmt.Errorf("%s has no tool %s; it has: %s", what, tool, strings.Join(names, ", "))
			}
		}
		return nil, fmt.Errorf("call %s on %s: %w", tool, what, err)
	}
	out := &Result{Structured: res.StructuredContent, IsError: res.IsError}
	var parts []string
	for _, c := range res.Content {
		switch x := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, x.Text)
		default:
			b, err := json.Marshal(c)
			if err != nil {
				return nil, fmt.Errorf("read %s's answer: %w", tool, err)
			}
			parts = append(parts, string(b))
		}
	}
	out.Text = strings.Join(parts, "\n")
	return out, nil
}

func toolNames(ctx context.Context, cs *mcp.ClientSession) ([]string, error) {
	var names []string
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		names = append(names, t.Name)
		if len(names) > 200 {
			break
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, errors.New("no tools")
	}
	return names, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
