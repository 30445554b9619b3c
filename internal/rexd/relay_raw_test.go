package rexd_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/sshtest"
)

// A connection resumed through a second rexd is relayed to the rexd that
// holds the session (conn.startRelay). A plain session opened on it
// afterwards that asks for output.raw gets raw frames from the holding
// rexd: the relay must pass their bytes on whole. Read as lines, blank
// lines were dropped, "\r\n" lost its "\r", the frame's declared size no
// longer matched what followed, and the exit was lost.
func TestRawOutputThroughResumeRelay(t *testing.T) {
	dir := sshtest.TempDir(t)
	root := t.TempDir()
	env := resumeEnv(dir, root)
	r1 := startRexd(t, nil, env, "--root", root)
	c := rexclient.NewConn(r1.stdout, r1.stdin, r1)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "test", ResumeGraceMS: 60_000})
	if err != nil || !s.Resumable() {
		t.Fatalf("open: %v", err)
	}
	dropped := c.Dropped()
	r1.Close()
	<-dropped
	r2 := startRexd(t, nil, env, "--root", root)
	if err := c.Resume(ctx, r2.stdout, r2.stdin, r2); err != nil {
		t.Fatalf("resume through a second rexd: %v", err)
	}

	plain, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "plain", RequestedCapabilities: []string{protocol.CapOutputRaw}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p, err := plain.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sh", "-c", `printf 'a\n\nb\r\n'`}}, rexclient.ExecOptions{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	exit, werr := p.Wait(ctx)
	if werr != nil || out.String() != "a\n\nb\r\n" {
		t.Fatalf("through the relay: output %q (want %q), exit %+v, wait: %v", out.String(), "a\n\nb\r\n", exit, werr)
	}
}
