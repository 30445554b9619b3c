package chain

import (
	"strings"
	"testing"
)

const walker = "executor_id: rex/core/runtimes/state-graph/walker\n"

// TestGraphValidation: cycles, missing nodes, unreachable nodes and bad
// conditions make a graph tool unusable, with the reason.
func TestGraphValidation(t *testing.T) {
	nodes := "  nodes:\n    a: {tool: t/ok}\n    b: {tool: t/ok}\n    c: {tool: t/ok}\n"
	for name, tc := range map[string]struct{ graph, want string }{
		"cycle":       {"  start: a\n" + nodes + "  edges:\n    - {from: a, to: b}\n    - {from: b, to: c}\n    - {from: c, to: b}\n", "the graph has a cycle: b → c → b"},
		"self":        {"  start: a\n" + nodes + "  edges:\n    - {from: a, to: a}\n    - {from: a, to: b}\n    - {from: a, to: c}\n", "cycle: a → a"},
		"missing":     {"  start: a\n" + nodes + "  edges:\n    - {from: a, to: b}\n    - {from: b, to: d}\n", "edge 2 (b → d) names node d, which the graph does not have (nodes: a, b, c)"},
		"nostart":     {nodes + "  edges:\n    - {from: a, to: b}\n", "the graph has no start"},
		"badstart":    {"  start: z\n" + nodes, "start z is not a node of the graph"},
		"unreachable": {"  start: a\n" + nodes + "  edges:\n    - {from: a, to: b}\n", "node c cannot be reached from start a"},
		"syntax":      {"  start: a\n" + nodes + "  edges:\n    - {from: a, to: b, when: \"a.exit_code ==\"}\n    - {from: a, to: c}\n", "edge 1 (a → b): condition \"a.exit_code ==\" does not compile"},
		"field":       {"  start: a\n" + nodes + "  edges:\n    - {from: a, to: b, when: \"a.exitcode == 1\"}\n    - {from: a, to: c}\n", "does not compile"},
		"unknown":     {"  start: a\n" + nodes + "  edges:\n    - {from: a, to: b, when: \"x.ok\"}\n    - {from: a, to: c}\n", "does not compile"},
		"nonbool":     {"  start: a\n" + nodes + "  edges:\n    - {from: a, to: b, when: \"a.exit_code\"}\n    - {from: a, to: c}\n", "does not compile"},
		"later":       {"  start: a\n" + nodes + "  edges:\n    - {from: a, to: b, when: \"c.ok\"}\n    - {from: b, to: c}\n", "uses c, which cannot have run before a"},
		"notool":      {"  start: a\n  nodes:\n    a: {target: h1}\n", "node a names no tool"},
		"badname":     {"  start: a-b\n  nodes:\n    a-b: {tool: t/ok}\n", "node name \"a-b\" is not a name a condition can use"},
	} {
		t.Run(name, func(t *testing.T) {
			proj := project(t, map[string]string{".ai/tools/g/x.yaml": walker + "graph:\n" + tc.graph, ".ai/tools/t/ok.sh": okTool})
			e := newEngine(t, Options{ProjectRoot: proj})
			_, err := e.Plan(t.Context(), PlanRequest{ID: "g/x", Target: localTarget(t, nil)})
			errorContains(t, err, "graph: ", tc.want)
		})
	}
	// A node whose tool does not exist, or is a runtime, fails the plan.
	proj := project(t, map[string]string{
		".ai/tools/g/missing.yaml": walker + "graph:\n  start: a\n  nodes:\n    a: {tool: t/nope}\n",
		".ai/tools/g/rt.yaml":      walker + "graph:\n  start: a\n  nodes:\n    a: {tool: rex/core/runtimes/sh/sh}\n",
		".ai/tools/g/nograph.yaml": walker,
	})
	e := newEngine(t, Options{ProjectRoot: proj})
	_, err := e.Plan(t.Context(), PlanRequest{ID: "g/missing", Target: localTarget(t, nil)})
	errorContains(t, err, "tool g/missing, node a: tool t/nope not found")
	_, err = e.Plan(t.Context(), PlanRequest{ID: "g/rt", Target: localTarget(t, nil)})
	errorContains(t, err, "node a: rex/core/runtimes/sh/sh is a runtime, not a tool")
	_, err = e.Plan(t.Context(), PlanRequest{ID: "g/nograph", Target: localTarget(t, nil)})
	errorContains(t, err, "has no graph")
}

const okTool = "#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\necho ok\n"

// TestGraphWalk: a valid graph plans as a state graph, and Next follows
// the first edge whose condition holds.
func TestGraphWalk(t *testing.T) {
	proj := project(t, map[string]string{
		".ai/tools/g/flow.yaml": walker + `config_schema:
  type: object
  properties: {dir: {type: string, default: /tmp}, host: {type: string}}
graph:
  start: check
  nodes:
    check: {tool: t/ok, target: "{host}", params: {path: "{dir}/x", n: 3, tags: [a, b]}}
    clean: {tool: t/ok, target: h2}
    report: {tool: t/ok, target: local}
  edges:
    - {from: check, to: clean, when: "check.exit_code == 1 || (check.result.full ?? 0) > 0"}
    - {from: check, to: report}
    - {from: clean, to: report, when: "clean.ok && check.ran"}
`,
		".ai/tools/t/ok.sh": okTool,
	})
	e := newEngine(t, Options{ProjectRoot: proj})
	pl, err := e.Plan(t.Context(), PlanRequest{ID: "g/flow", Target: localTarget(t, nil), Params: map[string]string{"host": "h1"}})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Kind != PlanStateGraph || pl.Graph == nil || pl.Argv != nil {
		t.Fatalf("plan kind %s graph %v argv %v", pl.Kind, pl.Graph, pl.Argv)
	}
	g := pl.Graph
	for _, tc := range []struct {
		from string
		res  map[string]NodeResult
		want string
	}{
		{"check", map[string]NodeResult{"check": {Ran: true, OK: true}}, "report"},
		{"check", map[string]NodeResult{"check": {Ran: true, ExitCode: 1}}, "clean"},
		{"check", map[string]NodeResult{"check": {Ran: true, OK: true, Result: map[string]any{"full": 2}}}, "clean"},
		{"clean", map[string]NodeResult{"check": {Ran: true}, "clean": {Ran: true, OK: true}}, "report"},
		{"clean", map[string]NodeResult{"check": {Ran: true}, "clean": {Ran: true, ExitCode: 2}}, ""},
		{"report", nil, ""},
	} {
		got, err := g.Next(tc.from, tc.res)
		if err != nil || got != tc.want {
			t.Errorf("after %s with %v: %q %v, want %q", tc.from, tc.res, got, err, tc.want)
		}
	}
	// A condition that fails at run time stops the walk with the reason.
	bad := &Graph{Start: "a", Nodes: map[string]*GraphNode{"a": {Tool: "t/ok"}, "b": {Tool: "t/ok"}}, Edges: []GraphEdge{{From: "a", To: "b", When: "a.result.n > 0"}}}
	if err := bad.check(); err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Next("a", map[string]NodeResult{"a": {Ran: true}}); err == nil || !strings.Contains(err.Error(), `edge a → b: condition "a.result.n > 0"`) {
		t.Errorf("a failing condition: %v", err)
	}
	call, err := g.Call("check", pl.Params)
	if err != nil {
		t.Fatal(err)
	}
	if call.Tool != "t/ok" || call.Target != "h1" || call.Params["path"] != "/tmp/x" || call.Params["n"] != "3" || call.Params["tags"] != `["a","b"]` {
		t.Errorf("call %+v", call)
	}
	if _, err := g.Call("check", map[string]any{"dir": "/d"}); err == nil || !strings.Contains(err.Error(), "uses {host}, which is not a parameter of the graph") {
		t.Errorf("a missing graph parameter: %v", err)
	}
}

// TestMCPPlans: an MCP tool plans as a server command (stdio) or a URL
// (http) and a tool name; parameters are arguments, never in either.
func TestMCPPlans(t *testing.T) {
	proj := project(t, map[string]string{
		".ai/tools/m/echo.yaml":   "executor_id: rex/core/runtimes/mcp/stdio\nconfig:\n  command: /usr/bin/env\n  args: [python3, \"{tool_dir}/server.py\"]\n  tool_name: echo\n",
		".ai/tools/m/server.py":   "",
		".ai/tools/m/web.yaml":    "executor_id: rex/core/runtimes/mcp/http\nconfig:\n  url: http://127.0.0.1:9/mcp\n  tool_name: search\n",
		".ai/tools/m/noname.yaml": "executor_id: rex/core/runtimes/mcp/http\nconfig:\n  url: http://127.0.0.1:9/mcp\n",
		".ai/tools/m/purl.yaml":   "executor_id: rex/core/runtimes/mcp/http\nconfig:\n  url: \"http://{host}/mcp\"\n  tool_name: x\n",
		".ai/tools/m/pcmd.yaml":   "executor_id: rex/core/runtimes/mcp/stdio\nconfig:\n  command: \"{server}\"\n  tool_name: x\n",
		".ai/tools/m/stdin.yaml":  "executor_id: rex/core/runtimes/mcp/stdio\nconfig:\n  command: cat\n  tool_name: x\n  input_data: \"{params_json}\"\n",
	})
	e := newEngine(t, Options{ProjectRoot: proj})
	plan := func(id string, params map[string]string) (*Plan, error) {
		return e.Plan(t.Context(), PlanRequest{ID: id, Target: localTarget(t, nil), Params: params})
	}
	pl, err := plan("m/echo", map[string]string{"message": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Kind != PlanMCP || pl.MCP.Transport != "stdio" || pl.MCP.Tool != "echo" || len(pl.Argv) != 3 || !strings.HasSuffix(pl.Argv[2], "/m/server.py") || pl.Stdin != nil || pl.Params["message"] != "hi" {
		t.Errorf("stdio plan: %+v %+v", pl, pl.MCP)
	}
	pl, err = plan("m/web", nil)
	if err != nil || pl.MCP.Transport != "http" || pl.MCP.URL != "http://127.0.0.1:9/mcp" || pl.Argv != nil || len(pl.Files) != 0 {
		t.Errorf("http plan: %+v %v", pl, err)
	}
	_, err = plan("m/noname", nil)
	errorContains(t, err, "names no tool; set config.tool_name")
	_, err = plan("m/purl", map[string]string{"host": "evil.example"})
	errorContains(t, err, "{host} carries a parameter into the MCP server's URL")
	_, err = plan("m/pcmd", map[string]string{"server": "/bin/sh"})
	errorContains(t, err, "{server} carries a parameter into what names the program")
	_, err = plan("m/stdin", nil)
	errorContains(t, err, "input_data cannot be used with an MCP server")
}
