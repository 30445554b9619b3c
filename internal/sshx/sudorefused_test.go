package sshx

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
	"github.com/rexconsole/rex/internal/sudo"
)

// TestSudoRefusedIsTold: when sudo on the target refuses the password
// SudoPassword gave, the connection fails with ErrWrongPassword and
// SudoRefused is told which password it was, so that it is not given again.
func TestSudoRefusedIsTold(t *testing.T) {
	e := newEnv(t)
	login := sshtest.NewUser(t, sshtest.UserOptions{Sudo: sshtest.SudoPassword, Password: "right-one"})
	s := e.server(sshtest.Options{User: login.Name, Home: login.Home})
	o := e.opts()
	o.SudoPassword = func(string, string) ([]byte, error) { return []byte("a-typo"), nil }
	var told atomic.Value
	o.SudoRefused = func(pw []byte) { told.Store(string(pw)) }
	d := NewDialer(o)
	tg := e.target("h1", s)
	tg.Become = "root"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := d.Connect(ctx, tg)
	if err == nil {
		c.Close()
		t.Fatal("sudo took a wrong password")
	}
	if !errors.Is(err, sudo.ErrWrongPassword) {
		t.Fatalf("connect: %v, want sudo refusing the password", err)
	}
	if got, _ := told.Load().(string); got != "a-typo" {
		t.Fatalf("SudoRefused was told %q, want the refused password", got)
	}
}
