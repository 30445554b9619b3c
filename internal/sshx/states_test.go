package sshx

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
)

// stateLog records what OnState is told, as "target:state" and the
// errors of failures.
type stateLog struct {
	mu     sync.Mutex
	states []string
	errs   []error
}

func (l *stateLog) on(target, state string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.states = append(l.states, target+":"+state)
	if state == StateFailed {
		l.errs = append(l.errs, err)
	}
}

func (l *stateLog) take() (string, []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, e := strings.Join(l.states, " "), l.errs
	l.states, l.errs = nil, nil
	return s, e
}

// TestStatesEndEveryDial: every dial that OnState hears start ends in
// ready or failed, with the error that says why, whatever the verb —
// so a front end never shows "connecting" for a dial that is over.
func TestStatesEndEveryDial(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	var log stateLog
	o := e.opts()
	o.OnState = log.on
	d := NewDialer(o)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A check of a live host: reached, then ready.
	if _, err := d.Check(ctx, e.target("h1", s)); err != nil {
		t.Fatal(err)
	}
	if got, _ := log.take(); got != "h1:connecting h1:ready" {
		t.Errorf("check: states %q", got)
	}

	// A refused dial: failed, with the unreachable error.
	host, port, _ := net.SplitHostPort(sshtest.RefusingAddr(t))
	p, _ := strconv.Atoi(port)
	down := Target{Name: "down1", Host: host, Port: p, User: "nobody", KeyPath: e.key.Path}
	if _, err := d.Check(ctx, down); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("check of a refusing address: %v", err)
	}
	got, errs := log.take()
	if got != "down1:connecting down1:failed" || len(errs) != 1 || !errors.Is(errs[0], ErrUnreachable) {
		t.Errorf("refused: states %q, errors %v", got, errs)
	}

	// A key the server does not take: failed, an authentication error.
	other := sshtest.NewKey(t, "ed25519")
	bad := e.target("h1", s)
	bad.KeyPath = other.Path
	if _, err := d.Connect(ctx, bad); !errors.Is(err, ErrAuth) {
		t.Fatalf("connect with a foreign key: %v", err)
	}
	got, errs = log.take()
	if got != "h1:connecting h1:failed" || len(errs) != 1 || !errors.Is(errs[0], ErrAuth) {
		t.Errorf("auth: states %q, errors %v", got, errs)
	}

	// Clean and Dial end in ready too.
	if _, err := d.Clean(ctx, e.target("h1", s)); err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial(ctx, e.target("h1", s))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got, _ := log.take(); got != "h1:connecting h1:ready h1:connecting h1:ready" {
		t.Errorf("clean, dial: states %q", got)
	}
}
