package rexd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// pipeCloser ends an in-process connection: it closes the client's side of
// the pipe and waits for Serve to return.
type pipeCloser struct {
	w    io.Closer
	done chan struct{}
}

func (p pipeCloser) Close() error { p.w.Close(); <-p.done; return nil }

// servePipes runs a Server whose one root is root on pipes: what its
// client reads and writes, and a channel closed once Serve has returned.
// hook, when set, runs before every handler with the handler's context.
func servePipes(t *testing.T, root string, hook func(ctx context.Context, method string)) (*Server, io.Reader, io.WriteCloser, chan struct{}) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Roots = []string{root}
	cfg.AuditPath = filepath.Join(t.TempDir(), "audit.log")
	cfg.CASDir = filepath.Join(t.TempDir(), "cas")
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.testHook = hook
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	done := make(chan struct{})
	go func() {
		srv.Serve(context.Background(), sr, sw)
		sw.Close()
		close(done)
	}()
	return srv, cr, cw, done
}

// serveInProcess runs a Server on pipes and returns a client of it. hook,
// when set, runs before every handler with the handler's context.
func serveInProcess(t *testing.T, hook func(ctx context.Context, method string)) (*rexclient.Client, *Server) {
	t.Helper()
	srv, cr, cw, done := servePipes(t, t.TempDir(), hook)
	c := rexclient.NewConn(cr, cw, pipeCloser{w: cw, done: done})
	t.Cleanup(func() { c.Close(); srv.Close() })
	return c, srv
}

// TestSlowRequestsDoNotHoldUpQuickOnes (item 3): a file request that does
// not finish leaves the connection serving: session.info, exec.start and
// pty.input are answered while it runs, and the slow one is answered once
// the client cancels it ($/cancelRequest ends its context).
func TestSlowRequestsDoNotHoldUpQuickOnes(t *testing.T) {
	entered := make(chan struct{})
	ended := make(chan error, 1)
	c, _ := serveInProcess(t, func(ctx context.Context, method string) {
		if method != protocol.MethodFSStat {
			return
		}
		close(entered)
		<-ctx.Done() // a request that only its cancellation ends
		ended <- ctx.Err()
	})
	ctx := context.Background()
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	statErr := make(chan error, 1)
	go func() {
		_, err := s.Stat(sctx, ".")
		statErr <- err
	}()
	<-entered

	// Bounded, so that a stalled connection fails the test.
	ctx, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	if _, err := s.SessionInfo(ctx); err != nil {
		t.Fatalf("session.info while fs.stat runs: %v", err)
	}
	pty, err := s.OpenPTY(ctx, protocol.PTYOpenParams{Argv: []string{"cat"}}, rexclient.ExecOptions{})
	if err != nil {
		t.Fatalf("pty.open while fs.stat runs: %v", err)
	}
	if err := pty.Write(ctx, []byte("keystroke")); err != nil {
		t.Fatalf("pty.input while fs.stat runs: %v", err)
	}
	if err := pty.Close(ctx); err != nil {
		t.Fatalf("pty.close: %v", err)
	}

	cancel()
	if err := <-statErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call returned %v", err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the handler's context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client's cancellation never reached the handler")
	}
}

// TestCancelledRequestIsAnswered: a request cancelled while it waits is
// still answered, with request_cancelled, and the connection goes on.
func TestCancelledRequestIsAnswered(t *testing.T) {
	entered := make(chan struct{}, 1)
	c, _ := serveInProcess(t, func(ctx context.Context, method string) {
		if method == protocol.MethodFSList {
			entered <- struct{}{}
			<-ctx.Done()
		}
	})
	ctx := context.Background()
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// Call by hand, so the answer to the cancelled id can be read.
	res := make(chan error, 1)
	go func() {
		res <- c.Call(ctx, protocol.MethodFSList, protocol.FSListParams{SessionID: s.ID, Path: "."}, nil)
	}()
	<-entered
	// Find the id: the session.open was 1, fs.list is 2.
	if err := c.Notify(protocol.MethodCancelRequest, protocol.CancelParams{ID: []byte("2")}); err != nil {
		t.Fatal(err)
	}
	var perr *protocol.Error
	if err := <-res; !errors.As(err, &perr) || perr.Code != protocol.CodeRequestCancelled {
		t.Fatalf("cancelled fs.list answered %v, want request_cancelled", err)
	}
	if _, err := s.SessionInfo(ctx); err != nil {
		t.Fatalf("the connection after a cancellation: %v", err)
	}
}

// TestSessionCloseRaceCountsOnce: session.close calls for one session
// racing from many goroutines (released together) close it once, so the
// session count never goes below the sessions really open.
func TestSessionCloseRaceCountsOnce(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Roots = []string{t.TempDir()}
	cfg.AuditPath = ""
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := &conn{srv: srv, ctx: context.Background(), enc: protocol.NewEncoder(io.Discard), sessions: map[string]*session{}, inflight: map[string]*request{}}
	req := func(params string) *request {
		return &request{msg: &protocol.Message{Params: json.RawMessage(params)}}
	}
	for round := 0; round < 2000; round++ {
		res, perr := c.sessionOpen(context.Background(), req(`{"client_name":"x"}`))
		if perr != nil {
			t.Fatal(perr)
		}
		id := res.(protocol.SessionOpenResult).SessionID
		var wg sync.WaitGroup
		var closed atomic.Int32
		start := make(chan struct{})
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, perr := c.sessionClose(context.Background(), req(fmt.Sprintf(`{"session_id":%q}`, id))); perr == nil {
					closed.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if n, _ := srv.usage.held(); n != 0 || closed.Load() != 1 {
			k := closed.Load()
			t.Fatalf("round %d: %d closes succeeded and the session count is %d, want 1 and 0", round, k, n)
		}
	}
}

// TestResizeAfterTheTerminalClosed: a pty.resize that races the program's
// end (which closes the terminal) says the program ended; it never
// reaches a closed descriptor (an internal error FuzzServe's seed found
// under load).
func TestResizeAfterTheTerminalClosed(t *testing.T) {
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	tp := &ptyProc{id: "t_1", master: master}
	if ended, err := tp.setSize(80, 24); ended || err != nil {
		t.Fatalf("resize of an open terminal: ended %v, %v", ended, err)
	}
	tp.Close()
	tp.Close() // both of the program's end paths close it
	if ended, err := tp.setSize(100, 30); !ended || err != nil {
		t.Fatalf("resize of a closed terminal: ended %v, %v; want ended", ended, err)
	}
}
