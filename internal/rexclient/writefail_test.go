package rexclient_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// TestWriteFailureIsConnectionLoss: a request that cannot be written
// (the transport's writing half is gone, its reader not yet at its end)
// fails as a lost connection, ErrClosed, and the connection ends: fanout
// then counts the target unreachable and drops it from the pool. Before,
// the bare write error made it a failed command on a live-looking
// connection.
func TestWriteFailureIsConnectionLoss(t *testing.T) {
	p, r, w, closer := newPeer()
	c := rexclient.NewConn(r, w, closer)
	defer c.Close()
	go p.answer(t, protocol.MethodSessionOpen, protocol.SessionOpenResult{SessionID: "s_1", Protocol: protocol.Version})
	s, err := c.OpenSession(context.Background(), protocol.SessionOpenParams{ClientName: "t"})
	if err != nil {
		t.Fatal(err)
	}
	p.in.Close() // rexd's input is gone; its output is still open
	_, err = s.Exec(context.Background(), protocol.ExecStartParams{Argv: []string{"true"}}, rexclient.ExecOptions{})
	if !errors.Is(err, rexclient.ErrClosed) {
		t.Fatalf("Exec returned %v, want ErrClosed", err)
	}
	<-c.Done()
}

// TestWriteFailureOnResumableWaitsForTheResume: on a connection whose
// session is resumable, keys typed when the transport cannot be written
// wait for the resume and go out then, as when the drop is seen first:
// the failed write drops the transport (it does not spin, retrying on a
// transport that looks up but can carry nothing).
func TestWriteFailureOnResumableWaitsForTheResume(t *testing.T) {
	p1, r, w, closer := newPeer()
	closes := 0
	var mu sync.Mutex
	c := rexclient.NewConn(r, w, closerFunc(func() error {
		mu.Lock()
		closes++
		mu.Unlock()
		return closer.Close()
	}))
	defer c.Close()
	go func() {
		_ = p1.answer(t, protocol.MethodSessionOpen, protocol.SessionOpenResult{
			SessionID: "s_1", Protocol: protocol.Version, ResumeGraceMS: 60000, ResumeToken: "tok"}) &&
			p1.answer(t, protocol.MethodPTYOpen, protocol.PTYOpenResult{PTYID: "t_1", ProcessID: "p_1"})
	}()
	ctx := context.Background()
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "t", ResumeGraceMS: 60000})
	if err != nil {
		t.Fatal(err)
	}
	pty, err := s.OpenPTY(ctx, protocol.PTYOpenParams{}, rexclient.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1.in.Close() // rexd's input is gone; its output is still open
	wrote := make(chan error, 1)
	go func() { wrote <- pty.Write(ctx, []byte("ls\r")) }()
	select {
	case <-c.Dropped():
	case err := <-wrote:
		t.Fatalf("Write returned %v before the connection dropped", err)
	}

	p2, r2, w2, closer2 := newPeer()
	go func() {
		_ = p2.answer(t, protocol.MethodSessionResume, protocol.SessionResumeResult{SessionID: "s_1",
			Processes: []protocol.ProcessInfo{{ProcessID: "p_1", PTYID: "t_1"}}}) &&
			p2.answer(t, protocol.MethodPTYInput, struct{}{}) &&
			p2.answer(t, protocol.MethodSessionClose, struct{}{}) // c.Close
	}()
	if err := c.Resume(ctx, r2, w2, closer2); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("Write after the resume: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	// Once for the failed write, maybe once more by Resume (its old
	// transport's leftovers, on a goroutine).
	if closes > 2 {
		t.Errorf("the dead transport was closed %d times: the write was retried on it", closes)
	}
}
