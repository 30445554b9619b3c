package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rexconsole/rex/internal/fleettest"
)

// mcpNotes keeps the progress and log notifications a client got.
type mcpNotes struct {
	mu       sync.Mutex
	progress map[any][]string
	logs     []string
	signal   chan struct{}
}

func (n *mcpNotes) add(f func()) {
	n.mu.Lock()
	f()
	n.mu.Unlock()
	select {
	case n.signal <- struct{}{}:
	default:
	}
}

func (n *mcpNotes) progressOf(token any) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.progress[token], "\n")
}

func (n *mcpNotes) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for !cond() {
		select {
		case <-n.signal:
		case <-deadline:
			t.Fatalf("never got %s", what)
		}
	}
}

// mcpSession runs the built `rex mcp ARGS...` in the fleet's environment
// with the go-sdk client over mcp.CommandTransport.
func mcpSession(t *testing.T, f *sshFleet, version string, args ...string) (*mcp.ClientSession, *mcpNotes, *lockedBuffer) {
	t.Helper()
	cmd := f.cmd(append([]string{"mcp"}, args...)...)
	stderr := &lockedBuffer{} // exec's goroutine writes it while the test reads
	cmd.Stderr = stderr
	notes := &mcpNotes{progress: map[any][]string{}, signal: make(chan struct{}, 1)}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-client", Version: "1.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			notes.add(func() {
				notes.progress[r.Params.ProgressToken] = append(notes.progress[r.Params.ProgressToken], r.Params.Message)
			})
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			s, _ := r.Params.Data.(string)
			notes.add(func() { notes.logs = append(notes.logs, r.Params.Logger+": "+s) })
		},
	})
	cs, err := client.Connect(mcpCtx(t), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("rex mcp %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Logf("close: %v", err)
		}
	})
	return cs, notes, stderr
}

func mcpCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mcpCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, token any) (*mcp.CallToolResult, string) {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if token != nil {
		p.SetProgressToken(token)
	}
	r, err := cs.CallTool(mcpCtx(t), p)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var text []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return r, strings.Join(text, "\n")
}

// auditOf reads a rexd audit log: (client, method, command) of each line.
func auditOf(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	var out []map[string]any
	for _, l := range fleettest.AuditLines(b) {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

// audited reports whether a log has an exec.start of command by client.
func audited(t *testing.T, path, client, command string) bool {
	for _, e := range auditOf(t, path) {
		p, _ := e["params"].(map[string]any)
		if e["client_name"] == client && e["method"] == "exec.start" && p["command"] == command {
			return true
		}
	}
	return false
}

func TestMCPEndToEnd(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	for _, dir := range []string{f.home, f.hostHome("h1")} {
		os.WriteFile(filepath.Join(dir, "role"), []byte("web\n"), 0o644)
	}
	// local and both sshd hosts; h2 has no role file.
	// --background-after bounds every wait; the long command below asks
	// for less with timeout_s (the first calls also connect and bootstrap,
	// which takes its time on a loaded machine).
	cs, notes, stderr := mcpSession(t, f, "2025-11-25", "--target", "local,good", "--background-after", "90s")

	tl, err := cs.ListTools(mcpCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tool := range tl.Tools {
		tools[tool.Name] = tool
	}
	for _, name := range []string{"bash", "read", "write", "edit", "list", "glob", "grep", "job_output", "job_kill", "targets", "rex_ops_disk"} {
		if tools[name] == nil {
			t.Fatalf("no %s among the tools", name)
		}
	}
	if s, _ := json.Marshal(tools["bash"].InputSchema); !strings.Contains(string(s), `"required":["command"]`) {
		t.Errorf("bash's schema %s", s)
	}
	if a := tools["bash"].Annotations; a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("bash's annotations %+v", a)
	}
	if a := tools["read"].Annotations; !a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint {
		t.Errorf("read's annotations %+v", a)
	}

	// bash on the group, one host failing, streamed as it runs.
	if err := cs.SetLoggingLevel(mcpCtx(t), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	r, text := mcpCall(t, cs, "bash", map[string]any{"command": "echo ok; cat role"}, "p1")
	if r.IsError || !strings.HasPrefix(text, "target local,good: h[1-2],local\n") || !strings.Contains(text, "h2 · exit 1\n") ||
		!strings.Contains(text, "  cat: role: No such file or directory\n") || !strings.HasSuffix(text, "\n2/3 ok; h2 exit 1") {
		t.Fatalf("bash on the group (isError %v):\n%s\nstderr:\n%s", r.IsError, text, stderr)
	}
	notes.waitFor(t, "progress from every host", func() bool {
		p := notes.progressOf("p1")
		return strings.Contains(p, "local: web") && strings.Contains(p, "h1: web") && strings.Contains(p, "h2: exit 1")
	})
	notes.waitFor(t, "log messages", func() bool {
		notes.mu.Lock()
		defer notes.mu.Unlock()
		return slices.ContainsFunc(notes.logs, func(l string) bool { return strings.Contains(l, "h2: exit 1") })
	})

	// A long command moves to the background and is finished with job_output.
	cmd := "echo started; while [ ! -e go ]; do sleep 0.05; done; echo finished"
	r, text = mcpCall(t, cs, "bash", map[string]any{"command": cmd, "timeout_s": 2}, "p2")
	job, _ := r.Meta["rex/job_id"].(string)
	if r.IsError || job == "" || !strings.Contains(text, "still running after 2s; it goes on in the background as job "+job) {
		t.Fatalf("long command: %v\n%s", r.Meta, text)
	}
	for _, dir := range []string{f.home, f.hostHome("h1"), f.hostHome("h2")} {
		os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	}
	for i := 0; ; i++ {
		r, text = mcpCall(t, cs, "job_output", map[string]any{"job_id": job}, nil)
		if r.Meta["rex/running"] != true || i == 30 {
			break
		}
	}
	if r.IsError || !strings.Contains(text, "h[1-2],local (3 hosts) · exit 0\n  started\n  finished\n3/3 ok") {
		t.Errorf("job_output:\n%s", text)
	}

	// Every call is in each host's audit log as rex-mcp/<client>.
	for _, path := range []string{
		filepath.Join(f.home, ".local", "state", "rexd", "audit.log"),
		filepath.Join(f.hostHome("h1"), ".local", "state", "rexd", "audit.log"),
		filepath.Join(f.hostHome("h2"), ".local", "state", "rexd", "audit.log"),
	} {
		if !audited(t, path, "rex-mcp/e2e-client", cmd) {
			t.Errorf("%s has no exec.start of the long command by rex-mcp/e2e-client", path)
		}
	}
	if !strings.Contains(stderr.String(), "rex mcp: serving bash, read, write, edit") {
		t.Errorf("stderr: %s", stderr)
	}
}

func TestMCPReadOnly(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	cs, _, _ := mcpSession(t, f, "", "--target", "h1", "--read-only")
	tl, err := cs.ListTools(mcpCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tl.Tools {
		names = append(names, tool.Name)
		if !tool.Annotations.ReadOnlyHint {
			t.Errorf("%s is offered under --read-only", tool.Name)
		}
	}
	if strings.Join(names, ",") != "glob,grep,job_output,list,read,targets" {
		t.Errorf("tools %v", names)
	}
	r, text := mcpCall(t, cs, "write", map[string]any{"path": "x", "content": "y"}, nil)
	if !r.IsError || !strings.HasPrefix(text, "write is not offered: rex mcp runs with --read-only;") {
		t.Errorf("write: %v %q", r.IsError, text)
	}
	if _, err := os.Stat(filepath.Join(f.hostHome("h1"), "x")); err == nil {
		t.Error("write ran under --read-only")
	}
	os.WriteFile(filepath.Join(f.hostHome("h1"), "motd"), []byte("hi\n"), 0o644)
	if r, text := mcpCall(t, cs, "read", map[string]any{"path": "motd"}, nil); r.IsError || text != "target h1\nh1 · ok\n  hi\n1/1 ok" {
		t.Errorf("read: %q", text)
	}
}

func TestMCPPrintConfig(t *testing.T) {
	e := newRexEnv(t, rexBin)
	for client, want := range map[string]string{
		"claude": `{"mcpServers":{"rex":{"command":"` + rexBin + `","args":["mcp","--target","web","--read-only"]}}}`,
		"cursor": `{"mcpServers":{"rex":{"command":"` + rexBin + `","args":["mcp","--target","web","--read-only"]}}}`,
		"vscode": `{"servers":{"rex":{"type":"stdio","command":"` + rexBin + `","args":["mcp","--target","web","--read-only"]}}}`,
	} {
		out, errOut, code := e.run("mcp", "--target", "web", "--read-only", "--print-config", client)
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(out)); err != nil || code != 0 || compact.String() != want {
			t.Errorf("%s: exit %d, %v\n%s\nwant %s", client, code, err, out, want)
		}
		if !strings.Contains(errOut, "Add it to") && !strings.Contains(errOut, "claude mcp add rex -- ") {
			t.Errorf("%s: stderr %q", client, errOut)
		}
	}
	if _, errOut, code := e.run("mcp", "--print-config", "emacs"); code != 2 || !strings.Contains(errOut, "the clients are claude, cursor and vscode") {
		t.Errorf("unknown client: exit %d %q", code, errOut)
	}
	if _, errOut, code := e.run("mcp", "--allow", "rm"); code != 2 || !strings.Contains(errOut, `--allow rm: there is no tool "rm"`) {
		t.Errorf("--allow rm: exit %d %q", code, errOut)
	}
}

// inspector is the MCP Inspector CLI that .ci/run installs (npm ci
// --prefix .ci/inspector); REX_MCP_INSPECTOR names another.
func inspector(t *testing.T) string {
	t.Helper()
	p := os.Getenv("REX_MCP_INSPECTOR")
	if p == "" {
		p, _ = filepath.Abs(filepath.Join("..", "..", ".ci", "inspector", "node_modules", ".bin", "mcp-inspector"))
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the MCP Inspector CLI is not installed at %s: run npm ci --prefix .ci/inspector (bash .ci/run does)", p)
	}
	return p
}

// runInspector runs the Inspector CLI against the built rex mcp in the
// fleet's environment and decodes its JSON answer.
func runInspector(t *testing.T, f *sshFleet, mcpArgs []string, args ...string) map[string]any {
	t.Helper()
	// As its README has it: --cli CMD ARGS, then the Inspector's options
	// (--tool-arg takes every word after it).
	argv := append([]string{"--cli", rexBin, "mcp"}, mcpArgs...)
	argv = append(append(argv, "--format", "json"), args...)
	cmd := exec.Command(inspector(t), argv...)
	cmd.Env = f.env
	cmd.Dir = f.home
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("mcp-inspector %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), err, out.String(), errOut.String())
		}
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("mcp-inspector %s did not end\nstderr:\n%s", strings.Join(argv, " "), errOut.String())
	}
	var res struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Result == nil {
		t.Fatalf("mcp-inspector's answer %q: %v\nstderr:\n%s", out.String(), err, errOut.String())
	}
	return res.Result
}

func TestMCPInspector(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	os.WriteFile(filepath.Join(f.hostHome("h1"), "role"), []byte("web\n"), 0o644)
	// --strict exits 6 on tool schemas that clients may not take.
	list := runInspector(t, f, []string{"--target", "good"}, "--method", "tools/list", "--strict")
	var names []string
	for _, tool := range list["tools"].([]any) {
		tm := tool.(map[string]any)
		names = append(names, tm["name"].(string))
		if tm["name"] == "bash" {
			a := tm["annotations"].(map[string]any)
			if a["destructiveHint"] != true || a["readOnlyHint"] != false {
				t.Errorf("bash's annotations %v", a)
			}
		}
	}
	for _, want := range []string{"bash", "read", "write", "edit", "list", "glob", "grep", "job_output", "job_kill", "targets"} {
		if !slices.Contains(names, want) {
			t.Errorf("the Inspector lists %v, without %s", names, want)
		}
	}

	for _, era := range []string{"legacy", "modern"} {
		command := "echo " + era + "; cat role 2>&1" // one stream: its lines keep their order
		res := runInspector(t, f, []string{"--target", "good"}, "--protocol-era", era,
			"--method", "tools/call", "--tool-name", "bash", "--tool-arg", "command="+command)
		content := res["content"].([]any)
		text := content[0].(map[string]any)["text"].(string)
		want := "target good: h[1-2]\nh1 · exit 0\n  " + era + "\n  web\nh2 · exit 1\n  " + era + "\n  cat: role: No such file or directory\n1/2 ok; h2 exit 1"
		if text != want || res["isError"] == true {
			t.Errorf("%s: bash on the group:\n%s\nwant:\n%s", era, text, want)
		}
		for _, h := range []string{"h1", "h2"} {
			if !audited(t, filepath.Join(f.hostHome(h), ".local", "state", "rexd", "audit.log"), "rex-mcp/inspector-cli", command) {
				t.Errorf("%s: %s's audit log has no exec.start by rex-mcp/inspector-cli: %v", era, h, auditOf(t, filepath.Join(f.hostHome(h), ".local", "state", "rexd", "audit.log")))
			}
		}
	}
}

func TestMCPClientGoneStopsItsJobs(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	cmd := f.cmd("mcp", "--target", "h1,local", "--background-after", "1s")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	// Long enough that rex must end by itself when its stdin closes: Close
	// reports the SIGTERM it would otherwise send.
	transport := &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Minute}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-client"}, nil).Connect(mcpCtx(t), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, text := mcpCall(t, cs, "bash", map[string]any{"command": "echo $$ > pid; exec sleep 300"}, nil)
	if r.Meta["rex/running"] != true {
		t.Fatalf("not a job:\n%s", text)
	}
	pids := map[string]int{}
	for _, dir := range []string{f.home, f.hostHome("h1")} {
		pids[dir] = waitPid(t, filepath.Join(dir, "pid"))
	}
	if err := cs.Close(); err != nil {
		t.Errorf("rex mcp did not end by itself when its client went: %v\nstderr:\n%s", err, stderr.String())
	}
	for dir, pid := range pids {
		deadline := time.Now().Add(30 * time.Second)
		for !zombie(pid) && syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if !zombie(pid) && syscall.Kill(pid, 0) == nil {
			t.Errorf("the job's sleep %d (%s) outlived rex mcp", pid, dir)
		}
	}
}

// waitPid waits for a file holding a pid.
func waitPid(t *testing.T, p string) int {
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
