package sshx

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestHungAgentDoesNotHangConnect: an ssh-agent that takes the connection
// and never answers (a stopped or wedged agent: the kernel accepts for it)
// must not hold Connect past its context: canceling gives an answer.
func TestHungAgentDoesNotHangConnect(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	sock := filepath.Join(e.home, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan struct{}, 1)
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
			go func() {
				b := make([]byte, 5) // length and type of a request
				if _, err := c.Read(b); err == nil {
					select {
					case asked <- struct{}{}:
					default:
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	})

	o := e.opts()
	o.AgentSocket = sock
	d := NewDialer(o)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan error, 1)
	go func() {
		c, err := d.Connect(ctx, e.target("h1", s))
		if err == nil {
			c.Close()
		}
		res <- err
	}()
	select {
	case <-asked:
	case err := <-res:
		t.Fatalf("Connect returned %v before asking the agent", err)
	}
	cancel()
	select {
	case err := <-res:
		if err == nil || !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			t.Fatalf("Connect returned %v, want it canceled", err)
		}
		t.Logf("canceled: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Connect still waits for the agent 20s after its context was canceled")
	}
}
