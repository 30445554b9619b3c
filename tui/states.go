package tui

import (
	"sync"
	"sync/atomic"

	"github.com/rexconsole/rex/internal/fanout"
)

// Connection states shown in the sidebar.
const (
	stateIdle          = fanout.StateIdle
	stateConnecting    = fanout.StateConnecting
	stateBootstrapping = "bootstrapping"
	stateReady         = fanout.StateReady
	stateError         = fanout.StateError
)

// ConnStates carries connection progress that only the connector knows
// (sshx reports "bootstrapping" while it uploads rexd) to the console. The
// pool's own states (connecting, ready, error) reach the console without
// it. Create one, give its Report method to the connector (for sshx:
// sshx.Options.OnState) and pass it in Options.States; reports made before
// the console runs are dropped.
type ConnStates struct {
	sink atomic.Pointer[func(target, state string, err error)]
}

// Report tells the console that target is now in state. It is safe for
// concurrent use and never blocks for long.
func (c *ConnStates) Report(target, state string) {
	if c == nil {
		return
	}
	if f := c.sink.Load(); f != nil {
		(*f)(target, state, nil)
	}
}

func (c *ConnStates) attach(f func(target, state string, err error)) {
	if c != nil {
		c.sink.Store(&f)
	}
}

// connState is one target's connection as the sidebar shows it.
type connState struct {
	state string
	err   string
}

// stateBoard holds every target's connection state; the pool and the
// connector write it from their goroutines, the UI reads it.
type stateBoard struct {
	mu       sync.Mutex
	m        map[string]connState
	onChange func()
}

func newStateBoard(onChange func()) *stateBoard {
	return &stateBoard{m: map[string]connState{}, onChange: onChange}
}

func (b *stateBoard) set(target, state string, err error) {
	cs := connState{state: state}
	if state == fanout.StateClosed {
		cs.state = stateIdle
	}
	if err != nil {
		cs.err = err.Error()
	}
	b.mu.Lock()
	b.m[target] = cs
	b.mu.Unlock()
	if b.onChange != nil {
		b.onChange()
	}
}

func (b *stateBoard) get(target string) connState {
	b.mu.Lock()
	defer b.mu.Unlock()
	cs, ok := b.m[target]
	if !ok {
		return connState{state: stateIdle}
	}
	return cs
}

// names returns the targets that have a state, for ad-hoc hosts the
// registry does not list.
func (b *stateBoard) names() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.m))
	for n := range b.m {
		out = append(out, n)
	}
	return out
}
