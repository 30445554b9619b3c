package commands

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/chain"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/secrets"
)

// ToolUsage is the synopsis of `rex tool`.
const ToolUsage = `usage:
  rex tool list [--all]
  rex tool show ID [--trace]
  rex tool new ID [--runtime sh|bash|python|node|RUNTIME_ID] [--user]
  rex tool check ID
  rex tool run ID [--param K=V]... [--target TARGETS] [-x NAMES] [--json] [--trace] [--connect-timeout D]`

// ToolRunUsage is the synopsis of `rex tool run`.
const ToolRunUsage = "rex tool run ID [--param K=V]... [--target TARGETS] [-x NAMES] [--json] [--trace]"

// engine builds the executor chain engine for the working directory
// (App.WorkDir).
func (app *App) engine() (*chain.Engine, error) {
	wd, err := app.workDir()
	if err != nil {
		return nil, err
	}
	project, err := chain.FindProjectRoot(wd)
	if err != nil {
		return nil, err
	}
	opts := chain.Options{ProjectRoot: project, UserRoot: app.ConfigDir}
	if app.CacheDir != "" {
		opts.SystemDir = path.Join(app.CacheDir, "chain")
	}
	return chain.New(opts)
}

// Tool is `rex tool ARGS...` as the console's /tool gets it.
func Tool(ctx context.Context, app *App, o IO, args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprintln(o.Out, ToolUsage)
		return nil
	}
	helpOr := func(err error) error {
		if errors.Is(err, ErrHelp) {
			fmt.Fprintln(o.Out, ToolUsage)
			return nil
		}
		return err
	}
	switch args[0] {
	case "list":
		var spec ToolListSpec
		pos, err := ParseFlags("tool list", args[1:], spec.Bind)
		if err != nil {
			return helpOr(err)
		}
		if len(pos) > 0 {
			return Usagef("rex tool list takes no arguments")
		}
		return ToolList(app, o, spec)
	case "new":
		var spec ToolNewSpec
		pos, err := ParseFlags("tool new", args[1:], spec.Bind)
		if err != nil {
			return helpOr(err)
		}
		if err := spec.Args(pos); err != nil {
			return err
		}
		return ToolNew(app, o, spec)
	case "check":
		var spec ToolCheckSpec
		pos, err := ParseFlags("tool check", args[1:], func(*pflag.FlagSet) {})
		if err != nil {
			return helpOr(err)
		}
		if err := spec.Args(pos); err != nil {
			return err
		}
		return ToolCheck(ctx, app, o, spec)
	case "show":
		var spec ToolShowSpec
		pos, err := ParseFlags("tool show", args[1:], spec.Bind)
		if err != nil {
			return helpOr(err)
		}
		if err := spec.Args(pos); err != nil {
			return err
		}
		return ToolShow(app, o, spec)
	case "run":
		return helpOr(toolRun(ctx, app, o, args[1:]))
	}
	return Usagef("unknown tool verb %q\n%s", args[0], ToolUsage)
}

// ToolListSpec is a parsed `rex tool list`.
type ToolListSpec struct {
	// All shows runtimes, the primitive and shadowed files too.
	All bool
}

// Bind declares the flags of `rex tool list`.
func (s *ToolListSpec) Bind(fs *pflag.FlagSet) {
	fs.BoolVarP(&s.All, "all", "a", false, "also list runtimes, the primitive and files shadowed by a higher space")
}

// ToolList is `rex tool list`: the tools (what `tool run` takes); with
// --all, also what they are built on.
func ToolList(app *App, o IO, spec ToolListSpec) error {
	eng, err := app.engine()
	if err != nil {
		return err
	}
	return toolList(eng, o, spec.All)
}

// ToolShowSpec is a parsed `rex tool show`.
type ToolShowSpec struct {
	ID    string
	Trace bool
}

// Bind declares the flags of `rex tool show`.
func (s *ToolShowSpec) Bind(fs *pflag.FlagSet) {
	fs.BoolVar(&s.Trace, "trace", false, "show how each element of the chain was found")
}

// Args reads the tool id.
func (s *ToolShowSpec) Args(args []string) error {
	if len(args) != 1 {
		return Usagef("which tool? usage: rex tool show ID [--trace]")
	}
	s.ID = args[0]
	return nil
}

// ToolShow is `rex tool show`: the tool's chain, and whether it is valid.
func ToolShow(app *App, o IO, spec ToolShowSpec) error {
	eng, err := app.engine()
	if err != nil {
		return err
	}
	return toolShow(eng, o, spec.ID, spec.Trace)
}

func toolList(eng *chain.Engine, o IO, all bool) error {
	items, err := eng.List()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	if all {
		fmt.Fprintln(tw, "ID\tSPACE\tKIND\tVERSION\tDESCRIPTION")
	} else {
		fmt.Fprintln(tw, "ID\tSPACE\tVERSION\tDESCRIPTION")
	}
	hidden := 0
	for _, it := range items {
		if !all && (it.ShadowedBy != nil || it.Kind != chain.KindTool) {
			if it.ShadowedBy == nil {
				hidden++
			}
			continue
		}
		desc := it.Description
		switch {
		case it.Problem != "":
			desc = "(unusable: " + it.Problem + ")"
		case it.ShadowedBy != nil:
			desc = "(shadowed by " + it.ShadowedBy.Path + ")"
		case len(it.Shadows) > 0:
			desc += fmt.Sprintf(" [shadows %d]", len(it.Shadows))
		}
		if all {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", it.ID, it.Space, it.Kind, it.Version, desc)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.ID, it.Space, it.Version, desc)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if hidden > 0 {
		fmt.Fprintf(o.Err, "%d runtime(s) and primitive(s) not shown; rex tool list --all lists them\n", hidden)
	}
	return nil
}

func toolShow(eng *chain.Engine, o IO, id string, trace bool) error {
	res, err := eng.Show(id, trace)
	if err != nil {
		return err
	}
	el := res.Chain.Tool()
	head := el.ID
	if el.Meta.Version != "" {
		head += " " + el.Meta.Version
	}
	fmt.Fprintf(o.Out, "%s (%s %s)\n", head, el.Space, el.Kind)
	if res.NotRunnable != nil {
		fmt.Fprintf(o.Out, "  %s\n", res.NotRunnable)
	}
	if el.Meta.Description != "" {
		fmt.Fprintf(o.Out, "  %s\n", el.Meta.Description)
	}
	fmt.Fprintf(o.Out, "  file: %s\n", el.Path)
	if res.NotRunnable == nil {
		fmt.Fprintln(o.Out, "\nparameters:")
		if len(res.Params) == 0 {
			fmt.Fprintln(o.Out, "  none")
		} else {
			tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  NAME\tTYPE\tDEFAULT\tREQUIRED\tALLOWED\tDESCRIPTION")
			for _, p := range res.Params {
				def, allowed := "-", "-"
				if p.Default != nil {
					def = jsonValueText(p.Default)
				}
				if len(p.Enum) > 0 {
					parts := make([]string, len(p.Enum))
					for i, e := range p.Enum {
						parts[i] = jsonValueText(e)
					}
					allowed = strings.Join(parts, "|")
				}
				req := "no"
				if p.Required {
					req = "yes"
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Type, def, req, allowed, p.Description)
			}
			tw.Flush()
		}
		if len(res.Secrets) > 0 {
			fmt.Fprintf(o.Out, "\nsecrets (as environment variables): %s\n", strings.Join(res.Secrets, ", "))
		}
		fmt.Fprintf(o.Out, "\nexample:\n  %s\n", res.Example())
	}
	fmt.Fprintln(o.Out, "\nchain:")
	for i, el := range res.Chain.Elements {
		fmt.Fprintf(o.Out, "  %d. %s %s (%s) %s\n", i+1, el.Kind, el.ID, el.Space, el.Path)
		for _, sh := range el.Shadowed {
			fmt.Fprintf(o.Out, "       shadows %s\n", sh.Path)
		}
	}
	if res.Trace != nil {
		res.Trace.WriteText(o.Out)
	}
	if len(res.Problems) > 0 {
		for _, p := range res.Problems {
			fmt.Fprintf(o.Err, "invalid: %s\n", p.Message)
		}
		return &ExitError{Code: 1, Err: fmt.Errorf("the chain of %s is invalid", id)}
	}
	fmt.Fprintln(o.Out, "valid")
	return nil
}

// jsonValueText renders a schema value: strings bare, the rest as JSON.
func jsonValueText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// ToolRunSpec is a parsed `rex tool run`.
type ToolRunSpec struct {
	ID     string
	Params map[string]string
	// Targets is the --target list, "" when none was given (the command
	// line then runs on local, the console on its current target).
	Targets string
	TargetFlags
	Trace          bool
	ConnectTimeout time.Duration
	// JSON asks the tool for JSON (REX_OUTPUT=json in its environment)
	// and prints one JSON object per target.
	JSON bool
	Sudo bool

	params []string
}

// Bind declares the flags of `rex tool run`.
func (r *ToolRunSpec) Bind(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&r.params, "param", "p", nil, "set the tool's parameter (KEY=VALUE; repeatable)")
	r.TargetFlags.Bind(fs)
	fs.BoolVar(&r.Trace, "trace", false, "print how the executor chain resolved the tool on each target")
	fs.BoolVar(&r.JSON, "json", false, "ask the tool for JSON and print one JSON object per target")
	BindConnectTimeout(fs, &r.ConnectTimeout)
	BindSudo(fs, &r.Sudo)
}

// Args reads the tool id from the positionals and checks the flags.
func (r *ToolRunSpec) Args(args []string) error {
	r.Params = map[string]string{}
	for _, v := range r.params {
		k, pv, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return Usagef("--param %q: want KEY=VALUE", v)
		}
		r.Params[k] = pv
	}
	switch {
	case len(args) == 0:
		return Usagef("which tool? usage: %s", ToolRunUsage)
	case len(args) > 1:
		return Usagef("unexpected %q; usage: %s", args[1], ToolRunUsage)
	}
	r.ID = args[0]
	if r.Target != "" || len(r.Exclude) > 0 {
		r.Targets = r.TargetFlags.Spec("")
	}
	return nil
}

// ParseToolRun reads the arguments of `rex tool run` (after "run").
func ParseToolRun(args []string) (ToolRunSpec, error) {
	var r ToolRunSpec
	pos, err := ParseFlags("tool run", args, r.Bind)
	if err != nil {
		return r, err
	}
	return r, r.Args(pos)
}

func toolRun(ctx context.Context, app *App, o IO, args []string) error {
	spec, err := ParseToolRun(args)
	if err != nil {
		return err
	}
	return ToolRun(ctx, app, o, spec)
}

// ToolRun is `rex tool run`: the tool on its targets (local when none
// are named), output prefixed as `rex run` prints it.
func ToolRun(ctx context.Context, app *App, o IO, spec ToolRunSpec) error {
	if spec.ConnectTimeout > 0 {
		app.ConnectTimeout = spec.ConnectTimeout
	}
	if spec.Targets == "" {
		spec.Targets = LocalName
	}
	targets, err := app.Resolve(spec.Targets)
	if err != nil {
		return err
	}
	if spec.Sudo {
		targets = WithSudo(targets)
	}
	var traceMu sync.Mutex
	onTrace := func(target, text string) {
		traceMu.Lock()
		defer traceMu.Unlock()
		fmt.Fprintf(o.Err, "trace for %s:\n%s", target, text)
	}
	// A state graph shows its nodes' targets (node@target) and says how
	// each node ends.
	display, err := GraphTargets(app, spec, targets)
	if err != nil {
		return err
	}
	onNode := func(ev NodeEvent) {
		traceMu.Lock()
		defer traceMu.Unlock()
		switch ev.State {
		case "running":
			fmt.Fprintf(o.Err, "graph: %s (%s on %s)\n", ev.Node, ev.Tool, devices.Fold(ev.Targets))
		case "skipped":
			fmt.Fprintf(o.Err, "graph: %s skipped\n", ev.Node)
		default:
			fmt.Fprintf(o.Err, "graph: %s %s, %s\n", ev.Node, ev.State, ev.Result)
		}
	}
	var results []fanout.EachResult
	if spec.JSON {
		// One JSON object per target, printed as each ends.
		var outMu sync.Mutex
		col := NewToolCollector(display, func(r ToolResult) {
			b, _ := json.Marshal(r)
			outMu.Lock()
			defer outMu.Unlock()
			fmt.Fprintf(o.Out, "%s\n", b)
		})
		results, err = RunTool(ctx, app, spec, targets, ToolRunOptions{OnEvent: col.Event, OnTrace: onTrace, OnNode: onNode})
		if err != nil {
			return err
		}
		return exitOfResults(results, nil)
	}
	sink := newPrefixSink(o, display)
	results, err = RunTool(ctx, app, spec, targets, ToolRunOptions{
		OnNode: onNode,
		OnEvent: func(ev fanout.Event) {
			if ev.Kind == fanout.EventResult {
				// Finish the target's last lines; its error is printed
				// once, with the others, below.
				ev.Result = &fanout.Result{Target: ev.Target}
			}
			sink.event(ev)
		},
		OnTrace: onTrace,
	})
	sink.finish(nil)
	if err != nil {
		return err
	}
	return exitOfResults(results, o.Err)
}

// exitOfResults is a tool run's exit status: the highest exit code, 255
// when a target was unreachable, 1 when one could not run the tool. With
// w set, why each target failed is printed there.
func exitOfResults(results []fanout.EachResult, w io.Writer) error {
	say := func(r fanout.EachResult) {
		if w != nil {
			fmt.Fprintf(w, "%s! %v\n", r.Target, r.Err)
		}
	}
	code := 0
	for _, r := range results {
		var ee *ExitError
		switch {
		case r.Err == nil:
		case errors.As(r.Err, &ee):
			if ee.Code > code && code != 255 {
				code = ee.Code
			}
		case r.Unreachable:
			say(r)
			code = 255
		default:
			say(r)
			if code == 0 {
				code = 1
			}
		}
	}
	if code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// OutputEnv is set to "json" in a tool's environment when the caller asked
// for JSON (rex tool run --json, the console's table of a group run).
const OutputEnv = "REX_OUTPUT"

// ToolRunOptions let a front end watch a tool run; both may be nil. They
// are called from one goroutine per target at once.
type ToolRunOptions struct {
	// OnEvent receives each target's events as fanout.Run sends them:
	// EventStart when the tool starts, its output, and one EventResult
	// for every target (also one that could not be reached or planned).
	OnEvent func(fanout.Event)
	// OnTrace receives a target's trace (spec.Trace) before its tool runs.
	OnTrace func(target, text string)
	// OnNode follows a state-graph tool's walk, node by node; its events
	// come with node@target names (see GraphTargets).
	OnNode func(NodeEvent)
	// ClientName names the rexd sessions remote targets run in (see
	// fanout.Options.ClientName); "" is the operator's own.
	ClientName string
	// Confine keeps a state graph's nodes on the targets given: a node
	// whose own target reaches another host fails. An agent's call runs
	// where the operator consented, never where a graph parameter the
	// model filled in points.
	Confine bool
}

// RunTool is `rex tool run` after its arguments: the tool planned for and
// run on every target at once, its files shipped through the object
// store to remote ones. Each target's end is in its result, in the order
// of targets: nil, an *ExitError with the tool's exit status, or why it
// could not run. The error is for what stops every target.
func RunTool(ctx context.Context, app *App, spec ToolRunSpec, targets []fanout.Target, opts ToolRunOptions) ([]fanout.EachResult, error) {
	eng, err := app.engine()
	if err != nil {
		return nil, err
	}
	emit := opts.OnEvent
	if emit == nil {
		emit = func(fanout.Event) {}
	}
	// What stops every target is found before any starts: an id that is
	// not a tool, or a secret the tool or a device needs that is not set.
	c, err := eng.Chain(spec.ID, nil)
	if err != nil {
		return nil, err
	}
	if err := c.Runnable(); err != nil {
		return nil, err
	}
	if err := c.CheckParams(spec.Params); err != nil {
		// The operator's mistake, said once, before any target is
		// reached; it was said by every target, as a failure of each.
		return nil, &UsageError{Msg: err.Error()}
	}
	if c.Elements[len(c.Elements)-1].ID == chain.PrimitiveStateGraph {
		return runGraph(ctx, app, eng, spec, targets, opts)
	}
	if c.MCPTransport() == "http" {
		return runHTTPMCP(ctx, app, eng, c, spec, targets, opts)
	}
	needs := c.Secrets()
	devSecrets := map[string][]string{}
	for _, t := range targets {
		names, err := deviceSecrets(t)
		if err != nil {
			return nil, err
		}
		devSecrets[t.Name] = names
		needs = append(needs, names...)
	}
	values, err := secretValues(app, "tool "+spec.ID, needs)
	if err != nil {
		return nil, err
	}
	// Every value is masked in every target's output.
	mask := valuesOf(values)
	runOn := func(ctx context.Context, t fanout.Target, ct chain.Target, root string, ship func(*chain.Plan) error) error {
		plan, err := eng.Plan(ctx, chain.PlanRequest{ID: spec.ID, Params: spec.Params, Target: ct, TargetRoot: root, Trace: spec.Trace, Secrets: devSecrets[t.Name]})
		if err != nil {
			return err
		}
		if spec.Trace && plan.Trace != nil && opts.OnTrace != nil {
			var b strings.Builder
			plan.Trace.WriteText(&b)
			opts.OnTrace(t.Name, secrets.Mask(b.String(), mask))
		}
		if ship != nil {
			if err := ship(plan); err != nil {
				return err
			}
		}
		extra := map[string]string{}
		for _, n := range plan.Secrets {
			extra[n] = values[n]
		}
		if spec.JSON {
			extra[OutputEnv] = "json"
		}
		emit(fanout.Event{Target: t.Name, Kind: fanout.EventStart})
		out := secrets.NewMasker(&eventWriter{emit: emit, target: t.Name, kind: fanout.EventStdout}, mask)
		errw := secrets.NewMasker(&eventWriter{emit: emit, target: t.Name, kind: fanout.EventStderr}, mask)
		var code int
		if plan.Kind == chain.PlanMCP {
			code, err = runMCP(ctx, plan, ct, extra, spec.JSON, out, errw)
		} else {
			code, err = chain.RunWith(ctx, plan, ct, extra, out, errw)
		}
		out.Flush()
		errw.Flush()
		if err != nil {
			return errors.New(secrets.Mask(err.Error(), mask))
		}
		if code != 0 {
			return &ExitError{Code: code, Err: fmt.Errorf("exit %d", code)}
		}
		return nil
	}
	result := func(r fanout.EachResult) { emitResult(emit, r) }
	// Every target runs the tool through its rexd, local too: consent is
	// the front end's, the audit log rexd's, under opts.ClientName.
	// Local's rexd runs as the operator on this machine, so the plan uses
	// the tool's files where they are; elsewhere (sudo on local included)
	// they are shipped through the object store.
	var st *cas.Store
	for _, t := range targets {
		if _, ok := t.Spec.(LocalSpec); !ok {
			if st, err = app.openStore(); err != nil {
				return nil, err
			}
			break
		}
	}
	results := fanout.Each(ctx, app.Pool, targets, fanout.Options{ConnectTimeout: app.ConnectTimeout, ClientName: opts.ClientName},
		func(ctx context.Context, t fanout.Target, s *rexclient.Session) error {
			ct := &SessionTarget{TargetName: t.Name, S: s}
			start := time.Now()
			var err error
			if _, ok := t.Spec.(LocalSpec); ok {
				err = runOn(ctx, t, ct, "", nil)
			} else {
				root := toolRoot(s, spec.ID)
				err = runOn(ctx, t, ct, root, func(p *chain.Plan) error { return shipPlan(ctx, st, s, t.Name, p, root) })
			}
			result(fanout.EachResult{Target: t.Name, Err: err, Duration: time.Since(start)})
			return err
		})
	for _, r := range results {
		if r.Unreachable || r.Cancelled {
			result(r) // fn never ran
		}
	}
	return results, nil
}

// emitResult tells a front end how a target ended.
func emitResult(emit func(fanout.Event), r fanout.EachResult) {
	res := &fanout.Result{Target: r.Target, Err: r.Err, Unreachable: r.Unreachable, Duration: r.Duration}
	var ee *ExitError
	switch {
	case r.Err == nil:
		res.ExitCode = new(int)
	case errors.As(r.Err, &ee):
		code := ee.Code
		res.ExitCode, res.Err = &code, nil
	}
	emit(fanout.Event{Target: r.Target, Kind: fanout.EventResult, Result: res})
}

// ToolIDs lists the tools a `tool run` can name (runtimes and primitives
// left out), for completion.
func ToolIDs(app *App) ([]string, error) {
	eng, err := app.engine()
	if err != nil {
		return nil, err
	}
	items, err := eng.List()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, it := range items {
		if it.ShadowedBy == nil && it.Kind == chain.KindTool && it.Problem == "" {
			ids = append(ids, it.ID)
		}
	}
	return ids, nil
}

// ToolInfo describes a tool a run can name.
type ToolInfo struct {
	ID          string
	Description string
	// Schema is the tool's CONFIG_SCHEMA (a JSON Schema of its
	// parameters); nil when it declares none.
	Schema map[string]any
	// Once is set for a tool rex calls itself from this machine (an MCP
	// tool over HTTP): it runs once, whatever the target, and reports as
	// local.
	Once bool
}

// ToolInfos lists the usable tools with their parameter schemas, for the
// agent's toolset, which offers each one to models.
func ToolInfos(app *App) ([]ToolInfo, error) {
	eng, err := app.engine()
	if err != nil {
		return nil, err
	}
	items, err := eng.List()
	if err != nil {
		return nil, err
	}
	var out []ToolInfo
	for _, it := range items {
		if it.ShadowedBy != nil || it.Kind != chain.KindTool || it.Problem != "" {
			continue
		}
		c, err := eng.Chain(it.ID, nil)
		if err != nil {
			continue // an unusable chain is not offered
		}
		out = append(out, ToolInfo{ID: it.ID, Description: it.Description, Schema: c.Tool().Meta.ConfigSchema, Once: c.MCPTransport() == "http"})
	}
	return out, nil
}

// eventWriter turns a tool's output into run events.
type eventWriter struct {
	emit   func(fanout.Event)
	target string
	kind   fanout.EventKind
}

func (w *eventWriter) Write(p []byte) (int, error) {
	w.emit(fanout.Event{Target: w.target, Kind: w.kind, Data: append([]byte(nil), p...)})
	return len(p), nil
}

// toolRoot is where a tool's files live on a remote target: one directory
// per tool id under the target user's cache.
func toolRoot(s *rexclient.Session, id string) string {
	// A session starts in the home directory when its roots hold it (a
	// root of "/" included), else in its first root.
	home := s.Info.Cwd
	if home == "" && len(s.Info.WorkspaceRoots) > 0 {
		home = s.Info.WorkspaceRoots[0]
	}
	sum := sha256.Sum256([]byte(id))
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, id)
	return path.Join(home, ".cache", "rex", "tools", safe+"-"+hex.EncodeToString(sum[:4]))
}

// shipPlan pushes the plan's files through the object store and writes them
// at root on the target, so only what the target lacks crosses the wire.
func shipPlan(ctx context.Context, st *cas.Store, s *rexclient.Session, target string, p *chain.Plan, root string) error {
	if !s.HasCAS() {
		return errNoCAS(target)
	}
	tree, err := treeOfFiles(st, p.Files)
	if err != nil {
		return err
	}
	// The tool's directory holds exactly its files: replaced whole.
	if _, _, err := PushTree(ctx, st, s, target, tree, root, PushOptions{Atomic: true}); err != nil {
		return fmt.Errorf("ship the tool's files: %w", err)
	}
	return nil
}

// treeOfFiles stores the files of a plan as a tree laid out by their Rel
// paths, with an empty project/ directory at least (the plan's cwd).
func treeOfFiles(st *cas.Store, files []chain.ShipFile) (cas.Digest, error) {
	type dir struct {
		entries map[string]cas.Entry
		subdirs map[string]*dir
	}
	newDir := func() *dir { return &dir{entries: map[string]cas.Entry{}, subdirs: map[string]*dir{}} }
	top := newDir()
	top.subdirs["project"] = newDir()
	for _, f := range files {
		data, err := os.ReadFile(f.Local)
		if err != nil {
			return cas.Digest{}, fmt.Errorf("read %s: %w", f.Local, err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != f.SHA256 {
			return cas.Digest{}, fmt.Errorf("%s changed while the tool was being planned; run it again", f.Local)
		}
		d, err := st.Add(data)
		if err != nil {
			return cas.Digest{}, err
		}
		parts := strings.Split(f.Rel, "/")
		cur := top
		for _, p := range parts[:len(parts)-1] {
			if cur.subdirs[p] == nil {
				cur.subdirs[p] = newDir()
			}
			cur = cur.subdirs[p]
		}
		name := parts[len(parts)-1]
		cur.entries[name] = cas.Entry{Name: name, Type: cas.EntryFile, Digest: d, Executable: f.Mode&0o111 != 0}
	}
	var build func(d *dir) (cas.Digest, error)
	build = func(d *dir) (cas.Digest, error) {
		var t cas.Tree
		for name, sub := range d.subdirs {
			sd, err := build(sub)
			if err != nil {
				return cas.Digest{}, err
			}
			t.Entries = append(t.Entries, cas.Entry{Name: name, Type: cas.EntryDir, Digest: sd})
		}
		for _, e := range d.entries {
			t.Entries = append(t.Entries, e)
		}
		sort.Slice(t.Entries, func(i, j int) bool { return t.Entries[i].Name < t.Entries[j].Name })
		return st.PutTree(t)
	}
	return build(top)
}

// SessionTarget is a chain.Target on a rexd session: the executor chain's
// probes and runs go through exec.start with argv, never a shell string
// built from values.
type SessionTarget struct {
	TargetName string
	S          *rexclient.Session

	once sync.Once
	env  map[string]string
	err  error
}

var _ chain.Target = (*SessionTarget)(nil)

// Name implements chain.Target.
func (t *SessionTarget) Name() string { return t.TargetName }

func (t *SessionTarget) capture(ctx context.Context, argv ...string) (string, int, error) {
	var out bytes.Buffer
	empty := ""
	p, err := t.S.Exec(ctx, protocol.ExecStartParams{Argv: argv, Stdin: &empty}, rexclient.ExecOptions{Stdout: &out})
	if err != nil {
		return "", -1, err
	}
	exit, err := p.Wait(ctx)
	if err != nil {
		return "", -1, err
	}
	code := 1
	if exit.ExitCode != nil {
		code = *exit.ExitCode
	}
	return out.String(), code, nil
}

// Environ implements chain.Target.
func (t *SessionTarget) Environ(ctx context.Context) (map[string]string, error) {
	t.once.Do(func() {
		out, code, err := t.capture(ctx, "env", "-0")
		if err != nil || code != 0 {
			t.err = fmt.Errorf("read the environment of %s: %v", t.TargetName, err)
			return
		}
		t.env = map[string]string{}
		for _, kv := range strings.Split(out, "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
				t.env[k] = v
			}
		}
	})
	return t.env, t.err
}

// Stat implements chain.Target with rexd's fs.stat, which follows
// symlinks within the session's roots; a path outside them is asked of
// test(1), a program, never a shell (rexd may refuse shells).
func (t *SessionTarget) Stat(ctx context.Context, p string) (chain.FileInfo, error) {
	res, err := t.S.Stat(ctx, p)
	if err == nil {
		if !res.Exists {
			return chain.FileInfo{}, nil
		}
		fi := chain.FileInfo{Exists: true, IsDir: res.Type == protocol.TypeDir, Mode: 0o644}
		if m, perr := strconv.ParseUint(res.Mode, 8, 32); perr == nil {
			fi.Mode = os.FileMode(m)
		}
		if fi.IsDir {
			fi.Mode |= os.ModeDir
		}
		return fi, nil
	}
	test := func(flag string) (bool, error) {
		_, code, err := t.capture(ctx, "test", flag, p)
		return code == 0, err
	}
	exists, terr := test("-e")
	if terr != nil {
		return chain.FileInfo{}, fmt.Errorf("stat %s: %v; and test(1): %w", p, err, terr)
	}
	if !exists {
		return chain.FileInfo{}, nil
	}
	fi := chain.FileInfo{Exists: true, Mode: 0o644}
	if d, _ := test("-d"); d {
		fi.IsDir, fi.Mode = true, 0o755|os.ModeDir
	} else if x, _ := test("-x"); x {
		fi.Mode = 0o755
	}
	return fi, nil
}

// LookPath implements chain.Target on top of Stat.
func (t *SessionTarget) LookPath(ctx context.Context, name, pathList string) (string, error) {
	found, err := chain.LookPathWithStat(ctx, t.Stat, name, pathList)
	if err != nil {
		if errors.Is(err, chain.ErrNotFound) {
			return "", fmt.Errorf("%s on %s: %w", name, t.TargetName, chain.ErrNotFound)
		}
		return "", err
	}
	return found, nil
}

// Run implements chain.Target.
func (t *SessionTarget) Run(ctx context.Context, req chain.RunRequest) (chain.RunResult, error) {
	stdin := string(req.Stdin)
	p := protocol.ExecStartParams{Argv: req.Argv, Env: req.Env, Cwd: req.Cwd}
	d, enc := protocol.EncodeData(req.Stdin)
	stdin, p.StdinEncoding = d, enc
	p.Stdin = &stdin
	if req.Timeout > 0 {
		p.TimeoutMS = req.Timeout.Milliseconds()
	}
	proc, err := t.S.Exec(ctx, p, rexclient.ExecOptions{Stdout: req.Stdout, Stderr: req.Stderr})
	if err != nil {
		return chain.RunResult{}, err
	}
	exit, err := proc.Wait(ctx)
	if err != nil {
		if ctx.Err() != nil {
			proc.Kill(context.Background(), "TERM")
		}
		return chain.RunResult{}, err
	}
	if errs := proc.Errors(); len(errs) > 0 && exit.ExitCode != nil && (*exit.ExitCode == 127 || *exit.ExitCode == 126) {
		return chain.RunResult{}, errors.New(errs[0].Message)
	}
	res := chain.RunResult{TimedOut: exit.TimedOut}
	switch {
	case exit.ExitCode != nil:
		res.ExitCode = *exit.ExitCode
	case exit.Signal != nil:
		res.Signal = *exit.Signal
		res.ExitCode = exitStatus(exit)
	}
	return res, nil
}
