package fanout_test

import (
	"context"
	"testing"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/rexclient"
)

// TestAcquireAsOpensANamedSession: a task run under a client name runs in
// a session of that name on the target's one pooled connection, opened
// once and reused; the operator's own session stays apart.
func TestAcquireAsOpensANamedSession(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	ctx := context.Background()
	tg := fanout.Target{Name: "n1"}

	var sessions []*rexclient.Session
	for _, client := range []string{"", "rex-agent", "rex-agent", "rex-mcp/inspector"} {
		l, err := pool.AcquireAs(ctx, tg, client)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, l.Session())
		l.Release()
	}
	base, agent, again, mcp := sessions[0], sessions[1], sessions[2], sessions[3]
	if agent == base || agent != again || mcp == agent {
		t.Fatalf("sessions: base %p agent %p again %p mcp %p; want one per client name, reused", base, agent, again, mcp)
	}
	if agent.Client() != base.Client() || mcp.Client() != base.Client() {
		t.Error("a named session is not on the pooled connection")
	}
	if got := f.dials.Load(); got != 1 {
		t.Errorf("%d dials, want 1", got)
	}
	info, err := agent.SessionInfo(ctx)
	if err != nil || info.ClientName != "rex-agent" {
		t.Errorf("session.info: %+v, %v; want client rex-agent", info, err)
	}

	// A run under the name: its process lives in the named session.
	rctx, cancel := context.WithCancel(ctx)
	started := make(chan struct{})
	done := make(chan *fanout.Summary)
	go func() {
		done <- fanout.Run(rctx, pool, []fanout.Target{tg}, fanout.Task{Argv: []string{"sleep", "60"}}, fanout.Options{
			ClientName: "rex-agent",
			OnEvent: func(ev fanout.Event) {
				if ev.Kind == fanout.EventStart {
					close(started)
				}
			},
		})
	}()
	<-started
	ai, err := agent.SessionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bi, err := base.SessionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	if len(ai.Processes) != 1 || len(bi.Processes) != 0 {
		t.Errorf("processes: rex-agent %d, operator %d; want 1 and 0", len(ai.Processes), len(bi.Processes))
	}
}
