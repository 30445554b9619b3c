package server

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// stuckConsole draws until a write fails, as a console whose renderer
// writes to a client that reads nothing (a suspended rex, a frozen
// terminal): its Attach ends only once the connection is closed.
type stuckConsole struct {
	fakeConsole
	attached chan struct{}
}

func (s *stuckConsole) Attach(ctx context.Context, t *Terminal) Detach {
	frame := bytes.Repeat([]byte("x"), 64<<10)
	// Attached once the first frames are on their way: the writes that
	// follow fill the socket's buffers, which nobody reads.
	for range 2 {
		if _, err := t.Out.Write(frame); err != nil {
			return Detach{Reason: "the connection ended"}
		}
	}
	s.attached <- struct{}{}
	for {
		if _, err := t.Out.Write(frame); err != nil {
			return Detach{Reason: "the connection ended"}
		}
	}
}

// TestServeEndsWithStuckClients: a stopping server waits a bounded time
// (detachNewsWait) for its attached clients to be told, however many do
// not read; with two such clients it must still end.
func TestServeEndsWithStuckClients(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	ln, err := Listen("")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	con := &stuckConsole{fakeConsole: fakeConsole{target: "web", stopped: make(chan bool, 1)}, attached: make(chan struct{}, 2)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- ln.Serve(ctx, con) }()

	d, err := OpenDir()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := 0; i < 2; i++ {
		c, err := d.Dial(ctx, SocketName)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Attach, then read nothing.
		if _, err := c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"console.attach","params":{"cols":80,"rows":24}}` + "\n")); err != nil {
			t.Fatal(err)
		}
		select {
		case <-con.attached:
		case <-time.After(10 * time.Second):
			t.Fatal("the client was not attached")
		}
	}
	cancel()
	select {
	case <-served:
	case <-time.After(4*detachNewsWait + 5*time.Second):
		t.Fatal("Serve did not end: the second client that reads nothing waits for news it can never get (the shared timer fired once)")
	}
}
