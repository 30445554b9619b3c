package fanout_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// firstStarter is a connector that starts Target.First with the
// connection's session, as sshx does, once the test opens the gate.
type firstStarter struct{ g *gated }

func (s firstStarter) Connect(ctx context.Context, t fanout.Target) (*fanout.Conn, error) {
	conn, err := s.g.Connect(ctx, t)
	if err != nil || t.First == nil {
		return conn, err
	}
	f := t.First
	f.Proc, f.Err = conn.Session.Exec(ctx, f.Params, f.Opts)
	f.Sent = true
	return conn, nil
}

// TestFirstOfACallerWhoLeftIsStopped: the caller whose Acquire dials
// hands its command (Target.First) to the dial; when it gives up while
// another caller keeps the dial going, that command, started with the
// connection, has nobody to own it and is stopped, as a cancelled Exec's
// is. Before, it ran to its end.
func TestFirstOfACallerWhoLeftIsStopped(t *testing.T) {
	g := newGated(newFleet(t))
	pool := fanout.NewPool(firstStarter{g}, fanout.PoolOptions{})
	defer pool.Close()
	joined := make(chan int, 8)
	fanout.SetWaitHook(pool, waiters(joined))

	first := &rexclient.FirstExec{Params: protocol.ExecStartParams{
		Argv: []string{"sleep", "60"}}}
	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() {
		_, err := pool.Acquire(ctxA, fanout.Target{Name: "h1", First: first})
		errA <- err
	}()
	<-joined
	<-g.started
	leaseB := make(chan *fanout.Lease, 1)
	go func() {
		l, err := pool.Acquire(context.Background(), fanout.Target{Name: "h1"})
		if err != nil {
			t.Error(err)
		}
		leaseB <- l
	}()
	<-joined
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first caller got %v, want context.Canceled", err)
	}
	close(g.gate)
	l := <-leaseB
	if l == nil {
		return
	}
	defer l.Release()
	// The process of the caller who left ends by a signal, long before
	// its sleep would. (Asking rexd for the session's processes raced the
	// kill: a process already ended is not listed.)
	if first.Proc == nil {
		t.Fatal("the dial started no first command")
	}
	// A bound for a kill that never comes, well under the sleep's 60 s.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exit, err := first.Proc.Wait(ctx)
	if err != nil {
		t.Fatalf("the command of the caller who left did not end: %v", err)
	}
	if exit.Signal == nil {
		t.Fatalf("the command of the caller who left ended %+v, want by a signal", exit)
	}
}

// TestFirstIsNotSentTwice: a one-shot run's command goes out with the
// connection's opening (Target.First); when that connection is lost
// before the caller gets it, Acquire does not dial again with the same
// command, which would start it a second time: the target ends
// Unreachable, saying it may have started. It was started twice and
// reported as one clean run.
func TestFirstIsNotSentTwice(t *testing.T) {
	f := newFleet(t)
	var starts atomic.Int64
	c := fanout.ConnectorFunc(func(ctx context.Context, tg fanout.Target) (*fanout.Conn, error) {
		conn, err := f.Connect(ctx, tg)
		if err != nil {
			return nil, err
		}
		if first := tg.First; first != nil {
			starts.Add(1)
			first.Proc, first.Err = conn.Session.Exec(ctx, first.Params, first.Opts)
			first.Sent = true
		}
		if f.dials.Load() == 1 {
			conn.Closer.Close() // lost as soon as it was made
		}
		return conn, nil
	})
	pool := fanout.NewPool(c, fanout.PoolOptions{})
	defer pool.Close()
	s := fanout.Run(context.Background(), pool, targets("h1"), fanout.Task{Argv: []string{"true"}}, fanout.Options{Release: true})
	if n := starts.Load(); n != 1 {
		t.Errorf("the command was started %d times", n)
	}
	if r := s.Results[0]; !r.Unreachable || !strings.Contains(r.Err.Error(), "may have started") {
		t.Errorf("result %+v: want unreachable, saying the command may have started", r)
	}
}
