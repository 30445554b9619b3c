// Package mcptest is test support: an MCP server, written with the official
// Go SDK, whose tools the MCP runtimes' tests call (in process, as a
// process on stdio, and over streamable HTTP on loopback).
package mcptest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EchoIn is the echo tool's input.
type EchoIn struct {
	Message string `json:"message" jsonschema:"what to say back"`
}

// AddIn and AddOut are the add tool's input and structured output.
type AddIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

// AddOut is the sum.
type AddOut struct {
	Sum int `json:"sum"`
}

// Server returns a server with three tools: echo (text: "echo: MESSAGE"
// and, for the secrets test, the value of $MCP_TOKEN's length), add
// (structured {"sum": A+B}) and fail (a tool error).
func Server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "rex-test", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "say it back"}, func(_ context.Context, _ *mcp.CallToolRequest, in EchoIn) (*mcp.CallToolResult, any, error) {
		text := "echo: " + in.Message
		if tok := os.Getenv("MCP_TOKEN"); tok != "" {
			text += fmt.Sprintf(" (token %s, %d bytes)", tok, len(tok))
		}
		if dir, err := os.Getwd(); err == nil && os.Getenv("MCP_SHOW_CWD") != "" {
			text += " in " + dir
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "add two numbers"}, func(_ context.Context, _ *mcp.CallToolRequest, in AddIn) (*mcp.CallToolResult, AddOut, error) {
		return nil, AddOut{Sum: in.A + in.B}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "always fails"}, func(_ context.Context, _ *mcp.CallToolRequest, in EchoIn) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("it failed: " + in.Message)
	})
	return s
}

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

// Binary builds the server as a program (it speaks MCP on stdio) once per
// test binary and returns its path. A package that calls it removes the
// build with Close from its TestMain.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir, err := os.MkdirTemp("", "rex-mcptest-")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		buildPath = filepath.Join(dir, "mcpserver")
		cmd := exec.Command("go", "build", "-o", buildPath, "./mcpserver")
		cmd.Dir = filepath.Dir(file)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build the test MCP server: %v: %s", err, strings.TrimSpace(string(out)))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// Close removes what Binary built: call it after m.Run in TestMain, since
// the build outlives any one test.
func Close() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}
