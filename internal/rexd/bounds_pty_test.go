package rexd_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexd"
)

// TestEndedPTYsAreForgotten: a session remembers its ended PTYs the way it
// remembers ended processes, the last keepFinished of them, so a session
// the console keeps for hours, opening a PTY per pane, stays bounded. Of
// keepFinished+2 PTYs opened and ended one after another, the two oldest
// are answered as unknown ids (process_not_found without "reason":
// "exited"; pty.close too), while the oldest one kept and the newest still
// answer as ended PTYs.
func TestEndedPTYsAreForgotten(t *testing.T) {
	h := start(t)
	sid := h.open()
	const n = rexd.KeepFinished + 2
	ptys := make([]protocol.PTYOpenResult, n)
	for i := range ptys {
		ptys[i] = h.openPTY(protocol.PTYOpenParams{SessionID: sid, Argv: []string{"true"}})
		h.exitOf(ptys[i].ProcessID, 30*time.Second)
	}

	reason := func(e *protocol.Error) string {
		var d struct {
			Reason string `json:"reason"`
		}
		json.Unmarshal(e.Data, &d)
		return d.Reason
	}
	for i, p := range ptys {
		forgotten := i < n-rexd.KeepFinished
		if i >= n-rexd.KeepFinished && i != n-rexd.KeepFinished && i != n-1 {
			continue // the edges of the window are what matter
		}
		want := "exited"
		if forgotten {
			want = ""
		}
		e := h.fails(protocol.MethodPTYResize, protocol.PTYResizeParams{SessionID: sid, PTYID: p.PTYID, Cols: 80, Rows: 24}, protocol.CodeProcessNotFound)
		if got := reason(e); got != want {
			t.Errorf("pty.resize of PTY %d of %d (%s): reason %q, want %q (%s)", i+1, n, p.PTYID, got, want, e.Message)
		}
		e = h.fails(protocol.MethodPTYInput, protocol.PTYInputParams{SessionID: sid, PTYID: p.PTYID, Data: "x"}, protocol.CodeProcessNotFound)
		if got := reason(e); got != want {
			t.Errorf("pty.input of PTY %d of %d (%s): reason %q, want %q (%s)", i+1, n, p.PTYID, got, want, e.Message)
		}
		if forgotten {
			h.fails(protocol.MethodPTYClose, protocol.PTYCloseParams{SessionID: sid, PTYID: p.PTYID}, protocol.CodeProcessNotFound)
			continue
		}
		var res protocol.OKResult
		h.ok(protocol.MethodPTYClose, protocol.PTYCloseParams{SessionID: sid, PTYID: p.PTYID}, &res)
		if res.OK {
			t.Errorf("pty.close of the ended PTY %d of %d (%s) answered ok: true", i+1, n, p.PTYID)
		}
	}
}
