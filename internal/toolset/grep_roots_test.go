package toolset_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/fleettest"
	"github.com/rexconsole/rex/internal/toolset"
)

// TestGrepStaysInTheRoots: a device's roots confine what the file tools
// reach; grep, a read-only tool an MCP client gets even with --read-only,
// reads files as they are and must not reach past the roots either.
func TestGrepStaysInTheRoots(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 1})
	home := f.Home("h1")
	os.MkdirAll(filepath.Join(home, "app"), 0o755)
	os.WriteFile(filepath.Join(home, "app", "ok.txt"), []byte("inside-3b1\n"), 0o644)
	os.WriteFile(filepath.Join(home, "private.txt"), []byte("outside-9f4\n"), 0o600)
	path := filepath.Join(f.Dir, "devices.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var reg map[string]any
	json.Unmarshal(b, &reg)
	reg["devices"].(map[string]any)["h1"].(map[string]any)["roots"] = []string{filepath.Join(home, "app")}
	b, _ = json.Marshal(reg)
	os.WriteFile(path, b, 0o600)

	ts := newToolset(t, f, toolset.Options{})
	ctx := fleettest.Context(t)
	outside := filepath.Join(home, "private.txt")
	if res := ts.Do(ctx, toolset.Call{Tool: "read", Target: "h1", Input: input(t, map[string]any{"path": outside})}, nil); !res.IsError {
		t.Fatalf("read outside the roots worked:\n%s", res.Text)
	}
	res := ts.Do(ctx, toolset.Call{Tool: "grep", Target: "h1", Input: input(t, map[string]any{"pattern": ".", "path": outside})}, nil)
	if strings.Contains(res.Text, "outside-9f4") || !strings.Contains(res.Text, "outside allowed roots") {
		t.Errorf("grep read a file outside the roots:\n%s", res.Text)
	}
	res = ts.Do(ctx, toolset.Call{Tool: "grep", Target: "h1", Input: input(t, map[string]any{"pattern": "inside"})}, nil)
	if !strings.Contains(res.Text, "inside-3b1") {
		t.Errorf("grep inside the roots:\n%s", res.Text)
	}
}
