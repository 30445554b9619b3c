// Package toolset is the one logical toolset rex offers to models: bash,
// read, write, edit, list, glob, grep, job_output, job_kill and the
// executor chain's tools. No tool has a target parameter: the caller routes
// every call to a target (the operator's /target, `rex ask --target`,
// `rex mcp --target`), as the REXD spec's runtime routing model has it, and
// a call on a group fans out to every member through the same pooled rexd
// sessions and fan-out the console's /run uses.
//
// A call is prepared first (input checked, target expanded to hosts, the
// exact command or diff worked out) so that a consent step can show what
// will happen and where, then run. Results come back as one compact block
// per set of hosts that answered alike, plus a summary line; the full
// output streams to a progress callback as it is produced. Every call runs
// in a rexd session named for the caller (rex-agent, rex-mcp/<client>), so
// rexd's audit log says who acted.
//
// The in-console agent, `rex ask` and `rex mcp` all use this package; none
// of them has tool code of its own.
package toolset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
)

// The tools' names: scripts and MCP clients rely on them.
const (
	Bash      = "bash"
	Read      = "read"
	Write     = "write"
	Edit      = "edit"
	List      = "list"
	Glob      = "glob"
	Grep      = "grep"
	JobOutput = "job_output"
	JobKill   = "job_kill"
)

// Options configure a Toolset.
type Options struct {
	// App reaches targets: its pool, resolver and connect timeout.
	App *commands.App
	// ClientName is the rexd session name calls run under, e.g.
	// "rex-agent" or "rex-mcp/claude-code"; it is what the audit log
	// records. Empty means "rex-agent".
	ClientName string
	// Concurrency bounds the hosts a call reaches at once; 0 is fan-out's
	// default.
	Concurrency int
	// ChainTools offers the executor chain's tools (rex tool list) as
	// tools of their own.
	ChainTools bool
	// DefaultTimeout is how long bash waits before a command moves to the
	// background when the call gives no timeout_s; 0 is 60 s.
	DefaultTimeout time.Duration
	// MaxWait, when set, bounds how long any call holds its caller: a
	// model's timeout_s and job_output's wait_s are cut to it (and
	// DefaultTimeout too). MCP clients give up on a request after their
	// own timeout; a command must move to the background before that, not
	// be cancelled with the request. 0 keeps the limits of the schemas
	// (3600 s and 600 s).
	MaxWait time.Duration
}

// Toolset runs calls. It is safe for concurrent use. Close it to stop the
// commands still running in the background.
type Toolset struct {
	opts   Options
	lim    limits
	ctx    context.Context // jobs live as long as this
	cancel context.CancelFunc

	mu      sync.Mutex
	jobs    map[string]*job
	nextJob int
	wg      sync.WaitGroup
}

// New returns a toolset over opts.App.
func New(opts Options) *Toolset {
	if opts.ClientName == "" {
		opts.ClientName = "rex-agent"
	}
	if opts.DefaultTimeout <= 0 {
		opts.DefaultTimeout = defaultTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Toolset{opts: opts, lim: opts.limits(), ctx: ctx, cancel: cancel, jobs: map[string]*job{}}
}

// ClientName is the name calls run under in rexd sessions.
func (ts *Toolset) ClientName() string { return ts.opts.ClientName }

// Close stops every command still running in the background (their remote
// processes are killed) and waits for them to end.
func (ts *Toolset) Close() error {
	ts.cancel()
	ts.wg.Wait()
	return nil
}

// Call is one invocation of a tool, as a model makes it.
type Call struct {
	Tool string
	// Input is the model's JSON object of arguments.
	Input json.RawMessage
	// Target is where the call goes: a TARGETS expression (a device, a
	// group, local, a list...). The model never chooses it. Empty is local.
	Target string
}

// Action is a call that was checked and routed but has not run: what a
// consent step shows. It runs with Toolset.Run.
type Action struct {
	Tool Tool
	// Target is the TARGETS expression the call goes to; Hosts the names
	// it expands to, in order.
	Target string
	Hosts  []string
	// Command is one line saying exactly what will run: the shell command
	// of bash, "edit PATH", "write 120 bytes to PATH", a chain tool's id
	// and parameters.
	Command string
	// Detail is more for the operator to judge by: the diff of an edit,
	// the start of a write's content; "" when the command says it all.
	Detail string
	// Path is the file a read, write, edit or list is about.
	Path string
	// Stdin is what bash gives the command on its standard input: part
	// of what runs (sh, python3 and mysql run it), for consent's rules.
	Stdin string

	input   any
	targets []fanout.Target
	chainID string
	params  map[string]string
	// reports, when set, are the hosts the result names in place of
	// Hosts: local alone for a tool rex calls once itself.
	reports []string
}

// reported are the hosts a call's result names.
func (a *Action) reported() []string {
	if a.reports != nil {
		return a.reports
	}
	return a.Hosts
}

// Key identifies the whole call, for a grant that covers "this exact
// call" on other hosts: its command and all of its input (the content of
// a write, the text of an edit, a command's stdin), which Command and
// Detail only sum up. How long a call is waited for is not part of it.
func (a *Action) Key() string {
	in := a.input
	if b, ok := in.(*BashInput); ok {
		c := *b
		c.TimeoutS = 0
		in = &c
	}
	if a.chainID != "" {
		in = a.params
	}
	raw, _ := json.Marshal(in)
	return a.Tool.Name + "\x00" + a.Command + "\x00" + string(raw)
}

// HostsFolded is the host list as TARGETS writes it (db2,web[1-3]).
func (a *Action) HostsFolded() string { return devices.Fold(a.Hosts) }

// EventKind says what an Event reports.
type EventKind int

const (
	// EventStart: the call started; Hosts are the hosts it reaches.
	EventStart EventKind = iota
	// EventOutput: Host wrote Data (Stderr says which stream).
	EventOutput
	// EventHostDone: Host is done; Status says how ("exit 0", "ok",
	// "unreachable"), OK whether that counts as success, and Result is
	// its end as a fan-out result (for panes that show /run's).
	EventHostDone
	// EventBackground: the command outlived its timeout and goes on as
	// JobID; its events keep coming until it ends.
	EventBackground
	// EventDone: the call (or background job JobID) has ended.
	EventDone
)

// Event is progress of a call, for panes and progress notifications. For
// a call that moved to the background, events go on after Run returned,
// until EventDone.
type Event struct {
	Kind   EventKind
	Tool   string
	JobID  string
	Hosts  []string
	Host   string
	Data   []byte
	Stderr bool
	Status string
	OK     bool
	Result *fanout.Result
}

// Result is how a call ended.
type Result struct {
	// Text is what the model reads: the target and hosts, one block per
	// set of hosts that ended alike (status, then the head and tail of
	// their output), and the summary line.
	Text string
	// IsError is set when the call could not run or no host succeeded.
	IsError bool
	Target  string
	Hosts   []string
	// Summary is the last line of Text: "3/4 ok; db2 exit 1".
	Summary string
	PerHost []HostResult
	// JobID is set when a command goes on in the background; Running says
	// it has not ended yet.
	JobID   string
	Running bool
}

// HostResult is one host's part of a Result.
type HostResult struct {
	Host     string
	OK       bool
	Status   string
	ExitCode *int
	// Output is what the model saw of this host's output.
	Output string
}

// errorResult is a call that failed as a whole, told in one sentence.
func errorResult(target string, err error) *Result {
	msg := err.Error()
	return &Result{Text: msg, IsError: true, Target: target, Summary: msg}
}

// ErrorResult is the Result of a call that could not run, for front ends
// that refuse a call (denied, unknown tool) in the same shape.
func ErrorResult(target string, err error) *Result { return errorResult(target, err) }

// Tools lists every tool: the built-in ones, then (with ChainTools) the
// executor chain's. A chain tool list that cannot be read is left out and
// its reason returned beside the built-ins.
func (ts *Toolset) Tools() ([]Tool, error) {
	tools := builtinTools(ts.lim)
	if !ts.opts.ChainTools {
		return tools, nil
	}
	ct, err := ts.chainTools()
	return append(tools, ct...), err
}

// Lookup finds a tool by name.
func (ts *Toolset) Lookup(name string) (Tool, bool) {
	for _, t := range builtinTools(ts.lim) {
		if t.Name == name {
			return t, true
		}
	}
	if ts.opts.ChainTools && name != "" {
		ct, _ := ts.chainTools()
		for _, t := range ct {
			if t.Name == name {
				return t, true
			}
		}
	}
	return Tool{}, false
}

// Prepare checks a call's input and routes it: the tool exists, the input
// fits its schema, the target resolves to hosts. The error is one
// sentence for the model.
func (ts *Toolset) Prepare(ctx context.Context, c Call) (*Action, error) {
	tool, ok := ts.Lookup(c.Tool)
	if !ok {
		return nil, fmt.Errorf("there is no tool %q; the tools are %s", c.Tool, strings.Join(ts.names(), ", "))
	}
	if err := tool.validate(c.Input); err != nil {
		return nil, fmt.Errorf("%s: %w", tool.Name, err)
	}
	a := &Action{Tool: tool, Target: c.Target}
	if a.Target == "" {
		a.Target = commands.LocalName
	}
	if tool.Name != JobOutput && tool.Name != JobKill {
		targets, err := ts.opts.App.Resolve(a.Target)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", a.Target, err)
		}
		if len(targets) == 0 {
			return nil, fmt.Errorf("target %s names no hosts", a.Target)
		}
		a.targets = targets
		for _, t := range targets {
			a.Hosts = append(a.Hosts, t.Name)
		}
	}
	if err := ts.prepare(ctx, a, c.Input); err != nil {
		return nil, fmt.Errorf("%s: %w", tool.Name, err)
	}
	return a, nil
}

// Run runs a prepared call. progress, which may be nil, receives the
// call's events from several goroutines, one host's in order.
func (ts *Toolset) Run(ctx context.Context, a *Action, progress func(Event)) *Result {
	if progress == nil {
		progress = func(Event) {}
	}
	var r *Result
	switch a.Tool.Name {
	case Bash:
		r = ts.runBash(ctx, a, progress)
	case Read, Write, Edit, List, Glob:
		r = ts.runFS(ctx, a, progress)
	case Grep:
		r = ts.runGrep(ctx, a, progress)
	case JobOutput:
		r = ts.jobOutput(ctx, a)
	case JobKill:
		r = ts.jobKill(ctx, a)
	default:
		r = ts.runChain(ctx, a, progress)
	}
	r.Target = a.Target
	if r.Hosts == nil {
		r.Hosts = a.Hosts
	}
	return r
}

// Do prepares and runs a call without asking anyone: a call that cannot
// be prepared is an error result.
func (ts *Toolset) Do(ctx context.Context, c Call, progress func(Event)) *Result {
	a, err := ts.Prepare(ctx, c)
	if err != nil {
		return errorResult(c.Target, err)
	}
	return ts.Run(ctx, a, progress)
}

func (ts *Toolset) names() []string {
	tools, _ := ts.Tools()
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return names
}

// fanOpts are the fan-out options of a call.
func (ts *Toolset) fanOpts(onEvent func(fanout.Event)) fanout.Options {
	return fanout.Options{
		Concurrency:    ts.opts.Concurrency,
		ConnectTimeout: ts.opts.App.ConnectTimeout,
		ClientName:     ts.opts.ClientName,
		OnEvent:        onEvent,
	}
}

// errCancelled is the end of a call the operator stopped.
var errCancelled = errors.New("cancelled by the operator")
