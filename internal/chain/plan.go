package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rexconsole/rex/internal/secrets"
)

// PlanRequest asks for the exact process that runs a tool on a target.
type PlanRequest struct {
	ID string
	// Params are the --param K=V pairs. Values are coerced to the types the
	// tool's config_schema declares (integer, number, boolean, array,
	// object) before they are sent as JSON on stdin.
	Params map[string]string
	// Target is where the tool will run; interpreters are resolved there.
	Target Target
	// TargetRoot is an absolute directory on the target under which the
	// plan's Files are placed (TargetRoot/ShipFile.Rel) before it runs;
	// every path in the plan refers to that layout. "" runs the files where
	// they are on this machine, the choice for the local target.
	TargetRoot string
	// Trace records every decision in Plan.Trace.
	Trace bool
	// Secrets names secrets the process gets besides the ones the chain
	// declares (a device's). The plan never holds their values: the
	// caller lays them over Plan.Env when it runs the plan (RunWith), so
	// nothing that prints a plan or a trace can show one.
	Secrets []string
}

// Plan kinds, by the primitive that ends the chain.
const (
	PlanExecute    = "execute"     // run Argv on the target
	PlanMCP        = "mcp"         // call MCP.Tool on an MCP server
	PlanStateGraph = "state-graph" // walk Graph
)

// MCPCall is how a plan reaches an MCP server and which tool it calls; the
// parameters are the call's arguments.
type MCPCall struct {
	// Transport is "stdio" (Argv, Env and Cwd start the server on the
	// target; it speaks MCP on its stdin and stdout) or "http" (URL, the
	// server's streamable HTTP endpoint, reached from this machine).
	Transport string
	URL       string
	Tool      string
}

// Plan is the exact process that runs a tool, and the files it needs.
type Plan struct {
	ID     string
	Target string
	Chain  *Chain
	// Kind is PlanExecute, PlanMCP or PlanStateGraph.
	Kind   string
	MCP    *MCPCall          // for PlanMCP
	Graph  *Graph            // for PlanStateGraph
	Argv   []string          // never a shell string built from parameters
	Env    map[string]string // laid over the target's environment
	Cwd    string
	Stdin  []byte         // the rendered input_data: normally the parameters as JSON
	Params map[string]any // the parameters as sent (coerced, with defaults and resolved_config)
	// Timeout is the config's timeout; 0 means none.
	Timeout time.Duration
	// Files must exist on the target at ShipFile.Target before Argv runs.
	// With an empty TargetRoot they are already in place.
	Files    []ShipFile
	Warnings []string
	Trace    *Trace
	// Secrets names every secret the process must get as environment:
	// the chain's and PlanRequest.Secrets.
	Secrets []string
}

// ShipFile is one local file the tool needs on the target.
type ShipFile struct {
	Role   string      // "tool", "runtime" (a file an element lists) or "dependency" (found around the anchor)
	Space  Space       // the space it comes from
	Local  string      // absolute path on this machine (system files are written out under Options.SystemDir)
	Rel    string      // slash path under TargetRoot: project/..., user/... or system/...
	Target string      // the path the plan uses for it on the target
	SHA256 string      // hex SHA-256 of the content the plan was made from
	Mode   fs.FileMode // permission bits to give it
}

// Roles of shipped files.
const (
	RoleTool       = "tool"
	RoleRuntime    = "runtime"
	RoleDependency = "dependency"
)

// primitiveKeys are the config keys the execute primitive reads. Parameters
// with these names never become template values (they stay in params_json).
func isPrimitiveKey(k string) bool {
	switch k {
	case "command", "args", "input_data", "cwd", "timeout", "param_env":
		return true
	}
	return false
}

// context keys are set by rex; nothing else may override them.
func isContextKey(k string) bool {
	switch k {
	case "tool_path", "tool_dir", "tool_parent", "tool_id", "project_path", "user_space",
		"system_space", "anchor_path", "runtime_lib", "runtime_dir", "params_json", "resolved_config":
		return true
	}
	return false
}

// limits on what an anchor may pull in.
const (
	maxDepFiles   = 5000
	maxDepBytes   = 64 << 20
	resolveCmdCap = 64 << 10
	resolveCmdTTL = 15 * time.Second
)

// planner carries one Plan call.
type planner struct {
	e    *Engine
	req  PlanRequest
	tr   *Trace
	c    *Chain
	plan *Plan

	base    map[string]string // the target's environment
	overlay map[string]string // what the plan sets
	dotenv  map[string]bool   // keys set by .env

	sysLocal string            // materialized system space, once needed
	ctxVals  map[string]string // execution context, target paths
	anchor   *anchorInfo
	ship     map[string]int // Rel → index in plan.Files
	secret   map[string]bool
}

type anchorInfo struct {
	cfg    *AnchorConfig
	owner  *Element
	space  Space
	rel    string // anchor directory relative to the space root
	active bool
}

// Plan resolves and validates the chain of req.ID and computes the exact
// process that runs it on req.Target. Interpreter probes run on the target;
// nothing of the tool itself runs.
func (e *Engine) Plan(ctx context.Context, req PlanRequest) (*Plan, error) {
	if req.Target == nil {
		return nil, errors.New("chain: plan needs a target")
	}
	if req.TargetRoot != "" && (!path.IsAbs(req.TargetRoot) || path.Clean(req.TargetRoot) != req.TargetRoot || req.TargetRoot == "/") {
		return nil, fmt.Errorf("chain: target root %q must be a clean absolute directory other than /", req.TargetRoot)
	}
	var tr *Trace
	if req.Trace {
		tr = &Trace{}
	}
	c, err := e.Chain(req.ID, tr)
	if err != nil {
		return nil, err
	}
	if err := c.Runnable(); err != nil {
		return nil, err
	}
	if probs := Validate(c); len(probs) > 0 {
		tr.add(TraceEvent{Step: StepValidate, ItemID: req.ID, Detail: fmt.Sprintf("%d problem(s)", len(probs))})
		return nil, &ValidationError{ID: req.ID, Problems: probs}
	}
	tr.add(TraceEvent{Step: StepValidate, ItemID: req.ID, Detail: "valid"})
	p := &planner{
		e: e, req: req, tr: tr, c: c,
		plan:    &Plan{ID: req.ID, Target: req.Target.Name(), Chain: c, Trace: tr},
		overlay: map[string]string{},
		dotenv:  map[string]bool{},
		ship:    map[string]int{},
		secret:  map[string]bool{},
	}
	for _, n := range append(c.Secrets(), req.Secrets...) {
		if err := secrets.CheckName(n); err != nil {
			return nil, err
		}
		if !p.secret[n] {
			p.secret[n] = true
			p.plan.Secrets = append(p.plan.Secrets, n)
		}
	}
	if len(p.plan.Secrets) > 0 {
		tr.add(TraceEvent{Step: StepEnv, ItemID: "secrets", Keys: p.plan.Secrets, Detail: "set when the process starts; values are never planned, traced or shown"})
	}
	if err := p.run(ctx); err != nil {
		return nil, err
	}
	return p.plan, nil
}

func (p *planner) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.plan.Warnings = append(p.plan.Warnings, msg)
}

func (p *planner) run(ctx context.Context) error {
	tool := p.c.Tool()
	var err error
	if p.base, err = p.req.Target.Environ(ctx); err != nil {
		return fmt.Errorf("read the environment of %s: %w", p.req.Target.Name(), err)
	}
	if err := p.context(tool); err != nil {
		return err
	}
	if err := p.loadDotEnv(); err != nil {
		return err
	}
	for i := len(p.c.Elements) - 1; i >= 0; i-- {
		if err := p.elementEnv(ctx, p.c.Elements[i]); err != nil {
			return err
		}
	}
	if err := p.anchorPaths(); err != nil {
		return err
	}
	params, err := p.params(tool)
	if err != nil {
		return err
	}
	p.plan.Params = params
	p.plan.Kind = PlanExecute
	switch p.c.Elements[len(p.c.Elements)-1].ID {
	case PrimitiveStateGraph:
		return p.stateGraph(tool)
	case PrimitiveMCP:
		p.plan.Kind = PlanMCP
	}
	if err := p.execution(params); err != nil {
		return err
	}
	if p.plan.Kind == PlanMCP && p.plan.MCP.Transport == "http" {
		return nil // nothing runs on the target
	}
	return p.files()
}

// stateGraph plans a graph: the walker runs here, each node's tool is
// planned when the walk reaches it; every node's tool must exist and be a
// tool now.
func (p *planner) stateGraph(tool *Element) error {
	g := tool.Meta.Graph
	if g == nil {
		return fmt.Errorf("tool %s runs on the state-graph walker but has no graph; add a graph: key (docs/tools.md)", tool.ID)
	}
	for _, n := range g.names() {
		id := g.Nodes[n].Tool
		c, err := p.e.Chain(id, p.tr)
		if err != nil {
			return fmt.Errorf("tool %s, node %s: %w", tool.ID, n, err)
		}
		if err := c.Runnable(); err != nil {
			return fmt.Errorf("tool %s, node %s: %w", tool.ID, n, err)
		}
		if probs := Validate(c); len(probs) > 0 {
			return fmt.Errorf("tool %s, node %s: %w", tool.ID, n, &ValidationError{ID: id, Problems: probs})
		}
	}
	p.plan.Kind, p.plan.Graph = PlanStateGraph, g
	p.tr.add(TraceEvent{Step: StepTemplate, ItemID: tool.ID, Keys: g.names(), Detail: "state graph from " + g.Start})
	return nil
}

// targetPath maps a space-relative slash path to where the plan uses it.
func (p *planner) targetPath(space Space, rel string) (string, error) {
	if p.req.TargetRoot != "" {
		return path.Join(p.req.TargetRoot, space.String(), rel), nil
	}
	dir, err := p.localDir(space)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.FromSlash(rel)), nil
}

// localDir returns a space's root on this machine, writing the system space
// out on first need.
func (p *planner) localDir(space Space) (string, error) {
	if space != SpaceSystem {
		if r := p.e.byspace[space]; r != nil {
			return r.dir, nil
		}
		return "", fmt.Errorf("no %s space is configured", space)
	}
	if p.sysLocal == "" {
		dir, err := p.e.materializeSystem()
		if err != nil {
			return "", err
		}
		p.sysLocal = dir
	}
	return p.sysLocal, nil
}

// context computes the execution context values, in target paths.
func (p *planner) context(tool *Element) error {
	v := map[string]string{"tool_id": tool.ID}
	var err error
	if v["tool_path"], err = p.targetPath(tool.Space, tool.Rel); err != nil {
		return fmt.Errorf("tool %s: %w", tool.ID, err)
	}
	v["tool_dir"] = path.Dir(v["tool_path"])
	v["tool_parent"] = path.Dir(v["tool_dir"])
	v["project_path"] = ""
	if p.e.byspace[SpaceProject] != nil {
		v["project_path"], _ = p.targetPath(SpaceProject, ".")
	}
	if p.e.byspace[SpaceUser] != nil {
		v["user_space"], _ = p.targetPath(SpaceUser, ".ai")
	}
	if p.req.TargetRoot != "" || p.e.systemDir != "" {
		if v["system_space"], err = p.targetPath(SpaceSystem, ".ai"); err != nil {
			return err
		}
	}
	p.ctxVals = v
	// The anchor of the nearest element that declares one applies.
	for _, el := range p.c.Elements {
		if el.Meta.Anchor != nil {
			return p.computeAnchor(tool, el)
		}
	}
	v["anchor_path"] = v["tool_dir"]
	return nil
}

// computeAnchor finds the anchor root on this machine (markers are looked
// for in the local files, which are the ones that ship) and maps it.
func (p *planner) computeAnchor(tool, owner *Element) error {
	cfg := owner.Meta.Anchor
	a := &anchorInfo{cfg: cfg, owner: owner, space: tool.Space}
	toolDir := path.Dir(tool.Rel)
	base := toolDir
	switch cfg.Root {
	case "tool_parent":
		base = path.Dir(toolDir)
	case "project_path":
		if p.e.byspace[SpaceProject] == nil {
			return fmt.Errorf("%s %s anchors at the project, but there is no project (no .ai directory above the working directory); run rex inside the project", owner.Kind, owner.ID)
		}
		a.space, base = SpaceProject, "."
	}
	mode := cfg.Mode
	if mode == "" {
		mode = "auto"
	}
	a.rel = base
	how := "inactive"
	switch {
	case !cfg.active():
		how = "disabled"
	case mode == "always":
		a.active, how = true, "mode always"
	default:
		// Walk up from base, never above .ai/tools, to the first directory
		// holding a marker.
		fsys := p.e.byspace[a.space].fsys
		bound := toolsDir
		if !within(bound, base) {
			bound = base
		}
	walk:
		for dir := base; within(bound, dir); dir = path.Dir(dir) {
			for _, mk := range cfg.MarkersAny {
				if _, err := fs.Stat(fsys, path.Join(dir, mk)); err == nil {
					a.rel, a.active = dir, true
					how = "marker " + mk
					break walk
				}
			}
			if dir == bound {
				break
			}
		}
		if !a.active {
			how = "no marker found; anchor is the tool's directory"
		}
	}
	ap, err := p.targetPath(a.space, a.rel)
	if err != nil {
		return err
	}
	p.ctxVals["anchor_path"] = ap
	if cfg.Lib != "" {
		lib := path.Join(a.rel, cfg.Lib)
		if !within(".", lib) {
			return fmt.Errorf("%s %s: anchor lib %q leaves the %s space; fix anchor.lib in %s", owner.Kind, owner.ID, cfg.Lib, a.space, owner.Path)
		}
		if p.ctxVals["runtime_lib"], err = p.targetPath(a.space, lib); err != nil {
			return err
		}
	}
	p.anchor = a
	p.tr.add(TraceEvent{Step: StepAnchor, ItemID: owner.ID, Path: ap, Space: a.space, Detail: fmt.Sprintf("active=%t (%s)", a.active, how)})
	return nil
}

// lookup reads the environment being built: the plan's overlay, then the
// target's own environment.
func (p *planner) lookup(name string) (string, bool) {
	if v, ok := p.overlay[name]; ok {
		return v, true
	}
	v, ok := p.base[name]
	return v, ok
}

// loadDotEnv reads .env from the project root, if there is one.
func (p *planner) loadDotEnv() error {
	root := p.e.byspace[SpaceProject]
	if root == nil {
		return nil
	}
	src, err := readItem(root.fsys, ".env")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", root.display(".env"), err)
	}
	vars, err := parseDotEnv(src, func(n string) (string, bool) { v, ok := p.base[n]; return v, ok })
	if err != nil {
		return fmt.Errorf("%s: %w", root.display(".env"), err)
	}
	var keys []string
	for _, v := range vars {
		p.overlay[v.Key] = v.Value
		p.dotenv[v.Key] = true
		keys = append(keys, v.Key)
	}
	p.tr.add(TraceEvent{Step: StepEnv, ItemID: ".env", Path: root.display(".env"), Keys: uniqueSorted(keys)})
	return nil
}

func uniqueSorted(keys []string) []string {
	sort.Strings(keys)
	out := keys[:0]
	for i, k := range keys {
		if i == 0 || k != keys[i-1] {
			out = append(out, k)
		}
	}
	return out
}

// plainRender renders trusted text with ${VAR} and the context values.
func (p *planner) plainRender(s, what string) (string, error) {
	out, unresolved, err := render(s, renderOpts{lookup: p.lookup, vals: p.ctxVals, what: what, secret: p.secret})
	if err != nil {
		return "", err
	}
	for _, n := range unresolved {
		p.warn("%s: {%s} has no value and stays as written", what, n)
	}
	return out, nil
}

// elementEnv applies one element's env_config. Elements are applied from
// the primitive up to the tool, so for the same key the tool's value wins
// over its runtime's, and a runtime's over the primitive's.
func (p *planner) elementEnv(ctx context.Context, el *Element) error {
	ec := el.Meta.Env
	if ec == nil {
		return nil
	}
	var keys []string
	if in := ec.Interpreter; in != nil {
		if p.dotenv[in.Var] {
			p.tr.add(TraceEvent{Step: StepInterp, ItemID: el.ID, Keys: []string{in.Var}, Detail: "pinned by .env: " + p.overlay[in.Var]})
		} else {
			v, how, err := p.interpreter(ctx, el, in)
			if err != nil {
				return err
			}
			p.overlay[in.Var] = v
			keys = append(keys, in.Var)
			p.tr.add(TraceEvent{Step: StepInterp, ItemID: el.ID, Keys: []string{in.Var}, Path: v, Detail: how})
		}
	}
	// Values expand against the environment as it was before this element
	// (plus its interpreter), never against their siblings, so the result
	// does not depend on key order.
	set := make(map[string]string, len(ec.Env))
	for k, raw := range ec.Env {
		v, err := p.plainRender(raw, fmt.Sprintf("%s %s env %s", el.Kind, el.ID, k))
		if err != nil {
			return err
		}
		set[k] = v
	}
	for k, v := range set {
		p.overlay[k] = v
		keys = append(keys, k)
	}
	p.tr.add(TraceEvent{Step: StepEnv, ItemID: el.ID, Keys: uniqueSorted(keys)})
	return nil
}

// interpreter resolves an interpreter on the target.
func (p *planner) interpreter(ctx context.Context, el *Element, in *Interpreter) (string, string, error) {
	t := p.req.Target
	pathList, _ := p.lookup("PATH")
	if pathList == "" {
		pathList = "/usr/local/bin:/usr/bin:/bin"
	}
	names := append([]string{in.Binary}, in.Candidates...)
	var looked []string
	switch in.Type {
	case InterpLocalBinary:
		roots := in.SearchRoots
		if len(roots) == 0 {
			roots = []string{"{project_path}"}
		}
		for _, r := range roots {
			root, err := p.plainRender(r, fmt.Sprintf("%s %s search_roots", el.Kind, el.ID))
			if err != nil {
				return "", "", err
			}
			if root == "" || !path.IsAbs(root) {
				continue
			}
			for _, sp := range in.SearchPaths {
				for _, n := range names {
					cand := path.Join(root, sp, n)
					if !within(root, cand) {
						continue
					}
					looked = append(looked, path.Dir(cand))
					fi, err := t.Stat(ctx, cand)
					if err != nil {
						return "", "", fmt.Errorf("%s %s: probe %s on %s: %w", el.Kind, el.ID, cand, t.Name(), err)
					}
					if fi.Executable() {
						return cand, "local_binary found " + cand, nil
					}
				}
			}
		}
	case InterpSystemBinary:
		for _, n := range names {
			found, err := t.LookPath(ctx, n, pathList)
			if err == nil {
				return found, "system_binary found " + n + " in PATH", nil
			}
			if !errors.Is(err, ErrNotFound) {
				return "", "", fmt.Errorf("%s %s: look up %s on %s: %w", el.Kind, el.ID, n, t.Name(), err)
			}
		}
	case InterpCommand:
		var out, errOut bytes.Buffer
		env := make(map[string]string, len(p.overlay))
		for k, v := range p.overlay {
			env[k] = v
		}
		res, err := t.Run(ctx, RunRequest{Argv: in.ResolveCmd, Env: env, Timeout: resolveCmdTTL,
			Stdout: &capWriter{buf: &out, max: resolveCmdCap}, Stderr: &capWriter{buf: &errOut, max: resolveCmdCap}})
		got := firstLine(out.String())
		switch {
		case err == nil && res.ExitCode == 0 && !res.TimedOut && got != "":
			return got, "command " + strings.Join(in.ResolveCmd, " ") + " printed it", nil
		case err != nil:
			looked = append(looked, fmt.Sprintf("%s (%v)", in.ResolveCmd[0], err))
		default:
			looked = append(looked, fmt.Sprintf("%s (exit %d: %s)", strings.Join(in.ResolveCmd, " "), res.ExitCode, firstLine(errOut.String())))
		}
	}
	if f := in.Fallback; f != "" {
		if path.IsAbs(f) {
			fi, err := t.Stat(ctx, f)
			if err == nil && fi.Executable() {
				return f, "fallback " + f, nil
			}
		} else {
			found, err := t.LookPath(ctx, f, pathList)
			if err == nil {
				return found, "fallback " + f + " found in PATH", nil
			}
		}
	}
	where := "PATH"
	if len(looked) > 0 {
		where = strings.Join(looked, ", ") + " and PATH"
	}
	return "", "", fmt.Errorf("%s %s: no interpreter %s on %s (looked in %s); install it there or set %s in the project's .env",
		el.Kind, el.ID, strings.Join(append(names, in.Fallback), "/"), t.Name(), where, in.Var)
}

// capWriter keeps at most max bytes.
type capWriter struct {
	buf *bytes.Buffer
	max int
}

func (w *capWriter) Write(b []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		if len(b) > room {
			w.buf.Write(b[:room])
		} else {
			w.buf.Write(b)
		}
	}
	return len(b), nil
}

// anchorPaths applies the active anchor's env_paths. Every entry must lie
// inside the anchor, its space or the project, compared by path components.
func (p *planner) anchorPaths() error {
	a := p.anchor
	if a == nil || !a.active || len(a.cfg.EnvPaths) == 0 {
		return nil
	}
	allowed := []string{p.ctxVals["anchor_path"]}
	if sr, err := p.targetPath(a.space, "."); err == nil {
		allowed = append(allowed, sr)
	}
	if pp := p.ctxVals["project_path"]; pp != "" {
		allowed = append(allowed, pp)
	}
	vars := make([]string, 0, len(a.cfg.EnvPaths))
	for k := range a.cfg.EnvPaths {
		vars = append(vars, k)
	}
	sort.Strings(vars)
	for _, k := range vars {
		edit := a.cfg.EnvPaths[k]
		conv := func(list []string) ([]string, error) {
			var out []string
			for _, raw := range list {
				v, err := p.plainRender(raw, fmt.Sprintf("%s %s anchor env_paths %s", a.owner.Kind, a.owner.ID, k))
				if err != nil {
					return nil, err
				}
				if !path.IsAbs(v) {
					return nil, fmt.Errorf("%s %s: anchor env path %q for %s is not absolute; build it from {anchor_path} in %s", a.owner.Kind, a.owner.ID, v, k, a.owner.Path)
				}
				v = path.Clean(v)
				ok := false
				for _, base := range allowed {
					if within(base, v) {
						ok = true
						break
					}
				}
				if !ok {
					return nil, fmt.Errorf("%s %s: anchor env path %q for %s is outside the anchor %s and the project; fix env_paths in %s", a.owner.Kind, a.owner.ID, v, k, p.ctxVals["anchor_path"], a.owner.Path)
				}
				out = append(out, v)
			}
			return out, nil
		}
		pre, err := conv(edit.Prepend)
		if err != nil {
			return err
		}
		app, err := conv(edit.Append)
		if err != nil {
			return err
		}
		parts := pre
		if cur, _ := p.lookup(k); cur != "" {
			parts = append(parts, cur)
		}
		parts = append(parts, app...)
		p.overlay[k] = strings.Join(parts, ":")
		p.tr.add(TraceEvent{Step: StepEnv, ItemID: a.owner.ID, Keys: []string{k}, Detail: "anchor env_paths"})
	}
	return nil
}

// params checks and coerces the parameters against the tool's schema and
// adds resolved_config.
func (p *planner) params(tool *Element) (map[string]any, error) {
	out, err := toolParams(tool, p.req.Params)
	if err != nil {
		return nil, err
	}
	for _, el := range p.c.Elements {
		if el.Meta.ConfigResolve != nil {
			rc, err := p.e.resolveConfig(el.Meta.ConfigResolve, p.tr)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", el.Kind, el.ID, err)
			}
			out["resolved_config"] = rc
			break
		}
	}
	return out, nil
}

// CheckParams reports what is wrong with params for the chain's tool, as
// Plan would for every target: a front end says it once, before any
// target is reached, rather than once per target.
func (c *Chain) CheckParams(params map[string]string) error {
	_, err := toolParams(c.Tool(), params)
	return err
}

// toolParams is tool's parameters from what was given: each coerced to
// its schema type, defaults filled in, the whole checked against the
// tool's CONFIG_SCHEMA. Nothing in it depends on a target.
func toolParams(tool *Element, given map[string]string) (map[string]any, error) {
	out := map[string]any{}
	schema := tool.Meta.ConfigSchema
	props, _ := schema["properties"].(map[string]any)
	names := make([]string, 0, len(given))
	for k := range given {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !isName(k) {
			return nil, fmt.Errorf("parameter name %q is not valid; use letters, digits and '_', starting with a letter or '_'", k)
		}
		if k == "resolved_config" {
			return nil, errors.New("parameter name resolved_config is reserved for the tool's resolved config file; rename the parameter")
		}
		raw := given[k]
		prop, _ := props[k].(map[string]any)
		v, err := coerce(raw, schemaType(prop))
		if err != nil {
			return nil, fmt.Errorf("parameter %s: %w", k, err)
		}
		out[k] = v
	}
	for k, pv := range props {
		prop, _ := pv.(map[string]any)
		if _, given := out[k]; !given && prop != nil {
			if d, ok := prop["default"]; ok {
				out[k] = d
			}
		}
	}
	if sch := tool.Meta.schema; sch != nil {
		if err := validateParams(sch, tool.ID, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func schemaType(prop map[string]any) string {
	switch t := prop["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				return s
			}
		}
	}
	return "string"
}

// coerce converts a --param value to the schema type.
func coerce(raw, typ string) (any, error) {
	switch typ {
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", raw)
		}
		return n, nil
	case "number":
		f, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil || f != f || f > 1e308 || f < -1e308 {
			return nil, fmt.Errorf("%q is not a number", raw)
		}
		return f, nil
	case "boolean":
		b, err := strconv.ParseBool(strings.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", raw)
		}
		return b, nil
	case "array", "object":
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			return nil, fmt.Errorf("%q is not JSON (an %s is expected)", raw, typ)
		}
		if _, isArr := v.([]any); typ == "array" && !isArr {
			return nil, fmt.Errorf("%q is not a JSON array", raw)
		}
		if _, isObj := v.(map[string]any); typ == "object" && !isObj {
			return nil, fmt.Errorf("%q is not a JSON object", raw)
		}
		return v, nil
	}
	return raw, nil
}

// cfgVal is a merged config value and the index of the element it came from.
type cfgVal struct {
	v      any
	origin int
}

// execution merges the config, renders the command and fills the plan.
func (p *planner) execution(params map[string]any) error {
	merged := map[string]cfgVal{}
	// Primitive first, tool last: the tool's config overrides its runtime's.
	for i := len(p.c.Elements) - 1; i >= 0; i-- {
		for k, v := range p.c.Elements[i].Meta.Config {
			merged[k] = cfgVal{v, i}
		}
	}
	var pj bytes.Buffer
	enc := json.NewEncoder(&pj)
	enc.SetEscapeHTML(false) // the tool reads JSON, not HTML: keep <, > and & as typed
	if err := enc.Encode(params); err != nil {
		return fmt.Errorf("encode parameters as JSON: %w", err)
	}
	paramsJSON := strings.TrimSuffix(pj.String(), "\n")

	// Pass 1 on trusted config values, context values as final text, then
	// parameters as final text; pass 2 until stable.
	vals := map[string][]seg{}
	var excluded []string
	keys := make([]string, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cv := merged[k]
		if isPrimitiveKey(k) {
			continue
		}
		if isContextKey(k) {
			p.warn("%s: config key %s is set by rex and cannot be overridden", p.c.Elements[cv.origin].ID, k)
			continue
		}
		s, ok := scalarString(cv.v)
		if !ok {
			continue
		}
		segs := pass1(s, p.lookup)
		segs, _ = substitute(segs, map[string][]seg{"runtime_dir": {{text: p.elementDir(cv.origin), final: true}}})
		vals[k] = segs
	}
	for k, v := range p.ctxVals {
		vals[k] = []seg{{text: v, final: true}}
	}
	pnames := make([]string, 0, len(params))
	for k := range params {
		pnames = append(pnames, k)
	}
	sort.Strings(pnames)
	var shadowsConfig []string
	for _, k := range pnames {
		if isPrimitiveKey(k) || isContextKey(k) {
			if k != "resolved_config" {
				excluded = append(excluded, k)
			}
			continue
		}
		if _, isConfig := merged[k]; isConfig {
			// The config's value stays: a parameter never replaces what
			// the tool's author wrote.
			shadowsConfig = append(shadowsConfig, k)
			continue
		}
		s, ok := scalarString(params[k])
		if !ok {
			b, _ := json.Marshal(params[k])
			s = string(b)
		}
		vals[k] = []seg{{text: s, final: true, param: true}}
	}
	if len(excluded) > 0 {
		p.tr.add(TraceEvent{Step: StepParams, ItemID: p.c.ID, Keys: excluded,
			Detail: "named like primitive config or context keys: excluded from templating, still in params_json"})
	}
	if len(shadowsConfig) > 0 {
		p.tr.add(TraceEvent{Step: StepParams, ItemID: p.c.ID, Keys: shadowsConfig,
			Detail: "named like config keys: the config's values stay, the parameters are only in params_json"})
	}
	resolved, tainted, err := resolveValues(vals)
	if err != nil {
		return fmt.Errorf("tool %s: %w", p.c.ID, err)
	}

	// Parameters the schema declares numbers hold checked numbers: they
	// may go where a shell evaluates arithmetic.
	numeric := map[string]bool{}
	props, _ := p.c.Elements[0].Meta.ConfigSchema["properties"].(map[string]any)
	for _, k := range pnames {
		prop, _ := props[k].(map[string]any)
		switch params[k].(type) {
		case int64, int, uint64, float64:
			_, isConfig := merged[k]
			if t := schemaType(prop); (t == "integer" || t == "number") && !isConfig && !isPrimitiveKey(k) && !isContextKey(k) {
				numeric[k] = true
			}
		}
	}
	var shell string // the shell that reads a modeShell template
	renderKey := func(s string, mode renderMode, refusal string, allowStdin bool, origin int, what string) (string, []string, error) {
		vv := resolved
		if dir := p.elementDir(origin); dir != "" {
			vv = make(map[string]string, len(resolved)+1)
			for k, v := range resolved {
				vv[k] = v
			}
			vv["runtime_dir"] = dir
		}
		o := renderOpts{lookup: p.lookup, vals: vv, mode: mode, refusal: refusal, tainted: tainted, what: what, secret: p.secret,
			numeric: numeric, shell: shell, tool: p.c.ID}
		if allowStdin {
			o.paramsJSON = &paramsJSON
		}
		out, unresolved, used, err := renderTaint(s, o)
		if err != nil {
			return "", nil, err
		}
		if mode != modeShell {
			// A shell render repeats a plain one; warn once.
			for _, n := range unresolved {
				p.warn("%s: {%s} has no value and stays as written", what, n)
			}
		}
		if mode == modeShell {
			p.tr.add(TraceEvent{Step: StepTemplate, ItemID: p.c.Elements[origin].ID, Detail: what + " is a shell command: every substituted value is single-quoted"})
		}
		return out, used, nil
	}
	elName := func(i int) string { el := p.c.Elements[i]; return string(el.Kind) + " " + el.ID }

	// Every argument is rendered plainly first, then read the way the
	// program that receives it parses its arguments (argScanner): a shell
	// command line is rendered again with quoting; a parameter is refused
	// where it would name the program, be an option or be program text.
	var sc argScanner
	arg := func(s string, origin int, what string) (string, error) {
		out, used, err := renderKey(s, modeData, "", false, origin, what)
		if err != nil {
			return "", err
		}
		prog := sc.prog
		role := sc.next(out)
		if role == roleProgram {
			prog = sc.prog
		}
		switch role {
		case roleShell:
			shell = sc.prog
			out, _, err = renderKey(s, modeShell, "", false, origin, what)
			return out, err
		case roleData:
			return out, nil
		}
		if len(used) == 0 {
			return out, nil
		}
		switch role {
		case roleProgram:
			return "", fmt.Errorf("%s: %s carries a parameter into what names the program or script that runs (%q); a parameter never chooses what runs", what, used[0], prog)
		case roleOption:
			return "", fmt.Errorf("%s: %s carries a parameter into an option of %s; pass it as an argument after the options", what, used[0], prog)
		}
		return "", fmt.Errorf("%s: %s carries a parameter into program text of %s, where no quoting is safe; read parameters from stdin (params_json) instead", what, used[0], prog)
	}

	isMCP := p.plan.Kind == PlanMCP
	if isMCP {
		call := &MCPCall{}
		tv, _ := merged["transport"]
		call.Transport, _ = tv.v.(string)
		switch call.Transport {
		case "stdio", "http":
		default:
			return fmt.Errorf("chain %s: config.transport must be stdio or http, not %q", p.c, call.Transport)
		}
		nv, ok := merged["tool_name"]
		name, _ := nv.v.(string)
		if !ok || name == "" {
			return fmt.Errorf("tool %s calls an MCP server but names no tool; set config.tool_name", p.c.ID)
		}
		if call.Tool, _, err = renderKey(name, modeNoParams, "the MCP tool's name", false, nv.origin, elName(nv.origin)+" tool_name"); err != nil {
			return err
		}
		if _, ok := merged["input_data"]; ok {
			return fmt.Errorf("chain %s: input_data cannot be used with an MCP server, whose stdin carries the protocol; the parameters are the call's arguments", p.c)
		}
		if call.Transport == "http" {
			uv, ok := merged["url"]
			u, _ := uv.v.(string)
			if !ok || u == "" {
				return fmt.Errorf("tool %s calls an MCP server over HTTP but has no config.url", p.c.ID)
			}
			if call.URL, _, err = renderKey(u, modeNoParams, "the MCP server's URL", false, uv.origin, elName(uv.origin)+" url"); err != nil {
				return err
			}
			if !strings.HasPrefix(call.URL, "http://") && !strings.HasPrefix(call.URL, "https://") {
				return fmt.Errorf("tool %s: url %q is not an http:// or https:// address", p.c.ID, call.URL)
			}
		}
		p.plan.MCP = call
		if tv, ok := merged["timeout"]; ok && tv.v != nil {
			d, err := parseTimeout(tv.v)
			if err != nil {
				return fmt.Errorf("%s: config.timeout: %w", elName(tv.origin), err)
			}
			p.plan.Timeout = d
		}
		if call.Transport == "http" {
			p.plan.Env = p.overlay
			return nil
		}
	}

	cmdV, ok := merged["command"]
	if !ok {
		return fmt.Errorf("no element of the chain %s sets command; add config.command to its runtime", p.c)
	}
	cmdS, ok := cmdV.v.(string)
	if !ok || cmdS == "" {
		return fmt.Errorf("%s: config.command must be a non-empty string", elName(cmdV.origin))
	}
	command, err := arg(cmdS, cmdV.origin, elName(cmdV.origin)+" command")
	if err != nil {
		return err
	}
	if command == "" {
		return fmt.Errorf("%s: command %q is empty once rendered; check the variable it uses", elName(cmdV.origin), cmdS)
	}
	argv := []string{command}
	if av, ok := merged["args"]; ok && av.v != nil {
		list, ok := av.v.([]any)
		if !ok {
			return fmt.Errorf("%s: config.args must be a list", elName(av.origin))
		}
		for i, a := range list {
			s, ok := scalarString(a)
			if !ok {
				return fmt.Errorf("%s: config.args[%d] must be a string", elName(av.origin), i)
			}
			out, err := arg(s, av.origin, fmt.Sprintf("%s args[%d]", elName(av.origin), i))
			if err != nil {
				return err
			}
			argv = append(argv, out)
		}
	}
	p.plan.Argv = argv
	if iv, ok := merged["input_data"]; ok && iv.v != nil {
		s, ok := scalarString(iv.v)
		if !ok {
			return fmt.Errorf("%s: config.input_data must be a string", elName(iv.origin))
		}
		what := elName(iv.origin) + " input_data"
		var out string
		switch sc.stdin() {
		case stdinShell:
			if strings.Contains(s, "{params_json}") {
				return fmt.Errorf("%s: {params_json} would run as commands, because %s reads its commands from stdin here; give %s a script (or -c) so stdin is data", what, sc.prog, sc.prog)
			}
			shell = sc.prog
			out, _, err = renderKey(s, modeShell, "", false, iv.origin, what)
		case stdinProgram:
			if strings.Contains(s, "{params_json}") {
				return fmt.Errorf("%s: {params_json} would be read as program text, because %s reads its program from stdin here; give %s a script so stdin is data", what, sc.prog, sc.prog)
			}
			out, _, err = renderKey(s, modeNoParams, fmt.Sprintf("program text: %s reads its program from stdin here, where no quoting is safe; give it a script and read parameters from stdin (params_json) instead", sc.prog), false, iv.origin, what)
		default:
			out, _, err = renderKey(s, modeData, "", true, iv.origin, what)
		}
		if err != nil {
			return err
		}
		p.plan.Stdin = []byte(out)
	}
	// Working directory: config cwd, else an active anchor's cwd, else the
	// project, else the tool's directory.
	cwd := p.ctxVals["project_path"]
	if cwd == "" {
		cwd = p.ctxVals["tool_dir"]
	}
	if a := p.anchor; a != nil && a.active && a.cfg.Cwd != "" {
		if cwd, err = p.plainRender(a.cfg.Cwd, a.owner.ID+" anchor cwd"); err != nil {
			return err
		}
	}
	if cv, ok := merged["cwd"]; ok && cv.v != nil {
		s, ok := cv.v.(string)
		if !ok {
			return fmt.Errorf("%s: config.cwd must be a string", elName(cv.origin))
		}
		if cwd, _, err = renderKey(s, modeData, "", false, cv.origin, elName(cv.origin)+" cwd"); err != nil {
			return err
		}
	}
	if !path.IsAbs(cwd) {
		return fmt.Errorf("tool %s: working directory %q is not absolute; fix cwd in its runtime", p.c.ID, cwd)
	}
	p.plan.Cwd = cwd
	if tv, ok := merged["timeout"]; ok && tv.v != nil {
		d, err := parseTimeout(tv.v)
		if err != nil {
			return fmt.Errorf("%s: config.timeout: %w", elName(tv.origin), err)
		}
		p.plan.Timeout = d
	}
	if pv, ok := merged["param_env"]; ok && pv.v != nil && !isMCP {
		prefix, ok := pv.v.(string)
		if !ok || !isName(prefix) {
			return fmt.Errorf("%s: config.param_env must be a variable-name prefix like REX_PARAM_", elName(pv.origin))
		}
		var keys []string
		for _, k := range pnames {
			if k == "resolved_config" {
				continue
			}
			s, ok := scalarString(params[k])
			if !ok {
				b, _ := json.Marshal(params[k])
				s = string(b)
			}
			key := prefix + strings.ToUpper(k)
			p.overlay[key] = s
			keys = append(keys, key)
		}
		if len(keys) > 0 {
			p.tr.add(TraceEvent{Step: StepEnv, ItemID: "params", Keys: keys, Detail: "param_env " + prefix})
		}
	}
	p.plan.Env = p.overlay
	return nil
}

// elementDir is the target directory of a chain element's file ("" for a
// built-in), the value of {runtime_dir} in that element's own config.
func (p *planner) elementDir(i int) string {
	el := p.c.Elements[i]
	if el.Builtin {
		return ""
	}
	tp, err := p.targetPath(el.Space, path.Dir(el.Rel))
	if err != nil {
		return ""
	}
	return tp
}

func parseTimeout(v any) (time.Duration, error) {
	switch x := v.(type) {
	case int64:
		if x < 0 || x > 1<<31 {
			return 0, fmt.Errorf("%d seconds is out of range", x)
		}
		return time.Duration(x) * time.Second, nil
	case float64:
		if x < 0 || x > 1<<31 {
			return 0, fmt.Errorf("%g seconds is out of range", x)
		}
		return time.Duration(x * float64(time.Second)), nil
	case string:
		d, err := time.ParseDuration(x)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%q is not a duration like 300s or 5m", x)
		}
		return d, nil
	}
	return 0, fmt.Errorf("must be a number of seconds or a duration like 5m")
}

// files lists what must be on the target: the tool, the files elements
// declare, and the anchor's dependencies.
func (p *planner) files() error {
	tool := p.c.Tool()
	if err := p.addFile(RoleTool, tool.Space, tool.Rel, tool.Hash); err != nil {
		return err
	}
	for _, el := range p.c.Elements {
		for _, f := range el.Meta.Files {
			rel := path.Join(path.Dir(el.Rel), f)
			if !within(toolsDir, rel) {
				return fmt.Errorf("%s %s: file %q leaves .ai/tools; fix files in %s", el.Kind, el.ID, f, el.Path)
			}
			if err := p.addFile(RoleRuntime, el.Space, rel, ""); err != nil {
				return fmt.Errorf("%s %s: %w", el.Kind, el.ID, err)
			}
		}
	}
	if err := p.dependencies(); err != nil {
		return err
	}
	for _, f := range p.plan.Files {
		p.tr.add(TraceEvent{Step: StepShip, Path: f.Local, Space: f.Space, Hash: f.SHA256, Detail: f.Role + " → " + f.Target})
	}
	return nil
}

// addFile adds one space-relative file, checking it against wantHash when
// given (the bytes the metadata was parsed from).
func (p *planner) addFile(role string, space Space, rel, wantHash string) error {
	key := space.String() + "/" + rel
	if _, dup := p.ship[key]; dup {
		return nil
	}
	root := p.e.byspace[space]
	content, err := fs.ReadFile(root.fsys, rel)
	if err != nil {
		return fmt.Errorf("read %s: %w", root.display(rel), err)
	}
	fi, err := fs.Stat(root.fsys, rel)
	if err != nil {
		return fmt.Errorf("stat %s: %w", root.display(rel), err)
	}
	hash := sha256Hex(content)
	if wantHash != "" && hash != wantHash {
		return fmt.Errorf("%s changed while the plan was made; run the tool again", root.display(rel))
	}
	local, err := p.localDir(space)
	if err != nil {
		return err
	}
	localPath := filepath.Join(local, filepath.FromSlash(rel))
	mode := fi.Mode().Perm()
	if space == SpaceSystem {
		// The written-out copy must still hold the embedded bytes.
		got, err := os.ReadFile(localPath)
		if err != nil || sha256Hex(got) != hash {
			return fmt.Errorf("system file %s no longer matches the copy built into rex; delete %s and run again", localPath, local)
		}
		mode = 0o644
	}
	tp, err := p.targetPath(space, rel)
	if err != nil {
		return err
	}
	p.tr.add(TraceEvent{Step: StepIntegrity, Path: localPath, Space: space, Hash: hash, Verified: boolPtr(true), Detail: role})
	p.ship[key] = len(p.plan.Files)
	p.plan.Files = append(p.plan.Files, ShipFile{Role: role, Space: space, Local: localPath, Rel: key, Target: tp, SHA256: hash, Mode: mode})
	return nil
}

// dependencies walks an active anchor for the files verify_deps selects.
func (p *planner) dependencies() error {
	a := p.anchor
	if a == nil || !a.active {
		return nil
	}
	var vd *VerifyDeps
	for _, el := range p.c.Elements {
		if el.Meta.VerifyDeps != nil {
			vd = el.Meta.VerifyDeps
			break
		}
	}
	if vd == nil || vd.Enabled != nil && !*vd.Enabled {
		return nil
	}
	root := p.e.byspace[a.space]
	recursive := vd.Recursive == nil || *vd.Recursive
	exclude := map[string]bool{}
	for _, d := range vd.ExcludeDirs {
		exclude[d] = true
	}
	exts := map[string]bool{}
	for _, x := range vd.Extensions {
		exts[x] = true
	}
	var anchorReal string
	if root.dir != "" {
		r, err := filepath.EvalSymlinks(filepath.Join(root.dir, filepath.FromSlash(a.rel)))
		if err != nil {
			return fmt.Errorf("anchor %s: %w", root.display(a.rel), err)
		}
		anchorReal = r
	}
	count, total := 0, int64(0)
	err := fs.WalkDir(root.fsys, a.rel, func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel != a.rel && (exclude[d.Name()] || !recursive) {
				return fs.SkipDir
			}
			return nil
		}
		if len(exts) > 0 && !exts[path.Ext(rel)] {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if anchorReal == "" {
				return nil
			}
			real, err := filepath.EvalSymlinks(filepath.Join(root.dir, filepath.FromSlash(rel)))
			if err != nil || !within(anchorReal, real) {
				p.warn("dependency %s is a symlink that leaves the anchor %s; it is not shipped", root.display(rel), root.display(a.rel))
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		fi, err := fs.Stat(root.fsys, rel)
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		count++
		total += fi.Size()
		if count > maxDepFiles || total > maxDepBytes {
			return fmt.Errorf("anchor %s holds more than %d files or %d MiB of dependencies; narrow verify_deps (extensions, exclude_dirs) or add a marker nearer the tool", root.display(a.rel), maxDepFiles, maxDepBytes>>20)
		}
		return p.addFile(RoleDependency, a.space, rel, "")
	})
	if err != nil {
		return fmt.Errorf("collect dependencies: %w", err)
	}
	return nil
}
