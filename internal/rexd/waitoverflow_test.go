package rexd_test

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestExecWaitHugeTimeout: timeout_ms was turned into a Duration by
// multiplying by a millisecond, which wraps for values past ~292 years:
// math.MaxInt64 became a negative duration, a timer that fires at once, so
// exec.wait answered "running" immediately instead of waiting. A huge
// timeout waits as long as the process runs.
func TestExecWaitHugeTimeout(t *testing.T) {
	h := start(t)
	sid := h.open()
	var res protocol.ExecStartResult
	h.ok(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{"cat"}}, &res)
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"w","method":%q,"params":{"session_id":%q,"process_id":%q,"timeout_ms":%d}}`,
		protocol.MethodExecWait, sid, res.ProcessID, int64(math.MaxInt64)))
	// A round trip through cat, started after the wait: by then the wait
	// is under way. Only then end the process: a wait that waits sees it
	// ended.
	h.ok(protocol.MethodExecInput, protocol.ExecInputParams{SessionID: sid, ProcessID: res.ProcessID, Data: "x"}, nil)
	h.wait(30*time.Second, func(m *protocol.Message) bool { return m.Method == protocol.EventExecStdout })
	h.ok(protocol.MethodExecKill, protocol.ExecKillParams{SessionID: sid, ProcessID: res.ProcessID, Signal: "KILL"}, nil)
	m := h.response(`"w"`)
	if m.Error != nil {
		t.Fatalf("exec.wait: %v", m.Error)
	}
	var w protocol.ExecWaitResult
	if err := json.Unmarshal(m.Result, &w); err != nil {
		t.Fatal(err)
	}
	if w.Status == protocol.StatusRunning {
		t.Errorf("exec.wait with timeout_ms %d answered %q without waiting", int64(math.MaxInt64), w.Status)
	}
}
