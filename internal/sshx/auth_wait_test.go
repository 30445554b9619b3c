package sshx

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync/atomic"
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

// TestTypingAPassphraseDoesNotTimeOutOtherHosts: connecting to many hosts
// with one encrypted key, the first handshake asks for its passphrase.
// The others wait for that answer (they use the key it unlocks, without
// asking again), and that wait is the operator's typing, not a slow host:
// it must not count against their connect timeout, as it does not for
// the handshake that asks.
func TestTypingAPassphraseDoesNotTimeOutOtherHosts(t *testing.T) {
	e := newEnv(t)
	key := sshtest.NewEncryptedKey(t, "ed25519", "open sesame")
	s1 := sshtest.Start(t, sshtest.Options{Authorized: []*sshtest.Key{key}})
	s2 := sshtest.Start(t, sshtest.Options{Authorized: []*sshtest.Key{key}})
	o := e.opts()
	// Check: a handshake and one command, no rexd start, so a short
	// bound holds even on a loaded machine.
	o.ConnectTimeout = 5 * time.Second
	prompting := make(chan struct{})
	var calls atomic.Int32
	o.Passphrase = func(string) ([]byte, error) {
		if calls.Add(1) == 1 {
			close(prompting)
			time.Sleep(o.ConnectTimeout + 2*time.Second) // the operator types
		}
		return []byte("open sesame"), nil
	}
	d := NewDialer(o)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tg := func(name string, s *sshtest.Server) Target {
		return Target{Name: name, Host: s.Host, Port: s.Port, User: s.User, KeyPath: key.Path}
	}
	first := make(chan error, 1)
	go func() {
		_, err := d.Check(ctx, tg("h1", s1))
		first <- err
	}()
	select {
	case <-prompting:
	case err := <-first:
		t.Fatalf("h1 ended before asking for the passphrase: %v", err)
	}
	_, err := d.Check(ctx, tg("h2", s2))
	if err != nil {
		t.Errorf("h2, connected while h1 asked for the passphrase: %v", err)
	}
	if err := <-first; err != nil {
		t.Errorf("h1: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the passphrase was asked %d times, want once", n)
	}
}
