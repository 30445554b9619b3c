package rexd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestResumableSessionKeepsBoundedEvents: a client that never
// acknowledges cannot make a resumable session keep more than a bound:
// each process's output is capped (resume_buffer_bytes), but ended
// processes' output piled up without end; now, once the session keeps
// four times that, a new process is refused with
// resource_limit, and acknowledging makes room again.
func TestResumableSessionKeepsBoundedEvents(t *testing.T) {
	const sessionBuffers = 4 // rexd's: resume_buffer_bytes × 4 per session
	conf := filepath.Join(t.TempDir(), "rexd.toml")
	os.WriteFile(conf, []byte("[limits]\nresume_buffer_bytes = 65536\n"), 0o600)
	h := start(t, "--config", conf)
	var open protocol.SessionOpenResult
	h.ok(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "t", ResumeGraceMS: 60_000}, &open)
	started, refused := 0, false
	for range 4 * sessionBuffers { // half a buffer each: the bound is reached by 2×sessionBuffers
		m := h.call(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: open.SessionID, Shell: true, Command: "head -c 32768 /dev/zero | tr '\\0' x"})
		if m.Error != nil {
			if m.Error.Code != protocol.CodeResourceLimit {
				t.Fatalf("exec.start refused with %d: %s", m.Error.Code, m.Error.Message)
			}
			refused = true
			break
		}
		var res protocol.ExecStartResult
		json.Unmarshal(m.Result, &res)
		// All its output has come (its exit may not: the process that
		// fills the session waits for room before it reads its end).
		got := 0
		h.wait(30*time.Second, func(m *protocol.Message) bool {
			var e protocol.OutputEvent
			if m.Method != protocol.EventExecStdout || json.Unmarshal(m.Params, &e) != nil || e.ProcessID != res.ProcessID {
				return false
			}
			d, _ := e.Bytes()
			got += len(d)
			return got >= 32768
		})
		started++
	}
	// Each process keeps 32 KiB and its events' framing: the bound of
	// 4 × 64 KiB is reached by the 8th, never before the 7th.
	if !refused || started > 2*sessionBuffers || started < 2*sessionBuffers-1 {
		t.Fatalf("started %d processes of half a buffer each without an acknowledgement; refused: %v", started, refused)
	}
	// Acknowledging everything sent makes room.
	ack, _ := protocol.NewNotification(protocol.MethodSessionAck, protocol.SessionAckParams{SessionID: open.SessionID, SessionSeq: 1 << 62})
	b, _ := json.Marshal(ack)
	h.send(string(b))
	h.ok(protocol.MethodSessionInfo, protocol.SessionRef{SessionID: open.SessionID}, nil)
	if _, _, exit := h.run(open.SessionID, protocol.ExecStartParams{Shell: true, Command: "echo room"}); exit.ExitCode == nil || *exit.ExitCode != 0 {
		t.Errorf("after the acknowledgement: exit %+v", exit)
	}
}
