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

// TestChainToolOnLocalIsAudited: a chain tool the agent calls on local
// runs through local's rexd, whose audit log records it as rex-agent.
func TestChainToolOnLocalIsAudited(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	tool := "#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\n# rex: description: say where\necho \"ran-here-7731\"\n"
	p := filepath.Join(f.App.ConfigDir, ".ai", "tools", "ops", "where.sh")
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(tool), 0o755); err != nil {
		t.Fatal(err)
	}
	ts := newToolset(t, f, toolset.Options{ChainTools: true})
	res := ts.Do(fleettest.Context(t), toolset.Call{Tool: "ops_where", Input: input(t, map[string]any{})}, nil)
	if res.Text != "target local\nlocal · exit 0\n  ran-here-7731\n1/1 ok" {
		t.Fatalf("chain tool result:\n%s", res.Text)
	}
	found := false
	for _, e := range f.Audit(t, "local") {
		argv, _ := json.Marshal(e.Params["argv"])
		if e.Method == "exec.start" && strings.Contains(string(argv), "where.sh") {
			found = true
			if e.ClientName != "rex-agent" {
				t.Errorf("the chain tool ran as %q, want rex-agent", e.ClientName)
			}
		}
	}
	if !found {
		t.Errorf("local's audit log has no exec.start of the chain tool: %+v", f.Audit(t, "local"))
	}
}
