package rexclient_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// serve answers every request on p with answer(method) (nil: an empty
// result), recording the methods, until the transport ends; after
// answering closeAfter, it ends the client's input.
func (p *peer) serve(mu *sync.Mutex, seen *[]string, answer func(string) any, closeAfter string) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			line, err := p.dec.ReadLine()
			if err != nil {
				return
			}
			m, perr := protocol.ParseMessage(line)
			if perr != nil || len(m.ID) == 0 {
				continue
			}
			mu.Lock()
			*seen = append(*seen, m.Method)
			mu.Unlock()
			var res any = struct{}{}
			if a := answer(m.Method); a != nil {
				res = a
			}
			msg, _ := protocol.NewResponse(m.ID, res)
			p.enc.Encode(msg)
			if m.Method == closeAfter {
				p.out.Close()
			}
		}
	}()
	return done
}

// TestKillQueuedWhileDroppedSurvivesAFailedResume: a kill asked for
// while the connection was down is sent by the Resume that brings it
// back, even when an earlier Resume's transport dropped again as soon as
// rexd answered: that Resume took the queued kills and sent them on a
// connection still dropped, where they failed, so the process ran on.
func TestKillQueuedWhileDroppedSurvivesAFailedResume(t *testing.T) {
	resumed := protocol.SessionResumeResult{SessionID: "s_1", Processes: []protocol.ProcessInfo{{ProcessID: "p_1"}}}
	answer := func(method string) any {
		switch method {
		case protocol.MethodSessionOpen:
			return protocol.SessionOpenResult{SessionID: "s_1", Protocol: protocol.Version, ResumeGraceMS: 60000, ResumeToken: "tok"}
		case protocol.MethodExecStart:
			return protocol.ExecStartResult{ProcessID: "p_1"}
		case protocol.MethodSessionResume:
			return resumed
		}
		return nil
	}
	var mu sync.Mutex
	var seen []string
	p1, r, w, closer := newPeer()
	p1.serve(&mu, &seen, answer, "")
	c := rexclient.NewConn(r, w, closer)
	defer c.Close()
	ctx := context.Background()
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "t", ResumeGraceMS: 60000})
	if err != nil {
		t.Fatal(err)
	}
	proc, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sleep", "60"}}, rexclient.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1.out.Close() // the transport drops
	<-c.Dropped()
	if err := proc.Kill(ctx, "TERM"); err != nil {
		t.Fatalf("Kill while dropped: %v", err)
	}

	// rexd answers session.resume, and this transport drops at once.
	// The answer lists many processes: decoding it keeps Resume busy
	// while the reader meets the end (it may still win: the kill then
	// goes out on this transport, which is fine too).
	p2, r2, w2, closer2 := newPeer()
	long := resumed
	for i := range 20000 {
		long.Processes = append(long.Processes, protocol.ProcessInfo{ProcessID: fmt.Sprintf("p_%d", i+2), Argv: []string{"sleep", "60"}})
	}
	p2.serve(&mu, &seen, func(method string) any {
		if method == protocol.MethodSessionResume {
			return long
		}
		return answer(method)
	}, protocol.MethodSessionResume)
	c.Resume(ctx, r2, w2, closer2)
	<-c.Dropped()

	p3, r3, w3, closer3 := newPeer()
	p3.serve(&mu, &seen, answer, "")
	if err := c.Resume(ctx, r3, w3, closer3); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(seen, protocol.MethodExecKill) {
		t.Fatalf("rexd got %v: the kill asked for while dropped was never sent", seen)
	}
}
