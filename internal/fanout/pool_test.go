package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/rexclient"
)

// gated dials through a fleet once the test opens the gate, and reports
// each dial's start and how its context ended.
type gated struct {
	f       *fleet
	gate    chan struct{}
	started chan context.Context
}

func newGated(f *fleet) *gated {
	return &gated{f: f, gate: make(chan struct{}), started: make(chan context.Context, 8)}
}

func (g *gated) Connect(ctx context.Context, t fanout.Target) (*fanout.Conn, error) {
	g.started <- ctx
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.f.Connect(ctx, t)
}

// waiters returns a hook that reports callers joining a dial on ch.
func waiters(ch chan int) func(int) { return func(n int) { ch <- n } }

// TestSharedDialRunsOnItsOwnContext: a caller that gives up does not end
// the dial another caller still waits for (item 2: shared dials run on a
// context of their own; each waiter honours only its own).
func TestSharedDialRunsOnItsOwnContext(t *testing.T) {
	g := newGated(newFleet(t))
	pool := fanout.NewPool(g, fanout.PoolOptions{})
	defer pool.Close()
	joined := make(chan int, 8)
	fanout.SetWaitHook(pool, waiters(joined))

	first, cancelFirst := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, err := pool.Acquire(first, fanout.Target{Name: "h1"})
		firstErr <- err
	}()
	<-joined
	dialCtx := <-g.started
	second := make(chan error, 1)
	var lease *fanout.Lease
	go func() {
		l, err := pool.Acquire(context.Background(), fanout.Target{Name: "h1"})
		lease = l
		second <- err
	}()
	if n := <-joined; n != 2 {
		t.Fatalf("%d callers wait for the dial, want 2", n)
	}
	cancelFirst()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up got %v, want context.Canceled", err)
	}
	if dialCtx.Err() != nil {
		t.Fatalf("the first caller leaving ended the shared dial: %v", dialCtx.Err())
	}
	close(g.gate)
	if err := <-second; err != nil {
		t.Fatalf("the caller still waiting got %v, want a session", err)
	}
	defer lease.Release()
	if _, err := lease.Session().SessionInfo(context.Background()); err != nil {
		t.Fatalf("the shared session does not answer: %v", err)
	}
	if n := g.f.dials.Load(); n != 1 {
		t.Errorf("%d dials, want the one shared", n)
	}
}

// TestAbandonedDialIsCancelled: when every caller has gone, the dial is
// ended, and the next caller dials afresh.
func TestAbandonedDialIsCancelled(t *testing.T) {
	g := newGated(newFleet(t))
	pool := fanout.NewPool(g, fanout.PoolOptions{})
	defer pool.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := pool.Acquire(ctx, fanout.Target{Name: "h1"})
		done <- err
	}()
	dialCtx := <-g.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	select {
	case <-dialCtx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the dial nobody waits for was not cancelled")
	}
	close(g.gate)
	lease, err := pool.Acquire(context.Background(), fanout.Target{Name: "h1"})
	if err != nil {
		t.Fatalf("a new caller after an abandoned dial: %v", err)
	}
	lease.Release()
}

// TestSharedDialIsBoundedByTheConnectTimeout: the pool's own bound ends a
// dial that never answers, whatever the callers' contexts.
func TestSharedDialIsBoundedByTheConnectTimeout(t *testing.T) {
	g := newGated(newFleet(t))
	pool := fanout.NewPool(g, fanout.PoolOptions{ConnectTimeout: 50 * time.Millisecond})
	defer pool.Close()
	_, err := pool.Acquire(context.Background(), fanout.Target{Name: "h1"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the dial's deadline", err)
	}
}

// TestLeasesAreHandles: releasing or dropping an old lease never touches
// the connection that replaced it (item 2: leases are handles, not names).
func TestLeasesAreHandles(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{IdleTimeout: time.Hour})
	defer pool.Close()
	h1 := fanout.Target{Name: "h1"}
	old, err := pool.Acquire(context.Background(), h1)
	if err != nil {
		t.Fatal(err)
	}
	oldClient := old.Session().Client()
	old.Drop()
	select {
	case <-oldClient.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Drop did not close the connection")
	}
	cur, err := pool.Acquire(context.Background(), h1)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Release()
	// The old lease is used again, twice, as a confused caller would.
	old.Release()
	old.Drop()
	if n := pool.ReapIdle(time.Now().Add(2 * time.Hour)); n != 0 {
		t.Fatalf("the reaper closed %d connection(s) while a lease is held", n)
	}
	if _, err := cur.Session().SessionInfo(context.Background()); err != nil {
		t.Fatalf("the current connection was closed through an old lease: %v", err)
	}
	if n := f.dials.Load(); n != 2 {
		t.Errorf("%d dials, want 2", n)
	}
}

// TestCloseDuringDialLeaksNothing: closing the pool while a dial is in
// flight ends the dial, and a connection it still makes is closed.
func TestCloseDuringDialLeaksNothing(t *testing.T) {
	f := newFleet(t)
	made := make(chan *fanout.Conn, 1)
	started := make(chan struct{})
	c := fanout.ConnectorFunc(func(ctx context.Context, tg fanout.Target) (*fanout.Conn, error) {
		close(started)
		<-ctx.Done() // Close cancels the dial ...
		conn, err := f.Connect(context.Background(), tg)
		made <- conn // ... which still makes a connection
		return conn, err
	})
	pool := fanout.NewPool(c, fanout.PoolOptions{})
	errc := make(chan error, 1)
	go func() {
		_, err := pool.Acquire(context.Background(), fanout.Target{Name: "h1"})
		errc <- err
	}()
	<-started
	pool.Close()
	conn := <-made
	select {
	case <-conn.Session.Client().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the connection a dial made after Close was left open")
	}
	if err := <-errc; err == nil {
		t.Error("Acquire succeeded on a closed pool")
	}
}

// TestIdleReaper: a connection with no lease for IdleTimeout is closed
// (and reported idle); one in use never is.
func TestIdleReaper(t *testing.T) {
	f := newFleet(t)
	var mu sync.Mutex
	var states []string
	pool := fanout.NewPool(f, fanout.PoolOptions{IdleTimeout: time.Minute, OnState: func(target, state string, err error) {
		mu.Lock()
		states = append(states, target+":"+state)
		mu.Unlock()
	}})
	defer pool.Close()
	busy, err := pool.Acquire(context.Background(), fanout.Target{Name: "busy"})
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Release()
	idle, err := pool.Acquire(context.Background(), fanout.Target{Name: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	idleClient := idle.Session().Client()
	idle.Release()
	if n := pool.ReapIdle(time.Now().Add(30 * time.Second)); n != 0 {
		t.Fatalf("reaped %d before the idle timeout", n)
	}
	if n := pool.ReapIdle(time.Now().Add(2 * time.Minute)); n != 1 {
		t.Fatalf("reaped %d, want the idle one", n)
	}
	<-idleClient.Done()
	if _, err := busy.Session().SessionInfo(context.Background()); err != nil {
		t.Fatalf("the connection in use was reaped: %v", err)
	}
	mu.Lock()
	last := states[len(states)-1]
	mu.Unlock()
	if last != "idle:idle" {
		t.Errorf("last state %q: want the reaped connection reported idle", last)
	}
	// The next use dials again.
	again, err := pool.Acquire(context.Background(), fanout.Target{Name: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	again.Release()
	if n := f.dials.Load(); n != 3 {
		t.Errorf("%d dials, want 3", n)
	}
}

// laned is a fleet whose connections can open bulk lanes (another rexd of
// the same target), or fail to when failLanes is set.
type laned struct {
	*fleet
	lanes     atomic.Int64
	failLanes bool
	laneErr   error // what a failing lane says; "no lane here" if nil
}

func (l *laned) Connect(ctx context.Context, t fanout.Target) (*fanout.Conn, error) {
	c, err := l.fleet.Connect(ctx, t)
	if err != nil {
		return nil, err
	}
	c.OpenLane = func(ctx context.Context) (*fanout.Conn, error) {
		l.lanes.Add(1)
		if l.failLanes {
			if l.laneErr != nil {
				return nil, l.laneErr
			}
			return nil, errors.New("no lane here")
		}
		return l.fleet.connect(ctx, t)
	}
	return c, nil
}

// TestBulkLane: bulk work gets a second rexd stream of the lease's
// connection, opened once and closed with the connection, so that it
// never queues ahead of interactive messages; without lanes it shares the
// connection's own session.
func TestBulkLane(t *testing.T) {
	ctx := context.Background()
	l := &laned{fleet: newFleet(t)}
	pool := fanout.NewPool(l, fanout.PoolOptions{})
	defer pool.Close()
	lease, err := pool.Acquire(ctx, fanout.Target{Name: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	bulk, err := lease.Bulk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bulk.Client() == lease.Session().Client() {
		t.Fatal("the bulk lane is the connection's own stream")
	}
	if again, _ := lease.Bulk(ctx); again != bulk || l.lanes.Load() != 1 {
		t.Fatalf("a second Bulk opened another lane (%d lanes)", l.lanes.Load())
	}
	if _, err := bulk.Stat(ctx, "."); err != nil {
		t.Fatalf("the lane does not answer: %v", err)
	}
	// Each with Bulk hands fn the lane.
	var got *rexclient.Session
	fanout.Each(ctx, pool, targets("h1"), fanout.Options{Bulk: true}, func(ctx context.Context, tg fanout.Target, s *rexclient.Session) error {
		got = s
		return nil
	})
	if got != bulk {
		t.Error("Each with Bulk did not get the lane")
	}
	lease.Drop()
	select {
	case <-bulk.Client().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("dropping the connection left its lane open")
	}

	// A connector whose lanes fail: the connection's own session serves.
	l2 := &laned{fleet: newFleet(t), failLanes: true}
	pool2 := fanout.NewPool(l2, fanout.PoolOptions{})
	defer pool2.Close()
	lease2, err := pool2.Acquire(ctx, fanout.Target{Name: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	defer lease2.Release()
	if s, err := lease2.Bulk(ctx); s != lease2.Session() || err != nil {
		t.Errorf("without a lane, Bulk is not the lease's own session (%v)", err)
	}

	// A pool that takes no lanes (a one-shot push) never opens one.
	l4 := &laned{fleet: newFleet(t)}
	pool4 := fanout.NewPool(l4, fanout.PoolOptions{NoLanes: true})
	defer pool4.Close()
	fanout.Each(ctx, pool4, targets("h1"), fanout.Options{Bulk: true}, func(ctx context.Context, tg fanout.Target, s *rexclient.Session) error {
		got = s
		return nil
	})
	lease4, err := pool4.Acquire(ctx, fanout.Target{Name: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	defer lease4.Release()
	if got != lease4.Session() || l4.lanes.Load() != 0 {
		t.Errorf("with NoLanes, Each with Bulk got another session than the connection's (%d lanes opened)", l4.lanes.Load())
	}

	// A lane refused as unsafe (another host key on its connection): the
	// work fails on that target with the lane's own sentence.
	unsafe := errors.New("the host key of h1 changed")
	l3 := &laned{fleet: newFleet(t), failLanes: true, laneErr: fanout.LaneUnsafe(unsafe)}
	pool3 := fanout.NewPool(l3, fanout.PoolOptions{})
	defer pool3.Close()
	ran := false
	rs := fanout.Each(ctx, pool3, targets("h1"), fanout.Options{Bulk: true}, func(context.Context, fanout.Target, *rexclient.Session) error {
		ran = true
		return nil
	})
	if ran || !errors.Is(rs[0].Err, unsafe) || !errors.Is(rs[0].Err, fanout.ErrLaneUnsafe) || rs[0].Err.Error() != unsafe.Error() {
		t.Errorf("an unsafe lane: ran %v, err %v; want the work not run and the lane's error", ran, rs[0].Err)
	}
}

// TestLeaseClose: closing a lease ends its connection only when no other
// lease holds it; a later Acquire dials again.
func TestLeaseClose(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	ctx := context.Background()
	h1 := fanout.Target{Name: "h1"}
	a, err := pool.Acquire(ctx, h1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pool.Acquire(ctx, h1)
	if err != nil {
		t.Fatal(err)
	}
	a.Close() // b still holds it
	if _, err := b.Session().SessionInfo(ctx); err != nil {
		t.Fatalf("closing one lease ended the connection another one holds: %v", err)
	}
	b.Close()
	select {
	case <-b.Session().Client().Done():
	case <-time.After(time.Minute):
		t.Fatal("the last lease closed, the connection is still open")
	}
	c, err := pool.Acquire(ctx, h1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if got := f.dials.Load(); got != 2 {
		t.Fatalf("%d dials, want 2 (the closed connection is not reused)", got)
	}
}

// TestReleaseClosesEachTarget: a run (Run or Each) with Release leaves
// no connection in the pool; without it every target's connection stays
// for the next run.
func TestReleaseClosesEachTarget(t *testing.T) {
	runs := map[string]func(pool *fanout.Pool, ts []fanout.Target, opts fanout.Options) int{
		"Run": func(pool *fanout.Pool, ts []fanout.Target, opts fanout.Options) int {
			return fanout.Run(context.Background(), pool, ts, fanout.Task{Argv: []string{"true"}}, opts).OK
		},
		"Each": func(pool *fanout.Pool, ts []fanout.Target, opts fanout.Options) int {
			ok := 0
			for _, r := range fanout.Each(context.Background(), pool, ts, opts, func(ctx context.Context, _ fanout.Target, s *rexclient.Session) error {
				_, err := s.SessionInfo(ctx)
				return err
			}) {
				if r.Err == nil {
					ok++
				}
			}
			return ok
		},
	}
	for name, run := range runs {
		for _, release := range []bool{true, false} {
			f := newFleet(t)
			pool := fanout.NewPool(f, fanout.PoolOptions{})
			ts := targets("h1", "h2", "h3", "h4")
			for range 2 {
				if ok := run(pool, ts, fanout.Options{Concurrency: 2, Release: release}); ok != len(ts) {
					t.Fatalf("%s, release %v: %d ok", name, release, ok)
				}
			}
			want := int64(len(ts))
			if release {
				want *= 2
			}
			if got := f.dials.Load(); got != want {
				t.Errorf("%s, release %v: %d dials over two runs, want %d", name, release, got, want)
			}
			pool.Close()
		}
	}
}

// countedCloser decrements open once when closed.
func countedCloser(c interface{ Close() error }, open *atomic.Int64) closerFunc {
	var once sync.Once
	return func() error {
		once.Do(func() { open.Add(-1) })
		return c.Close()
	}
}

// TestClosingDoesNotWaitForALaneDial: closing the pool, or dropping the
// connection, while a lease dials its bulk lane returns at once; the dial
// is cancelled, and a lane that lands anyway (a dial that does not heed
// its context) is closed, not leaked. Bulk held the lane's lock across
// the dial, which closing needs: Close waited for a whole SSH dial.
func TestClosingDoesNotWaitForALaneDial(t *testing.T) {
	closers := map[string]func(pool *fanout.Pool, other *fanout.Lease){
		"pool closed": func(pool *fanout.Pool, _ *fanout.Lease) { pool.Close() },
		"dropped":     func(_ *fanout.Pool, other *fanout.Lease) { other.Drop() },
	}
	for name, closeIt := range closers {
		for _, late := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, lane lands late %v", name, late), func(t *testing.T) {
				ctx := context.Background()
				f := newFleet(t)
				var open atomic.Int64 // lanes made and not closed
				started := make(chan struct{}, 1)
				gate := make(chan struct{})
				c := fanout.ConnectorFunc(func(ctx context.Context, tg fanout.Target) (*fanout.Conn, error) {
					conn, err := f.Connect(ctx, tg)
					if err != nil {
						return nil, err
					}
					conn.OpenLane = func(ctx context.Context) (*fanout.Conn, error) {
						started <- struct{}{}
						if late {
							<-gate
						} else {
							select {
							case <-gate:
							case <-ctx.Done():
							}
							if ctx.Err() != nil {
								return nil, ctx.Err()
							}
						}
						lane, err := f.connect(context.Background(), tg)
						if err != nil {
							return nil, err
						}
						open.Add(1)
						lane.Closer = countedCloser(lane.Closer, &open)
						return lane, nil
					}
					return conn, nil
				})
				pool := fanout.NewPool(c, fanout.PoolOptions{})
				defer pool.Close()
				h1 := fanout.Target{Name: "h1"}
				bulkLease, err := pool.Acquire(ctx, h1)
				if err != nil {
					t.Fatal(err)
				}
				defer bulkLease.Release()
				other, err := pool.Acquire(ctx, h1)
				if err != nil {
					t.Fatal(err)
				}
				bulk := make(chan *rexclient.Session, 1)
				go func() {
					s, _ := bulkLease.Bulk(ctx)
					bulk <- s
				}()
				<-started
				closed := make(chan struct{})
				go func() {
					closeIt(pool, other)
					close(closed)
				}()
				select {
				case <-closed:
				case <-time.After(10 * time.Second):
					close(gate) // let it unwind
					<-closed
					t.Fatal("closing waited for the lane's dial")
				}
				close(gate)
				if s := <-bulk; s != bulkLease.Session() {
					t.Error("Bulk on a connection closed meanwhile gave a lane")
				}
				if n := open.Load(); n != 0 {
					t.Errorf("%d lane(s) left open", n)
				}
			})
		}
	}
}

// TestLaneLostKeepsTheConnection: bulk work that fails because its lane
// ended (ErrClosed from the lane's own connection) leaves the target's
// connection, and everything other leases run on it, alone; the next bulk
// work gets a new lane. Each dropped the connection for any ErrClosed,
// and a lane lost in a push ended the operator's terminals on that host.
func TestLaneLostKeepsTheConnection(t *testing.T) {
	ctx := context.Background()
	l := &laned{fleet: newFleet(t)}
	pool := fanout.NewPool(l, fanout.PoolOptions{})
	defer pool.Close()
	held, err := pool.Acquire(ctx, fanout.Target{Name: "h1"}) // a terminal, say
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	rs := fanout.Each(ctx, pool, targets("h1"), fanout.Options{Bulk: true}, func(ctx context.Context, _ fanout.Target, s *rexclient.Session) error {
		if s.Client() == held.Session().Client() {
			return errors.New("Each with Bulk did not get the lane")
		}
		s.Client().Close() // the lane's connection ends
		_, err := s.SessionInfo(ctx)
		return err
	})
	if !errors.Is(rs[0].Err, rexclient.ErrClosed) {
		t.Fatalf("the work on a lost lane ended with %v, want ErrClosed", rs[0].Err)
	}
	if _, err := held.Session().SessionInfo(ctx); err != nil {
		t.Fatalf("a lost lane ended the connection another lease holds: %v", err)
	}
	rs = fanout.Each(ctx, pool, targets("h1"), fanout.Options{Bulk: true}, func(ctx context.Context, _ fanout.Target, s *rexclient.Session) error {
		if s.Client() == held.Session().Client() {
			return errors.New("no new lane after the lost one")
		}
		_, err := s.SessionInfo(ctx)
		return err
	})
	if rs[0].Err != nil {
		t.Fatal(rs[0].Err)
	}
	if d, n := l.dials.Load(), l.lanes.Load(); d != 1 || n != 2 {
		t.Errorf("%d dials and %d lanes, want 1 and 2", d, n)
	}
}

// TestReapClosesAtOnce: the reaper closes the idle connections together,
// as the pool's Close does, not one after another: closing one whose
// host no longer answers waits seconds (rexd is asked to close its
// resumable sessions first), and the pool's Close waits for the reaper.
func TestReapClosesAtOnce(t *testing.T) {
	f := newFleet(t)
	entered, release := make(chan string, 2), make(chan struct{})
	c := fanout.ConnectorFunc(func(ctx context.Context, tg fanout.Target) (*fanout.Conn, error) {
		conn, err := f.Connect(ctx, tg)
		if err != nil {
			return nil, err
		}
		closer := conn.Closer
		conn.Closer = closerFunc(func() error {
			entered <- tg.Name
			<-release // a host that does not answer
			return closer.Close()
		})
		return conn, nil
	})
	pool := fanout.NewPool(c, fanout.PoolOptions{IdleTimeout: time.Minute})
	defer pool.Close()
	for _, name := range []string{"h1", "h2"} {
		l, err := pool.Acquire(context.Background(), fanout.Target{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
	}
	reaped := make(chan int, 1)
	go func() { reaped <- pool.ReapIdle(time.Now().Add(2 * time.Minute)) }()
	for range 2 {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			close(release)
			t.Fatal("the reaper closes one connection after another")
		}
	}
	close(release)
	if n := <-reaped; n != 2 {
		t.Fatalf("reaped %d, want 2", n)
	}
}
