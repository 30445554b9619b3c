package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// A state-graph tool (executor_id: rex/core/runtimes/state-graph/walker) is
// a YAML file whose graph key names nodes — each a tool call on its own
// targets — and the edges between them:
//
//	graph:
//	  start: check
//	  nodes:
//	    check:  {tool: rex/ops/disk, target: web1, params: {threshold: 80}}
//	    clean:  {tool: my/clean-tmp, target: web1}
//	    report: {tool: my/report, target: local, params: {host: "{host}"}}
//	  edges:
//	    - {from: check, to: clean, when: "check.exit_code == 1"}
//	    - {from: check, to: report, when: "check.ok"}
//	    - {from: clean, to: report}
//
// The walker starts at start, runs the node, then follows the first of its
// edges (in the order written) whose condition holds, or that has none; it
// stops where no edge is taken. Conditions are expr-lang expressions over
// the results of the nodes that ran before (see NodeResult), checked when
// the file is loaded: a cycle, an edge to a node that does not exist, a
// node no path reaches or a condition that does not compile (or refers to
// a node that cannot have run yet) makes the tool unusable. String values
// of a node's params and target may use {name} for the graph's own
// parameters; they are data, never code.

// Graph is a state-graph tool's graph.
type Graph struct {
	Start string                `json:"start"`
	Nodes map[string]*GraphNode `json:"nodes"`
	Edges []GraphEdge           `json:"edges,omitempty"`

	conds []*vm.Program // per edge; nil for an edge without a condition
}

// GraphNode is one tool call.
type GraphNode struct {
	Tool string `json:"tool"`
	// Target is a TARGETS list; "" runs the node on the targets the graph
	// was run on.
	Target string         `json:"target,omitempty"`
	Params map[string]any `json:"params,omitempty"`
}

// GraphEdge leads from one node to the next when its condition holds.
type GraphEdge struct {
	From string `json:"from"`
	To   string `json:"to"`
	When string `json:"when,omitempty"`
}

// NodeResult is what a condition sees of a node: check.ok,
// check.exit_code, check.result.FIELD (the node's JSON output, when it
// printed JSON on every target), check.output. A node that has not run has
// ran == false and zero values.
type NodeResult struct {
	Ran      bool           `expr:"ran" json:"ran"`
	OK       bool           `expr:"ok" json:"ok"`               // every target exited 0
	ExitCode int            `expr:"exit_code" json:"exit_code"` // the highest exit code of its targets
	Failed   int            `expr:"failed" json:"failed"`       // targets that did not exit 0
	Targets  int            `expr:"targets" json:"targets"`
	Result   map[string]any `expr:"result" json:"result,omitempty"` // the JSON object the node printed (the first target's)
	Output   string         `expr:"output" json:"output,omitempty"` // its standard output (the first target's)
}

// maxGraphNodes bounds a graph.
const maxGraphNodes = 256

// graphFrom parses and checks the graph key of a YAML item.
func graphFrom(v any) (*Graph, error) {
	g := &Graph{}
	if err := convert(v, g); err != nil {
		return nil, err
	}
	if err := g.check(); err != nil {
		return nil, err
	}
	return g, nil
}

// check validates the graph's shape and compiles its conditions.
func (g *Graph) check() error {
	if len(g.Nodes) == 0 {
		return errors.New("the graph has no nodes")
	}
	if len(g.Nodes) > maxGraphNodes {
		return fmt.Errorf("the graph has %d nodes; at most %d", len(g.Nodes), maxGraphNodes)
	}
	names := g.names()
	for _, n := range names {
		nd := g.Nodes[n]
		if !isName(n) {
			return fmt.Errorf("node name %q is not a name a condition can use; use letters, digits and '_'", n)
		}
		if nd == nil || nd.Tool == "" {
			return fmt.Errorf("node %s names no tool; add tool: ID", n)
		}
		if err := checkID(nd.Tool); err != nil {
			return fmt.Errorf("node %s: %w", n, err)
		}
	}
	if g.Start == "" {
		return errors.New("the graph has no start; add start: NODE")
	}
	if g.Nodes[g.Start] == nil {
		return fmt.Errorf("start %s is not a node of the graph (nodes: %s)", g.Start, strings.Join(names, ", "))
	}
	next := map[string][]string{}
	for i, e := range g.Edges {
		for _, end := range []string{e.From, e.To} {
			if g.Nodes[end] == nil {
				return fmt.Errorf("edge %d (%s → %s) names node %s, which the graph does not have (nodes: %s)", i+1, e.From, e.To, end, strings.Join(names, ", "))
			}
		}
		next[e.From] = append(next[e.From], e.To)
	}
	// No cycles: every walk ends.
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var path []string
	var visit func(n string) error
	visit = func(n string) error {
		color[n] = grey
		path = append(path, n)
		for _, m := range next[n] {
			switch color[m] {
			case grey:
				i := len(path) - 1
				for path[i] != m {
					i--
				}
				return fmt.Errorf("the graph has a cycle: %s → %s; a state graph must end, so break it", strings.Join(path[i:], " → "), m)
			case white:
				if err := visit(m); err != nil {
					return err
				}
			}
		}
		path = path[:len(path)-1]
		color[n] = black
		return nil
	}
	for _, n := range names {
		if color[n] == white {
			if err := visit(n); err != nil {
				return err
			}
		}
	}
	// Every node is reachable from start.
	reach := map[string]bool{g.Start: true}
	queue := []string{g.Start}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, m := range next[n] {
			if !reach[m] {
				reach[m] = true
				queue = append(queue, m)
			}
		}
	}
	for _, n := range names {
		if !reach[n] {
			return fmt.Errorf("node %s cannot be reached from start %s; add an edge to it or remove it", n, g.Start)
		}
	}
	// Conditions: expr-lang, type-checked against the nodes' results, and
	// referring only to nodes that ran before the edge is taken.
	env := map[string]any{}
	for _, n := range names {
		env[n] = NodeResult{}
	}
	before := g.ancestors()
	g.conds = make([]*vm.Program, len(g.Edges))
	for i, e := range g.Edges {
		if strings.TrimSpace(e.When) == "" {
			continue
		}
		prog, err := expr.Compile(e.When, expr.Env(env), expr.AsBool())
		if err != nil {
			return fmt.Errorf("edge %d (%s → %s): condition %q does not compile: %s", i+1, e.From, e.To, e.When, oneLine(err.Error()))
		}
		var bad []string
		node := prog.Node()
		ast.Walk(&node, identVisitor(func(name string) {
			if g.Nodes[name] != nil && name != e.From && !before[e.From][name] {
				bad = append(bad, name)
			}
		}))
		if len(bad) > 0 {
			sort.Strings(bad)
			return fmt.Errorf("edge %d (%s → %s): condition %q uses %s, which cannot have run before %s", i+1, e.From, e.To, e.When, strings.Join(bad, ", "), e.From)
		}
		g.conds[i] = prog
	}
	return nil
}

type identVisitor func(string)

func (f identVisitor) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok {
		f(id.Value)
	}
}

func (g *Graph) names() []string {
	out := make([]string, 0, len(g.Nodes))
	for n := range g.Nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ancestors maps each node to the nodes some path from start passes
// through before it.
func (g *Graph) ancestors() map[string]map[string]bool {
	prev := map[string][]string{}
	for _, e := range g.Edges {
		prev[e.To] = append(prev[e.To], e.From)
	}
	out := map[string]map[string]bool{}
	var up func(n string) map[string]bool
	up = func(n string) map[string]bool {
		if a, ok := out[n]; ok {
			return a
		}
		a := map[string]bool{}
		out[n] = a
		for _, p := range prev[n] {
			a[p] = true
			for q := range up(p) {
				a[q] = true
			}
		}
		return a
	}
	for n := range g.Nodes {
		up(n)
	}
	return out
}

// Next returns the node the walk goes to after from, given the results so
// far, or "" when it ends there.
func (g *Graph) Next(from string, results map[string]NodeResult) (string, error) {
	env := map[string]any{}
	for n := range g.Nodes {
		env[n] = results[n]
	}
	for i, e := range g.Edges {
		if e.From != from {
			continue
		}
		if g.conds[i] == nil {
			return e.To, nil
		}
		v, err := expr.Run(g.conds[i], env)
		if err != nil {
			return "", fmt.Errorf("edge %s → %s: condition %q: %w", e.From, e.To, e.When, err)
		}
		if b, _ := v.(bool); b {
			return e.To, nil
		}
	}
	return "", nil
}

// NodeCall is a node's tool call with the graph's parameters filled in:
// what `rex tool run` gets for it.
type NodeCall struct {
	Tool   string
	Target string            // "" means the graph's own targets
	Params map[string]string // as --param values
}

// Call fills {name} in the node's target and string params with the
// graph's parameters. Substituted text is data: it becomes --param values
// that the node's own tool validates and templates as it does any.
func (g *Graph) Call(node string, params map[string]any) (NodeCall, error) {
	nd := g.Nodes[node]
	if nd == nil {
		return NodeCall{}, fmt.Errorf("the graph has no node %s", node)
	}
	fill := func(s, what string) (string, error) {
		var missing []string
		out := placeholderRE.ReplaceAllStringFunc(s, func(m string) string {
			name := m[1 : len(m)-1]
			v, ok := params[name]
			if !ok {
				missing = append(missing, name)
				return m
			}
			if str, ok := scalarString(v); ok {
				return str
			}
			b, _ := json.Marshal(v)
			return string(b)
		})
		if len(missing) > 0 {
			return "", fmt.Errorf("node %s %s uses {%s}, which is not a parameter of the graph", node, what, strings.Join(missing, "}, {"))
		}
		return out, nil
	}
	call := NodeCall{Tool: nd.Tool, Params: map[string]string{}}
	var err error
	if call.Target, err = fill(nd.Target, "target"); err != nil {
		return NodeCall{}, err
	}
	for k, v := range nd.Params {
		switch x := v.(type) {
		case string:
			if call.Params[k], err = fill(x, "param "+k); err != nil {
				return NodeCall{}, err
			}
		case nil:
		default:
			if s, ok := scalarString(x); ok {
				call.Params[k] = s
				continue
			}
			b, err := json.Marshal(x)
			if err != nil {
				return NodeCall{}, fmt.Errorf("node %s param %s: %w", node, k, err)
			}
			call.Params[k] = string(b)
		}
	}
	return call, nil
}

// String renders a node result for traces and status lines.
func (r NodeResult) String() string {
	if !r.Ran {
		return "did not run"
	}
	s := "exit " + strconv.Itoa(r.ExitCode)
	if r.Targets > 1 {
		s += fmt.Sprintf(" (%d of %d targets failed)", r.Failed, r.Targets)
	}
	return s
}

// Order lists the nodes from start, breadth first along the edges in the
// order written: the order a front end shows them in.
func (g *Graph) Order() []string {
	seen := map[string]bool{g.Start: true}
	out := []string{g.Start}
	for i := 0; i < len(out); i++ {
		for _, e := range g.Edges {
			if e.From == out[i] && !seen[e.To] {
				seen[e.To] = true
				out = append(out, e.To)
			}
		}
	}
	return out
}
