package rexclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// TestNilCloserEndsWithoutRexd: a connection made with no closer
// (NewConn allows it: its caller owns the transport) ends by itself on
// Close and on a failed write, without waiting for rexd to end its
// output. Before, Close waited for rexd forever, and a failed write left
// a connection that looked up and could carry nothing.
func TestNilCloserEndsWithoutRexd(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, c *rexclient.Client, p *peer)
	}{
		{"Close", func(t *testing.T, c *rexclient.Client, p *peer) {
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}},
		{"write failure", func(t *testing.T, c *rexclient.Client, p *peer) {
			p.in.Close() // rexd's input is gone; its output is still open
			err := c.Call(context.Background(), protocol.MethodSessionInfo, protocol.SessionRef{SessionID: "s_1"}, nil)
			if !errors.Is(err, rexclient.ErrClosed) {
				t.Errorf("the call that could not be written returned %v, want ErrClosed", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, r, w, closer := newPeer()
			defer closer.Close() // the test owns the transport, as NewConn's caller does
			c := rexclient.NewConn(r, w, nil)
			ended := make(chan struct{})
			go func() {
				tc.end(t, c, p)
				<-c.Done()
				close(ended)
			}()
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the connection did not end while rexd kept its output open")
			}
			if !errors.Is(c.Err(), rexclient.ErrClosed) {
				t.Errorf("the connection ended with %v, want ErrClosed", c.Err())
			}
		})
	}
}
