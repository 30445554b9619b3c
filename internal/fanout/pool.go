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
	Spec any
}

// Conn is a ready connection: a session on a rexd.
type Conn struct {
	Session *rexclient.Session
	// Closer ends the connection (SSH client, local subprocess).
	Closer io.Closer
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
)

// PoolOptions tune a Pool.
type PoolOptions struct {
	// IdleTimeout closes connections unused for that long; 0 keeps them.
	IdleTimeout time.Duration
	// OnState reports connection state changes (for the console sidebar).
	// err is set with StateError.
	OnState func(target, state string, err error)
}

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
}

type entry struct {
	ready    chan struct{} // closed when the dial ended (conn or err set)
	conn     *Conn
	err      error
	lastUsed time.Time
	users    int

	// named are further sessions on conn, one per client name (AcquireAs);
	// namedMu serialises opening them. They end with the connection.
	namedMu sync.Mutex
	named   map[string]*rexclient.Session
}

// NewPool returns a pool dialling through c.
func NewPool(c Connector, opts PoolOptions) *Pool {
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

// Acquire returns a live session for t, dialling if needed. Concurrent
// callers for one target share one dial. Release it when done.
func (p *Pool) Acquire(ctx context.Context, t Target) (*rexclient.Session, error) {
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
			if e.conn != nil {
				go e.conn.Closer.Close()
			}
			delete(p.entries, k)
			e = nil
		}
		dial := false
		if e == nil {
			e = &entry{ready: make(chan struct{})}
			p.entries[k] = e
			dial = true
		}
		e.users++
		e.lastUsed = time.Now()
		p.mu.Unlock()

		if dial {
			p.state(t, StateConnecting, nil)
			conn, err := p.connector.Connect(ctx, t)
			p.mu.Lock()
			e.conn, e.err = conn, err
			close(e.ready)
			p.mu.Unlock()
			if err != nil {
				p.state(t, StateError, err)
				p.mu.Lock()
				e.users--
				// A dial cut short by the caller is not remembered as a failure.
				if ctx.Err() != nil && p.entries[k] == e {
					delete(p.entries, k)
				}
				p.mu.Unlock()
				return nil, err
			}
			p.state(t, StateReady, nil)
			go p.watch(t, e)
			return conn.Session, nil
		}
		select {
		case <-e.ready:
		case <-ctx.Done():
			p.release(k, e)
			return nil, ctx.Err()
		}
		if e.err != nil {
			p.release(k, e)
			return nil, e.err
		}
		if e.dead() {
			p.release(k, e)
			continue
		}
		return e.conn.Session, nil
	}
	return nil, fmt.Errorf("connect %s: the connection keeps dropping", t.Name)
}

// AcquireAs is Acquire for a session of its own on t's pooled connection,
// opened once under client's name and reused: rexd's audit log then names
// who acted (rex-agent, rex-mcp/<client>) while every front end shares one
// SSH connection and rexd per target. The session gets the workspace roots
// of the connection's first session. Release it with Release(t). An empty
// client is Acquire.
func (p *Pool) AcquireAs(ctx context.Context, t Target, client string) (*rexclient.Session, error) {
	base, err := p.Acquire(ctx, t)
	if err != nil || client == "" {
		return base, err
	}
	p.mu.Lock()
	e := p.entries[key(t)]
	p.mu.Unlock()
	if e == nil || e.conn == nil || e.conn.Session != base {
		// Dropped between the two steps: the caller retries as after any
		// lost connection.
		p.Release(t)
		return nil, fmt.Errorf("connect %s: %w", t.Name, rexclient.ErrClosed)
	}
	e.namedMu.Lock()
	defer e.namedMu.Unlock()
	if s := e.named[client]; s != nil {
		return s, nil
	}
	s, err := base.Client().OpenSession(ctx, protocol.SessionOpenParams{
		ClientName:     client,
		ClientVersion:  version.Version,
		WorkspaceRoots: base.Info.WorkspaceRoots,
	})
	if err != nil {
		p.Release(t)
		return nil, fmt.Errorf("%s: open a session for %s: %w", t.Name, client, err)
	}
	if e.named == nil {
		e.named = map[string]*rexclient.Session{}
	}
	e.named[client] = s
	return s, nil
}

// Release marks one use of t's session as finished.
func (p *Pool) Release(t Target) {
	k := key(t)
	p.mu.Lock()
	e := p.entries[k]
	p.mu.Unlock()
	if e != nil {
		p.release(k, e)
	}
}

func (p *Pool) release(k string, e *entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.users > 0 {
		e.users--
	}
	e.lastUsed = time.Now()
}

func (e *entry) done() bool {
	select {
	case <-e.ready:
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

// watch reports a connection that dropped.
func (p *Pool) watch(t Target, e *entry) {
	select {
	case <-e.conn.Session.Client().Done():
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if !closed {
			err := e.conn.Session.Client().Err()
			p.state(t, StateError, fmt.Errorf("connection to %s lost: %v", t.Name, err))
		}
	case <-p.stop:
	}
}

func (p *Pool) reapIdle() {
	defer p.wg.Done()
	tick := time.NewTicker(p.opts.IdleTimeout / 2)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		var idle []*Conn
		p.mu.Lock()
		for k, e := range p.entries {
			if e.done() && e.users == 0 && time.Since(e.lastUsed) > p.opts.IdleTimeout {
				if e.conn != nil {
					idle = append(idle, e.conn)
				}
				delete(p.entries, k)
			}
		}
		p.mu.Unlock()
		for _, c := range idle {
			c.Closer.Close()
		}
	}
}

// Drop closes t's connection, if any (for example after an error the
// caller knows to be fatal to it).
func (p *Pool) Drop(t Target) {
	k := key(t)
	p.mu.Lock()
	e := p.entries[k]
	delete(p.entries, k)
	p.mu.Unlock()
	if e != nil && e.done() && e.conn != nil {
		e.conn.Closer.Close()
		p.state(t, StateIdle, nil)
	}
}

// Close closes every connection.
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
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range entries {
		<-e.ready
		if e.conn != nil {
			wg.Add(1)
			go func(c *Conn) { defer wg.Done(); c.Closer.Close() }(e.conn)
		}
	}
	wg.Wait()
	p.wg.Wait()
	return nil
}
