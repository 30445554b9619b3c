package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/fleettest"
	"github.com/rexconsole/rex/internal/mcpserver"
)

func TestMain(m *testing.M) { fleettest.Main(m) }

// notes records what the server sent besides results.
type notes struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
	signal   chan struct{}
}

func newNotes() *notes { return &notes{signal: make(chan struct{}, 1)} }

func (n *notes) poke() {
	select {
	case n.signal <- struct{}{}:
	default:
	}
}

func (n *notes) onProgress(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	n.mu.Lock()
	n.progress = append(n.progress, r.Params)
	n.mu.Unlock()
	n.poke()
}

func (n *notes) onLog(_ context.Context, r *mcp.LoggingMessageRequest) {
	n.mu.Lock()
	n.logs = append(n.logs, r.Params)
	n.mu.Unlock()
	n.poke()
}

// progressText is every progress message for token, joined.
func (n *notes) progressText(token any) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var b strings.Builder
	for _, p := range n.progress {
		if p.ProgressToken == token {
			b.WriteString(p.Message + "\n")
		}
	}
	return b.String()
}

// logText is every log message of logger, joined.
func (n *notes) logText(logger string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var b strings.Builder
	for _, l := range n.logs {
		if l.Logger == logger {
			s, _ := l.Data.(string)
			b.WriteString(s + "\n")
		}
	}
	return b.String()
}

// waitFor waits until cond holds, or fails after a bound.
// A detail, when given, says what was missing at the end.
func (n *notes) waitFor(t *testing.T, what string, cond func() bool, detail ...*string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-n.signal:
		case <-deadline:
			if len(detail) > 0 {
				t.Fatalf("never got %s: missing %s", what, *detail[0])
			}
			t.Fatalf("never got %s", what)
		}
	}
}

type client struct {
	cs    *mcp.ClientSession
	notes *notes
	srv   *mcpserver.Server
	// done is closed when the server's Run returned.
	done chan struct{}
}

// connect serves opts to a go-sdk client over in-memory transports, with
// the given protocol version ("" is the SDK's newest).
func connect(t *testing.T, opts mcpserver.Options, version string) *client {
	t.Helper()
	srv, err := mcpserver.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	c := &client{notes: newNotes(), srv: srv, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(c.done)
		if err := srv.Run(ctx, st); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	cl := mcp.NewClient(&mcp.Implementation{Name: "test client", Version: "1.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: c.notes.onProgress,
		LoggingMessageHandler:       c.notes.onLog,
	})
	c.cs, err = cl.Connect(fleettest.Context(t), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.cs.Close()
		cancel()
		<-c.done
	})
	return c
}

func opts(f *fleettest.Fleet) mcpserver.Options {
	return mcpserver.Options{App: f.App, Store: f.Store}
}

func text(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) != 1 {
		t.Fatalf("%d contents", len(r.Content))
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T", r.Content[0])
	}
	return tc.Text
}

func (c *client) call(t *testing.T, tool string, args map[string]any, token any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta}
	if token != nil {
		p.SetProgressToken(token)
	}
	r, err := c.cs.CallTool(fleettest.Context(t), p)
	if err != nil {
		t.Fatalf("%s: a protocol error: %v", tool, err)
	}
	return r
}

func toolNames(t *testing.T, c *client) map[string]*mcp.Tool {
	t.Helper()
	res, err := c.cs.ListTools(fleettest.Context(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

func keys[V any](m map[string]V) string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return strings.Join(k, ",")
}

func TestToolsList(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	// A user-space chain tool with a parameter schema.
	tool := "#!/bin/bash\n# rex: executor_id: rex/core/runtimes/bash/bash\n# rex: version: \"1.0.0\"\n# rex: description: say hello\n" +
		"# rex: config_schema: {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}}, \"required\": [\"name\"]}\n" +
		"echo \"hello $REX_PARAM_NAME\"\n"
	p := filepath.Join(f.App.ConfigDir, ".ai", "tools", "ops", "hello.sh")
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(tool), 0o755); err != nil {
		t.Fatal(err)
	}
	c := connect(t, opts(f), "")
	tools := toolNames(t, c)
	for _, name := range []string{"bash", "read", "write", "edit", "list", "glob", "grep", "job_output", "job_kill", "targets", "ops_hello"} {
		if tools[name] == nil {
			t.Errorf("no tool %s in %s", name, keys(tools))
		}
	}
	if tools["use_target"] != nil {
		t.Error("use_target is offered without --allow-retarget")
	}
	for name, req := range map[string]string{"bash": "command", "read": "path", "write": "path,content", "edit": "path,old,new",
		"list": "path", "glob": "pattern", "grep": "pattern", "job_output": "job_id", "job_kill": "job_id", "ops_hello": "name"} {
		schema := map[string]any{}
		b, _ := json.Marshal(tools[name].InputSchema)
		json.Unmarshal(b, &schema)
		var got []string
		for _, r := range schema["required"].([]any) {
			got = append(got, r.(string))
		}
		if schema["type"] != "object" || strings.Join(got, ",") != req {
			t.Errorf("%s's schema %s", name, b)
		}
		if _, ok := schema["properties"].(map[string]any)["target"]; ok {
			t.Errorf("%s has a target parameter", name)
		}
	}
	bashSchema, _ := json.Marshal(tools["bash"].InputSchema)
	if !strings.Contains(string(bashSchema), "(default 30, at most 30)") || !strings.Contains(string(bashSchema), `"additionalProperties":false`) {
		t.Errorf("bash's schema %s", bashSchema)
	}
	for _, name := range []string{"read", "list", "glob", "grep", "job_output", "targets"} {
		a := tools[name].Annotations
		if a == nil || !a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint {
			t.Errorf("%s's annotations %+v", name, a)
		}
	}
	for _, name := range []string{"bash", "write", "edit", "job_kill", "ops_hello"} {
		a := tools[name].Annotations
		if a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
			t.Errorf("%s's annotations %+v", name, a)
		}
	}
	if a := tools["bash"].Annotations; a.OpenWorldHint == nil || !*a.OpenWorldHint || a.Title == "" {
		t.Errorf("bash's annotations %+v", a)
	}
	if a := tools["write"].Annotations; !a.IdempotentHint {
		t.Errorf("write's annotations %+v", a)
	}
	if !strings.Contains(tools["ops_hello"].Description, "say hello") {
		t.Errorf("chain tool %+v", tools["ops_hello"])
	}
}

func TestReadOnlyAllowAndRetarget(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	for _, tt := range []struct {
		name string
		mod  func(*mcpserver.Options)
		want string
	}{
		{"read-only", func(o *mcpserver.Options) { o.ReadOnly = true }, "glob,grep,job_output,list,read,targets"},
		{"allow bash", func(o *mcpserver.Options) { o.Allow = []string{"bash"} }, "bash,job_kill,job_output"},
		{"allow read,targets", func(o *mcpserver.Options) { o.Allow = []string{"read,targets"} }, "read,targets"},
		{"read-only grep", func(o *mcpserver.Options) { o.ReadOnly, o.Allow = true, []string{"grep"} }, "grep,job_output"},
		{"retarget", func(o *mcpserver.Options) { o.AllowRetarget, o.Allow = true, []string{"list"} }, "list,use_target"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := opts(f)
			tt.mod(&o)
			c := connect(t, o, "")
			if got := keys(toolNames(t, c)); got != tt.want {
				t.Errorf("tools %s, want %s", got, tt.want)
			}
		})
	}

	// A hidden tool called anyway: a tool error that says why.
	o := opts(f)
	o.ReadOnly = true
	c := connect(t, o, "")
	r := c.call(t, "write", map[string]any{"path": "x", "content": "y"}, nil, nil)
	if !r.IsError || !strings.HasPrefix(text(t, r), "write is not offered: rex mcp runs with --read-only; the tools are read, list, glob, grep, job_output, targets") {
		t.Errorf("write under --read-only: %v %q", r.IsError, text(t, r))
	}
	if _, err := os.Stat(filepath.Join(f.LocalHome, "x")); err == nil {
		t.Error("a hidden tool ran")
	}
	r = c.call(t, "use_target", map[string]any{"target": "local"}, nil, nil)
	if !r.IsError || !strings.Contains(text(t, r), "the operator chooses the target (rex mcp --allow-retarget lets you)") {
		t.Errorf("use_target: %q", text(t, r))
	}

	for _, tt := range []struct {
		mod  func(*mcpserver.Options)
		want string
	}{
		{func(o *mcpserver.Options) { o.Allow = []string{"rm"} }, `--allow rm: there is no tool "rm"; the tools are bash, read,`},
		{func(o *mcpserver.Options) { o.ReadOnly, o.Allow = true, []string{"edit"} }, "--allow edit: edit changes things and --read-only hides it"},
		{func(o *mcpserver.Options) { o.Allow = []string{"use_target"} }, "use_target is offered only with --allow-retarget"},
		{func(o *mcpserver.Options) { o.Target = "nosuch" }, "--target nosuch: "},
	} {
		o := opts(f)
		tt.mod(&o)
		_, err := mcpserver.New(o)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error %v, want %q", err, tt.want)
		}
	}
}

func TestBashOnAGroupStreamsAndAudits(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 2, Down: true})
	f.WriteFile(t, "h1", "role", "web\n")
	o := opts(f)
	o.Target = "fleet"
	c := connect(t, o, "2025-11-25")
	if err := c.cs.SetLoggingLevel(fleettest.Context(t), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	// One stream (2>&1): stdout and stderr are two pipes whose lines may
	// arrive in either order.
	r := c.call(t, "bash", map[string]any{"command": "echo one; cat role 2>&1"}, "tok-1", nil)
	want := "target fleet: down,h[1-2]\n" +
		"h1 · exit 0\n  one\n  web\n" +
		"h2 · exit 1\n  one\n  cat: role: No such file or directory\n" +
		"down · unreachable\n  connect down"
	got := text(t, r)
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "\n1/3 ok; h2 exit 1, down unreachable") || r.IsError {
		t.Fatalf("result (isError %v):\n%s\nwant it to start:\n%s", r.IsError, got, want)
	}
	if r.Meta["rex/target"] != "fleet" || !slices.Equal(anyStrings(r.Meta["rex/hosts"]), []string{"h1", "h2", "down"}) ||
		r.Meta["rex/summary"] != "1/3 ok; h2 exit 1, down unreachable" {
		t.Errorf("meta %v", r.Meta)
	}
	// Progress for the request's token, with every line of every host and
	// each host's end. (The client may handle a notification after the
	// result that followed it: wait for them.)
	c.notes.waitFor(t, "every host's end as progress", func() bool {
		p := c.notes.progressText("tok-1")
		return strings.Contains(p, "h1: exit 0") && strings.Contains(p, "h2: exit 1") && strings.Contains(p, "down: unreachable")
	})
	prog := c.notes.progressText("tok-1")
	for _, l := range []string{"h1: one\n", "h1: web\n", "h2: one\n", "h2: cat: role: No such file or directory\n", "h1: exit 0\n", "h2: exit 1\n", "down: unreachable\n"} {
		if !strings.Contains(prog, l) {
			t.Errorf("progress lacks %q:\n%s", l, prog)
		}
	}
	c.notes.mu.Lock()
	for i, p := range c.notes.progress {
		if p.Progress != float64(i+1) {
			t.Errorf("progress %d is %v: it must increase", i, p.Progress)
		}
	}
	c.notes.mu.Unlock()
	// The same lines came as log messages (each host's in its own
	// batches: one host's end says nothing of the other's lines).
	var missing string
	c.notes.waitFor(t, "every host's lines as log messages", func() bool {
		logs := c.notes.logText("rex")
		for _, l := range []string{"h1: one\n", "h1: web\n", "h2: one\n", "h2: cat: role: No such file or directory\n", "h2: exit 1\n", "down: unreachable\n"} {
			if !strings.Contains(logs, l) {
				missing = fmt.Sprintf("%q (logs so far:\n%s)", l, logs)
				return false
			}
		}
		missing = ""
		return true
	}, &missing)
	// Each host's rexd audited the command under the client's name.
	for _, h := range []string{"h1", "h2"} {
		ok := false
		for _, e := range f.Audit(t, h) {
			ok = ok || e.Method == "exec.start" && e.ClientName == "rex-mcp/test-client" && e.Params["command"] == "echo one; cat role 2>&1"
		}
		if !ok {
			t.Errorf("%s's audit log has no exec.start by rex-mcp/test-client: %+v", h, f.Audit(t, h))
		}
	}
	// A call without a token gets no progress, but its output is logged.
	c.call(t, "bash", map[string]any{"command": "echo quiet"}, nil, nil)
	c.notes.waitFor(t, "the quiet call's log", func() bool { return strings.Contains(c.notes.logText("rex"), "h1: quiet") })
	c.notes.mu.Lock()
	for _, p := range c.notes.progress {
		if strings.Contains(p.Message, "quiet") {
			t.Errorf("progress without a progress token: %+v", p)
		}
	}
	c.notes.mu.Unlock()
}

func anyStrings(v any) []string {
	var out []string
	switch v := v.(type) {
	case []string:
		return v
	case []any:
		for _, s := range v {
			out = append(out, s.(string))
		}
	}
	return out
}

func TestLongCommandMovesToTheBackground(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 2})
	o := opts(f)
	o.Target = "fleet"
	o.BackgroundAfter = time.Second
	c := connect(t, o, "")
	info := mcp.Meta{mcp.MetaKeyLogLevel: "info"}
	cmd := "echo started; while [ ! -e go ]; do sleep 0.05; done; echo finished"
	r := c.call(t, "bash", map[string]any{"command": cmd, "timeout_s": 3600}, "bg", info)
	got := text(t, r)
	if r.IsError || r.Meta["rex/job_id"] != "j1" || r.Meta["rex/running"] != true ||
		!strings.Contains(got, "0/2 ok; h[1-2] running\nstill running after 1s; it goes on in the background as job j1") {
		t.Fatalf("result %v:\n%s", r.Meta, got)
	}
	c.notes.waitFor(t, "the move to the background as progress", func() bool {
		return strings.Contains(c.notes.progressText("bg"), "still running: it goes on in the background as job j1")
	})
	// job_output's wait is bounded by --background-after too.
	out := c.call(t, "job_output", map[string]any{"job_id": "j1", "wait_s": 600}, "wait-1", info)
	if out.IsError || out.Meta["rex/running"] != true || !strings.Contains(text(t, out), "job j1 is still running after another 1s") {
		t.Fatalf("job_output %v:\n%s", out.Meta, text(t, out))
	}
	// What the job prints while job_output waits streams to its token.
	done := make(chan *mcp.CallToolResult)
	go func() {
		done <- c.call(t, "job_output", map[string]any{"job_id": "j1", "wait_s": 600}, "wait-2", info)
	}()
	c.notes.waitFor(t, "job_output's first progress", func() bool { return strings.Contains(c.notes.progressText("wait-2"), "waiting for job j1") })
	f.WriteFile(t, "h1", "go", "")
	f.WriteFile(t, "h2", "go", "")
	tokens := []string{"wait-2"}
	for out = nil; out == nil; {
		select {
		case out = <-done:
		case <-time.After(2 * time.Minute):
			t.Fatal("job_output never returned")
		}
		if out.Meta["rex/running"] == true && len(tokens) < 20 {
			// Slow hosts: wait again.
			tok := "wait-" + strconv.Itoa(len(tokens)+2)
			tokens = append(tokens, tok)
			go func() { done <- c.call(t, "job_output", map[string]any{"job_id": "j1", "wait_s": 600}, tok, info) }()
			out = nil
		}
	}
	got = text(t, out)
	if out.IsError || !strings.Contains(got, "h[1-2] (2 hosts) · exit 0\n  started\n  finished\n2/2 ok") || out.Meta["rex/target"] != "fleet" {
		t.Errorf("job_output %v:\n%s", out.Meta, got)
	}
	c.notes.waitFor(t, "the job's end as job_output's progress", func() bool {
		var p string
		for _, tok := range tokens {
			p += c.notes.progressText(tok)
		}
		if len(tokens) > 1 {
			// A wait ran out while the hosts were still finishing (a
			// loaded machine): until the next job_output attached, or if
			// the job ended first, what it printed went to its log only
			// (and into the result), as progress goes only to a request
			// that waits.
			p += c.notes.logText("rex/j1")
		}
		return strings.Contains(p, "h1: finished") && strings.Contains(p, "h2: exit 0")
	})
	if p := c.notes.progressText("wait-1"); strings.Contains(p, "finished") {
		t.Errorf("progress on a request that had returned:\n%s", p)
	}
}

func TestErrorsAreToolErrors(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 1})
	c := connect(t, opts(f), "")
	for _, tt := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"bash", map[string]any{}, "bash: missing required argument command"},
		{"bash", map[string]any{"command": "ls", "host": "h1"}, `bash: there is no argument "host"`},
		{"read", map[string]any{"path": "nope"}, "local · error\n  read ~/nope: no such file or directory\n0/1 ok; local error"},
		{"job_output", map[string]any{"job_id": "j7"}, `there is no job "j7" and none is running`},
		{"rm", map[string]any{}, `there is no tool "rm" here; the tools are bash, read, write, edit, list, glob, grep, job_output, job_kill,`},
	} {
		r := c.call(t, tt.tool, tt.args, nil, nil)
		got := text(t, r)
		t.Log(got)
		if !r.IsError || !strings.Contains(got, tt.want) {
			t.Errorf("%s %v: isError %v %q, want %q", tt.tool, tt.args, r.IsError, got, tt.want)
		}
	}
}

func TestRouting(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 2})
	var mu sync.Mutex
	console, consoleErr := "", error(nil)
	o := opts(f)
	o.ConsoleTarget = func(context.Context) (string, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return console, console != "", consoleErr
	}
	setConsole := func(t string, err error) {
		mu.Lock()
		console, consoleErr = t, err
		mu.Unlock()
	}
	hostname := map[string]any{"command": "pwd"}
	c := connect(t, o, "")
	// No --target, no server: local.
	if r := c.call(t, "bash", hostname, nil, nil); r.Meta["rex/target"] != "local" || !strings.Contains(text(t, r), f.LocalHome) {
		t.Errorf("default: %v %s", r.Meta, text(t, r))
	}
	// The console's /target, read at every call.
	setConsole("h2", nil)
	if r := c.call(t, "bash", hostname, nil, nil); r.Meta["rex/target"] != "h2" || !strings.Contains(text(t, r), f.Home("h2")) {
		t.Errorf("console h2: %v %s", r.Meta, text(t, r))
	}
	setConsole("fleet", nil)
	if r := c.call(t, "bash", hostname, nil, nil); r.Meta["rex/target"] != "fleet" || !strings.HasPrefix(text(t, r), "target fleet: h[1-2]\n") {
		t.Errorf("console fleet: %v %s", r.Meta, text(t, r))
	}
	tg := c.call(t, "targets", nil, nil, nil)
	if s := text(t, tg); !strings.HasPrefix(s, "current target: fleet: h[1-2] (from the console's /target)\nThe operator chooses the target") ||
		!strings.Contains(s, "\ndevices:\n  h1  ") || !strings.Contains(s, "\ngroups:\n  fleet: h[1-2]") {
		t.Errorf("targets:\n%s", s)
	}
	// A server that does not answer: refused, not sent elsewhere.
	setConsole("", errors.New("connection refused"))
	if r := c.call(t, "bash", hostname, nil, nil); !r.IsError || !strings.Contains(text(t, r), "the rex server did not say which target the console is on (connection refused); start rex mcp with --target") {
		t.Errorf("server error: %v %s", r.IsError, text(t, r))
	}

	// --target wins over the console; use_target over both when allowed.
	setConsole("h2", nil)
	o.Target, o.AllowRetarget = "h1", true
	c2 := connect(t, o, "")
	if r := c2.call(t, "bash", hostname, nil, nil); r.Meta["rex/target"] != "h1" {
		t.Errorf("--target: %v", r.Meta)
	}
	if r := c2.call(t, "use_target", map[string]any{"target": "nosuch"}, nil, nil); !r.IsError || !strings.Contains(text(t, r), "target nosuch: ") {
		t.Errorf("bad use_target: %s", text(t, r))
	}
	if r := c2.call(t, "use_target", map[string]any{"target": "fleet"}, nil, nil); r.IsError || text(t, r) != "target fleet: h[1-2]; every following call runs there" {
		t.Errorf("use_target: %s", text(t, r))
	}
	if r := c2.call(t, "bash", hostname, nil, nil); r.Meta["rex/target"] != "fleet" {
		t.Errorf("after use_target: %v", r.Meta)
	}
	if s := text(t, c2.call(t, "targets", nil, nil, nil)); !strings.HasPrefix(s, "current target: fleet: h[1-2] (from use_target)\nuse_target changes it.") {
		t.Errorf("targets:\n%s", s)
	}
}

func TestResources(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 2})
	f.WriteFile(t, "h1", "etc/motd", "hello from h1\n")
	f.WriteFile(t, "h1", "blob", "\x00\x01\xfe")
	f.WriteFile(t, "h2", "etc/motd", "h2\n")
	o := opts(f)
	o.Target = "h1"
	c := connect(t, o, "")
	ctx := fleettest.Context(t)
	list, err := c.cs.ListResources(ctx, nil)
	if err != nil || len(list.Resources) != 1 || list.Resources[0].URI != "rex://devices" {
		t.Fatalf("resources %+v %v", list, err)
	}
	tmpl, err := c.cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tmpl.ResourceTemplates) != 1 || tmpl.ResourceTemplates[0].URITemplate != "rex://target/{name}/file/{+path}" {
		t.Fatalf("templates %+v %v", tmpl, err)
	}
	read := func(uri string) (*mcp.ResourceContents, error) {
		r, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return nil, err
		}
		return r.Contents[0], nil
	}
	dev, err := read("rex://devices")
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		Devices []struct {
			Name   string   `json:"name"`
			Groups []string `json:"groups"`
		} `json:"devices"`
		Groups []struct {
			Name    string   `json:"name"`
			Members []string `json:"members"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(dev.Text), &reg); err != nil || dev.MIMEType != "application/json" || len(reg.Devices) != 2 ||
		reg.Devices[0].Name != "h1" || len(reg.Groups) != 1 || strings.Join(reg.Groups[0].Members, ",") != "h1,h2" {
		t.Errorf("rex://devices %v: %s", err, dev.Text)
	}
	for _, uri := range []string{"rex://target/h1/file/etc/motd", "rex://target/h1/file/~/etc/motd", "rex://target/h1/file/%7E%2Fetc%2Fmotd",
		"rex://target/h1/file/" + filepath.Join(f.Home("h1"), "etc/motd")} {
		got, err := read(uri)
		if err != nil || got.Text != "hello from h1\n" || got.URI != uri || got.MIMEType != "text/plain" {
			t.Errorf("%s: %+v %v", uri, got, err)
		}
	}
	if got, err := read("rex://target/h1/file/blob"); err != nil || string(got.Blob) != "\x00\x01\xfe" || got.MIMEType != "application/octet-stream" {
		t.Errorf("binary: %+v %v", got, err)
	}
	for uri, want := range map[string]string{
		"rex://target/h2/file/etc/motd": "h2 is not a host of the target h1 (h1); files are read only where the tools run",
		"rex://target/h1/file/nope":     "h1: read ~/nope: no such file or directory",
	} {
		if _, err := read(uri); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", uri, err, want)
		}
	}
	ok := false
	for _, e := range f.Audit(t, "h1") {
		ok = ok || e.Method == "fs.read" && e.ClientName == "rex-mcp/test-client"
	}
	if !ok {
		t.Error("the resource reads are not in h1's audit log")
	}
}

// pidIn waits for a file holding a pid.
func pidIn(t *testing.T, p string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(p)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no pid in %s", p)
	return 0
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return !strings.Contains(string(b), ") Z ")
}

func TestClientGoneStopsItsJobs(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 1})
	o := opts(f)
	o.Target = "h1"
	o.BackgroundAfter = time.Second
	c := connect(t, o, "")
	r := c.call(t, "bash", map[string]any{"command": "echo $$ > pid; exec sleep 300"}, nil, nil)
	if r.Meta["rex/running"] != true {
		t.Fatalf("not in the background: %s", text(t, r))
	}
	pid := pidIn(t, filepath.Join(f.Home("h1"), "pid"))
	c.cs.Close()
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		t.Fatal("the server did not end with its client")
	}
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pid) {
		t.Errorf("the job's process %d outlived its client", pid)
	}
}

func TestAllowCommandsStillApply(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	// local's rexd with a policy that allows echo only.
	cfg := filepath.Join(f.Dir, "rexd.toml")
	if err := os.WriteFile(cfg, []byte("[security]\nallow_commands = [\"echo\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(fanout.OperatorLimits(), "--config", cfg, "--root", f.LocalHome, "--audit", f.AuditPath("local"))
	app := &commands.App{
		Pool:    fanout.NewPool(commands.Connectors{Local: fanout.LocalConnector(fleettest.Rexd(), args...)}, fanout.PoolOptions{}),
		Resolve: f.App.Resolve, ConfigDir: f.App.ConfigDir, CacheDir: f.App.CacheDir,
	}
	t.Cleanup(func() { app.Pool.Close() })
	c := connect(t, mcpserver.Options{App: app, Store: f.Store}, "")
	r := c.call(t, "bash", map[string]any{"command": "touch made"}, nil, nil)
	if got := text(t, r); !r.IsError || !strings.Contains(got, "local · failed\n") || !strings.Contains(got, `command "/bin/sh" is not in this rexd's allow list`) {
		t.Errorf("a refused command: isError %v\n%s", r.IsError, got)
	}
	if _, err := os.Stat(filepath.Join(f.LocalHome, "made")); err == nil {
		t.Error("the refused command ran")
	}
}

// TestChainToolKeepsTheToolListed: a chain tool's name stands for the
// tool tools/list described, which is what the client approved. Tool
// files added later can give the name to another tool (ops.disk sorts
// before ops/disk and takes ops_disk); a call then runs nothing and says
// why, rather than run the other tool.
func TestChainToolKeepsTheToolListed(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	dir := filepath.Join(f.App.ConfigDir, ".ai", "tools")
	os.MkdirAll(filepath.Join(dir, "ops"), 0o755)
	os.WriteFile(filepath.Join(dir, "ops", "disk.sh"), []byte("#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\n# rex: description: disk\necho listed-1a2\n"), 0o755)
	c := connect(t, opts(f), "")
	if r := c.call(t, "ops_disk", map[string]any{}, nil, nil); !strings.Contains(text(t, r), "listed-1a2") {
		t.Fatalf("ops_disk before: %s", text(t, r))
	}
	os.WriteFile(filepath.Join(dir, "ops.disk.sh"), []byte("#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\n# rex: description: other\necho other-3b4\n"), 0o755)
	r := c.call(t, "ops_disk", map[string]any{}, nil, nil)
	if got := text(t, r); strings.Contains(got, "other-3b4") || !r.IsError {
		t.Errorf("ops_disk, listed as ops/disk, ran another tool: %s", got)
	}
}

// TestChainToolTheSDKRefusesIsLeftOut: a chain tool whose schema the MCP
// SDK refuses (it panics in AddTool: here x-mcp-header on an object) is
// left out with a notice, as a tool that cannot be read is; rex mcp
// serves the others rather than crash at start.
func TestChainToolTheSDKRefusesIsLeftOut(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	dir := filepath.Join(f.App.ConfigDir, ".ai", "tools", "ops")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "hdr.sh"), []byte("#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\n# rex: description: hdr\n# rex: config_schema: {type: object, properties: {a: {type: object, x-mcp-header: X-A}}}\necho hdr\n"), 0o755)
	var notices strings.Builder
	o := opts(f)
	o.Notices = &notices
	var srv *mcpserver.Server
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("rex mcp crashed at start: %v", r)
			}
		}()
		var err error
		if srv, err = mcpserver.New(o); err != nil {
			t.Fatal(err)
		}
	}()
	names := strings.Join(srv.Tools(), " ")
	if strings.Contains(names, "ops_hdr") || !strings.Contains(names, "bash") || !strings.Contains(notices.String(), "ops/hdr") {
		t.Errorf("tools %s; notices %q", names, notices.String())
	}
}

// TestResourcesFollowAllow: a resource is served only with the tool that
// does the same thing (files with read, the registry with targets); one
// left out is neither listed nor read, and reading it says which flag
// serves it.
func TestResourcesFollowAllow(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	f.WriteFile(t, "local", "secret.txt", "not for you\n")
	for _, tt := range []struct {
		name              string
		mod               func(*mcpserver.Options)
		devices, files    bool
		devicesErr, fileE string
	}{
		{"all", func(o *mcpserver.Options) {}, true, true, "", ""},
		{"read-only", func(o *mcpserver.Options) { o.ReadOnly = true }, true, true, "", ""},
		{"allow targets", func(o *mcpserver.Options) { o.Allow = []string{"targets"} }, true, false, "",
			"rex://target/local/file/secret.txt is not served: rex mcp runs with --allow targets and file resources come with the read tool; add read to --allow"},
		{"allow read", func(o *mcpserver.Options) { o.Allow = []string{"read"} }, false, true,
			"rex://devices is not served: rex mcp runs with --allow read and the device registry comes with the targets tool; add targets to --allow", ""},
		{"allow bash", func(o *mcpserver.Options) { o.Allow = []string{"bash"} }, false, false,
			"rex://devices is not served: rex mcp runs with --allow bash and the device registry comes with the targets tool; add targets to --allow",
			"rex://target/local/file/secret.txt is not served: rex mcp runs with --allow bash and file resources come with the read tool; add read to --allow"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := opts(f)
			tt.mod(&o)
			c := connect(t, o, "")
			ctx := fleettest.Context(t)
			var uris, tmpls []string
			if list, err := c.cs.ListResources(ctx, nil); err == nil {
				for _, r := range list.Resources {
					uris = append(uris, r.URI)
				}
			}
			if list, err := c.cs.ListResourceTemplates(ctx, nil); err == nil {
				for _, r := range list.ResourceTemplates {
					tmpls = append(tmpls, r.URITemplate)
				}
			}
			if got := slices.Contains(uris, "rex://devices"); got != tt.devices || len(uris) > 1 {
				t.Errorf("resources %v, want rex://devices listed: %v", uris, tt.devices)
			}
			if got := slices.Contains(tmpls, mcpserver.FileTemplate); got != tt.files || len(tmpls) > 1 {
				t.Errorf("resource templates %v, want the file template listed: %v", tmpls, tt.files)
			}
			for uri, want := range map[string]string{"rex://devices": tt.devicesErr, "rex://target/local/file/secret.txt": tt.fileE} {
				r, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				switch {
				case want == "" && err != nil:
					t.Errorf("%s: %v", uri, err)
				case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
					t.Errorf("%s: %v, want %q", uri, err, want)
				case want != "" && r != nil:
					t.Errorf("%s was read: %+v", uri, r.Contents)
				}
			}
		})
	}
}
