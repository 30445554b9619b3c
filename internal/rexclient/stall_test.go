package rexclient_test

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// inValve passes the client's writes to rexd, holding them while shut:
// a transport that takes no more bytes (a dead link with a full SSH
// window, a peer that stopped reading).
type inValve struct {
	*latch
	w io.WriteCloser
}

func newInValve(w io.WriteCloser) *inValve { return &inValve{latch: newLatch(), w: w} }

func (v *inValve) Write(p []byte) (int, error) {
	v.pass()
	return v.w.Write(p)
}

func (v *inValve) Close() error { v.set(false); return v.w.Close() }

// returns waits, bounded, for what a call returned: a call stuck past
// its context fails the test instead of hanging it.
func returns(t *testing.T, what string, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10 s of its context's end", what)
		return nil
	}
}

// TestExecOnAStalledTransportEndsWithItsContext: an Exec whose request
// cannot be written (the transport takes no more bytes) returns when its
// context ends, and when the transport moves again and the request
// reaches rexd after all, the process it starts is stopped: nothing is
// left running for a caller that is gone. Before, the write held Exec
// until the transport moved, whatever its context said.
func TestExecOnAStalledTransportEndsWithItsContext(t *testing.T) {
	root := t.TempDir()
	cmd := exec.Command(rexdBin, "--stdio", "--root", root, "--no-audit")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	v := newInValve(in)
	c := rexclient.NewConn(out, v, v)
	t.Cleanup(func() { c.Close(); cmd.Wait() })
	s, err := c.OpenSession(context.Background(), protocol.SessionOpenParams{ClientName: "t"})
	if err != nil {
		t.Fatal(err)
	}

	v.set(true)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sh", "-c", "echo $$ > pid; exec sleep 60"}}, rexclient.ExecOptions{})
		errc <- err
	}()
	waitFor(t, v.isHolding) // exec.start is being written
	cancel()
	if err := returns(t, "Exec", errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec returned %v, want context.Canceled", err)
	}

	// The transport moves for exec.start alone, which rexd runs, and
	// then for the $/cancelRequest that follows it (sent before rexd
	// began, it would stop it from running at all).
	v.let()
	pid := readPid(t, filepath.Join(root, "pid"))
	v.set(false)
	// No event tells the test that rexd stopped it: poll, bounded.
	waitFor(t, func() bool { return syscall.Kill(pid, 0) != nil })
}

// TestCallOnAStalledTransport: a Call whose transport stops taking bytes
// returns when its context ends, whether the stall comes before its
// request is written or after (then the $/cancelRequest it owes rexd
// waits for the transport, not the caller). A request whose write had
// not begun is never sent; one being written is followed by its
// $/cancelRequest.
func TestCallOnAStalledTransport(t *testing.T) {
	type stalled struct {
		p      *peer
		v      *inValve
		c      *rexclient.Client
		ctx    context.Context
		cancel func()
		call   func()        // starts the call
		gone   chan struct{} // closed once the call has returned
	}
	for _, tc := range []struct {
		name string
		// stall stops the transport while the call is under way, ends
		// the call's context and returns the requests the peer must read
		// once the transport moves again.
		stall func(t *testing.T, s stalled) []string
	}{
		{"before the write begins", func(t *testing.T, s stalled) []string {
			rexclient.SetWriteHook(s.c, func() { <-s.gone })
			s.call()
			s.cancel()
			return nil
		}},
		{"during the write", func(t *testing.T, s stalled) []string {
			s.v.set(true)
			s.call()
			waitFor(t, s.v.isHolding)
			s.cancel()
			return []string{"fs.stat", protocol.MethodCancelRequest}
		}},
		{"after the write", func(t *testing.T, s stalled) []string {
			s.call()
			if s.p.request(t, "fs.stat") == nil { // written; no answer comes
				return nil
			}
			s.v.set(true)
			s.cancel()
			waitFor(t, s.v.isHolding) // the $/cancelRequest waits
			return []string{protocol.MethodCancelRequest}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, r, w, closer := newPeer()
			v := newInValve(w.(io.WriteCloser))
			c := rexclient.NewConn(r, v, closerFunc(func() error { v.set(false); return closer.Close() }))
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			call := func() {
				go func() { errc <- c.Call(ctx, "fs.stat", map[string]string{"path": "x"}, nil) }()
			}
			gone := make(chan struct{})
			want := tc.stall(t, stalled{p, v, c, ctx, cancel, call, gone})
			err := returns(t, "Call", errc)
			close(gone)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Call returned %v, want context.Canceled", err)
			}
			// The transport moves again: the peer reads what was owed, in
			// order, and the next call (which may come between a request
			// and its $/cancelRequest, never before the request).
			v.set(false)
			go c.Call(context.Background(), "fs.list", map[string]string{"path": "y"}, nil)
			var got []string
			for range len(want) + 1 {
				line, err := p.dec.ReadLine()
				if err != nil {
					t.Fatalf("peer: read: %v", err)
				}
				m, perr := protocol.ParseMessage(line)
				if perr != nil {
					t.Fatalf("peer: %s: %v", line, perr)
				}
				if m.Method != "fs.list" {
					got = append(got, m.Method)
				} else if len(got) == 0 && len(want) > 0 {
					t.Fatalf("peer: fs.list came before %s", want[0])
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("peer read %q besides fs.list, want %q", got, want)
			}
		})
	}
}
