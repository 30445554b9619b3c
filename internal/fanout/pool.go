// Package fanout runs one task on many targets at once with bounded
// concurrency, streams every target's events as they happen, isolates
// failures per target, and keeps one live rexd session per target in a pool
// that later tasks reuse.
package fanout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/version"
)

// Target is one place a task runs: `local`, a device or an ad-hoc host.
// Key identifies its connection in the pool; Spec is what the Connector
// needs to reach it.
type Target struct {
	Name string
	Key  string
	// Group is the group TARGETS chose the target through, "" when it was
	// named on its own; a run passes it on as REX_GROUP.
	Group string
	Spec  any
	// ConnectTimeout, when set, bounds reaching the target (dial,
	// handshake, bootstrap) in place of the connector's own default; the
	// connector enforces it and names it when it fires.
	ConnectTimeout time.Duration
	// ResumeGrace, when set, asks the connector for a connection whose
	// rexd sessions outlive a drop that long (resumable sessions); the
	// pool then reconnects and resumes (Conn.Resume). PoolOptions
	// sets it for every target.
	ResumeGrace time.Duration
	// First, when set, is a command a connector that can may start with
	// the connection's first session, in the same flight (sshx does; see
	// rexclient.FirstExec). Only the caller whose Acquire dials passes it
	// on; it finds out from First.Sent whether it was started.
	First *rexclient.FirstExec
}

// Conn is a ready connection: a session on a rexd.
type Conn struct {
	Session *rexclient.Session
	// Closer ends the connection (SSH client, local subprocess).
	Closer io.Closer
	// OpenLane, when set, starts another rexd to the same target (over an
	// SSH connection of its own, another local subprocess), at a lower CPU
	// priority, with a session of its own. The pool opens one per
	// connection, on first use, for bulk transfers (Lease.Bulk): a push
	// then never queues ahead of a keystroke in the connection's own
	// stream, where a message is written whole, nor in its TCP stream.
	OpenLane func(ctx context.Context) (*Conn, error)
	// Resume, when set, carries on a connection whose transport dropped
	// while its sessions are resumable: a new transport to the same rexd
	// sessions (sshx.Conn.Resume). The pool calls it with backoff.
	Resume func(ctx context.Context) error
}

// Connector opens connections. Implementations: local rexd, SSH.
type Connector interface {
	Connect(ctx context.Context, t Target) (*Conn, error)
}

// ConnectorFunc adapts a function to Connector.
type ConnectorFunc func(ctx context.Context, t Target) (*Conn, error)

// Connect calls f.
func (f ConnectorFunc) Connect(ctx context.Context, t Target) (*Conn, error) { return f(ctx, t) }

// Connection states reported to OnState.
const (
	StateIdle       = "idle"
	StateConnecting = "connecting"
	StateReady      = "ready"
	StateError      = "error"
	StateClosed     = "closed"
	// StateReconnecting: the connection dropped and the pool is getting
	// it back (resumable sessions); ready or error follows.
	StateReconnecting = "reconnecting"
)

// PoolOptions tune a Pool.
type PoolOptions struct {
	// IdleTimeout closes connections nobody has used for that long; 0
	// keeps them until the pool closes.
	IdleTimeout time.Duration
	// ConnectTimeout bounds one dial (connect, bootstrap, session), which
	// runs on a context of its own so that callers sharing it each wait
	// only as long as their own context allows. Default 2 minutes.
	ConnectTimeout time.Duration
	// OnState reports connection state changes (for the console sidebar).
	// err is set with StateError.
	OnState func(target, state string, err error)
	// Secrets, when set, gives the secrets every process started on a
	// target gets (a device's "secrets"), as environment variables by
	// name. Run and Lease.OpenPTY ask it before each process starts, lay
	// the variables over the process's environment and mask their values
	// as *** in its output; an error stops that process from starting.
	Secrets func(ctx context.Context, t Target) (map[string]string, error)
	// ResumeGrace, when set, opens resumable sessions on every target
	// that has no grace of its own (Target.ResumeGrace): a connection
	// that drops is dialled again, with backoff, and its sessions resumed,
	// for as long as rexd keeps them.
	ResumeGrace time.Duration
	// NoLanes keeps bulk transfers on each connection's own session
	// (Lease.Bulk opens no lane). A process that runs one transfer and
	// exits (`rex push`, `rex pull`) has nothing interactive on its
	// connections to keep ahead of the blobs, and a lane would cost every
	// host a second SSH connection and rexd.
	NoLanes bool
}

// DefaultIdleTimeout is how long the console keeps an unused connection.
const DefaultIdleTimeout = 10 * time.Minute

// defaultDialTimeout bounds a shared dial when PoolOptions say nothing; a
// caller's own, usually shorter, connect timeout applies to its wait.
const defaultDialTimeout = 2 * time.Minute

// Pool keeps one live session per target key: dialled and bootstrapped
// once, reused by later tasks, closed when idle, re-dialled when dead.
type Pool struct {
	connector Connector
	opts      PoolOptions

	mu      sync.Mutex
	entries map[string]*entry
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup

	// waitHook, when set (by tests), is called each time a caller starts
	// waiting for a dial, with the number of callers now waiting.
	waitHook func(waiters int)
	// resumeWaitHook, when set (by tests), is called each time a caller
	// of Acquire starts waiting for a dropped connection to be resumed.
	resumeWaitHook func()
	// droppedHook, when set (by tests), is called by watch when it sees a
	// connection's transport drop, before it starts the reconnection.
	droppedHook func(target string)
	// watchEndHook, when set (by tests), is called as watch returns.
	watchEndHook func(target string)
}

// entry is one connection of the pool, from its dial to its close. Leases
// point at the entry they were taken on, so nothing done through an old
// lease can touch the entry that replaced it.
type entry struct {
	key      string
	name     string        // the target's name, for OnState
	ready    chan struct{} // closed when the dial ended (conn or err set)
	conn     *Conn
	err      error
	lastUsed time.Time
	users    int    // leases not yet released
	waiters  int    // callers waiting for the dial
	cancel   func() // ends the dial
	removed  bool   // no longer in entries: close conn once the dial ends
	// stopResume, while the connection is being resumed, ends the
	// reconnection and its attempt in flight (retireLocked).
	stopResume func()

	// first is the dialling caller's Target.First; firstLeft is set when
	// that caller gave up before the dial ended: a command the dial
	// starts for it then has no owner, and is stopped.
	first     *rexclient.FirstExec
	firstLeft bool

	// named are further sessions on conn, one per client name (AcquireAs),
	// and opening the ones being opened, each closed once its open ended;
	// namedMu guards both and is never held across an open, so that one
	// name's hanging open holds back no other. They end with the
	// connection.
	namedMu sync.Mutex
	named   map[string]*rexclient.Session
	opening map[string]chan struct{}

	// lane is the bulk lane (Lease.Bulk), opened on first use. laneMu
	// guards it, laneDial and laneStop (the dial in flight, closed when
	// it ends, and what ends it) and closed, set once the connection is
	// being closed. The lock is never held across a dial: closing the
	// connection (the pool's Close, a Drop) must not wait for one.
	laneMu   sync.Mutex
	lane     *Conn
	laneDial chan struct{}
	laneStop context.CancelFunc
	closed   bool
}

// closeConn closes the entry's bulk lane, then its connection; a lane
// dial in flight is ended, and closes the lane if it still lands.
func (e *entry) closeConn() {
	e.laneMu.Lock()
	e.closed = true
	lane, stop := e.lane, e.laneStop
	e.lane = nil
	e.laneMu.Unlock()
	if stop != nil {
		stop()
	}
	if lane != nil {
		lane.Closer.Close()
	}
	e.conn.Closer.Close()
}

// Lease is one use of a target's session, from Acquire to Release. It is
// a handle on the connection it was taken on: releasing or dropping it
// never affects a newer connection to the same target.
type Lease struct {
	p    *Pool
	t    Target
	e    *entry
	s    *rexclient.Session // a named session (AcquireAs), or nil
	once sync.Once
}

// Session is the lease's rexd session.
func (l *Lease) Session() *rexclient.Session {
	if l.s != nil {
		return l.s
	}
	return l.e.conn.Session
}

// Bulk is the session for bulk transfers (push, pull) on this lease's
// connection: the connection's bulk lane (Conn.OpenLane), opened on first
// use and kept with the connection, so that large messages never queue
// ahead of interactive ones. When the pool takes no lanes (NoLanes), the
// connector has none, a lane cannot be opened, or the lease is a named
// session (AcquireAs, whose client name the audit must keep), it is the
// lease's own session.
//
// The only error is an OpenLane error that wraps ErrLaneUnsafe: the work
// must not go ahead on this target at all.
func (l *Lease) Bulk(ctx context.Context) (*rexclient.Session, error) {
	e := l.e
	if l.s != nil || e.conn.OpenLane == nil || l.p.opts.NoLanes {
		return l.Session(), nil
	}
	for {
		e.laneMu.Lock()
		if lane := e.lane; lane != nil {
			if !isClosed(lane.Session.Client().Done()) {
				e.laneMu.Unlock()
				return lane.Session, nil
			}
			e.lane = nil // it ended: open another
			e.laneMu.Unlock()
			lane.Closer.Close()
			continue
		}
		if e.closed {
			e.laneMu.Unlock()
			return l.Session(), nil
		}
		if dial := e.laneDial; dial != nil {
			// Another lease is opening it: take its lane, or open one
			// ourselves if it got none.
			e.laneMu.Unlock()
			select {
			case <-dial:
				continue
			case <-ctx.Done():
				return l.Session(), nil // the work fails with ctx's error
			}
		}
		dctx, stop := context.WithCancel(ctx)
		dial := make(chan struct{})
		e.laneDial, e.laneStop = dial, stop
		e.laneMu.Unlock()

		lane, err := e.conn.OpenLane(dctx)
		e.laneMu.Lock()
		e.laneDial, e.laneStop = nil, nil
		closed := e.closed
		if err == nil && lane != nil && !closed {
			e.lane = lane
		}
		e.laneMu.Unlock()
		stop()
		close(dial)
		switch {
		case errors.Is(err, ErrLaneUnsafe):
			return nil, err
		case err != nil || lane == nil:
			return l.Session(), nil // the connection's own stream still serves
		case closed:
			// The connection was closed while the lane was dialled:
			// nothing would ever close the lane.
			lane.Closer.Close()
			return l.Session(), nil
		}
		return lane.Session, nil
	}
}

// ErrLaneUnsafe marks an OpenLane error that must reach the operator
// rather than be worked around on the connection's own stream: the second
// connection met another host key than the first one verified.
var ErrLaneUnsafe = errors.New("the bulk lane's connection is not to be trusted")

// LaneUnsafe marks err as ErrLaneUnsafe, keeping err's own sentence.
func LaneUnsafe(err error) error { return laneUnsafe{err} }

type laneUnsafe struct{ err error }

func (e laneUnsafe) Error() string   { return e.err.Error() }
func (e laneUnsafe) Unwrap() []error { return []error{ErrLaneUnsafe, e.err} }

// Release ends this use of the connection; it stays open for later ones.
// Calling it more than once does nothing.
func (l *Lease) Release() {
	l.once.Do(func() {
		l.p.mu.Lock()
		l.e.users--
		l.e.lastUsed = time.Now()
		l.p.mu.Unlock()
	})
}

// Close releases the lease and closes its connection when nobody else uses
// it or waits for it: a one-shot run (Options.Release) gives back each
// target's socket and rexd as soon as the target is done, so the open files
// of a run follow its concurrency, not its number of targets.
func (l *Lease) Close() {
	l.Release()
	l.p.mu.Lock()
	e := l.e
	if e.removed || e.users > 0 || e.waiters > 0 {
		l.p.mu.Unlock()
		return
	}
	l.p.retireLocked(e)
	l.p.mu.Unlock()
	e.closeConn()
	l.p.state(l.t, StateIdle, nil)
}

// Drop releases the lease and closes its connection (after an error the
// caller knows to be fatal to it), unless a newer one replaced it already.
func (l *Lease) Drop() {
	l.Release()
	l.p.mu.Lock()
	e := l.e
	if e.removed {
		l.p.mu.Unlock()
		return
	}
	l.p.retireLocked(e)
	l.p.mu.Unlock()
	e.closeConn()
	l.p.state(l.t, StateIdle, nil)
}

// NewPool returns a pool dialling through c.
func NewPool(c Connector, opts PoolOptions) *Pool {
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = defaultDialTimeout
	}
	p := &Pool{connector: c, opts: opts, entries: map[string]*entry{}, stop: make(chan struct{})}
	if opts.IdleTimeout > 0 {
		p.wg.Add(1)
		go p.reapIdle()
	}
	return p
}

func (p *Pool) state(t Target, s string, err error) {
	if p.opts.OnState != nil {
		p.opts.OnState(t.Name, s, err)
	}
}

func key(t Target) string {
	if t.Key != "" {
		return t.Key
	}
	return t.Name
}

// removeLocked takes e out of the pool; its connection is closed by the
// caller, or by the dial when it has not ended yet.
func (p *Pool) removeLocked(e *entry) {
	if p.entries[e.key] == e {
		delete(p.entries, e.key)
	}
	e.removed = true
}

// retireLocked is removeLocked for a connection closed on purpose (Drop,
// Lease.Close, ReapIdle, the pool's Close): a reconnection under way ends
// at once, and quietly. One found ended (Acquire) is not: its
// reconnection is reporting why.
func (p *Pool) retireLocked(e *entry) {
	p.removeLocked(e)
	if e.stopResume != nil {
		e.stopResume()
	}
}

// Acquire returns a lease on a live session for t, dialling if needed.
// Concurrent callers for one target share one dial, which runs on a
// context of its own (bounded by PoolOptions.ConnectTimeout); each caller
// waits only as long as its own ctx allows, and the dial is abandoned when
// every caller has gone. Release the lease when done.
func (p *Pool) Acquire(ctx context.Context, t Target) (*Lease, error) {
	k := key(t)
	for attempt := 0; attempt < 2; attempt++ {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errors.New("connection pool is closed")
		}
		e := p.entries[k]
		if e != nil && e.done() && (e.err != nil || e.dead()) {
			// A failed dial or a dead connection: dial again.
			p.removeLocked(e)
			if e.conn != nil {
				go e.closeConn()
			}
			e = nil
		}
		if e == nil {
			e = p.dialLocked(t, k)
		}
		e.waiters++
		waiters := e.waiters
		p.mu.Unlock()
		if p.waitHook != nil {
			p.waitHook(waiters)
		}

		select {
		case <-e.ready:
		case <-ctx.Done():
		}
		p.mu.Lock()
		e.waiters--
		if !e.done() {
			// This caller gives up; the last one to leave ends the dial,
			// and the next caller starts a fresh one.
			if t.First != nil && t.First == e.first {
				e.firstLeft = true
			}
			if e.waiters == 0 {
				p.removeLocked(e)
				e.cancel()
			}
			p.mu.Unlock()
			return nil, ctx.Err()
		}
		if e.err != nil {
			err := e.err
			p.mu.Unlock()
			return nil, err
		}
		if e.removed || e.dead() {
			p.mu.Unlock()
			if f := t.First; f != nil && f == e.first && f.Sent {
				// The command went out with this connection's opening:
				// dialling again with it would start it a second time.
				return nil, fmt.Errorf("connect %s: the connection was lost as soon as it was made, after the command had gone out with it: it may have started there; check before running it again", t.Name)
			}
			continue
		}
		if c := e.conn.Session.Client(); isClosed(c.Dropped()) {
			// The transport dropped and the connection waits to be
			// resumed: a lease now would fail its calls with ErrDropped
			// on a host that is coming back. Wait for it, as for a dial.
			// The client knows as soon as its reader does; watch, which
			// starts the reconnection, may not have seen it yet.
			p.mu.Unlock()
			if p.resumeWaitHook != nil {
				p.resumeWaitHook()
			}
			if c.WaitResumed(ctx) != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			attempt-- // resumed, or ended and dialled again below
			continue
		}
		e.users++
		e.lastUsed = time.Now()
		p.mu.Unlock()
		return &Lease{p: p, t: t, e: e}, nil
	}
	return nil, fmt.Errorf("connect %s: the connection keeps dropping", t.Name)
}

// AcquireAs is Acquire for a session of its own on t's pooled connection,
// opened once under client's name and reused: rexd's audit log then names
// who acted (rex-agent, rex-mcp/<client>) while every front end shares one
// SSH connection and rexd per target. The session gets the workspace roots
// of the connection's first session. An empty client is Acquire.
func (p *Pool) AcquireAs(ctx context.Context, t Target, client string) (*Lease, error) {
	l, err := p.Acquire(ctx, t)
	if err != nil || client == "" {
		return l, err
	}
	e, base := l.e, l.e.conn.Session
	e.namedMu.Lock()
	for {
		if s := e.named[client]; s != nil {
			e.namedMu.Unlock()
			l.s = s
			return l, nil
		}
		opening := e.opening[client]
		if opening == nil {
			break
		}
		// Another caller opens it: wait for it (and open it ourselves
		// if that one fails).
		e.namedMu.Unlock()
		select {
		case <-opening:
		case <-ctx.Done():
			l.Release()
			return nil, fmt.Errorf("%s: open a session for %s: %w", t.Name, client, ctx.Err())
		}
		e.namedMu.Lock()
	}
	if e.opening == nil {
		e.opening = map[string]chan struct{}{}
	}
	opening := make(chan struct{})
	e.opening[client] = opening
	e.namedMu.Unlock()
	defer close(opening)
	s, err := base.Client().OpenSession(ctx, protocol.SessionOpenParams{
		ClientName:     client,
		ClientVersion:  version.Version,
		WorkspaceRoots: base.Info.WorkspaceRoots,
		ResumeGraceMS:  base.Info.ResumeGraceMS, // resumed with the rest
		// rex's own rexd has raw output frames (a resumable session
		// keeps JSON lines whatever is asked).
		RequestedCapabilities: []string{protocol.CapOutputRaw},
	})
	e.namedMu.Lock()
	delete(e.opening, client)
	if err == nil {
		if e.named == nil {
			e.named = map[string]*rexclient.Session{}
		}
		e.named[client] = s
	}
	e.namedMu.Unlock()
	if err != nil {
		l.Release()
		return nil, fmt.Errorf("%s: open a session for %s: %w", t.Name, client, err)
	}
	l.s = s
	return l, nil
}

// dialLocked starts the one dial of a new entry for t.
func (p *Pool) dialLocked(t Target, k string) *entry {
	// The connector bounds the dial by t.ConnectTimeout; the pool's bound
	// only backs it up.
	dctx, cancel := context.WithTimeout(context.Background(), max(p.opts.ConnectTimeout, t.ConnectTimeout+5*time.Second))
	if t.ResumeGrace == 0 {
		t.ResumeGrace = p.opts.ResumeGrace
	}
	e := &entry{key: k, name: t.Name, ready: make(chan struct{}), cancel: cancel, lastUsed: time.Now(), first: t.First}
	p.entries[k] = e
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer cancel()
		p.state(t, StateConnecting, nil)
		conn, err := p.connector.Connect(dctx, t)
		if err == nil && conn == nil {
			err = fmt.Errorf("connect %s: the connector returned no connection", t.Name)
		}
		p.mu.Lock()
		e.conn, e.err = conn, err
		quiet := e.removed // dropped or closed while dialling
		if err != nil && dctx.Err() != nil {
			// Every caller left (or the pool closed): not remembered
			// as a failure of the target.
			p.removeLocked(e)
		}
		drop := e.removed && conn != nil
		var orphan *rexclient.Process
		if f := t.First; e.firstLeft && f != nil && f.Sent && f.Proc != nil {
			orphan = f.Proc
		}
		close(e.ready)
		p.mu.Unlock()
		if orphan != nil && !drop {
			// Its caller was told it was cancelled: it must not run.
			kctx, kcancel := context.WithTimeout(context.Background(), killWait)
			orphan.Kill(kctx, "TERM")
			kcancel()
		}
		switch {
		case drop:
			// Nobody can use it any more: close it rather than leak it.
			conn.Closer.Close()
			p.state(t, StateIdle, nil)
		case err != nil:
			if !quiet {
				p.state(t, StateError, err)
			}
		default:
			p.state(t, StateReady, nil)
			p.wg.Add(1)
			go p.watch(t, e)
		}
	}()
	return e
}

func (e *entry) done() bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (e *entry) dead() bool {
	if e.conn == nil {
		return false
	}
	select {
	case <-e.conn.Session.Client().Done():
		return true
	default:
		return false
	}
}

// watch reports a connection that dropped, and gets back one whose
// sessions are resumable.
func (p *Pool) watch(t Target, e *entry) {
	defer p.wg.Done()
	if p.watchEndHook != nil {
		defer p.watchEndHook(t.Name)
	}
	c := e.conn.Session.Client()
	for {
		select {
		case <-c.Done():
			p.mu.Lock()
			quiet := p.closed || e.removed
			p.mu.Unlock()
			if !quiet {
				p.state(t, StateError, fmt.Errorf("connection to %s lost: %v", t.Name, c.Err()))
			}
			return
		case <-c.Dropped():
			select {
			case <-c.Done():
				continue // it ended; the case above reports it
			default:
			}
			if p.droppedHook != nil {
				p.droppedHook(t.Name)
			}
			if e.conn.Resume == nil {
				c.Abandon(errors.New("this connection cannot be resumed"))
				continue
			}
			if !p.reconnect(t, e) {
				return // its end is reported (or closed on purpose)
			}
		case <-p.stop:
			return
		}
	}
}

// resumeOverstay is how long, past the sessions' grace, the pool still
// tries to reconnect: rexd then says how their processes ended.
const resumeOverstay = time.Minute

// Backoff between reconnection attempts.
const (
	reconnectFirst = time.Second
	reconnectMax   = 5 * time.Second
)

// reconnect gets a dropped connection back: Conn.Resume with backoff
// until it works, rexd refuses (the grace ran out), or the grace and
// resumeOverstay have passed. It reports whether it is back: otherwise the
// connection has ended, and reconnect has said why (or it was closed on
// purpose), so watch says nothing more.
func (p *Pool) reconnect(t Target, e *entry) (resumed bool) {
	c := e.conn.Session.Client()
	// Retiring the entry (Drop, ReapIdle, the pool's Close) ends the
	// reconnection at once, its attempt in flight too.
	closed := errors.New("the connection was closed while it was being resumed")
	rctx, stop := context.WithCancel(context.Background())
	defer stop()
	p.mu.Lock()
	gone := p.closed || e.removed
	if !gone {
		e.stopResume = stop
		defer func() {
			p.mu.Lock()
			e.stopResume = nil
			p.mu.Unlock()
		}()
	}
	p.mu.Unlock()
	if gone {
		c.Abandon(closed)
		return false
	}
	grace := c.ResumeGrace()
	p.state(t, StateReconnecting, nil)
	deadline := time.Now().Add(grace + resumeOverstay)
	wait := reconnectFirst
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(rctx, max(p.opts.ConnectTimeout/4, 30*time.Second))
		err := e.conn.Resume(ctx)
		cancel()
		if rctx.Err() != nil {
			// Closed on purpose while it was being resumed: nothing to
			// report (it was reported idle or closed). A resume that
			// landed all the same is closed again, now that it is up.
			if err == nil {
				e.conn.Closer.Close()
			}
			c.Abandon(closed)
			return false
		}
		if err == nil {
			p.state(t, StateReady, nil)
			return true
		}
		select {
		case <-c.Done(): // rexd refused: the client has ended with why
			p.state(t, StateError, c.Err())
			return false
		default:
		}
		if time.Now().After(deadline) {
			err = fmt.Errorf("the connection to %s dropped and could not be made again within its resume grace of %s (%d attempts, the last: %v); rexd there stops what ran for it", t.Name, grace, attempt, err)
			c.Abandon(err)
			p.state(t, StateError, err)
			return false
		}
		t := time.NewTimer(jitter(wait))
		select {
		case <-t.C:
		case <-rctx.Done():
			t.Stop()
		}
		wait = min(wait*2, reconnectMax)
	}
}

// jitter spreads d by ±20%, so that hosts that dropped together do not
// all dial again at once.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)*2/5)) - d/5
}

// reapIdle closes connections no lease has used for IdleTimeout.
func (p *Pool) reapIdle() {
	defer p.wg.Done()
	tick := time.NewTicker(p.opts.IdleTimeout / 4)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		p.ReapIdle(time.Now())
	}
}

// ReapIdle closes every connection that has had no lease for IdleTimeout
// as of now, and reports how many it closed. The pool calls it on a timer;
// it is exported so that a test (or a front end) can run it at a given
// time.
//
// A connection being resumed is closed too, and its reconnection ends:
// with no lease on it, no command, transfer or terminal of the operator's
// runs there (each holds its lease while it lasts), so its sessions keep
// nothing anyone will come back to, and rexd stops what is left in them
// when their grace runs out, as for any connection given up while down.
func (p *Pool) ReapIdle(now time.Time) int {
	if p.opts.IdleTimeout <= 0 {
		return 0
	}
	var idle []*entry
	p.mu.Lock()
	for _, e := range p.entries {
		if e.done() && e.users == 0 && e.waiters == 0 && now.Sub(e.lastUsed) >= p.opts.IdleTimeout {
			p.retireLocked(e)
			if e.conn != nil {
				idle = append(idle, e)
			}
		}
	}
	p.mu.Unlock()
	closeConns(idle, func(e *entry) {
		if p.opts.OnState != nil {
			p.opts.OnState(e.name, StateIdle, nil)
		}
	})
	return len(idle)
}

// closeConns closes the entries' connections together, each followed by
// then (when set): closing one whose host no longer answers can take
// seconds, and they add up one after another.
func closeConns(es []*entry, then func(e *entry)) {
	var wg sync.WaitGroup
	for _, e := range es {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.closeConn()
			if then != nil {
				then(e)
			}
		}()
	}
	wg.Wait()
}

// Close closes every connection and ends dials in progress.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.stop)
	entries := p.entries
	p.entries = map[string]*entry{}
	var open []*entry
	for _, e := range entries {
		p.retireLocked(e)
		if e.done() {
			if e.conn != nil {
				open = append(open, e)
			}
		} else {
			e.cancel() // the dial closes what it gets
		}
	}
	p.mu.Unlock()
	closeConns(open, nil)
	p.wg.Wait()
	return nil
}
