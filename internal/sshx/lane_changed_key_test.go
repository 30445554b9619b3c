package sshx

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestLaneSaysWhenTheHostKeyChanged: when the lane's second connection
// shows another host key than the one this connection verified (a man in
// the middle on the second TCP stream), Lane returns the changed-key
// refusal instead of falling back in silence to a channel of the first.
func TestLaneSaysWhenTheHostKeyChanged(t *testing.T) {
	e := newEnv(t)
	key := sshtest.NewKey(t, "ed25519")
	s := sshtest.Start(t, sshtest.Options{Authorized: []*sshtest.Key{key}})
	c := connect(t, NewDialer(e.opts()), Target{Name: "h1", Host: s.Host, Port: s.Port, User: s.User, KeyPath: key.Path})
	// What a different server on the second stream looks like to the pin.
	c.mu.Lock()
	c.hostKey = sshtest.NewKey(t, "ed25519").Public
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc, _, err := c.Lane(ctx)
	if rc != nil {
		defer rc.Close()
	}
	if !errors.Is(err, ErrHostKeyChanged) {
		t.Fatalf("Lane with a changed host key on its own connection: err %v, want the changed-key refusal reported", err)
	}
}
