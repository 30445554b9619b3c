package rexclient_test

import (
	"context"
	"errors"
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
	go func() {
		m := p.request(t, protocol.MethodSessionOpen)
		if m == nil {
			return
		}
		res, _ := protocol.NewResponse(m.ID, protocol.SessionOpenResult{SessionID: "s_1", Protocol: protocol.Version})
		p.enc.Encode(res)
	}()
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
