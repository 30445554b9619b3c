package sshx

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestResumeWhenTheCachedRexdIsGone: a resumable connection drops and,
// meanwhile, the cached rexd it would relay through is removed from the
// host (a cache cleaned, `rex clean`). Resume copies rexd again and gets
// the sessions back, instead of failing every attempt with "connection to
// rexd closed" until the rexd that kept them gives up.
func TestResumeWhenTheCachedRexdIsGone(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	tg := e.target("h1", s)
	tg.ResumeGrace = time.Minute
	c := connect(t, NewDialer(e.opts()), tg)
	if !c.Client.Resumable() {
		t.Fatal("the connection is not resumable")
	}
	// Drop the transport: kill the connection's sshd processes, not
	// rexd, which keeps the session for its grace.
	for _, pid := range s.Descendants() {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if strings.HasPrefix(strings.TrimSpace(string(comm)), "sshd") {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	select {
	case <-c.Client.Dropped():
	case <-time.After(30 * time.Second):
		t.Fatal("the connection did not drop")
	}
	if err := os.Remove(c.Info.RemotePath); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if _, err := os.Stat(c.Info.RemotePath); err != nil {
		t.Errorf("rexd was not copied again: %v", err)
	}
	if out, code := runOn(t, c, "echo", "back"); out != "back\n" || code != 0 {
		t.Errorf("echo after resume: %q exit %d", out, code)
	}
}
