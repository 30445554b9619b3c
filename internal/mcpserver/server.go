// Package mcpserver is `rex mcp`: the toolset of the in-console agent
// (internal/toolset: bash, read, write, edit, list, glob, grep, job_output,
// job_kill and the executor chain's tools) served to any MCP client over
// the official go-sdk, plus `targets`, `use_target` (opt-in) and resources
// for the registry and for files.
//
// The model never names a host. Every call goes to the target the operator
// chose: --target, else the console's current target when a rex server
// runs for this user (Options.ConsoleTarget), else local. While a command
// runs its output streams to the client as progress notifications (when
// the request carries a progress token) and as log messages; a command
// that outlives its wait moves to the background as a job. Every call runs
// in a rexd session named rex-mcp/<client name>, so each host's audit log
// says which client acted. Failures are tool results with isError set and
// one sentence, never protocol errors.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/toolset"
	"github.com/rexconsole/rex/internal/version"
)

// Names of the tools rex mcp adds to the toolset's.
const (
	Targets   = "targets"
	UseTarget = "use_target"
)

// ClientPrefix starts the rexd client name of every call: the audit log
// records rex-mcp/<the MCP client's name>.
const ClientPrefix = "rex-mcp/"

// DefaultBackgroundAfter is how long a call holds the client before a
// command still running moves to the background. MCP clients commonly give
// up on a request after 60 s (the TypeScript SDK's default); the command
// must be a job by then, not cancelled with the request.
const DefaultBackgroundAfter = 30 * time.Second

// ConsoleTargetFunc asks the rex server running for this user (issue 17)
// which target its console is on. ok is false when no server runs; an
// error means one runs but did not answer, and calls then fail rather than
// go somewhere the operator did not choose.
type ConsoleTargetFunc func(ctx context.Context) (target string, ok bool, err error)

// NoConsole is the ConsoleTargetFunc while rex has no server: none runs.
func NoConsole(context.Context) (string, bool, error) { return "", false, nil }

// Options configure a Server.
type Options struct {
	// App reaches the targets.
	App *commands.App
	// Store is the device registry, for targets and rex://devices.
	Store *devices.Store
	// Target is --target: a TARGETS expression every call goes to. Empty
	// routes to the console's target, else local.
	Target string
	// ConsoleTarget asks the rex server for the console's target; nil is
	// NoConsole.
	ConsoleTarget ConsoleTargetFunc
	// ReadOnly offers only the tools that change nothing.
	ReadOnly bool
	// Allow, when not empty, offers only these tools (job_output and
	// job_kill come with any tool that can leave a job behind).
	Allow []string
	// AllowRetarget offers use_target, with which the client changes the
	// target.
	AllowRetarget bool
	// Concurrency bounds the hosts a call reaches at once; 0 is fan-out's
	// default.
	Concurrency int
	// BackgroundAfter bounds how long a call holds the client; 0 is
	// DefaultBackgroundAfter.
	BackgroundAfter time.Duration
	// Notices receives one line per thing the operator should know (what
	// is served where, chain tools that could not be read); nil drops them.
	Notices io.Writer
}

// Server is rex's MCP server.
type Server struct {
	opts Options
	srv  *mcp.Server
	// offered are the toolset's tools this server offers, by name.
	offered map[string]toolset.Tool
	// names lists every tool offered, toolset's and rex mcp's, in order.
	names []string
	// hidden are tools left out by --read-only or --allow, for errors.
	hidden map[string]bool

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*session
	closed   bool
}

// New checks the options (tool names, the target) and builds the server.
// Its errors are usage errors, one sentence each.
func New(opts Options) (*Server, error) {
	if opts.ConsoleTarget == nil {
		opts.ConsoleTarget = NoConsole
	}
	if opts.BackgroundAfter <= 0 {
		opts.BackgroundAfter = DefaultBackgroundAfter
	}
	if opts.Target != "" {
		hosts, err := opts.App.Resolve(opts.Target)
		if err != nil {
			return nil, fmt.Errorf("--target %s: %w", opts.Target, err)
		}
		if len(hosts) == 0 {
			return nil, commands.Usagef("--target %s names no hosts", opts.Target)
		}
	}
	s := &Server{opts: opts, offered: map[string]toolset.Tool{}, hidden: map[string]bool{}, sessions: map[*mcp.ServerSession]*session{}}

	// The tool list is read once; a lister toolset runs nothing.
	lister := toolset.New(s.toolsetOptions(""))
	all, chainErr := lister.Tools()
	lister.Close()
	if chainErr != nil {
		s.notice("rex mcp: %v", chainErr)
	}
	all = slices.DeleteFunc(all, func(t toolset.Tool) bool {
		if t.Name == Targets || t.Name == UseTarget {
			s.notice("rex mcp: the executor-chain tool %s is not offered: rex mcp's own %s has its name", t.ChainID, t.Name)
			return true
		}
		if t.ChainID != "" {
			if err := sdkRefuses(t); err != nil {
				s.notice("rex mcp: the executor-chain tool %s is not offered: the MCP SDK refuses its schema (%v)", t.ChainID, err)
				return true
			}
		}
		return false
	})
	if err := s.choose(all); err != nil {
		return nil, err
	}

	s.srv = mcp.NewServer(&mcp.Implementation{Name: "rex", Title: "rex", Version: version.Version},
		&mcp.ServerOptions{
			Instructions: instructions,
			// Logging carries the output of running commands.
			Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}},
		})
	s.srv.AddReceivingMiddleware(s.unknownTools)
	for _, t := range all {
		if _, ok := s.offered[t.Name]; ok {
			s.srv.AddTool(mcpTool(t), s.handler(t))
		}
	}
	if slices.Contains(s.names, Targets) {
		mcp.AddTool(s.srv, targetsTool, s.targets)
	}
	if opts.AllowRetarget {
		mcp.AddTool(s.srv, useTargetTool, s.useTarget)
	}
	s.addResources()
	return s, nil
}

// sdkRefuses says why the MCP SDK would refuse a tool, or nil. The SDK
// panics in AddTool on a schema it cannot take (x-mcp-header on an
// object, a value JSON cannot hold); a chain tool's schema is its
// author's, and one such tool must not keep rex mcp from starting.
func sdkRefuses(t toolset.Tool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	mcp.NewServer(&mcp.Implementation{Name: "rex"}, nil).AddTool(mcpTool(t), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, nil
	})
	return nil
}

// instructions tell the model what kind of server this is.
const instructions = `rex runs these tools on the machines the operator chose (the target): one host or a whole group at once, through rexd on each host. You never name a host; every result says which target and hosts it ran on, with one block per set of hosts that answered alike and a summary line. A command still running after its wait moves to the background as a job: call job_output to wait for it and job_kill to stop it. The targets tool lists the devices and groups and says which target is current.`

// toolsetOptions are the options of a session's toolset.
func (s *Server) toolsetOptions(client string) toolset.Options {
	return toolset.Options{
		App:         s.opts.App,
		ClientName:  client,
		Concurrency: s.opts.Concurrency,
		ChainTools:  true,
		MaxWait:     s.opts.BackgroundAfter,
	}
}

// jobMakers are the tools whose commands may move to the background.
func jobMaker(t toolset.Tool) bool {
	return t.Name == toolset.Bash || t.Name == toolset.Grep || t.ChainID != ""
}

// choose works out the tools offered from --read-only and --allow.
func (s *Server) choose(all []toolset.Tool) error {
	known := map[string]toolset.Tool{}
	var knownNames []string
	for _, t := range all {
		known[t.Name] = t
		knownNames = append(knownNames, t.Name)
	}
	knownNames = append(knownNames, Targets, UseTarget)
	allow := map[string]bool{}
	for _, a := range s.opts.Allow {
		for _, name := range strings.Split(a, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			t, ok := known[name]
			switch {
			case name == UseTarget && !s.opts.AllowRetarget:
				return commands.Usagef("--allow use_target: use_target is offered only with --allow-retarget")
			case name == Targets || name == UseTarget:
			case !ok:
				return commands.Usagef("--allow %s: there is no tool %q; the tools are %s", name, name, strings.Join(knownNames, ", "))
			case s.opts.ReadOnly && !t.ReadOnly:
				return commands.Usagef("--allow %s: %s changes things and --read-only hides it; drop one of the two", name, name)
			}
			allow[name] = true
		}
	}
	narrowed := len(allow) > 0
	offer := func(t toolset.Tool) bool {
		if s.opts.ReadOnly && !t.ReadOnly {
			return false
		}
		return !narrowed || allow[t.Name]
	}
	jobs := false
	for _, t := range all {
		if offer(t) {
			s.offered[t.Name] = t
			jobs = jobs || jobMaker(t)
		}
	}
	// A job is useless without the tools that wait for it and stop it.
	for _, name := range []string{toolset.JobOutput, toolset.JobKill} {
		if t := known[name]; jobs && (!s.opts.ReadOnly || t.ReadOnly) {
			s.offered[name] = t
		}
	}
	for _, t := range all {
		if _, ok := s.offered[t.Name]; ok {
			s.names = append(s.names, t.Name)
		} else {
			s.hidden[t.Name] = true
		}
	}
	if !narrowed || allow[Targets] {
		s.names = append(s.names, Targets)
	} else {
		s.hidden[Targets] = true
	}
	if s.opts.AllowRetarget {
		s.names = append(s.names, UseTarget)
	}
	if len(s.names) == 0 {
		return commands.Usagef("--allow leaves no tool to offer")
	}
	return nil
}

// Tools are the names of the tools offered, in order.
func (s *Server) Tools() []string { return slices.Clone(s.names) }

// MCP is the go-sdk server, for transports other than Run's.
func (s *Server) MCP() *mcp.Server { return s.srv }

// Run serves one client over t until it disconnects or ctx ends, then
// stops every command the client left running.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	defer s.Close()
	err := s.srv.Run(ctx, t)
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Close stops every command still running for any client (their remote
// processes are killed) and waits for them to end.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	sessions := make([]*session, 0, len(s.sessions))
	for _, se := range s.sessions {
		sessions = append(sessions, se)
	}
	s.sessions = map[*mcp.ServerSession]*session{}
	s.mu.Unlock()
	for _, se := range sessions {
		se.close()
	}
}

func (s *Server) notice(format string, args ...any) {
	if s.opts.Notices != nil {
		fmt.Fprintf(s.opts.Notices, format+"\n", args...)
	}
}

// session is one client's state: its toolset (its jobs, its rexd session
// name), its target when use_target set one, and the output streams of
// its background jobs.
type session struct {
	srv    *Server
	ss     *mcp.ServerSession
	ts     *toolset.Toolset
	client string
	// ctx lives as long as the client: log messages of background jobs
	// are sent under it.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	retarget string
	streams  map[string]*stream
}

// session returns the state of the client that sent req, made on its
// first call.
func (s *Server) session(ss *mcp.ServerSession, info *mcp.Implementation) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("rex mcp is shutting down")
	}
	if se := s.sessions[ss]; se != nil {
		return se, nil
	}
	name := ""
	if info != nil {
		name = info.Name
	}
	client := ClientPrefix + clientName(name)
	ctx, cancel := context.WithCancel(context.Background())
	se := &session{srv: s, ss: ss, ts: toolset.New(s.toolsetOptions(client)), client: client, ctx: ctx, cancel: cancel,
		streams: map[string]*stream{}}
	s.sessions[ss] = se
	go func() {
		// A client that goes away leaves nothing running.
		ss.Wait()
		s.mu.Lock()
		delete(s.sessions, ss)
		s.mu.Unlock()
		se.close()
	}()
	return se, nil
}

func (se *session) close() {
	se.cancel()
	se.ts.Close()
}

// clientName makes an MCP client's name fit a rexd client name: letters,
// digits and . _ - only (spaces become -), at most 48 bytes.
func clientName(name string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ' || r == '/':
			b.WriteByte('-')
		}
		if b.Len() >= 48 {
			break
		}
	}
	if b.Len() == 0 {
		return "unknown"
	}
	return b.String()
}

// Where a call's target came from.
const (
	fromFlag    = "--target"
	fromRetgt   = "use_target"
	fromConsole = "the console's /target"
	fromLocal   = "the default: no --target and no rex server"
)

// route says where a call goes now, and why.
func (se *session) route(ctx context.Context) (target, from string, err error) {
	se.mu.Lock()
	rt := se.retarget
	se.mu.Unlock()
	switch {
	case rt != "":
		return rt, fromRetgt, nil
	case se.srv.opts.Target != "":
		return se.srv.opts.Target, fromFlag, nil
	}
	t, ok, err := se.srv.opts.ConsoleTarget(ctx)
	if err != nil {
		return "", "", fmt.Errorf("the rex server did not say which target the console is on (%v); start rex mcp with --target", err)
	}
	if ok && t != "" {
		return t, fromConsole, nil
	}
	return commands.LocalName, fromLocal, nil
}

// handler runs a toolset tool for the client.
func (s *Server) handler(t toolset.Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		se, err := s.session(req.Session, req.ClientInfo())
		if err != nil {
			return errorResult(err), nil
		}
		target := ""
		if t.Name != toolset.JobOutput && t.Name != toolset.JobKill {
			if target, _, err = se.route(ctx); err != nil {
				return errorResult(err), nil
			}
		}
		st := se.newStream(ctx, req, t)
		if t.Name == toolset.JobOutput {
			// The job's output from now on goes to this request too.
			if js := se.jobStream(req.Params.Arguments); js != nil {
				js.attach(ctx, req.Params.GetProgressToken())
				defer js.detach()
			}
		}
		var res *toolset.Result
		a, err := se.ts.Prepare(ctx, toolset.Call{Tool: t.Name, Input: req.Params.Arguments, Target: target})
		switch {
		case err != nil:
			res = toolset.ErrorResult(target, err)
		case a.Tool.ChainID != t.ChainID:
			// The client approved the tool tools/list described; tool
			// files added since can give its name to another.
			res = toolset.ErrorResult(target, fmt.Errorf("%s was listed as rex tool %s, but the tool files changed and the name now stands for %s; nothing ran: restart rex mcp to list the tools again",
				t.Name, t.ChainID, a.Tool.ChainID))
		default:
			res = se.ts.Run(ctx, a, st.event)
		}
		st.detach()
		return toolResult(res), nil
	}
}

// jobStream is the output stream of the job a job_output call names.
func (se *session) jobStream(args json.RawMessage) *stream {
	var in struct {
		JobID string `json:"job_id"`
	}
	if json.Unmarshal(args, &in) != nil || in.JobID == "" {
		return nil
	}
	se.mu.Lock()
	defer se.mu.Unlock()
	return se.streams[in.JobID]
}

// toolResult is a toolset result as MCP has it: the text the model reads,
// isError, and in _meta where it ran (not structuredContent: some clients
// show that instead of the text).
func toolResult(r *toolset.Result) *mcp.CallToolResult {
	meta := mcp.Meta{"rex/target": r.Target, "rex/hosts": orEmpty(r.Hosts), "rex/summary": r.Summary}
	if r.JobID != "" {
		meta["rex/job_id"] = r.JobID
		meta["rex/running"] = r.Running
	}
	return &mcp.CallToolResult{
		Meta:    meta,
		Content: []mcp.Content{&mcp.TextContent{Text: r.Text}},
		IsError: r.IsError,
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// errorResult is a call that could not run, as one sentence.
func errorResult(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}, IsError: true}
}

// unknownTools answers a call of a tool this server does not offer with
// a tool error that says why, where the SDK would fail the request: a
// model reads a tool error and can change course; a protocol error only
// ends its turn.
func (s *Server) unknownTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		name := ""
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
			name = p.Name
		}
		if slices.Contains(s.names, name) {
			return next(ctx, method, req)
		}
		why := fmt.Sprintf("there is no tool %q here", name)
		switch {
		case s.hidden[name] && s.opts.ReadOnly:
			why = fmt.Sprintf("%s is not offered: rex mcp runs with --read-only", name)
		case s.hidden[name]:
			why = fmt.Sprintf("%s is not offered: rex mcp runs with --allow %s", name, strings.Join(s.opts.Allow, ","))
		case name == UseTarget:
			why = "use_target is not offered: the operator chooses the target (rex mcp --allow-retarget lets you)"
		}
		return errorResult(fmt.Errorf("%s; the tools are %s", why, strings.Join(s.names, ", "))), nil
	}
}

// mcpTool describes a toolset tool for tools/list: its schema as the
// toolset has it (one schema for both faces) and its annotations.
func mcpTool(t toolset.Tool) *mcp.Tool {
	openWorld := t.Name == toolset.Bash || t.ChainID != ""
	title := titles[t.Name]
	if t.ChainID != "" {
		title = "rex tool " + t.ChainID
	}
	return &mcp.Tool{
		Name:        t.Name,
		Title:       title,
		Description: t.Description,
		InputSchema: t.Schema,
		Annotations: &mcp.ToolAnnotations{
			Title:           title,
			ReadOnlyHint:    t.ReadOnly,
			DestructiveHint: ptr(!t.ReadOnly && t.Destructive),
			// write leaves the same file however often it runs.
			IdempotentHint: t.ReadOnly || t.Name == toolset.Write,
			OpenWorldHint:  ptr(openWorld),
		},
	}
}

var titles = map[string]string{
	toolset.Bash:      "Run a shell command on the target",
	toolset.Read:      "Read a file on the target",
	toolset.Write:     "Write a file on the target",
	toolset.Edit:      "Edit a file on the target",
	toolset.List:      "List a directory on the target",
	toolset.Glob:      "Find files on the target",
	toolset.Grep:      "Search files on the target",
	toolset.JobOutput: "Wait for a background command",
	toolset.JobKill:   "Stop a background command",
}

func ptr[T any](v T) *T { return &v }
