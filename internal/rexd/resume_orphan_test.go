package rexd

import (
	"context"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestLateOrphanOfAMovedSession: a connection's shutdown orphans the
// resumable sessions it finds in its map, and session.resume on another
// connection takes the session out of that map only after it has marked
// it no longer orphaned. An old connection that ends in between (the
// network of a client that has just reconnected gives out) orphaned a
// session another connection now holds: its grace timer ran, and the
// session, in use, expired and had its processes stopped. The test makes
// that interleaving by hand: the resume, then the orphan that the old
// connection's shutdown ran in the window.
func TestLateOrphanOfAMovedSession(t *testing.T) {
	rs := newResumeServer(t, nil)
	ctx := context.Background()
	c1, _ := rs.connectRaw(t)
	open := c1.open(ctx, 60_000)
	sess := rs.srv.resumableSession(open.SessionID)
	sess.mu.Lock()
	old := sess.conn
	sess.mu.Unlock()

	c2, _ := rs.connectRaw(t)
	var res protocol.SessionResumeResult
	c2.call(protocol.MethodSessionResume, protocol.SessionResumeParams{SessionID: open.SessionID, ResumeToken: open.ResumeToken}, &res)
	sess.orphan(old)

	r := sess.resume
	r.mu.Lock()
	orphaned, timer := r.orphaned, r.timer != nil && r.timer.Stop()
	r.mu.Unlock()
	if orphaned || timer {
		t.Fatalf("the session held by the new connection is orphaned (timer running: %v): it would expire in %s", timer, r.grace.Round(time.Second))
	}
	c2.call(protocol.MethodSessionInfo, protocol.SessionRef{SessionID: open.SessionID}, nil)
}
