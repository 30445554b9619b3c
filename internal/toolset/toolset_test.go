package toolset_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/fleettest"
	"github.com/rexconsole/rex/internal/toolset"
)

func TestMain(m *testing.M) { fleettest.Main(m) }

// recorder keeps a call's events.
type recorder struct {
	mu     sync.Mutex
	events []toolset.Event
	out    map[string]*strings.Builder
	notify chan toolset.Event
}

func newRecorder() *recorder {
	return &recorder{out: map[string]*strings.Builder{}, notify: make(chan toolset.Event, 1024)}
}

func (r *recorder) event(ev toolset.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	if ev.Kind == toolset.EventOutput {
		if r.out[ev.Host] == nil {
			r.out[ev.Host] = &strings.Builder{}
		}
		r.out[ev.Host].Write(ev.Data)
	}
	r.mu.Unlock()
	select {
	case r.notify <- ev:
	default:
	}
}

func (r *recorder) output(host string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out[host] == nil {
		return ""
	}
	return r.out[host].String()
}

func (r *recorder) kinds(k toolset.EventKind) []toolset.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []toolset.Event
	for _, e := range r.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// waitOutput waits until a host's streamed output contains s.
func (r *recorder) waitOutput(t *testing.T, host, s string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(r.output(host), s) {
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("%s never printed %q; got %q", host, s, r.output(host))
		}
	}
}

func input(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newToolset(t *testing.T, f *fleettest.Fleet, opts toolset.Options) *toolset.Toolset {
	opts.App = f.App
	ts := toolset.New(opts)
	t.Cleanup(func() { ts.Close() })
	return ts
}

func TestBashOnLocal(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	ts := newToolset(t, f, toolset.Options{})
	rec := newRecorder()
	res := ts.Do(fleettest.Context(t), toolset.Call{Tool: "bash", Input: input(t, map[string]any{"command": "echo hello; echo oops >&2"})}, rec.event)
	// stdout and stderr are two pipes: either may come first.
	want := "target local\nlocal · exit 0\n  hello\n  oops\n1/1 ok"
	other := "target local\nlocal · exit 0\n  oops\n  hello\n1/1 ok"
	if (res.Text != want && res.Text != other) || res.IsError || res.Summary != "1/1 ok" {
		t.Fatalf("result %+v\ntext:\n%s\nwant:\n%s", res, res.Text, want)
	}
	if got := rec.output("local"); got != "hello\noops\n" && got != "oops\nhello\n" {
		t.Errorf("streamed output %q", got)
	}
	if starts := rec.kinds(toolset.EventStart); len(starts) != 1 || strings.Join(starts[0].Hosts, ",") != "local" {
		t.Errorf("start events %+v", starts)
	}
	// rexd audited the command under the caller's name.
	found := false
	for _, e := range f.Audit(t, "local") {
		if e.Method == "exec.start" && e.ClientName == "rex-agent" && e.Params["command"] == "echo hello; echo oops >&2" {
			found = true
		}
	}
	if !found {
		t.Errorf("no exec.start by rex-agent in local's audit log: %+v", f.Audit(t, "local"))
	}
}

func TestBashFansOutWithOneHostFailing(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 3, Down: true})
	ts := newToolset(t, f, toolset.Options{ClientName: "rex-mcp/test"})
	f.WriteFile(t, "h1", "role", "web\n")
	f.WriteFile(t, "h2", "role", "web\n")
	rec := newRecorder()
	res := ts.Do(fleettest.Context(t), toolset.Call{Tool: "bash", Target: "fleet",
		Input: input(t, map[string]any{"command": "cat role && echo ok"})}, rec.event)
	wantHead := "target fleet: down,h[1-3]\n" +
		"h[1-2] (2 hosts) · exit 0\n  web\n  ok\n" +
		"h3 · exit 1\n  cat: role: No such file or directory\n" +
		"down · unreachable\n  connect down"
	if !strings.HasPrefix(res.Text, wantHead) {
		t.Fatalf("text:\n%s\nwant it to start:\n%s", res.Text, wantHead)
	}
	if res.Summary != "2/4 ok; h3 exit 1, down unreachable" || !strings.HasSuffix(res.Text, "\n"+res.Summary) {
		t.Errorf("summary %q; text:\n%s", res.Summary, res.Text)
	}
	if res.IsError || res.Target != "fleet" || strings.Join(res.Hosts, ",") != "h1,h2,h3,down" {
		t.Errorf("result %+v", res)
	}
	for _, h := range []string{"h1", "h2"} {
		if rec.output(h) != "web\nok\n" {
			t.Errorf("%s streamed %q", h, rec.output(h))
		}
	}
	done := map[string]string{}
	for _, e := range rec.kinds(toolset.EventHostDone) {
		done[e.Host] = e.Status
	}
	if done["h1"] != "exit 0" || done["h3"] != "exit 1" || done["down"] != "unreachable" {
		t.Errorf("host ends %v", done)
	}
	for _, h := range []string{"h1", "h2", "h3"} {
		ok := false
		for _, e := range f.Audit(t, h) {
			if e.Method == "exec.start" && e.ClientName == "rex-mcp/test" {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s's audit log has no exec.start by rex-mcp/test", h)
		}
	}
}

func TestBashLongOutputIsCut(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	ts := newToolset(t, f, toolset.Options{})
	res := ts.Do(fleettest.Context(t), toolset.Call{Tool: "bash", Input: input(t, map[string]any{"command": "seq 1 200000"})}, nil)
	if !strings.Contains(res.Text, "\n  1\n  2\n") || !strings.Contains(res.Text, "\n  200000\n1/1 ok") {
		t.Fatalf("head or tail missing:\n%s", res.Text)
	}
	if !strings.Contains(res.Text, "\n  … 199760 lines omitted …\n") || len(res.Text) > 8<<10 {
		t.Errorf("%d bytes of text for 1.3 MB of output:\n%s", len(res.Text), res.Text)
	}
}

// pidOf waits for a host's command to have written its pid into a file.
func pidOf(t *testing.T, rec *recorder, host string) int {
	t.Helper()
	rec.waitOutput(t, host, "pid ")
	out := rec.output(host)
	i := strings.Index(out, "pid ")
	pid, err := strconv.Atoi(strings.Fields(out[i+4:])[0])
	if err != nil {
		t.Fatalf("pid in %q: %v", out, err)
	}
	return pid
}

// gone waits for a process to end.
func gone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("process %d still runs", pid)
}

func TestBashCancelStopsTheRemoteCommand(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 1})
	ts := newToolset(t, f, toolset.Options{})
	rec := newRecorder()
	ctx, cancel := context.WithCancel(fleettest.Context(t))
	done := make(chan *toolset.Result)
	go func() {
		done <- ts.Do(ctx, toolset.Call{Tool: "bash", Target: "h1", Input: input(t, map[string]any{"command": "echo pid $$; exec sleep 300"})}, rec.event)
	}()
	pid := pidOf(t, rec, "h1")
	cancel()
	res := <-done
	if !res.IsError || !strings.Contains(res.Text, "cancelled by the operator") {
		t.Errorf("cancelled call: %+v", res)
	}
	gone(t, pid)
}

func TestBashMovesToTheBackground(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 2})
	ts := newToolset(t, f, toolset.Options{})
	ctx := fleettest.Context(t)
	rec := newRecorder()
	// Each host waits for a file the test creates after the call returned.
	cmd := "echo started; while [ ! -e go ]; do sleep 0.05; done; echo finished"
	res := ts.Do(ctx, toolset.Call{Tool: "bash", Target: "fleet", Input: input(t, map[string]any{"command": cmd, "timeout_s": 1})}, rec.event)
	if !res.Running || res.JobID != "j1" || res.IsError {
		t.Fatalf("result %+v", res)
	}
	// Both hosts run; whether each printed "started" within the second
	// (and so whether their blocks are gathered) depends on the machine.
	if !strings.Contains(res.Text, "h1 · running") && !strings.Contains(res.Text, "h[1-2] (2 hosts) · running") ||
		!strings.Contains(res.Text, `job_output with job_id "j1"`) || !strings.Contains(res.Summary, "0/2 ok; h[1-2] running") {
		t.Errorf("text:\n%s", res.Text)
	}
	if bg := rec.kinds(toolset.EventBackground); len(bg) != 1 || bg[0].JobID != "j1" {
		t.Errorf("background events %+v", bg)
	}
	if got := ts.Jobs(); strings.Join(got, ",") != "j1" {
		t.Errorf("jobs %v", got)
	}
	f.WriteFile(t, "h1", "go", "")
	f.WriteFile(t, "h2", "go", "")
	out := ts.Do(ctx, toolset.Call{Tool: "job_output", Input: input(t, map[string]any{"job_id": "j1", "wait_s": 60})}, nil)
	if out.Running || out.IsError || out.Summary != "2/2 ok" || !strings.Contains(out.Text, "  started\n  finished\n") || out.Target != "fleet" {
		t.Errorf("job_output %+v\n%s", out, out.Text)
	}
	// The job kept streaming after its call returned.
	rec.waitOutput(t, "h2", "finished")
	if len(rec.kinds(toolset.EventDone)) != 1 {
		t.Errorf("no done event for the job")
	}
	bad := ts.Do(ctx, toolset.Call{Tool: "job_output", Input: input(t, map[string]any{"job_id": "j9"})}, nil)
	if !bad.IsError || !strings.Contains(bad.Text, `there is no job "j9"`) {
		t.Errorf("unknown job: %+v", bad)
	}
}

func TestJobKill(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 1})
	ts := newToolset(t, f, toolset.Options{})
	ctx := fleettest.Context(t)
	rec := newRecorder()
	res := ts.Do(ctx, toolset.Call{Tool: "bash", Target: "h1", Input: input(t, map[string]any{"command": "echo pid $$; exec sleep 300", "timeout_s": 1})}, rec.event)
	if !res.Running {
		t.Fatalf("result %+v", res)
	}
	pid := pidOf(t, rec, "h1")
	a, err := ts.Prepare(ctx, toolset.Call{Tool: "job_kill", Input: input(t, map[string]any{"job_id": res.JobID})})
	if err != nil {
		t.Fatal(err)
	}
	if a.Target != "h1" || !strings.Contains(a.Command, "exec sleep 300") {
		t.Errorf("job_kill routes to %q, command %q", a.Target, a.Command)
	}
	k := ts.Run(ctx, a, nil)
	if k.Running || !strings.Contains(k.Text, "job j1 stopped on every host") || !strings.Contains(k.Text, "h1 · stopped") {
		t.Errorf("job_kill:\n%s", k.Text)
	}
	gone(t, pid)
}

func TestCloseStopsBackgroundJobs(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 1})
	ts := toolset.New(toolset.Options{App: f.App})
	rec := newRecorder()
	res := ts.Do(fleettest.Context(t), toolset.Call{Tool: "bash", Target: "h1", Input: input(t, map[string]any{"command": "echo pid $$; exec sleep 300", "timeout_s": 1})}, rec.event)
	if !res.Running {
		t.Fatalf("result %+v", res)
	}
	pid := pidOf(t, rec, "h1")
	ts.Close()
	gone(t, pid)
}

func TestFileTools(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 2})
	ts := newToolset(t, f, toolset.Options{})
	ctx := fleettest.Context(t)
	do := func(tool string, in map[string]any) *toolset.Result {
		t.Helper()
		return ts.Do(ctx, toolset.Call{Tool: tool, Target: "fleet", Input: input(t, in)}, nil)
	}

	w := do("write", map[string]any{"path": "etc/app.conf", "content": "port = 80\nname = web\n"})
	if w.Summary != "2/2 ok" || !strings.Contains(w.Text, "· ok\n  created ") {
		t.Errorf("write:\n%s", w.Text)
	}
	for _, h := range []string{"h1", "h2"} {
		if got := f.ReadFile(t, h, "etc/app.conf"); got != "port = 80\nname = web\n" {
			t.Errorf("%s holds %q", h, got)
		}
	}

	r := do("read", map[string]any{"path": "etc/app.conf"})
	if r.Text != "target fleet: h[1-2]\nh[1-2] (2 hosts) · ok\n  port = 80\n  name = web\n2/2 ok" {
		t.Errorf("read:\n%s", r.Text)
	}
	r = do("read", map[string]any{"path": "etc/app.conf", "offset": 2, "limit": 1})
	if !strings.Contains(r.Text, "· lines 2-2 of 2\n  name = web\n") {
		t.Errorf("read with offset:\n%s", r.Text)
	}

	// One host's copy differs: the edit works there only where old occurs.
	f.WriteFile(t, "h2", "etc/app.conf", "port = 8080\n")
	e := do("edit", map[string]any{"path": "etc/app.conf", "old": "port = 80\n", "new": "port = 81\n"})
	if !strings.Contains(e.Text, "h1 · ok\n  replaced 1 occurrence in ") ||
		!strings.Contains(e.Text, "h2 · error\n  old text not found in ") || e.Summary != "1/2 ok; h2 error" {
		t.Errorf("edit:\n%s", e.Text)
	}
	if got := f.ReadFile(t, "h1", "etc/app.conf"); got != "port = 81\nname = web\n" {
		t.Errorf("h1 after the edit: %q", got)
	}
	f.WriteFile(t, "h1", "dup", "a\na\n")
	e = ts.Do(ctx, toolset.Call{Tool: "edit", Target: "h1", Input: input(t, map[string]any{"path": "dup", "old": "a", "new": "b"})}, nil)
	if !e.IsError || !strings.Contains(e.Text, "old text occurs 2 times") {
		t.Errorf("ambiguous edit:\n%s", e.Text)
	}
	e = ts.Do(ctx, toolset.Call{Tool: "edit", Target: "h1", Input: input(t, map[string]any{"path": "dup", "old": "a", "new": "b", "replace_all": true})}, nil)
	if e.IsError || f.ReadFile(t, "h1", "dup") != "b\nb\n" {
		t.Errorf("replace_all:\n%s", e.Text)
	}

	l := do("list", map[string]any{"path": "etc"})
	if !strings.Contains(l.Text, "h[1-2] (2 hosts) · ok\n  app.conf\n") {
		t.Errorf("list:\n%s", l.Text)
	}
	g := do("glob", map[string]any{"pattern": "**/*.conf"})
	if !strings.Contains(g.Text, "· 1 match\n  etc/app.conf\n") {
		t.Errorf("glob:\n%s", g.Text)
	}
	gr := do("grep", map[string]any{"pattern": "name = [a-z]+", "path": "etc"})
	if !strings.Contains(gr.Text, "h1 · matches\n  etc/app.conf:2:name = web\n") || !strings.Contains(gr.Text, "h2 · no matches\n") ||
		gr.Summary != "2/2 ok" {
		t.Errorf("grep:\n%s", gr.Text)
	}
	// Patterns are arguments, never shell text.
	gr = do("grep", map[string]any{"pattern": "$(touch pwned)", "path": "."})
	if _, err := os.Stat(filepath.Join(f.Home("h1"), "pwned")); err == nil {
		t.Errorf("a grep pattern ran as shell: %s", gr.Text)
	}

	miss := do("read", map[string]any{"path": "nope"})
	if !miss.IsError || !strings.Contains(miss.Text, "h[1-2] (2 hosts) · error\n") {
		t.Errorf("missing file:\n%s", miss.Text)
	}
}

func TestPrepare(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 2})
	ts := newToolset(t, f, toolset.Options{})
	ctx := fleettest.Context(t)
	a, err := ts.Prepare(ctx, toolset.Call{Tool: "edit", Target: "fleet",
		Input: input(t, map[string]any{"path": "/etc/motd", "old": "hello\n", "new": "goodbye\n"})})
	if err != nil {
		t.Fatal(err)
	}
	if a.Command != "edit /etc/motd" || a.HostsFolded() != "h[1-2]" || !strings.Contains(a.Detail, "-hello\n+goodbye\n") || a.Tool.ReadOnly {
		t.Errorf("edit action %+v", a)
	}
	a, err = ts.Prepare(ctx, toolset.Call{Tool: "bash", Input: input(t, map[string]any{"command": "df -h"})})
	if err != nil || a.Command != "df -h" || a.Target != "local" || strings.Join(a.Hosts, ",") != "local" {
		t.Errorf("bash action %+v, %v", a, err)
	}
	for _, tt := range []struct {
		tool, input, target, err string
	}{
		{"bash", `{}`, "", "bash: missing required argument command"},
		{"bash", `{"command": 3}`, "", "argument command must be a string"},
		{"bash", `{"command": "ls", "host": "x"}`, "", `there is no argument "host"`},
		{"bash", `[1]`, "", "the arguments must be a JSON object"},
		{"edit", `{"path": "x", "old": "", "new": "y"}`, "", "old is empty"},
		{"rm", `{}`, "", `there is no tool "rm"; the tools are bash, read, write`},
		{"read", `{"path": "x"}`, "nosuch", "target nosuch:"},
	} {
		_, err := ts.Prepare(ctx, toolset.Call{Tool: tt.tool, Input: json.RawMessage(tt.input), Target: tt.target})
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s %s: error %v, want %q", tt.tool, tt.input, err, tt.err)
		}
	}
}

func TestToolsListing(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	// A user-space executor-chain tool with a parameter schema.
	tool := "#!/bin/bash\n# rex: executor_id: rex/core/runtimes/bash/bash\n# rex: version: \"1.0.0\"\n# rex: description: say hello\n" +
		"# rex: config_schema: {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}}, \"required\": [\"name\"]}\n" +
		"echo \"hello $REX_PARAM_NAME\"\n"
	p := filepath.Join(f.App.ConfigDir, ".ai", "tools", "ops", "hello.sh")
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(tool), 0o755); err != nil {
		t.Fatal(err)
	}
	ts := newToolset(t, f, toolset.Options{ChainTools: true})
	tools, err := ts.Tools()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]toolset.Tool{}
	var names []string
	for _, tl := range tools {
		byName[tl.Name] = tl
		names = append(names, tl.Name)
	}
	if strings.Join(names[:9], ",") != "bash,read,write,edit,list,glob,grep,job_output,job_kill" {
		t.Errorf("tools %v", names)
	}
	for name, req := range map[string]string{"bash": "command", "read": "path", "write": "path,content", "edit": "path,old,new",
		"list": "path", "glob": "pattern", "grep": "pattern", "job_output": "job_id", "job_kill": "job_id"} {
		if got := strings.Join(byName[name].Required(), ","); got != req {
			t.Errorf("%s requires %q, want %q", name, got, req)
		}
	}
	for _, ro := range []string{"read", "list", "glob", "grep", "job_output"} {
		if !byName[ro].ReadOnly || byName[ro].Destructive {
			t.Errorf("%s should be read-only", ro)
		}
	}
	for _, rw := range []string{"bash", "write", "edit", "job_kill"} {
		if byName[rw].ReadOnly || !byName[rw].Destructive {
			t.Errorf("%s should be destructive", rw)
		}
	}
	for _, tl := range tools {
		if _, ok := tl.Properties()["target"]; ok {
			t.Errorf("%s has a target parameter", tl.Name)
		}
	}
	hello, ok := byName["ops_hello"]
	if !ok {
		t.Fatalf("the chain tool is not offered: %v", names)
	}
	if hello.ChainID != "ops/hello" || strings.Join(hello.Required(), ",") != "name" || !strings.Contains(hello.Description, "say hello") {
		t.Errorf("chain tool %+v", hello)
	}
	res := ts.Do(fleettest.Context(t), toolset.Call{Tool: "ops_hello", Input: input(t, map[string]any{"name": "rex"})}, nil)
	if res.Text != "target local\nlocal · exit 0\n  hello rex\n1/1 ok" {
		t.Errorf("chain tool result:\n%s", res.Text)
	}
}

func TestMaxWaitBoundsEveryWait(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	ts := newToolset(t, f, toolset.Options{MaxWait: time.Second})
	ctx := fleettest.Context(t)
	bash, _ := ts.Lookup("bash")
	jo, _ := ts.Lookup("job_output")
	if d := bash.Properties()["timeout_s"].(map[string]any)["description"]; !strings.Contains(d.(string), "(default 1, at most 1)") {
		t.Errorf("timeout_s says %q", d)
	}
	if d := jo.Properties()["wait_s"].(map[string]any)["description"]; !strings.Contains(d.(string), "(default 1, at most 1)") {
		t.Errorf("wait_s says %q", d)
	}
	// A model asking for ten minutes still gets the call back after a
	// second, with the command going on in the background.
	cmd := "echo started; while [ ! -e go ]; do sleep 0.05; done; echo finished"
	res := ts.Do(ctx, toolset.Call{Tool: "bash", Input: input(t, map[string]any{"command": cmd, "timeout_s": 600})}, nil)
	if !res.Running || !strings.Contains(res.Text, "still running after 1s") {
		t.Fatalf("bash:\n%s", res.Text)
	}
	out := ts.Do(ctx, toolset.Call{Tool: "job_output", Input: input(t, map[string]any{"job_id": res.JobID, "wait_s": 600})}, nil)
	if !out.Running || !strings.Contains(out.Text, "still running after another 1s") {
		t.Fatalf("job_output:\n%s", out.Text)
	}
	f.WriteFile(t, "local", "go", "")
	for out.Running {
		out = ts.Do(ctx, toolset.Call{Tool: "job_output", Input: input(t, map[string]any{"job_id": res.JobID})}, nil)
	}
	if out.Summary != "1/1 ok" || !strings.Contains(out.Text, "  started\n  finished\n") {
		t.Errorf("the job's end:\n%s", out.Text)
	}
}

func TestReadFile(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 1})
	ts := newToolset(t, f, toolset.Options{ClientName: "rex-mcp/test"})
	ctx := fleettest.Context(t)
	f.WriteFile(t, "h1", "notes/a.txt", "hello\nworld\n")
	f.WriteFile(t, "h1", "bin", "\x00\xff\x01")
	got, err := ts.ReadFile(ctx, "h1", "notes/a.txt")
	if err != nil || got.Text != "hello\nworld\n" || got.Binary || got.Host != "h1" || got.Path != filepath.Join(f.Home("h1"), "notes/a.txt") || got.Size != 12 {
		t.Errorf("text file: %+v, %v", got, err)
	}
	got, err = ts.ReadFile(ctx, "h1", "~/bin")
	if err != nil || !got.Binary || string(got.Data) != "\x00\xff\x01" {
		t.Errorf("binary file: %+v, %v", got, err)
	}
	for _, tt := range []struct{ host, path, err string }{
		{"h1", "nope", "h1: read ~/nope: no such file or directory"},
		{"h1,local", "x", "h1,local names 2 hosts; a file is read from one host"},
		{"nosuch", "x", "target nosuch: "},
	} {
		if _, err := ts.ReadFile(ctx, tt.host, tt.path); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s %s: %v, want %q", tt.host, tt.path, err, tt.err)
		}
	}
	ok := false
	for _, e := range f.Audit(t, "h1") {
		ok = ok || e.Method == "fs.read" && e.ClientName == "rex-mcp/test"
	}
	if !ok {
		t.Error("no fs.read by rex-mcp/test in h1's audit log")
	}
}
