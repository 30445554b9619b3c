package rexd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// sendRequest writes one request line with a raw id, without waiting.
func (h *harness) sendRequest(id, method string, params any) {
	h.t.Helper()
	p, err := json.Marshal(params)
	if err != nil {
		h.t.Fatal(err)
	}
	h.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + string(p) + `}`)
}

// TestPipelinedOpenAndStart: a client sends session.open and, before its
// answer, exec.start naming that session by the open request's id; both
// are answered in order and the process runs in the session just opened.
func TestPipelinedOpenAndStart(t *testing.T) {
	h := start(t)
	h.sendRequest("7", protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "pipe"})
	h.sendRequest(`"start"`, protocol.MethodExecStart, protocol.ExecStartParams{
		SessionOpenID: json.RawMessage("7"), Argv: []string{"sh", "-c", "echo piped"}})

	open := h.response("7")
	var or protocol.SessionOpenResult
	mustResult(t, open, &or)
	if !slices.Contains(or.Capabilities, protocol.CapPipeline) {
		t.Errorf("capabilities %v lack %q", or.Capabilities, protocol.CapPipeline)
	}
	startMsg := h.response(`"start"`)
	var sr protocol.ExecStartResult
	mustResult(t, startMsg, &sr)
	exit := h.exitOf(sr.ProcessID, 30*time.Second)
	out, _ := h.output(sr.ProcessID)
	if exit.ExitCode == nil || *exit.ExitCode != 0 || out != "piped\n" {
		t.Fatalf("pipelined process: exit %+v, stdout %q", exit, out)
	}
	if exit.SessionID != or.SessionID {
		t.Errorf("process ran in session %q, want the one opened, %q", exit.SessionID, or.SessionID)
	}
	// The answer to session.open came first.
	h.mu.Lock()
	iOpen, iStart := slices.Index(h.msgs, open), slices.Index(h.msgs, startMsg)
	h.mu.Unlock()
	if iOpen > iStart {
		t.Errorf("exec.start was answered before the session.open it names")
	}

	// session.info lists the process under that session.
	var info protocol.SessionInfoResult
	h.ok(protocol.MethodSessionInfo, protocol.SessionRef{SessionID: or.SessionID}, &info)
	if info.ClientName != "pipe" {
		t.Errorf("session.info = %+v", info)
	}
}

// TestPipelinedStartRefusals: an exec.start naming a session.open that
// failed, never came, or came later starts nothing and says so; an open
// that names build hashes other than this rexd's opens nothing, so the
// start pipelined behind it cannot run either.
func TestPipelinedStartRefusals(t *testing.T) {
	h := start(t)
	marker := filepath.Join(h.root, "ran")
	cmd := protocol.ExecStartParams{Argv: []string{"touch", marker}}

	t.Run("unknown open id", func(t *testing.T) {
		h := h.with(t)
		p := cmd
		p.SessionOpenID = json.RawMessage("12345")
		e := h.fails(protocol.MethodExecStart, p, protocol.CodeInvalidParams)
		if !strings.Contains(e.Message, "12345") {
			t.Errorf("message %q does not name the open id", e.Message)
		}
	})
	t.Run("open failed", func(t *testing.T) {
		h := h.with(t)
		h.sendRequest("20", protocol.MethodSessionOpen, protocol.SessionOpenParams{}) // no client_name
		p := cmd
		p.SessionOpenID = json.RawMessage("20")
		h.sendRequest("21", protocol.MethodExecStart, p)
		if m := h.response("20"); m.Error == nil {
			t.Fatalf("session.open without client_name succeeded")
		}
		if m := h.response("21"); m.Error == nil || m.Error.Code != protocol.CodeInvalidParams {
			t.Fatalf("exec.start behind a failed open: %+v", m)
		}
	})
	t.Run("other build", func(t *testing.T) {
		h := h.with(t)
		h.sendRequest("30", protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "x",
			BuildHashes: []string{strings.Repeat("0", 64)}})
		p := cmd
		p.SessionOpenID = json.RawMessage("30")
		h.sendRequest("31", protocol.MethodExecStart, p)
		m := h.response("30")
		if m.Error == nil || m.Error.Code != protocol.CodeInvalidParams || !strings.Contains(string(m.Error.Data), "build_hash") {
			t.Fatalf("session.open for another build: %+v", m)
		}
		if m := h.response("31"); m.Error == nil {
			t.Fatalf("exec.start behind a refused open ran")
		}
	})
	t.Run("own build", func(t *testing.T) {
		h := h.with(t)
		var or protocol.SessionOpenResult
		h.ok(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "x"}, &or)
		h.ok(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "y",
			BuildHashes: []string{strings.Repeat("0", 64), or.BuildHash}}, nil)
	})
	t.Run("a later open", func(t *testing.T) {
		h := h.with(t)
		p := cmd
		p.SessionOpenID = json.RawMessage("41")
		h.sendRequest("40", protocol.MethodExecStart, p)
		h.sendRequest("41", protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "late"})
		if m := h.response("40"); m.Error == nil {
			t.Fatalf("exec.start ran in a session opened after it")
		}
		h.response("41")
	})
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("a refused exec.start ran its command")
	}
}

// TestPipelinedOpenIDsAreBounded: only the last session.open ids of a
// connection are remembered for session_open_id.
func TestPipelinedOpenIDsAreBounded(t *testing.T) {
	h := start(t, "--limit", "max_concurrent_sessions=32")
	for i := 0; i < 20; i++ {
		h.ok(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "many"}, nil)
	}
	// h.call numbers its requests from 1001: the first open was 1001.
	p := protocol.ExecStartParams{SessionOpenID: json.RawMessage("1001"), Argv: []string{"true"}}
	h.fails(protocol.MethodExecStart, p, protocol.CodeInvalidParams)
	p.SessionOpenID = json.RawMessage("1020")
	var sr protocol.ExecStartResult
	h.ok(protocol.MethodExecStart, p, &sr)
	h.exitOf(sr.ProcessID, 30*time.Second)
}
