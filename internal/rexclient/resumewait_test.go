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

// TestWaitResumed: WaitResumed returns at once on a connection that is
// up, and on one whose transport dropped waits until it is resumed, ends
// (with why), or the caller's context ends.
func TestWaitResumed(t *testing.T) {
	gone := errors.New("given up")
	cases := []struct {
		name string
		then func(c *rexclient.Client, cancel func()) // while WaitResumed waits
		want func(err error) bool
	}{
		{"resumed", func(c *rexclient.Client, _ func()) {
			var mu sync.Mutex
			var seen []string
			p, r, w, closer := newPeer()
			p.serve(&mu, &seen, resumableAnswer, "")
			if err := c.Resume(context.Background(), r, w, closer); err != nil {
				t.Errorf("resume: %v", err)
			}
		}, func(err error) bool { return err == nil }},
		{"abandoned", func(c *rexclient.Client, _ func()) { c.Abandon(gone) },
			func(err error) bool { return errors.Is(err, gone) && errors.Is(err, rexclient.ErrClosed) }},
		{"caller gave up", func(_ *rexclient.Client, cancel func()) { cancel() },
			func(err error) bool { return errors.Is(err, context.Canceled) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			p, r, w, closer := newPeer()
			p.serve(&mu, &seen, resumableAnswer, "")
			c := rexclient.NewConn(r, w, closer)
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if _, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "t", ResumeGraceMS: 60000}); err != nil {
				t.Fatal(err)
			}
			if err := c.WaitResumed(ctx); err != nil {
				t.Fatalf("on a connection that is up: %v", err)
			}
			p.out.Close() // the transport drops
			<-c.Dropped()
			waited := make(chan error, 1)
			go func() { waited <- c.WaitResumed(ctx) }()
			tc.then(c, cancel)
			select {
			case err := <-waited:
				if !tc.want(err) {
					t.Errorf("WaitResumed: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("WaitResumed did not return")
			}
		})
	}
}
