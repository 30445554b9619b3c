package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/auditlog"
	"github.com/rexconsole/rex/internal/chain"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/mcpcall"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/secrets"
)

// mcpStopGrace is how long an MCP server started for one call may take to
// exit once its stdin is closed before it is stopped.
const mcpStopGrace = 5 * time.Second

// runMCP calls the plan's MCP tool with the parameters as arguments and
// writes its answer: the structured content as JSON when asked for JSON,
// else the text. A tool that reports an error exits 1 with its message on
// stderr.
func runMCP(ctx context.Context, plan *chain.Plan, ct chain.Target, extra map[string]string, asJSON bool, out, errw io.Writer) (int, error) {
	if plan.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, plan.Timeout)
		defer cancel()
	}
	args := map[string]any{}
	for k, v := range plan.Params {
		args[k] = v
	}
	var res *mcpcall.Result
	var err error
	switch plan.MCP.Transport {
	case "http":
		res, err = mcpcall.HTTP(ctx, plan.MCP.URL, nil, plan.MCP.Tool, args)
	default:
		st, ok := ct.(chain.Starter)
		if !ok {
			return -1, fmt.Errorf("%s cannot start an MCP server", ct.Name())
		}
		env := map[string]string{}
		for k, v := range plan.Env {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
		proc, perr := st.Start(ctx, chain.RunRequest{Argv: plan.Argv, Env: env, Cwd: plan.Cwd, Stderr: errw})
		if perr != nil {
			return -1, fmt.Errorf("start the MCP server %s on %s: %w", plan.Argv[0], ct.Name(), perr)
		}
		res, err = mcpcall.Stdio(ctx, proc.Stdout(), proc.Stdin(), plan.MCP.Tool, args)
		// The session closed the server's stdin: it should end on its own.
		done := make(chan struct{})
		go func() { proc.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(mcpStopGrace):
			proc.Stop()
			<-done
		case <-ctx.Done():
			proc.Stop()
			<-done
		}
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && plan.Timeout > 0 {
			return 124, fmt.Errorf("tool %s on %s did not answer within %s; raise timeout in its config if it needs longer", plan.ID, ct.Name(), plan.Timeout)
		}
		return -1, err
	}
	if res.IsError {
		fmt.Fprintln(errw, strings.TrimRight(res.Text, "\n"))
		return 1, nil
	}
	switch {
	case asJSON:
		fmt.Fprintf(out, "%s\n", res.JSON())
	case res.Text != "":
		fmt.Fprintln(out, strings.TrimRight(res.Text, "\n"))
	case res.Structured != nil:
		fmt.Fprintf(out, "%s\n", res.JSON())
	}
	return 0, nil
}

// Start implements chain.Starter: the process's stdin stays open for
// exec.input, its stdout comes back as a stream.
func (t *SessionTarget) Start(ctx context.Context, req chain.RunRequest) (chain.Process, error) {
	pr, pw := io.Pipe()
	p := protocol.ExecStartParams{Argv: req.Argv, Env: req.Env, Cwd: req.Cwd}
	proc, err := t.S.Exec(ctx, p, rexclient.ExecOptions{Stdout: pw, Stderr: req.Stderr})
	if err != nil {
		pw.Close()
		return nil, err
	}
	sp := &sessionProcess{ctx: ctx, proc: proc, pr: pr, pw: pw}
	sp.in = &sessionStdin{p: sp}
	return sp, nil
}

type sessionProcess struct {
	ctx  context.Context
	proc *rexclient.Process
	pr   *io.PipeReader
	pw   *io.PipeWriter
	in   *sessionStdin

	once sync.Once
	res  chain.RunResult
	err  error
}

func (p *sessionProcess) Stdin() io.WriteCloser { return p.in }
func (p *sessionProcess) Stdout() io.ReadCloser { return p.pr }

func (p *sessionProcess) Wait() (chain.RunResult, error) {
	p.once.Do(func() {
		exit, err := p.proc.Wait(p.ctx)
		p.pw.Close()
		if err != nil {
			p.err = err
			return
		}
		switch {
		case exit.ExitCode != nil:
			p.res.ExitCode = *exit.ExitCode
		case exit.Signal != nil:
			p.res.Signal = *exit.Signal
			p.res.ExitCode = exitStatus(exit)
		}
	})
	return p.res, p.err
}

func (p *sessionProcess) Stop() {
	p.proc.Kill(context.Background(), "KILL")
	p.pr.Close()
}

// sessionStdin writes to a remote process with exec.input.
type sessionStdin struct {
	p      *sessionProcess
	mu     sync.Mutex
	closed bool
}

func (w *sessionStdin) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, io.ErrClosedPipe
	}
	if err := w.p.proc.Input(w.p.ctx, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w *sessionStdin) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.p.proc.CloseInput(w.p.ctx)
}

// NodeEvent reports a state-graph node as the walk reaches and ends it.
type NodeEvent struct {
	Node    string
	Tool    string
	Targets []string // the node's display names, node@target
	// State is "running", "ok", "failed" or "skipped".
	State  string
	Result chain.NodeResult
}

// graphDisplay names one node's target in a graph run: node@target.
func graphDisplay(node, target string) string { return node + "@" + target }

// GraphTargets is what a front end shows for a run of spec: for a
// state-graph tool, a target per node and node target (node@target), in
// walk order; for any other tool, targets themselves.
func GraphTargets(app *App, spec ToolRunSpec, targets []fanout.Target) ([]fanout.Target, error) {
	eng, err := app.engine()
	if err != nil {
		return nil, err
	}
	c, err := eng.Chain(spec.ID, nil)
	if err != nil {
		return targets, nil
	}
	if c.Elements[len(c.Elements)-1].ID != chain.PrimitiveStateGraph || c.Tool().Meta.Graph == nil {
		return runTargets(c, targets), nil
	}
	g := c.Tool().Meta.Graph
	params := map[string]any{}
	for k, v := range spec.Params {
		params[k] = v
	}
	for _, p := range chain.Params(c.Tool().Meta.ConfigSchema) {
		if _, ok := params[p.Name]; !ok && p.Default != nil {
			params[p.Name] = p.Default
		}
	}
	var out []fanout.Target
	for _, n := range g.Order() {
		nts, err := nodeTargets(app, g, n, params, targets, false)
		if err != nil {
			return nil, err
		}
		for _, t := range toolTargets(eng, g.Nodes[n].Tool, nts) {
			out = append(out, fanout.Target{Name: graphDisplay(n, t.Name), Key: t.Key, Spec: t.Spec})
		}
	}
	return out, nil
}

// nodeTargets resolves a node's targets: its own, else the graph's.
func nodeTargets(app *App, g *chain.Graph, node string, params map[string]any, def []fanout.Target, confine bool) ([]fanout.Target, error) {
	call, err := g.Call(node, params)
	if err != nil {
		return nil, err
	}
	if call.Target == "" {
		return def, nil
	}
	ts, err := app.Resolve(call.Target)
	if err != nil {
		return nil, fmt.Errorf("node %s: target %s: %w", node, call.Target, err)
	}
	if confine {
		within := map[string]bool{}
		var names []string
		for _, t := range def {
			within[t.Name] = true
			names = append(names, t.Name)
		}
		for _, t := range ts {
			if !within[t.Name] {
				return nil, fmt.Errorf("node %s: target %s reaches %s, outside the hosts this call may run on (%s); run the graph on a target that holds it", node, call.Target, t.Name, devices.Fold(names))
			}
		}
	}
	return ts, nil
}

// runGraph walks a state graph: each node's tool runs on the node's
// targets through RunTool (JSON asked for, so conditions can read results),
// its events renamed node@target; the walk follows the first edge whose
// condition holds. The results returned are the last node's: a graph ends
// as its last node does.
func runGraph(ctx context.Context, app *App, eng *chain.Engine, spec ToolRunSpec, targets []fanout.Target, opts ToolRunOptions) ([]fanout.EachResult, error) {
	emit := opts.OnEvent
	if emit == nil {
		emit = func(fanout.Event) {}
	}
	onNode := opts.OnNode
	if onNode == nil {
		onNode = func(NodeEvent) {}
	}
	plan, err := eng.Plan(ctx, chain.PlanRequest{ID: spec.ID, Params: spec.Params, Target: &chain.LocalTarget{}, Trace: spec.Trace})
	if err != nil {
		return nil, err
	}
	if spec.Trace && plan.Trace != nil && opts.OnTrace != nil {
		var b strings.Builder
		plan.Trace.WriteText(&b)
		opts.OnTrace("graph", b.String())
	}
	g := plan.Graph
	results := map[string]chain.NodeResult{}
	var last []fanout.EachResult
	ran := map[string]bool{}
	cur := g.Start
	for steps := 0; cur != "" && steps < len(g.Nodes); steps++ {
		node := cur
		call, err := g.Call(node, plan.Params)
		if err != nil {
			return nil, err
		}
		nts, err := nodeTargets(app, g, node, plan.Params, targets, opts.Confine)
		if err != nil {
			return nil, err
		}
		// An MCP tool over HTTP reports once, as local.
		shown := toolTargets(eng, call.Tool, nts)
		var names []string
		for _, t := range shown {
			names = append(names, graphDisplay(node, t.Name))
		}
		onNode(NodeEvent{Node: node, Tool: call.Tool, Targets: names, State: "running"})
		col := NewToolCollector(shown, nil)
		rename := func(ev fanout.Event) {
			col.Event(ev)
			ev.Target = graphDisplay(node, ev.Target)
			if ev.Result != nil {
				r := *ev.Result
				r.Target = ev.Target
				ev.Result = &r
			}
			emit(ev)
		}
		sub := ToolRunSpec{ID: call.Tool, Params: call.Params, Trace: spec.Trace, JSON: true}
		rr, err := RunTool(ctx, app, sub, nts, ToolRunOptions{OnEvent: rename, OnTrace: func(t, text string) {
			if opts.OnTrace != nil {
				opts.OnTrace(graphDisplay(node, t), text)
			}
		}, ClientName: opts.ClientName, Confine: opts.Confine})
		if err != nil {
			// The node could not start anywhere: every target says why.
			for _, t := range shown {
				emit(fanout.Event{Target: graphDisplay(node, t.Name), Kind: fanout.EventResult,
					Result: &fanout.Result{Target: graphDisplay(node, t.Name), Err: err}})
			}
			rr = make([]fanout.EachResult, len(shown))
			for i, t := range shown {
				rr[i] = fanout.EachResult{Target: t.Name, Err: err}
			}
		}
		nr := chain.NodeResult{Ran: true, Targets: len(shown), OK: true}
		for _, r := range rr {
			code := 0
			var ee *ExitError
			switch {
			case r.Err == nil:
			case errors.As(r.Err, &ee):
				code = ee.Code
			case r.Unreachable:
				code = 255
			default:
				code = 1
			}
			if code != 0 {
				nr.OK = false
				nr.Failed++
			}
			if code > nr.ExitCode {
				nr.ExitCode = code
			}
		}
		if res := col.Results(); len(res) > 0 {
			// Conditions compare numbers: JSON numbers become float64.
			if b, err := json.Marshal(res[0].Result); err == nil {
				var m map[string]any
				if json.Unmarshal(b, &m) == nil {
					nr.Result = m
				}
			}
			nr.Output = res[0].Output
		}
		results[node], ran[node] = nr, true
		state := "ok"
		if !nr.OK {
			state = "failed"
		}
		onNode(NodeEvent{Node: node, Tool: call.Tool, Targets: names, State: state, Result: nr})
		last = last[:0]
		for _, r := range rr {
			r.Target = graphDisplay(node, r.Target)
			last = append(last, r)
		}
		if cur, err = g.Next(node, results); err != nil {
			return nil, err
		}
	}
	// The nodes the walk did not reach end as skipped.
	for _, n := range g.Order() {
		if ran[n] {
			continue
		}
		nts, err := nodeTargets(app, g, n, plan.Params, targets, opts.Confine)
		if err != nil {
			continue
		}
		var names []string
		for _, t := range toolTargets(eng, g.Nodes[n].Tool, nts) {
			name := graphDisplay(n, t.Name)
			names = append(names, name)
			emit(fanout.Event{Target: name, Kind: fanout.EventResult, Result: &fanout.Result{Target: name, Err: ErrSkipped}})
		}
		onNode(NodeEvent{Node: n, Tool: g.Nodes[n].Tool, Targets: names, State: "skipped"})
	}
	return last, nil
}

// ErrSkipped ends a graph node the walk did not reach.
var ErrSkipped = errors.New("skipped: the walk did not take an edge to this node")

// toolTargets are the targets a run of tool id reports on: targets
// themselves, except for a tool rex calls itself from this machine (an
// MCP tool over HTTP), which runs once whatever the target and reports
// as local.
func toolTargets(eng *chain.Engine, id string, targets []fanout.Target) []fanout.Target {
	c, err := eng.Chain(id, nil)
	if err != nil {
		return targets
	}
	return runTargets(c, targets)
}

func runTargets(c *chain.Chain, targets []fanout.Target) []fanout.Target {
	if c.MCPTransport() != "http" || len(targets) == 0 {
		return targets
	}
	return []fanout.Target{LocalTarget()}
}

// runHTTPMCP runs a tool of an MCP server over HTTP. No host's rexd runs
// it: rex calls the server itself, from this machine. So it is planned
// here and called once whatever the target, its one result reports as
// local, and, as no rexd audit log sees it, rex's own audit log records
// the call. The log is opened before the call: a call it cannot record
// is not made.
func runHTTPMCP(ctx context.Context, app *App, eng *chain.Engine, c *chain.Chain, spec ToolRunSpec, targets []fanout.Target, opts ToolRunOptions) ([]fanout.EachResult, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	emit := opts.OnEvent
	if emit == nil {
		emit = func(fanout.Event) {}
	}
	values, err := secretValues(app, "tool "+spec.ID, c.Secrets())
	if err != nil {
		return nil, err
	}
	mask := valuesOf(values)
	lt := &chain.LocalTarget{}
	plan, err := eng.Plan(ctx, chain.PlanRequest{ID: spec.ID, Params: spec.Params, Target: lt, Trace: spec.Trace})
	if err != nil {
		return nil, errors.New(secrets.Mask(err.Error(), mask))
	}
	if spec.Trace && plan.Trace != nil && opts.OnTrace != nil {
		var b strings.Builder
		plan.Trace.WriteText(&b)
		opts.OnTrace(LocalName, secrets.Mask(b.String(), mask))
	}
	log, err := openAudit(app)
	if err != nil {
		return nil, fmt.Errorf("tool %s is not called: %w", spec.ID, err)
	}
	defer log.Close()
	var names []string
	for _, t := range targets {
		names = append(names, t.Name)
	}
	client := opts.ClientName
	if client == "" {
		client = "rex"
	}
	entry := auditlog.Entry{ClientName: client, Method: "tool.mcp_http", Params: map[string]any{
		"tool":      spec.ID,
		"url":       secrets.Mask(plan.MCP.URL, mask),
		"tool_name": plan.MCP.Tool,
		"arguments": maskedJSON(plan.Params, mask),
		"targets":   names,
	}}

	start := time.Now()
	emit(fanout.Event{Target: LocalName, Kind: fanout.EventStart})
	out := secrets.NewMasker(&eventWriter{emit: emit, target: LocalName, kind: fanout.EventStdout}, mask)
	errw := secrets.NewMasker(&eventWriter{emit: emit, target: LocalName, kind: fanout.EventStderr}, mask)
	if len(targets) > 1 || targets[0].Name != LocalName {
		fmt.Fprintf(errw, "called once, from rex's machine (local), for target %s: rex calls this MCP server over HTTP itself; no host runs it\n", devices.Fold(names))
	}
	code, err := runMCP(ctx, plan, lt, nil, spec.JSON, out, errw)
	out.Flush()
	errw.Flush()
	switch {
	case err != nil:
		err = errors.New(secrets.Mask(err.Error(), mask))
		entry.Error = &auditlog.Error{Message: err.Error()}
	case code != 0:
		entry.Result = map[string]any{"exit_code": code, "outcome": "the tool reported an error"}
		err = &ExitError{Code: code, Err: fmt.Errorf("exit %d", code)}
	default:
		entry.Result = map[string]any{"exit_code": 0, "outcome": "ok"}
	}
	if werr := log.Write(entry); werr != nil {
		// The call was made: say it went unrecorded, whatever its end.
		err = fmt.Errorf("tool %s was called but its audit entry was not recorded: %w", spec.ID, werr)
	}
	r := fanout.EachResult{Target: LocalName, Err: err, Duration: time.Since(start)}
	emitResult(emit, r)
	return []fanout.EachResult{r}, nil
}
