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

// TestChainGraphStaysOnTheCallsTarget: a state-graph tool the agent calls
// runs only on the hosts of the call's target, which the operator
// consented to. A node whose target is a graph parameter ({where}) or a
// fixed host elsewhere would let the model, which never chooses the
// target, send a command anywhere in the registry; such a node fails
// instead, saying why, and no other host is reached.
func TestChainGraphStaysOnTheCallsTarget(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 2})
	dir := filepath.Join(f.App.ConfigDir, ".ai", "tools", "ops")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "mark.sh"), []byte("#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\n# rex: description: mark\necho \"marked-5521\"\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "hop.yaml"), []byte(`executor_id: rex/core/runtimes/state-graph/walker
description: mark where asked
config_schema:
  type: object
  properties: {where: {type: string}}
  required: [where]
graph:
  start: mark
  nodes:
    mark: {tool: ops/mark, target: "{where}"}
`), 0o644)
	ts := newToolset(t, f, toolset.Options{ChainTools: true})
	ctx := fleettest.Context(t)
	a, err := ts.Prepare(ctx, toolset.Call{Tool: "ops_hop", Target: "h1", Input: input(t, map[string]any{"where": "h2"})})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(a.Hosts, ",") != "h1" {
		t.Fatalf("the call is consented for %v", a.Hosts)
	}
	res := ts.Run(ctx, a, nil)
	var h2 []fleettest.AuditEntry
	if _, err := os.Stat(f.AuditPath("h2")); err == nil {
		h2 = f.Audit(t, "h2") // no log: rexd never ran there
	}
	for _, e := range h2 {
		if e.Method == "exec.start" && e.ClientName == "rex-agent" {
			t.Errorf("a call consented for h1 ran on h2: %+v\nresult:\n%s", e, res.Text)
		}
	}
	if !res.IsError || !strings.Contains(res.Text, "h2") {
		t.Errorf("the result does not say the node's target was refused:\n%s", res.Text)
	}
}

// TestChainGraphResultReachesTheModel: a state graph reports each node's
// run as node@host; the call's result still shows each host's output and
// end (its last node's), a node the walk did not reach is no failure, and
// a host no node ran on has ended too.
func TestChainGraphResultReachesTheModel(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 2})
	dir := filepath.Join(f.App.ConfigDir, ".ai", "tools", "ops")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "mark.sh"), []byte("#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\n# rex: description: mark\necho \"marked-5521\"\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "hop.yaml"), []byte(`executor_id: rex/core/runtimes/state-graph/walker
description: mark, and mark again only when the first failed
graph:
  start: mark
  nodes:
    mark: {tool: ops/mark}
    again: {tool: ops/mark}
  edges:
    - {from: mark, to: again, when: "mark.exit_code == 1"}
`), 0o644)
	os.WriteFile(filepath.Join(dir, "one.yaml"), []byte("executor_id: rex/core/runtimes/state-graph/walker\ndescription: mark h1\ngraph:\n  start: mark\n  nodes:\n    mark: {tool: ops/mark, target: h1}\n"), 0o644)
	ts := newToolset(t, f, toolset.Options{ChainTools: true})
	ctx := fleettest.Context(t)
	res := ts.Do(ctx, toolset.Call{Tool: "ops_hop", Target: "h1", Input: input(t, map[string]any{})}, nil)
	if !strings.Contains(res.Text, "h1 · exit 0\n  marked-5521") || strings.Contains(res.Text, "running") || res.IsError || res.Running {
		t.Errorf("graph result:\n%s", res.Text)
	}
	res = ts.Do(ctx, toolset.Call{Tool: "ops_one", Target: "fleet", Input: input(t, map[string]any{})}, nil)
	if !strings.Contains(res.Text, "h1 · exit 0\n  marked-5521") || !strings.Contains(res.Text, "h2 · no node ran here") || strings.Contains(res.Text, "running") || res.IsError {
		t.Errorf("graph result on the group:\n%s", res.Text)
	}
}
