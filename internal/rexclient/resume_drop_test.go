package rexclient_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// TestResumeWhoseTransportDropsStaysDropped: a transport that Resume
// brings and that drops as soon as rexd has answered session.resume
// leaves the connection dropped, ready for the next Resume. Its reader
// settled the drop and only then closed the transport's channel; a
// Resume looking in between saw it open and marked the connection up:
// calls then went to a dead transport, and the next Resume was refused
// ("the connection has not dropped"). The hooks make that order: the
// reader's drop, then the Resume settling, then the reader going on.
func TestResumeWhoseTransportDropsStaysDropped(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	p1, r, w, closer := newPeer()
	p1.serve(&mu, &seen, resumableAnswer, "")
	c := rexclient.NewConn(r, w, closer)
	defer func() {
		// Bounded: on a connection wrongly marked up, Close waits for a
		// reader that has ended.
		closed := make(chan struct{})
		go func() {
			c.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Error("Close did not return")
		}
	}()
	ctx := context.Background()
	if _, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "t", ResumeGraceMS: 60000}); err != nil {
		t.Fatal(err)
	}
	p1.out.Close() // the transport drops
	<-c.Dropped()

	// The drop comes first, and the Resume settles before the reader
	// has finished with it.
	dropped, resumed := make(chan struct{}), make(chan struct{})
	rexclient.SetHooks(c, func() {
		close(dropped)
		<-resumed
	}, func() { <-dropped })
	p2, r2, w2, closer2 := newPeer()
	p2.serve(&mu, &seen, resumableAnswer, protocol.MethodSessionResume) // answers, then drops
	err := c.Resume(ctx, r2, w2, closer2)
	close(resumed)
	if err != nil {
		t.Fatalf("the resume rexd answered: %v", err)
	}
	<-c.Dropped()

	rexclient.SetHooks(c, nil, nil)
	p3, r3, w3, closer3 := newPeer()
	p3.serve(&mu, &seen, resumableAnswer, "")
	if err := c.Resume(ctx, r3, w3, closer3); err != nil {
		t.Fatalf("the resume after the second drop: %v", err)
	}
	if err := c.Call(ctx, protocol.MethodSessionInfo, protocol.SessionRef{SessionID: "s_1"}, nil); err != nil {
		t.Fatalf("a call on the resumed connection: %v", err)
	}
}

// TestResumeOfAClosedClientClosesItsTransport: a client closed (or
// abandoned) while rexd answered session.resume does not take the new
// transport: Resume says the connection ended and closes it. Before, it
// installed the transport on the ended client and returned nil, and over
// SSH the new connection and its remote relay were never closed.
func TestResumeOfAClosedClientClosesItsTransport(t *testing.T) {
	for _, end := range []string{"close", "abandon"} {
		t.Run(end, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			p1, r, w, closer := newPeer()
			p1.serve(&mu, &seen, resumableAnswer, "")
			c := rexclient.NewConn(r, w, closer)
			ctx := context.Background()
			if _, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "t", ResumeGraceMS: 60000}); err != nil {
				t.Fatal(err)
			}
			p1.out.Close() // the transport drops
			<-c.Dropped()

			rexclient.SetHooks(c, nil, func() {
				if end == "close" {
					c.Close()
				} else {
					c.Abandon(errors.New("given up"))
				}
			})
			p2, r2, w2, closer2 := newPeer()
			p2.serve(&mu, &seen, resumableAnswer, "")
			closed := make(chan struct{})
			err := c.Resume(ctx, r2, w2, closerFunc(func() error {
				select {
				case <-closed:
				default:
					close(closed)
				}
				return closer2.Close()
			}))
			if err == nil {
				t.Fatal("Resume of a client ended meanwhile returned nil")
			}
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the new transport was not closed")
			}
		})
	}
}
