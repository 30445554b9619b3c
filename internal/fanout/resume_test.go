package fanout_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/rexd"
)

// resumable is a connector to an in-process rexd whose sessions outlive
// their transport: Cut ends a target's transport as a network would, and
// the connection's Resume brings a new one to the same rexd.
type resumable struct {
	srv        *rexd.Server
	sessionDir string
	dials      atomic.Int64
	// open counts the transports not yet closed (nothing may be leaked).
	open atomic.Int64

	mu   sync.Mutex
	cuts map[string]func() // per target, ends its transport of now
	// resume, when set, runs first in every Resume with its context; an
	// error fails that attempt.
	resume func(ctx context.Context) error
	// cutOn, when set, cuts the transport in place of the first write
	// that holds it (a request lost with the network), and is cleared.
	cutOn string
	// loseOn, when set, loses the first request that holds it on the
	// way (its answer never comes), closing lost; it is cleared.
	loseOn string
	lost   chan struct{}
}

// cutWriter is a client's side of a transport, cut or losing a request
// as f.cutOn and f.loseOn say.
type cutWriter struct {
	f    *resumable
	name string
	w    io.Writer
}

func (w cutWriter) Write(p []byte) (int, error) {
	w.f.mu.Lock()
	on := w.f.cutOn
	cut := on != "" && bytes.Contains(p, []byte(on))
	if cut {
		w.f.cutOn = ""
	}
	lose := w.f.loseOn != "" && bytes.Contains(p, []byte(w.f.loseOn))
	if lose {
		w.f.loseOn = ""
	}
	w.f.mu.Unlock()
	if lose {
		close(w.f.lost)
		return len(p), nil
	}
	if cut {
		w.f.Cut(w.name)
		return 0, io.ErrClosedPipe
	}
	return w.w.Write(p)
}

func newResumable(t *testing.T) *resumable {
	home := t.TempDir()
	// Short: the sessions' Unix sockets live there.
	dir, err := os.MkdirTemp("", "fxr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := rexd.New(rexd.Config{
		Roots:       []string{home},
		Limits:      rexd.DefaultLimits(),
		AllowShell:  true,
		ResumeGrace: time.Minute,
		SessionDir:  filepath.Join(dir, "s"),
		CASDir:      filepath.Join(dir, "cas"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &resumable{srv: srv, sessionDir: filepath.Join(dir, "s"), cuts: map[string]func(){}}
}

// transport serves a new connection and returns the client's ends, its
// closer and a cut that ends it from the network's side.
func (f *resumable) transport(name string) (io.Reader, io.Writer, io.Closer) {
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		f.srv.Serve(context.Background(), toServer, fromServer)
		fromServer.Close()
	}()
	f.open.Add(1)
	var once sync.Once
	// As an SSH channel's close: rexd sees the end of its input.
	closer := closerFunc(func() error {
		once.Do(func() {
			fromClient.Close()
			toServer.Close()
			<-served
			f.open.Add(-1)
		})
		return nil
	})
	f.mu.Lock()
	f.cuts[name] = func() {
		toServer.Close()
		fromServer.Close()
	}
	f.mu.Unlock()
	return toClient, cutWriter{f, name, fromClient}, closer
}

// Cut ends the target's transport; its rexd keeps the sessions.
func (f *resumable) Cut(name string) {
	f.mu.Lock()
	cut := f.cuts[name]
	f.mu.Unlock()
	cut()
}

func (f *resumable) Connect(ctx context.Context, t fanout.Target) (*fanout.Conn, error) {
	f.dials.Add(1)
	r, w, closer := f.transport(t.Name)
	c := rexclient.NewConn(r, w, closer)
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "fanout-test", ResumeGraceMS: t.ResumeGrace.Milliseconds()})
	if err != nil {
		c.Close()
		return nil, err
	}
	resume := func(ctx context.Context) error {
		f.mu.Lock()
		hook := f.resume
		f.mu.Unlock()
		if hook != nil {
			if err := hook(ctx); err != nil {
				return err
			}
		}
		r, w, closer := f.transport(t.Name)
		if err := c.Resume(ctx, r, w, closer); err != nil {
			closer.Close()
			return err
		}
		return nil
	}
	return &fanout.Conn{Session: s, Closer: c, Resume: resume}, nil
}

// TestAcquireWaitsForTheResume: a connection whose transport dropped, and
// that watch has not started to reconnect yet, is not handed out: a
// command run then waits for the resume and runs on the connection that
// came back. The lease was handed out at once, and the command failed
// with ErrDropped on a host that was reconnecting fine.
func TestAcquireWaitsForTheResume(t *testing.T) {
	f := newResumable(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{ResumeGrace: time.Minute})
	defer pool.Close()
	ctx := context.Background()
	h1 := fanout.Target{Name: "h1"}
	lease, err := pool.Acquire(ctx, h1)
	if err != nil {
		t.Fatal(err)
	}
	c := lease.Session().Client()
	lease.Release()

	seen, hold := make(chan struct{}), make(chan struct{})
	waiting := make(chan struct{}, 1)
	fanout.SetResumeHooks(pool, func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}, func(string) {
		close(seen)
		<-hold // watch has seen the drop and has not started to reconnect
	})
	f.Cut("h1")
	<-c.Dropped()
	<-seen

	done := make(chan *fanout.Summary, 1)
	go func() {
		done <- fanout.Run(ctx, pool, []fanout.Target{h1}, fanout.Task{Command: "echo back"}, fanout.Options{})
	}()
	select {
	case <-waiting:
	case s := <-done:
		close(hold)
		t.Fatalf("a run during the drop did not wait for the resume: %+v", s.Results[0])
	case <-time.After(30 * time.Second):
		close(hold)
		t.Fatal("the run neither waited for the resume nor ended")
	}
	close(hold)
	var s *fanout.Summary
	select {
	case s = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end once the connection was resumed")
	}
	if r := s.Results[0]; !r.OK() {
		t.Fatalf("the run after the resume: %+v", r)
	}
	if n := f.dials.Load(); n != 1 {
		t.Errorf("%d dials, want 1: the connection was resumed, not dialled again", n)
	}
}

// TestReapDuringAResume: a connection that nothing has used for the idle
// timeout is reaped even while it is being resumed (no lease means no
// command, transfer or terminal of the operator's on it: nothing to come
// back to), and the reconnection ends with it, at once and quietly: its
// attempt in flight is cancelled, and the host is not reported in error
// (or ready) after it was reported idle. The attempt ran on for its own
// 30 s, kept the pool's Close waiting, and then reported the reaped
// connection as lost.
func TestReapDuringAResume(t *testing.T) {
	f := newResumable(t)
	attempts := make(chan context.Context, 1)
	f.resume = func(ctx context.Context) error {
		attempts <- ctx
		<-ctx.Done() // a host that does not answer yet
		return ctx.Err()
	}
	var mu sync.Mutex
	var states []string
	pool := fanout.NewPool(f, fanout.PoolOptions{IdleTimeout: time.Minute, ResumeGrace: time.Minute,
		OnState: func(target, state string, err error) {
			mu.Lock()
			states = append(states, state)
			mu.Unlock()
		}})
	defer pool.Close()
	lease, err := pool.Acquire(context.Background(), fanout.Target{Name: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	c := lease.Session().Client()
	lease.Release()
	f.Cut("h1")
	var attempt context.Context
	select {
	case attempt = <-attempts:
	case <-time.After(30 * time.Second):
		t.Fatal("the pool did not try to resume")
	}
	if n := pool.ReapIdle(time.Now().Add(2 * time.Minute)); n != 1 {
		t.Fatalf("reaped %d connections, want the one being resumed", n)
	}
	select {
	case <-attempt.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the resume in flight went on after the connection was reaped")
	}
	<-c.Done()
	closed := make(chan struct{})
	go func() {
		pool.Close() // waits for the reconnection to have ended
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the reaped connection's reconnection")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{fanout.StateConnecting, fanout.StateReady, fanout.StateReconnecting, fanout.StateIdle}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("states %v, want %v", states, want)
	}
	if n := f.open.Load(); n != 0 {
		t.Errorf("%d transport(s) left open", n)
	}
}

// TestCommandStartLostWithTheNetwork: a command whose start request is
// lost as the connection drops ends Unreachable, saying so and what to do,
// not as a failure of the command ("start command: connection to rexd
// lost; reconnecting"); it is not sent again (had it reached rexd, it
// could run twice), and the host, resumed, runs the next one.
func TestCommandStartLostWithTheNetwork(t *testing.T) {
	f := newResumable(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{ResumeGrace: time.Minute})
	defer pool.Close()
	ctx := context.Background()
	h1 := []fanout.Target{{Name: "h1"}}
	task := fanout.Task{Command: "echo ran >> ran.log"}
	if s := fanout.Run(ctx, pool, h1, task, fanout.Options{}); s.OK != 1 {
		t.Fatalf("first run: %+v", s.Results[0])
	}
	f.mu.Lock()
	f.cutOn = `"method":"exec.start"`
	f.mu.Unlock()
	s := fanout.Run(ctx, pool, h1, task, fanout.Options{})
	r := s.Results[0]
	if !r.Unreachable || s.ExitStatus() != 255 || !strings.Contains(r.Err.Error(), "run it again") {
		t.Fatalf("a start lost with the network: %+v (exit %d); want unreachable, saying to run it again", r, s.ExitStatus())
	}
	if s := fanout.Run(ctx, pool, h1, task, fanout.Options{}); s.OK != 1 {
		t.Fatalf("the run after the resume: %+v", s.Results[0])
	}
	if n := f.dials.Load(); n != 1 {
		t.Errorf("%d dials, want 1 (resumed)", n)
	}
}

// TestResumeRefusedReportsOnce: a connection rexd will not resume (its
// grace ran out) is reported in error once, with rexd's sentence. watch
// reported it a second time, "connection to h1 lost: connection lost and
// not resumed: …", over the one reconnect had just reported.
func TestResumeRefusedReportsOnce(t *testing.T) {
	f := newResumable(t)
	var mu sync.Mutex
	var errs []string
	pool := fanout.NewPool(f, fanout.PoolOptions{ResumeGrace: time.Millisecond,
		OnState: func(target, state string, err error) {
			if state == fanout.StateError {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
			}
		}})
	defer pool.Close()
	watched := make(chan struct{})
	fanout.SetWatchEndHook(pool, func(string) { close(watched) })
	lease, err := pool.Acquire(context.Background(), fanout.Target{Name: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	sid := lease.Session().ID
	lease.Release()
	f.mu.Lock()
	f.resume = func(context.Context) error {
		// rexd leaves this note once the session's grace has run out.
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := os.Stat(filepath.Join(f.sessionDir, sid+".ended")); err == nil {
				return nil
			}
			if time.Now().After(deadline) {
				return errors.New("the session never expired")
			}
			time.Sleep(10 * time.Millisecond) // polling a file rexd writes
		}
	}
	f.mu.Unlock()
	f.Cut("h1")
	select {
	case <-watched:
	case <-time.After(30 * time.Second):
		t.Fatal("the pool never gave up the connection rexd refused to resume")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 1 || !strings.Contains(errs[0], "not resumed within the resume grace") {
		t.Fatalf("errors reported: %q; want rexd's sentence, once", errs)
	}
}

// TestNamedSessionsOpenApart: opening a named session (AcquireAs) that
// hangs holds back only the callers of that name, not those of another
// name on the same connection. The lock of the named sessions was held
// across the open: an agent's tool call waited, past its own context, for
// an MCP client's session to open.
func TestNamedSessionsOpenApart(t *testing.T) {
	f := newResumable(t)
	f.loseOn, f.lost = `"client_name":"rex-mcp/slow"`, make(chan struct{})
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	h1 := fanout.Target{Name: "h1"}
	slowCtx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	slow := make(chan error, 1)
	go func() {
		_, err := pool.AcquireAs(slowCtx, h1, "rex-mcp/slow")
		slow <- err
	}()
	<-f.lost
	agent := make(chan error, 1)
	go func() {
		l, err := pool.AcquireAs(context.Background(), h1, "rex-agent")
		if err == nil {
			l.Release()
		}
		agent <- err
	}()
	select {
	case err := <-agent:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		giveUp() // let both go
		<-agent
		t.Fatal("a session for another name waited for the one being opened")
	}
	giveUp()
	if err := <-slow; !errors.Is(err, context.Canceled) {
		t.Fatalf("the open whose answer never came: %v, want its caller's context's end", err)
	}
	// The name whose open failed can be opened again.
	l, err := pool.AcquireAs(context.Background(), h1, "rex-mcp/slow")
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
}
