package rexd_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestFIFOInsideRootsNeverBlocks (item 3): a FIFO in the roots is opened
// with O_NONBLOCK and refused after fstat by every file method and as a
// cwd; the connection keeps answering, and SIGTERM ends rexd at once.
func TestFIFOInsideRootsNeverBlocks(t *testing.T) {
	h := start(t)
	sid := h.open()
	fifo := filepath.Join(h.root, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	e := h.fails(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: "pipe"}, protocol.CodeInvalidParams)
	if !strings.Contains(e.Message, "not a regular file") {
		t.Errorf("fs.read of a FIFO: %v", e)
	}
	f := false
	h.fails(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "pipe", Content: "x", Mode: protocol.WriteAppend}, protocol.CodeInvalidParams)
	h.fails(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "pipe", Content: "x", Atomic: &f}, protocol.CodeInvalidParams)
	h.fails(protocol.MethodFSList, protocol.FSListParams{SessionID: sid, Path: "pipe"}, protocol.CodeInvalidParams)
	h.fails(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"true"}, Cwd: "pipe"}, protocol.CodeInvalidParams)
	var st protocol.FSStatResult
	h.ok(protocol.MethodFSStat, protocol.FSStatParams{SessionID: sid, Path: "pipe"}, &st)
	if st.Type != protocol.TypeOther {
		t.Errorf("fs.stat of a FIFO: %+v", st)
	}
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("rexd did not end on SIGTERM")
	}
}

// TestPipelinedRequestsKeepTheirOrder: the ordering docs/protocol.md
// promises survives concurrent serving: session.open, exec.start and a
// run of exec.input written in one go reach the process in order.
func TestPipelinedRequestsKeepTheirOrder(t *testing.T) {
	h := start(t)
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"t"}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":2,"method":"exec.start","params":{"session_id":"s_1","argv":["cat"]}}` + "\n")
	var want strings.Builder
	for i := 0; i < 200; i++ {
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		data, _ := json.Marshal(line)
		b.WriteString(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"exec.input","params":{"session_id":"s_1","process_id":"p_1","data":%s}}`+"\n", 100+i, data))
		// A file request in between runs on its own and changes nothing.
		b.WriteString(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"fs.stat","params":{"session_id":"s_1","path":"."}}`+"\n", 1000+i))
	}
	b.WriteString(`{"jsonrpc":"2.0","id":3,"method":"exec.input","params":{"session_id":"s_1","process_id":"p_1","eof":true}}` + "\n")
	h.send(strings.TrimSuffix(b.String(), "\n"))
	h.exitOf("p_1", 30*time.Second)
	out, _ := h.output("p_1")
	if out != want.String() {
		t.Fatalf("cat saw the input out of order:\n%s", out)
	}
}

// TestAuditNamesTheSessionOfEveryEntry (item 4): every entry of a
// connection names a session and its client while one is open: a request
// names the session it reached; one that failed before reaching a session
// (unknown method, bad params, an unknown session, a line that is not
// JSON) names the session its params name if that is open here, else the
// connection's oldest open session.
func TestAuditNamesTheSessionOfEveryEntry(t *testing.T) {
	h := start(t)
	var first, second protocol.SessionOpenResult
	h.ok(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "auditor"}, &first)
	h.ok(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "second"}, &second)
	h.fails("probe.named", map[string]string{"session_id": second.SessionID}, protocol.CodeMethodNotFound)
	h.fails("probe.unnamed", nil, protocol.CodeMethodNotFound)
	h.fails(protocol.MethodFSRead, map[string]any{"session_id": second.SessionID, "path": 7}, protocol.CodeInvalidParams)
	h.fails(protocol.MethodExecStart, map[string]any{"argv": "not a list"}, protocol.CodeInvalidParams)
	h.fails("probe.elsewhere", map[string]string{"session_id": "s_999"}, protocol.CodeMethodNotFound)
	h.send(`{"jsonrpc":"2.0","id":77,"method":`)
	h.response("null")
	h.ok(protocol.MethodFSStat, protocol.FSStatParams{SessionID: second.SessionID, Path: "."}, nil)
	h.ok(protocol.MethodSessionClose, protocol.SessionRef{SessionID: second.SessionID}, nil)
	h.fails("probe.closed", map[string]string{"session_id": second.SessionID}, protocol.CodeMethodNotFound)
	h.stdin.Close()
	<-h.exited
	b, err := os.ReadFile(h.audit)
	if err != nil {
		t.Fatal(err)
	}
	// Entries are matched by what they record, not by their order: a
	// handler may write its entry after a later request's.
	type entry struct {
		SessionID  string         `json:"session_id"`
		ClientName string         `json:"client_name"`
		Method     string         `json:"method"`
		Params     map[string]any `json:"params"`
		Error      *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	got := map[string]entry{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		key := e.Method
		if e.Method == protocol.MethodSessionOpen {
			key += "/" + fmt.Sprint(e.Params["client_name"])
		}
		if _, dup := got[key]; dup {
			t.Fatalf("two audit entries for %s:\n%s", key, b)
		}
		got[key] = e
	}
	want := []struct {
		key, session, client string
		failed               bool
	}{
		{protocol.MethodSessionOpen + "/auditor", first.SessionID, "auditor", false},
		{protocol.MethodSessionOpen + "/second", second.SessionID, "second", false},
		{"probe.named", second.SessionID, "second", true},
		{"probe.unnamed", first.SessionID, "auditor", true},
		{protocol.MethodFSRead, second.SessionID, "second", true},
		{protocol.MethodExecStart, first.SessionID, "auditor", true},
		{"probe.elsewhere", first.SessionID, "auditor", true},
		{"", first.SessionID, "auditor", true}, // the line that is not JSON
		{protocol.MethodFSStat, second.SessionID, "second", false},
		{protocol.MethodSessionClose, second.SessionID, "second", false},
		{"probe.closed", first.SessionID, "auditor", true},
	}
	if len(got) != len(want) {
		t.Errorf("%d audit entries, want %d:\n%s", len(got), len(want), b)
	}
	for _, w := range want {
		e, ok := got[w.key]
		if !ok {
			t.Errorf("no audit entry for %q:\n%s", w.key, b)
			continue
		}
		if e.SessionID != w.session || e.ClientName != w.client || (e.Error != nil) != w.failed {
			t.Errorf("entry %q: session %q client %q error %v, want session %q client %q failed %v",
				w.key, e.SessionID, e.ClientName, e.Error != nil, w.session, w.client, w.failed)
		}
	}
}

// TestConcurrentSessionCloseCountsOnce: of many session.close calls for
// one session at once, one closes it and the others find it gone, so the
// session count (and max_concurrent_sessions) stays right.
func TestConcurrentSessionCloseCountsOnce(t *testing.T) {
	h := start(t, "--limit", "max_concurrent_sessions=1")
	sid := h.open()
	var b strings.Builder
	for i := 0; i < 64; i++ {
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"session.close","params":{"session_id":%q}}`+"\n", 500+i, sid)
	}
	h.send(strings.TrimSuffix(b.String(), "\n"))
	closed := 0
	for i := 0; i < 64; i++ {
		if m := h.response(fmt.Sprint(500 + i)); m.Error == nil {
			closed++
		}
	}
	if closed != 1 {
		t.Fatalf("%d of 64 concurrent closes succeeded, want 1", closed)
	}
	h.open()
	h.fails(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "over"}, protocol.CodeResourceLimit)
}

// TestFSReadWithoutLimitStreamsInChunks (item 8): with no read limit, a
// large file comes in pieces of at most 8 MiB (truncated says there is
// more) instead of one allocation of the whole file, and the pieces read
// on from offset make up the file exactly.
func TestFSReadWithoutLimitStreamsInChunks(t *testing.T) {
	h := start(t, "--limit", "max_file_read_bytes=0")
	sid := h.open()
	want := make([]byte, 20<<20+12345)
	for i := range want {
		want[i] = byte(i*7 + i>>12)
	}
	if err := os.WriteFile(filepath.Join(h.root, "big"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for calls := 0; ; calls++ {
		if calls > 4 {
			t.Fatal("more pieces than the file has")
		}
		var res protocol.FSReadResult
		h.ok(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: "big", Offset: int64(len(got)), Encoding: protocol.EncodingBase64}, &res)
		b, err := protocol.DecodeData(res.Content, res.Encoding)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 8<<20 {
			t.Fatalf("one fs.read returned %d bytes, want at most 8 MiB", len(b))
		}
		if res.Size != int64(len(want)) {
			t.Errorf("size %d", res.Size)
		}
		got = append(got, b...)
		if !res.Truncated {
			break
		}
	}
	if string(got) != string(want) {
		t.Fatalf("the pieces (%d bytes) do not make up the file (%d bytes)", len(got), len(want))
	}
}

// TestFSReadReadsToTheEnd: a file whose size says 0 (as /proc files do)
// is read to its end.
func TestFSReadReadsToTheEnd(t *testing.T) {
	h := start(t, "--root", "/proc/self")
	sid := h.open()
	var res protocol.FSReadResult
	h.ok(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: "status"}, &res)
	if res.Size != 0 || !strings.Contains(res.Content, "Pid:") {
		t.Fatalf("/proc/self/status: size %d, content %q", res.Size, res.Content)
	}
}

// TestZeroOutputTravelsAsBase64 (item 5): output of /dev/zero (valid
// UTF-8 that would be 6 bytes a byte as JSON escapes) goes as base64, at
// most 4/3 of its size on the wire.
func TestZeroOutputTravelsAsBase64(t *testing.T) {
	h := start(t)
	sid := h.open()
	const n = 1 << 20
	out, _, exit := h.run(sid, protocol.ExecStartParams{Argv: []string{"head", "-c", fmt.Sprint(n), "/dev/zero"}})
	if *exit.ExitCode != 0 || out != string(make([]byte, n)) {
		t.Fatalf("exit %v, %d bytes", exit.ExitCode, len(out))
	}
	wire := 0
	for _, e := range h.events("p_1", protocol.EventExecStdout) {
		if e.Encoding != protocol.EncodingBase64 {
			t.Fatalf("a chunk of zeros went as %s", e.Encoding)
		}
		wire += len(e.Data)
	}
	if wire > n*4/3+4*len(h.events("p_1", protocol.EventExecStdout)) {
		t.Fatalf("%d payload bytes on the wire for %d bytes of output", wire, n)
	}
}

// startWith runs rexd with a config file holding toml.
func startWith(t *testing.T, toml string) *harness {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return start(t, "--config", cfg)
}

// TestAllowCommandsUsesRexdsOwnPATH (item 6): with allow_commands set, a
// program is found with rexd's PATH and matched by full path; a request
// cannot bring its own PATH, a look-alike by full path, or loader and
// shell start-up variables.
func TestAllowCommandsUsesRexdsOwnPATH(t *testing.T) {
	h := startWith(t, "[security]\nallow_commands = [\"true\", \"/usr/bin/env\"]\n")
	sid := h.open()
	// A "true" of the client's own, written into the roots.
	marker := filepath.Join(h.root, "PWNED")
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "evil/true", Perm: "0755", MkdirParents: true,
		Content: "#!/bin/sh\ntouch " + marker + "\n"}, nil)
	evil := filepath.Join(h.root, "evil")
	for _, tt := range []struct {
		name string
		p    protocol.ExecStartParams
	}{
		{"PATH in env", protocol.ExecStartParams{Argv: []string{"true"}, Env: map[string]string{"PATH": evil}}},
		{"a look-alike by full path", protocol.ExecStartParams{Argv: []string{filepath.Join(evil, "true")}}},
		{"a look-alike by relative path", protocol.ExecStartParams{Argv: []string{"./true"}, Cwd: "evil"}},
		{"LD_PRELOAD", protocol.ExecStartParams{Argv: []string{"true"}, Env: map[string]string{"LD_PRELOAD": filepath.Join(evil, "x.so")}}},
		{"LD_LIBRARY_PATH", protocol.ExecStartParams{Argv: []string{"true"}, Env: map[string]string{"LD_LIBRARY_PATH": evil}}},
		{"BASH_ENV", protocol.ExecStartParams{Argv: []string{"true"}, Env: map[string]string{"BASH_ENV": filepath.Join(evil, "true")}}},
		{"ENV", protocol.ExecStartParams{Argv: []string{"true"}, Env: map[string]string{"ENV": filepath.Join(evil, "true")}}},
		{"IFS", protocol.ExecStartParams{Argv: []string{"true"}, Env: map[string]string{"IFS": "/"}}},
		{"DYLD_INSERT_LIBRARIES", protocol.ExecStartParams{Argv: []string{"true"}, Env: map[string]string{"DYLD_INSERT_LIBRARIES": "x"}}},
		{"an exported bash function", protocol.ExecStartParams{Argv: []string{"true"}, Env: map[string]string{"BASH_FUNC_true%%": "() { touch x; }"}}},
		{"a program not listed", protocol.ExecStartParams{Argv: []string{"cat", "/etc/hostname"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.p.SessionID = sid
			h.with(t).fails(protocol.MethodExecStart, tt.p, protocol.CodeUnauthorized)
		})
	}
	h.fails(protocol.MethodPTYOpen, protocol.PTYOpenParams{SessionID: sid, Argv: []string{"true"}, Env: map[string]string{"PATH": evil}}, protocol.CodeUnauthorized)
	// The real one runs, found through rexd's PATH; so does a listed full path.
	if _, _, exit := h.run(sid, protocol.ExecStartParams{Argv: []string{"true"}}); *exit.ExitCode != 0 {
		t.Errorf("the allowed true: exit %v", *exit.ExitCode)
	}
	if out, _, _ := h.run(sid, protocol.ExecStartParams{Argv: []string{"env"}, Env: map[string]string{"GREETING": "hi"}}); !strings.Contains(out, "GREETING=hi") {
		t.Errorf("env listed by full path, run by name: %q", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the client's own program ran")
	}
}

// TestShellOffRefusesShells (item 6): allow_shell = false refuses known
// shells as argv[0] (by name, path or symlink) and the login shell, not
// only shell: true.
func TestShellOffRefusesShells(t *testing.T) {
	h := startWith(t, "[security]\nallow_shell = false\n")
	sid := h.open()
	link := filepath.Join(h.root, "innocent")
	if err := os.Symlink("/bin/sh", link); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{
		{"/bin/sh", "-c", "true"},
		{"sh", "-c", "true"},
		{"bash", "-c", "true"},
		{"dash", "-c", "true"},
		{link, "-c", "true"},
		{"busybox", "sh", "-c", "true"},
	} {
		e := h.fails(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: argv}, protocol.CodeUnauthorized)
		if !strings.Contains(e.Message, "allow_shell") {
			t.Errorf("%v: %v", argv, e)
		}
	}
	h.fails(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Shell: true, Command: "true"}, protocol.CodeUnauthorized)
	h.fails(protocol.MethodPTYOpen, protocol.PTYOpenParams{SessionID: sid}, protocol.CodeUnauthorized)
	h.fails(protocol.MethodPTYOpen, protocol.PTYOpenParams{SessionID: sid, Argv: []string{"bash"}}, protocol.CodeUnauthorized)
	if out, _, _ := h.run(sid, protocol.ExecStartParams{Argv: []string{"echo", "not a shell"}}); out != "not a shell\n" {
		t.Errorf("a plain program: %q", out)
	}
}

// TestInputQueueBoundedInBytes (item 8): input to a process that does not
// read waits in a queue bounded in bytes (4 MiB), not 256 writes of up to
// 16 MiB each.
func TestInputQueueBoundedInBytes(t *testing.T) {
	h := start(t)
	sid := h.open()
	var res protocol.ExecStartResult
	h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"sleep", "30"}}, &res)
	chunk := strings.Repeat("a", 1<<20)
	var b strings.Builder
	for i := 1; i <= 6; i++ {
		line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 900 + i, "method": protocol.MethodExecInput,
			"params": protocol.ExecInputParams{SessionID: sid, ProcessID: res.ProcessID, Data: chunk}})
		b.Write(line)
		b.WriteString("\n")
	}
	h.send(strings.TrimSuffix(b.String(), "\n"))
	for _, id := range []string{"905", "906"} {
		m := h.response(id)
		if m.Error == nil || m.Error.Code != protocol.CodeResourceLimit || !strings.Contains(string(m.Error.Data), "input_queue_bytes") {
			t.Fatalf("input %s past 4 MiB queued: %+v", id, m.Error)
		}
	}
	h.ok(protocol.MethodExecKill, protocol.ExecKillParams{SessionID: sid, ProcessID: res.ProcessID, Signal: "KILL"}, nil)
	for _, id := range []string{"901", "902", "903", "904"} {
		if m := h.response(id); m.Error == nil || m.Error.Code != protocol.CodeProcessNotFound {
			t.Errorf("input %s queued for a process that was killed: %+v %s", id, m.Error, m.Result)
		}
	}
}

// TestDetachedProcessesHoldTheirSessionSlot (item 8): a closed session's
// detached processes keep its place in max_concurrent_sessions until the
// last of them ends, so opening and closing sessions cannot get around
// the process and session limits.
func TestDetachedProcessesHoldTheirSessionSlot(t *testing.T) {
	h := start(t, "--limit", "max_concurrent_sessions=1")
	sid := h.open()
	fifo := filepath.Join(h.root, "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var res protocol.ExecStartResult
	h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"cat", fifo}, Detach: true}, &res)
	var closed protocol.SessionCloseResult
	h.ok(protocol.MethodSessionClose, protocol.SessionRef{SessionID: sid}, &closed)
	if closed.ProcessesDetached != 1 {
		t.Fatalf("session.close: %+v", closed)
	}
	h.fails(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "again"}, protocol.CodeResourceLimit)
	// Let the detached process end: its slot comes back with its exit.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	h.exitOf(res.ProcessID, 10*time.Second)
	h.open()
}
