package rexd_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestSpecExamples replays the request examples of the REXD v1 spec
// verbatim (testdata/spec_requests.ndjson, copied from the spec) and checks
// the shape of every reply against the spec's response examples.
func TestSpecExamples(t *testing.T) {
	const app = "/srv/myapp"
	if _, err := os.Stat(app); os.IsNotExist(err) {
		if err := os.MkdirAll(app, 0o755); err != nil {
			t.Fatalf("the spec's examples use %s; create it (as root: mkdir -p %s): %v", app, app, err)
		}
		t.Cleanup(func() { os.RemoveAll(app) })
	}
	readme := filepath.Join(app, "README.md")
	if _, err := os.Stat(readme); os.IsNotExist(err) {
		os.WriteFile(readme, []byte("# spec example\n"), 0o644)
	}
	h := start(t, "--root", app)
	f, err := os.Open("testdata/spec_requests.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		h.send(sc.Text())
		n++
	}
	if n != 4 {
		t.Fatalf("want the spec's 4 request examples, read %d", n)
	}

	open := h.response("1")
	var so map[string]any
	mustResult(t, open, &so)
	for _, k := range []string{"session_id", "protocol", "server_version", "capabilities", "limits", "workspace_roots"} {
		if _, ok := so[k]; !ok {
			t.Errorf("session.open result lacks %q: %s", k, open.Result)
		}
	}
	if so["session_id"] != "s_1" || so["protocol"] != "rexd/1" {
		t.Errorf("session.open: got session_id %v protocol %v", so["session_id"], so["protocol"])
	}
	limits := so["limits"].(map[string]any)
	if limits["default_timeout_ms"] != float64(30000) || limits["max_output_bytes"] != float64(1048576) {
		t.Errorf("limits are not the spec defaults: %v", limits)
	}
	if roots := so["workspace_roots"].([]any); len(roots) != 1 || roots[0] != app {
		t.Errorf("workspace_roots = %v, want [%s]", roots, app)
	}

	var start map[string]any
	mustResult(t, h.response("2"), &start)
	if start["process_id"] != "p_1" {
		t.Errorf("exec.start process_id = %v, want p_1", start["process_id"])
	}
	if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(start["started_at"])); err != nil {
		t.Errorf("exec.start started_at %v is not a timestamp", start["started_at"])
	}
	exit := h.exitOf("p_1", 10*time.Second)
	if exit.ExitCode == nil {
		t.Errorf("exec.exit has no exit_code: %+v", exit)
	}

	var read map[string]any
	mustResult(t, h.response("3"), &read)
	for _, k := range []string{"path", "size", "mtime", "encoding", "content", "truncated"} {
		if _, ok := read[k]; !ok {
			t.Errorf("fs.read result lacks %q", k)
		}
	}
	var write map[string]any
	mustResult(t, h.response("4"), &write)
	for _, k := range []string{"path", "bytes_written", "mtime", "created"} {
		if _, ok := write[k]; !ok {
			t.Errorf("fs.write result lacks %q", k)
		}
	}
	if write["bytes_written"] != float64(8) {
		t.Errorf("bytes_written = %v, want 8", write["bytes_written"])
	}
	if b, _ := os.ReadFile(readme); string(b) != "# Hello\n" {
		t.Errorf("README.md = %q after the spec's write", b)
	}
}

func mustResult(t *testing.T, m *protocol.Message, v any) {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("unexpected error reply: %v", m.Error)
	}
	if err := json.Unmarshal(m.Result, v); err != nil {
		t.Fatalf("decode result %s: %v", m.Result, err)
	}
}

func TestEnvelopeErrors(t *testing.T) {
	h := start(t)
	tests := []struct {
		name string
		line string
		id   string
		code int
	}{
		{"malformed JSON", `{"jsonrpc":"2.0","id":1,"method":`, "null", protocol.CodeParseError},
		{"not an object", `[1,2,3]`, "null", protocol.CodeParseError},
		{"wrong version", `{"jsonrpc":"1.0","id":2,"method":"session.info"}`, "2", protocol.CodeInvalidRequest},
		{"no method", `{"jsonrpc":"2.0","id":3}`, "3", protocol.CodeInvalidRequest},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"session.info"}`, "null", protocol.CodeInvalidRequest},
		{"unknown method", `{"jsonrpc":"2.0","id":4,"method":"exec.teleport","params":{}}`, "4", protocol.CodeMethodNotFound},
		{"params of the wrong type", `{"jsonrpc":"2.0","id":5,"method":"session.open","params":{"client_name":42}}`, "5", protocol.CodeInvalidParams},
		{"missing client_name", `{"jsonrpc":"2.0","id":6,"method":"session.open","params":{}}`, "6", protocol.CodeInvalidParams},
		{"unknown session", `{"jsonrpc":"2.0","id":7,"method":"session.info","params":{"session_id":"s_999"}}`, "7", protocol.CodeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.mu.Lock()
			from := len(h.msgs)
			h.mu.Unlock()
			h.send(tt.line)
			i := 0
			m := h.wait(5*time.Second, func(m *protocol.Message) bool {
				i++
				return i > from && m.Error != nil
			})
			if string(m.ID) != tt.id || m.Error.Code != tt.code {
				t.Fatalf("got id %s error %v, want id %s code %d", m.ID, m.Error, tt.id, tt.code)
			}
			if m.Error.Message == "" {
				t.Fatal("error without a message")
			}
		})
	}
	// The server kept serving through all of that.
	if sid := h.open(); sid == "" {
		t.Fatal("no session after bad input")
	}
}

func TestOverlongLineIsAnErrorAndServingGoesOn(t *testing.T) {
	h := start(t)
	sid := h.open()
	big := `{"jsonrpc":"2.0","id":77,"method":"fs.write","params":{"session_id":"` + sid +
		`","path":"big","content":"` + strings.Repeat("x", protocol.DefaultMaxLine+10) + `"}}`
	h.send(big)
	m := h.wait(10*time.Second, func(m *protocol.Message) bool { return m.Error != nil })
	if m.Error.Code != protocol.CodeInvalidRequest || !strings.Contains(m.Error.Message, "longer than") {
		t.Fatalf("want -32600 line too long, got %v", m.Error)
	}
	if _, err := os.Stat(filepath.Join(h.root, "big")); !os.IsNotExist(err) {
		t.Fatal("the over-long write was carried out")
	}
	var info protocol.SessionInfoResult
	h.ok(protocol.MethodSessionInfo, protocol.SessionRef{SessionID: sid}, &info)
	if info.SessionID != sid {
		t.Fatal("session lost after an over-long line")
	}
}

func TestSessionLifecycle(t *testing.T) {
	h := start(t)
	var res protocol.SessionOpenResult
	h.ok(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "lifecycle", ClientVersion: "1.2.3",
		Limits: &protocol.LimitsOverride{MaxOutputBytes: 10, DefaultTimeoutMS: 999_999_999}}, &res)
	if res.Limits.MaxOutputBytes != 10 {
		t.Errorf("max_output_bytes lowered to %d, want 10", res.Limits.MaxOutputBytes)
	}
	if res.Limits.DefaultTimeoutMS != 30000 {
		t.Errorf("default_timeout_ms raised to %d; a session may only lower limits", res.Limits.DefaultTimeoutMS)
	}
	if res.Cwd != h.root {
		t.Errorf("cwd = %q, want the first root %q", res.Cwd, h.root)
	}
	var info protocol.SessionInfoResult
	h.ok(protocol.MethodSessionInfo, protocol.SessionRef{SessionID: res.SessionID}, &info)
	if info.ClientName != "lifecycle" || info.Cwd != h.root || len(info.Processes) != 0 {
		t.Errorf("session.info = %+v", info)
	}
	h.ok(protocol.MethodSessionClose, protocol.SessionRef{SessionID: res.SessionID}, nil)
	h.fails(protocol.MethodSessionInfo, protocol.SessionRef{SessionID: res.SessionID}, protocol.CodeInvalidParams)
}

func TestSessionCapabilitiesAndRoots(t *testing.T) {
	h := start(t)
	e := h.fails(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "x",
		RequestedCapabilities: []string{"exec", "teleport"}}, protocol.CodeUnsupportedCapability)
	if !strings.Contains(string(e.Data), "teleport") {
		t.Errorf("error data does not name the capability: %s", e.Data)
	}
	// workspace_roots may narrow the server's roots, never widen them.
	sub := filepath.Join(h.root, "proj")
	os.Mkdir(sub, 0o755)
	var res protocol.SessionOpenResult
	h.ok(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "x", WorkspaceRoots: []string{sub}}, &res)
	if len(res.WorkspaceRoots) != 1 || res.WorkspaceRoots[0] != sub {
		t.Errorf("narrowed roots = %v", res.WorkspaceRoots)
	}
	h.fails(protocol.MethodFSStat, protocol.FSStatParams{SessionID: res.SessionID, Path: h.root}, protocol.CodeForbiddenPath)
	h.fails(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "x", WorkspaceRoots: []string{"/etc"}}, protocol.CodeForbiddenPath)
}

func TestSessionLimit(t *testing.T) {
	h := start(t, "--limit", "max_concurrent_sessions=2")
	h.open()
	h.open()
	e := h.fails(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "third"}, protocol.CodeResourceLimit)
	var d protocol.ResourceLimitData
	json.Unmarshal(e.Data, &d)
	if d.Limit != "max_concurrent_sessions" || d.Value != 2 {
		t.Errorf("error data = %s", e.Data)
	}
}

func TestExecArgvShellAndEnv(t *testing.T) {
	h := start(t)
	sid := h.open()
	// argv is not interpreted by a shell.
	out, _, exit := h.run(sid, protocol.ExecStartParams{Argv: []string{"echo", "$HOME", "a;b", "*"}})
	if out != "$HOME a;b *\n" || *exit.ExitCode != 0 {
		t.Errorf("argv echo = %q, exit %v", out, exit.ExitCode)
	}
	out, _, _ = h.run(sid, protocol.ExecStartParams{Shell: true, Command: "echo $((6*7)) | tr 4 X"})
	if out != "X2\n" {
		t.Errorf("shell output = %q", out)
	}
	out, _, _ = h.run(sid, protocol.ExecStartParams{Argv: []string{"sh", "-c", "echo $REX_T; pwd"}, Env: map[string]string{"REX_T": "v 1"}})
	if out != "v 1\n"+h.root+"\n" {
		t.Errorf("env/cwd output = %q", out)
	}
	_, errOut, exit := h.run(sid, protocol.ExecStartParams{Argv: []string{"sh", "-c", "echo oops >&2; exit 3"}})
	if errOut != "oops\n" || *exit.ExitCode != 3 {
		t.Errorf("stderr %q exit %v", errOut, exit.ExitCode)
	}
	stdin := "line1\nline2\n"
	out, _, _ = h.run(sid, protocol.ExecStartParams{Argv: []string{"wc", "-l"}, Stdin: &stdin})
	if strings.TrimSpace(out) != "2" {
		t.Errorf("stdin: wc -l = %q", out)
	}
	for _, bad := range []protocol.ExecStartParams{
		{},
		{Command: "echo hi"},
		{Shell: true},
		{Shell: true, Command: "x", Argv: []string{"y"}},
		{Argv: []string{""}},
		{Argv: []string{"echo"}, Env: map[string]string{"A=B": "x"}},
		{Argv: []string{"echo"}, Cwd: "nonexistent-dir"},
	} {
		bad.SessionID = sid
		h.fails(protocol.MethodExecStart, bad, protocol.CodeInvalidParams)
	}
}

func TestExecNotFound(t *testing.T) {
	h := start(t)
	sid := h.open()
	var res protocol.ExecStartResult
	h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"rex-no-such-program"}}, &res)
	exit := h.exitOf(res.ProcessID, 5*time.Second)
	if exit.ExitCode == nil || *exit.ExitCode != 127 {
		t.Errorf("exit code %v, want 127", exit.ExitCode)
	}
	errs := h.errorEvents(res.ProcessID)
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "not found") {
		t.Errorf("exec.error events = %+v", errs)
	}
}

func TestShellDisabledIsUnauthorized(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, []byte("[security]\nallow_shell = false\nallow_commands = [\"echo\"]\n"), 0o644)
	h := start(t, "--config", cfg)
	sid := h.open()
	h.fails(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Shell: true, Command: "echo hi"}, protocol.CodeUnauthorized)
	h.fails(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"cat", "/etc/passwd"}}, protocol.CodeUnauthorized)
	h.fails(protocol.MethodPTYOpen, protocol.PTYOpenParams{SessionID: sid}, protocol.CodeUnauthorized) // the login shell is not allowed either
	out, _, _ := h.run(sid, protocol.ExecStartParams{Argv: []string{"echo", "allowed"}})
	if out != "allowed\n" {
		t.Errorf("allowed command output %q", out)
	}
}

func TestConfigFileRejectsUnknownKeys(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, []byte("[limits]\nmax_output_byte = 5\n"), 0o644)
	out, err := exec.Command(rexdBin, "--stdio", "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "max_output_byte") {
		t.Fatalf("a misspelt key must stop rexd with its name; got %v %q", err, out)
	}
}

func TestSpecConfigExample(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.log")
	cfg := filepath.Join(dir, "config.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`[server]
stdio = true
log_level = "info"

[limits]
default_timeout_ms = 30000
hard_timeout_ms = 300000
max_output_bytes = 1048576
max_file_read_bytes = 1048576
max_processes_per_session = 3
max_concurrent_sessions = 16

[security]
allow_shell = true

[[security.allowed_roots]]
path = %q

[audit]
enabled = true
path = %q
`, dir, audit)), 0o644)
	cmd := exec.Command(rexdBin, "--stdio", "--config", cfg)
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"c"}}` + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var m protocol.Message
	json.Unmarshal(out, &m)
	var res protocol.SessionOpenResult
	mustResult(t, &m, &res)
	if res.Limits.MaxProcessesPerSession != 3 || len(res.WorkspaceRoots) != 1 {
		t.Errorf("config not applied: %+v", res)
	}
	if b, err := os.ReadFile(audit); err != nil || !strings.Contains(string(b), `"method":"session.open"`) {
		t.Errorf("audit log at the configured path: %q %v", b, err)
	}
}

func TestVersion(t *testing.T) {
	out, err := exec.Command(rexdBin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if len(f) != 3 || f[0] != "rexd" || len(f[2]) != 64 {
		t.Fatalf("--version printed %q, want \"rexd <version> <sha256>\"", out)
	}
}

func TestOutputEventsSeqAndUTF8(t *testing.T) {
	h := start(t)
	sid := h.open()
	// "é" split across two writes with a pause: no event may split it.
	script := `printf 'caf\303'; sleep 0.3; printf '\251 ok\n'; printf '\377\376bin'; ` +
		`i=0; while [ $i -lt 50 ]; do echo line$i; i=$((i+1)); done`
	var res protocol.ExecStartResult
	h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"sh", "-c", script}}, &res)
	h.exitOf(res.ProcessID, 10*time.Second)
	evs := h.events(res.ProcessID, protocol.EventExecStdout)
	var all []byte
	sawBase64 := false
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("seq %d at position %d: must be 1, 2, 3, …", e.Seq, i)
		}
		b, err := e.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		switch e.Encoding {
		case protocol.EncodingUTF8:
			if !utf8.ValidString(e.Data) {
				t.Fatalf("utf8 event with invalid text %q", e.Data)
			}
		case protocol.EncodingBase64:
			sawBase64 = true
			if utf8.Valid(b) {
				t.Errorf("valid UTF-8 sent as base64: %q", b)
			}
		}
		all = append(all, b...)
	}
	if !sawBase64 {
		t.Error("invalid UTF-8 did not travel as base64")
	}
	if !strings.HasPrefix(string(all), "café ok\n\xff\xfebin") || !strings.HasSuffix(string(all), "line49\n") {
		t.Errorf("reassembled output = %q", all)
	}
	for _, e := range evs {
		if e.Encoding == protocol.EncodingUTF8 && strings.Contains(e.Data, "caf") && !strings.Contains(e.Data, "é") {
			if b, _ := e.Bytes(); b[len(b)-1] == 0xc3 {
				t.Fatal("a chunk ended in the middle of é")
			}
		}
	}
}

func TestExecWaitStatuses(t *testing.T) {
	h := start(t)
	sid := h.open()
	var res protocol.ExecStartResult
	h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"sleep", "5"}}, &res)
	zero := int64(50)
	var w protocol.ExecWaitResult
	h.ok(protocol.MethodExecWait, protocol.ExecWaitParams{SessionID: sid, ProcessID: res.ProcessID, TimeoutMS: &zero}, &w)
	if w.Status != protocol.StatusRunning || w.ExitCode != nil {
		t.Errorf("wait with a short timeout = %+v, want running", w)
	}
	var k protocol.OKResult
	h.ok(protocol.MethodExecKill, protocol.ExecKillParams{SessionID: sid, ProcessID: res.ProcessID}, &k)
	if !k.OK {
		t.Error("kill of a running process answered ok=false")
	}
	h.ok(protocol.MethodExecWait, protocol.ExecWaitParams{SessionID: sid, ProcessID: res.ProcessID}, &w)
	if w.Status != protocol.StatusKilled || w.Signal == nil || *w.Signal != "TERM" {
		t.Errorf("after kill: %+v", w)
	}
	h.fails(protocol.MethodExecWait, protocol.ExecWaitParams{SessionID: sid, ProcessID: "p_404"}, protocol.CodeProcessNotFound)
	h.fails(protocol.MethodExecKill, protocol.ExecKillParams{SessionID: sid, ProcessID: "p_404"}, protocol.CodeProcessNotFound)
	h.fails(protocol.MethodExecKill, protocol.ExecKillParams{SessionID: sid, ProcessID: res.ProcessID, Signal: "BOGUS"}, protocol.CodeInvalidParams)

	h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"true"}}, &res)
	h.ok(protocol.MethodExecWait, protocol.ExecWaitParams{SessionID: sid, ProcessID: res.ProcessID}, &w)
	if w.Status != protocol.StatusExited || w.ExitCode == nil || *w.ExitCode != 0 {
		t.Errorf("true: %+v", w)
	}
}

func TestExecKillSignals(t *testing.T) {
	h := start(t)
	sid := h.open()
	var res protocol.ExecStartResult
	// The script ignores TERM: KILL must still end it.
	h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Shell: true,
		Command: `trap '' TERM; echo ready; while :; do sleep 0.05; done`}, &res)
	h.wait(5*time.Second, func(m *protocol.Message) bool { return m.Method == protocol.EventExecStdout })
	h.ok(protocol.MethodExecKill, protocol.ExecKillParams{SessionID: sid, ProcessID: res.ProcessID, Signal: "SIGKILL"}, nil)
	exit := h.exitOf(res.ProcessID, 5*time.Second)
	if exit.Signal == nil || *exit.Signal != "KILL" {
		t.Errorf("exit after KILL: %+v", exit)
	}
	// TERM escalates to KILL after the grace period.
	h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Shell: true,
		Command: `trap '' TERM; echo ready2; while :; do sleep 0.05; done`}, &res)
	h.wait(5*time.Second, func(m *protocol.Message) bool {
		return m.Method == protocol.EventExecStdout && strings.Contains(string(m.Params), "ready2")
	})
	h.ok(protocol.MethodExecKill, protocol.ExecKillParams{SessionID: sid, ProcessID: res.ProcessID}, nil)
	exit = h.exitOf(res.ProcessID, 5*time.Second)
	if exit.Signal == nil || *exit.Signal != "KILL" {
		t.Errorf("TERM-ignoring process: %+v", exit)
	}
}

func TestExecTimeout(t *testing.T) {
	h := start(t)
	sid := h.open()
	pidFile := filepath.Join(h.root, "pids")
	var res protocol.ExecStartResult
	h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, TimeoutMS: 300, Shell: true,
		Command: `sleep 30 & echo $! >> pids; echo $$ >> pids; wait`}, &res)
	exit := h.exitOf(res.ProcessID, 5*time.Second)
	if !exit.TimedOut {
		t.Errorf("exit event not marked timed_out: %+v", exit)
	}
	errs := h.errorEvents(res.ProcessID)
	if len(errs) != 1 || errs[0].Code != protocol.CodeTimeout {
		t.Errorf("want one exec.error -32003, got %+v", errs)
	}
	var w protocol.ExecWaitResult
	h.ok(protocol.MethodExecWait, protocol.ExecWaitParams{SessionID: sid, ProcessID: res.ProcessID}, &w)
	if w.Status != protocol.StatusTimedOut {
		t.Errorf("status %q, want timed_out", w.Status)
	}
	noneAliveWithin(t, pidFile, 30*time.Second) // the 1 s kill grace, and a loaded machine

	// A request may lower the timeout but not raise it past the hard limit.
	h2 := start(t, "--limit", "hard_timeout_ms=200")
	sid2 := h2.open()
	_, _, exit = h2.run(sid2, protocol.ExecStartParams{Argv: []string{"sleep", "10"}, TimeoutMS: 60_000})
	if !exit.TimedOut || exit.DurationMS > 3000 {
		t.Errorf("hard timeout not enforced: %+v", exit)
	}
}

func TestOutputCap(t *testing.T) {
	h := start(t)
	sid := h.open()
	out, _, exit := h.run(sid, protocol.ExecStartParams{Argv: []string{"yes", "0123456789"}, MaxOutputBytes: 100_000})
	if len(out) != 100_000 {
		t.Errorf("sent %d bytes, want exactly the cap of 100000", len(out))
	}
	if !exit.OutputLimitExceeded || exit.Signal == nil {
		t.Errorf("exit after the cap: %+v", exit)
	}
	// A request cannot raise the session's cap.
	h2 := start(t, "--limit", "max_output_bytes=1000")
	sid2 := h2.open()
	var res protocol.ExecStartResult
	h2.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid2, Argv: []string{"yes"}, MaxOutputBytes: 1 << 30}, &res)
	h2.exitOf(res.ProcessID, 10*time.Second)
	o, _ := h2.output(res.ProcessID)
	if len(o) != 1000 {
		t.Errorf("got %d bytes with a server cap of 1000", len(o))
	}
	errs := h2.errorEvents(res.ProcessID)
	if len(errs) != 1 || errs[0].Code != protocol.CodeOutputLimitExceeded {
		t.Errorf("want exec.error -32004, got %+v", errs)
	}
}

func TestExecInput(t *testing.T) {
	h := start(t)
	sid := h.open()
	var res protocol.ExecStartResult
	h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"cat"}}, &res)
	var in protocol.ExecInputResult
	h.ok(protocol.MethodExecInput, protocol.ExecInputParams{SessionID: sid, ProcessID: res.ProcessID, Data: "hello "}, &in)
	if in.AcceptedBytes != 6 {
		t.Errorf("accepted %d bytes, want 6", in.AcceptedBytes)
	}
	h.ok(protocol.MethodExecInput, protocol.ExecInputParams{SessionID: sid, ProcessID: res.ProcessID,
		Data: "AP8K", Encoding: "base64", EOF: true}, &in) // 0x00 0xff '\n'
	exit := h.exitOf(res.ProcessID, 5*time.Second)
	out, _ := h.output(res.ProcessID)
	if out != "hello \x00\xff\n" || *exit.ExitCode != 0 {
		t.Errorf("cat echoed %q", out)
	}
	h.fails(protocol.MethodExecInput, protocol.ExecInputParams{SessionID: sid, ProcessID: res.ProcessID, Data: "late"}, protocol.CodeProcessNotFound)
	h.fails(protocol.MethodExecInput, protocol.ExecInputParams{SessionID: sid, ProcessID: res.ProcessID, Data: "!!", Encoding: "base64"}, protocol.CodeInvalidParams)
}

func TestProcessLimit(t *testing.T) {
	h := start(t, "--limit", "max_processes_per_session=2")
	sid := h.open()
	for i := 0; i < 2; i++ {
		h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"sleep", "10"}}, nil)
	}
	e := h.fails(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"true"}}, protocol.CodeResourceLimit)
	if !strings.Contains(string(e.Data), "max_processes_per_session") {
		t.Errorf("data = %s", e.Data)
	}
	h.fails(protocol.MethodPTYOpen, protocol.PTYOpenParams{SessionID: sid, Argv: []string{"true"}}, protocol.CodeResourceLimit)
	var info protocol.SessionInfoResult
	h.ok(protocol.MethodSessionInfo, protocol.SessionRef{SessionID: sid}, &info)
	if len(info.Processes) != 2 || info.Processes[0].Pid == 0 {
		t.Errorf("session.info processes = %+v", info.Processes)
	}
}

// Each way a session can end must take the whole process group with it,
// grandchildren included, within 2 s, as seen from outside.
func TestNoProcessSurvives(t *testing.T) {
	script := `sleep 60 & echo $! >> pids; sh -c 'sleep 60 & echo $! >> pids; wait' & echo $$ >> pids; wait`
	for _, how := range []string{"session.close", "stdin EOF"} {
		t.Run(how, func(t *testing.T) {
			h := start(t)
			sid := h.open()
			pidFile := filepath.Join(h.root, "pids")
			h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Shell: true, Command: script}, nil)
			waitPidFile(t, pidFile, 3)
			if len(pidsAlive(t, pidFile)) != 3 {
				t.Fatal("the test processes did not start")
			}
			switch how {
			case "session.close":
				var res protocol.SessionCloseResult
				h.ok(protocol.MethodSessionClose, protocol.SessionRef{SessionID: sid}, &res)
				if res.ProcessesKilled != 1 {
					t.Errorf("processes_killed = %d", res.ProcessesKilled)
				}
			case "stdin EOF":
				h.stdin.Close()
			}
			noneAliveWithin(t, pidFile, 30*time.Second) // the 1 s kill grace, and a loaded machine
		})
	}
}

func TestDetachedSurvivesDisconnect(t *testing.T) {
	h := start(t)
	sid := h.open()
	marker := filepath.Join(h.root, "marker")
	h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Detach: true, Shell: true,
		Command: "sleep 0.5; echo done > marker"}, nil)
	h.stdin.Close()
	select {
	case <-h.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("rexd did not exit after the detached process finished")
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "done\n" {
		t.Fatalf("detached process did not finish after the disconnect: %q %v", b, err)
	}
}

func TestAuditLogRedacts(t *testing.T) {
	h := start(t)
	sid := h.open()
	secret := "hunter2-secret-value"
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "s.txt", Content: secret}, nil)
	h.run(sid, protocol.ExecStartParams{Argv: []string{"cat"}, Stdin: &secret, Env: map[string]string{"TOKEN": secret}})
	var res protocol.ExecStartResult
	h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"cat"}}, &res)
	h.ok(protocol.MethodExecInput, protocol.ExecInputParams{SessionID: sid, ProcessID: res.ProcessID, Data: secret, EOF: true}, nil)
	h.exitOf(res.ProcessID, 5*time.Second)
	h.stdin.Close()
	<-h.exited
	b, err := os.ReadFile(h.audit)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Fatalf("the audit log contains a secret:\n%s", b)
	}
	var methods []string
	sawExit := false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line is not JSON: %q", line)
		}
		for _, k := range []string{"time", "session_id", "client_name"} {
			if _, ok := e[k]; !ok {
				t.Errorf("audit entry lacks %s: %s", k, line)
			}
		}
		if m, ok := e["method"].(string); ok {
			methods = append(methods, m)
		}
		if e["event"] == "exec.exit" {
			sawExit = true
			if r := e["result"].(map[string]any); r["exit_code"] != float64(0) {
				t.Errorf("exit entry: %s", line)
			}
		}
	}
	want := "session.open fs.write exec.start exec.start exec.input"
	if got := strings.Join(methods, " "); got != want {
		t.Errorf("audited methods %q, want %q", got, want)
	}
	if !sawExit {
		t.Error("no exec.exit summary in the audit log")
	}
	if fi, _ := os.Stat(h.audit); fi.Mode().Perm() != 0o600 {
		t.Errorf("audit log mode %v, want 0600", fi.Mode().Perm())
	}
}
