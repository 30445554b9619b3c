package rexclient_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os/exec"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// TestExitSignalIsAName: the signal of an exit event is shown by every
// front end (the CLI's "killed by signal", the agent's job results, the
// console), and whatever answers at a host's address can send any text
// there. The client keeps it only when it looks like a signal's name.
func TestExitSignalIsAName(t *testing.T) {
	cmd := exec.Command(rexdBin, "--stdio", "--root", t.TempDir(), "--no-audit")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A host that lies: rexd's exit event, its signal rewritten.
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReader(out)
		for {
			line, err := br.ReadBytes('\n')
			line = bytes.ReplaceAll(line, []byte(`"signal":"KILL"`), []byte(`"signal":"KILL\u001b]0;owned\u0007"`))
			if _, werr := pw.Write(line); werr != nil || err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	c := rexclient.NewConn(pr, in, in)
	t.Cleanup(func() { c.Close(); cmd.Wait() })
	ctx := context.Background()
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "t"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sh", "-c", "kill -KILL $$"}}, rexclient.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exit, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Signal == nil || *exit.Signal != "?" {
		t.Errorf("signal %q, want ? for a name that is not one", deref(exit.Signal))
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
