package rexd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestResumeAsTheGraceRunsOut: a session.resume that lands as the grace
// runs out, after expire has seen the session still orphaned, is refused
// as expired. It was answered as resumed, and then the session was
// closed under its client, its processes stopped. The hook holds expire
// at that point while the resume is made.
func TestResumeAsTheGraceRunsOut(t *testing.T) {
	rs := newResumeServer(t, func(c *Config) { c.ResumeGrace = 50 * time.Millisecond })
	ctx := context.Background()
	c, tr := rs.connectRaw(t)
	open := c.open(ctx, 60_000)
	pid := c.exec(ctx, open.SessionID, []string{"sleep", "300"})

	sess := rs.srv.resumableSession(open.SessionID)
	reached, release := make(chan struct{}), make(chan struct{})
	sess.resume.mu.Lock()
	sess.resume.expiring = func() {
		close(reached)
		<-release
	}
	sess.resume.mu.Unlock()
	tr.closer.Close()
	<-tr.served
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the grace of 50ms never ran out")
	}

	_, perr := rs.rawResume(ctx, protocol.SessionResumeParams{SessionID: open.SessionID, ResumeToken: open.ResumeToken, LastSeq: c.lastSeq()})
	close(release)
	if r := refusal(t, perr); r.Reason != protocol.ResumeExpired || !strings.Contains(perr.Message, "not resumed within the resume grace of 50ms") {
		t.Fatalf("the resume as the grace ran out: %+v %s", r, perr.Message)
	}
	waitGone(t, pid)
}
