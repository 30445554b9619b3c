package rexclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// TestCallFromOnEventWaitsBehindItsQueue documents ExecOptions' rule
// that OnEvent and the writers must not wait on their own Client: once
// the process's queue is full the connection's reader waits for it (that
// is the flow control), so the answer to a call made from within OnEvent
// is never read, and the call lasts as long as its ctx. Should that ever
// change, ExecOptions' doc changes with it.
func TestCallFromOnEventWaitsBehindItsQueue(t *testing.T) {
	p, r, w, closer := newPeer()
	c := rexclient.NewConn(r, w, closer)
	defer c.Close()
	events := rexclient.RouteQueue + 2 // one in OnEvent, a full queue, one the reader holds
	go func() {
		if !p.answer(t, protocol.MethodSessionOpen, protocol.SessionOpenResult{SessionID: "s_1", Protocol: protocol.Version}) ||
			!p.answer(t, protocol.MethodExecStart, protocol.ExecStartResult{ProcessID: "p_1"}) {
			return
		}
		for i := range events {
			m, err := protocol.NewNotification(protocol.EventExecStdout, protocol.OutputEvent{
				SessionID: "s_1", ProcessID: "p_1", Seq: uint64(i + 1), Data: "x", Encoding: protocol.EncodingUTF8})
			if err != nil || p.enc.Encode(m) != nil {
				t.Errorf("peer: event %d: %v", i+1, err)
				return
			}
		}
		m := p.request(t, protocol.MethodExecKill)
		if m == nil {
			return
		}
		go func() { // the client's $/cancelRequest: a pipe holds no line unread
			for {
				if _, err := p.dec.ReadLine(); err != nil {
					return
				}
			}
		}()
		res, _ := protocol.NewResponse(m.ID, struct{}{})
		p.enc.Encode(res) // the answer the reader does not reach in time
	}()
	ctx := context.Background()
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var proc *rexclient.Process
	started := make(chan struct{})
	killed := make(chan error, 1)
	first := true
	proc, err = s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"yes"}}, rexclient.ExecOptions{OnEvent: func(rexclient.Event) {
		if !first {
			return
		}
		first = false
		<-started
		deadline := time.Now().Add(10 * time.Second)
		for rexclient.Queued(proc) < rexclient.RouteQueue {
			if time.Now().After(deadline) {
				killed <- errors.New("the queue never filled")
				return
			}
			time.Sleep(time.Millisecond) // polling a condition, bounded
		}
		kctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		killed <- proc.Kill(kctx, "TERM")
	}})
	if err != nil {
		t.Fatal(err)
	}
	close(started)
	if err := <-killed; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Kill from OnEvent with the queue full returned %v, want it to wait until its ctx ended", err)
	}
}
