package rexd_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestAuditRedactsParamsWhateverTheirKeyCase: params are decoded with
// encoding/json, which matches keys case-insensitively (and with Unicode
// folding: "ſ" is "s"), so "Stdin", "CONTENT" or "Env" are the payload and
// the environment; the audit log must hide them as it hides "stdin".
func TestAuditRedactsParamsWhateverTheirKeyCase(t *testing.T) {
	h := start(t)
	sid := h.open()
	raw := func(id int, method, params string) {
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
		if m := h.response(fmt.Sprint(id)); m.Error != nil {
			t.Fatalf("%s: %v", method, m.Error)
		}
	}
	raw(1, protocol.MethodExecStart, fmt.Sprintf(`{"session_id":%q,"argv":["cat"],"Stdin":"SECRET-STDIN-1","Env":{"K":"SECRET-ENV-2"}}`, sid))
	raw(2, protocol.MethodExecStart, fmt.Sprintf(`{"session_id":%q,"argv":["cat"],"ſtdin":"SECRET-STDIN-3"}`, sid))
	raw(3, protocol.MethodFSWrite, fmt.Sprintf(`{"session_id":%q,"path":"f","CONTENT":"SECRET-FILE-4"}`, sid))
	if b, _ := os.ReadFile(filepath.Join(h.root, "f")); string(b) != "SECRET-FILE-4" {
		t.Fatalf("fs.write with CONTENT wrote %q: the key was not taken as content", b)
	}
	// The stdin given as "Stdin" and "ſtdin" reached the programs.
	for i, want := range []string{"SECRET-STDIN-1", "SECRET-STDIN-3"} {
		pid := fmt.Sprintf("p_%d", i+1)
		h.exitOf(pid, 30*time.Second)
		if out, _ := h.output(pid); out != want {
			t.Fatalf("%s printed %q, want %q: the key was not taken as stdin", pid, out, want)
		}
	}
	h.stdin.Close()
	<-h.exited
	log, err := os.ReadFile(h.audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"SECRET-STDIN-1", "SECRET-ENV-2", "SECRET-STDIN-3", "SECRET-FILE-4"} {
		if strings.Contains(string(log), s) {
			t.Errorf("the audit log holds %s:\n%s", s, log)
		}
	}
}

// TestProcessLimitFreedByTheExitEvent: once a client has the exit event
// of a process, the process no longer counts against
// max_processes_per_session, so a client running one command at a time
// under a limit of one is never refused.
func TestProcessLimitFreedByTheExitEvent(t *testing.T) {
	h := start(t, "--limit", "max_processes_per_session=1")
	sid := h.open()
	for i := 0; i < 50; i++ {
		h.run(sid, protocol.ExecStartParams{Argv: []string{"true"}})
	}
	var pty protocol.PTYOpenResult
	for i := 0; i < 10; i++ {
		h.ok(protocol.MethodPTYOpen, protocol.PTYOpenParams{SessionID: sid, Argv: []string{"true"}}, &pty)
		h.exitOf(pty.ProcessID, 30*time.Second)
	}
}

// TestFailedResumeDoesNotRelayTheConnection: a session.resume that names
// a session another rexd of the user holds makes this rexd relay the
// connection to that one. When the resume is refused (a wrong token), the
// connection must not go on being served by the other rexd, under its
// policy: a client of a rexd with allow_shell = false could otherwise run
// a shell on any rexd of the user that holds a resumable session, knowing
// only the session's id (a file name in the session directory).
func TestFailedResumeDoesNotRelayTheConnection(t *testing.T) {
	cache := t.TempDir()
	holder := startEnv(t, []string{"XDG_CACHE_HOME=" + cache})
	var open protocol.SessionOpenResult
	holder.ok(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "operator", ResumeGraceMS: 60_000}, &open)
	if open.ResumeToken == "" {
		t.Fatalf("session not resumable: %+v", open)
	}
	conf := filepath.Join(t.TempDir(), "restricted.toml")
	if err := os.WriteFile(conf, []byte("[security]\nallow_shell = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startEnv(t, []string{"XDG_CACHE_HOME=" + cache}, "--config", conf)
	h.fails(protocol.MethodSessionResume, protocol.SessionResumeParams{SessionID: open.SessionID, ResumeToken: "wrong"}, protocol.CodeUnauthorized)
	// Whatever answers now must be this rexd, under its own policy.
	m := h.call(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "agent"})
	if m.Error != nil {
		return // the connection was refused further service: fine
	}
	var sess protocol.SessionOpenResult
	json.Unmarshal(m.Result, &sess)
	m = h.call(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sess.SessionID, Shell: true, Command: "echo shell ran"})
	if m.Error == nil {
		t.Fatalf("a shell ran on a rexd with allow_shell = false, through the rexd the refused resume relayed to")
	}
}
