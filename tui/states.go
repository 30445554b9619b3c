package tui

import (
	"sync/atomic"

	"github.com/rexconsole/rex/tui/engine"
)

// The connection words panes use while their target is being reached.
const (
	stateConnecting    = string(engine.Connecting)
	stateBootstrapping = string(engine.Bootstrapping)
)

// ConnStates carries what only the SSH dialer knows to the console: dials
// that start and end outside the connection pool (/device check, prepare,
// clean) and the upload of rexd ("bootstrapping"). Create one, give its
// Report method to the dialer (sshx.Options.OnState) and pass it in
// Options.States; reports made before the console runs are dropped.
type ConnStates struct {
	sink atomic.Pointer[func(target, state string, err error)]
}

// Report tells the console that target is now in state (err is set with
// sshx.StateFailed). It is safe for concurrent use and never blocks for
// long.
func (c *ConnStates) Report(target, state string, err error) {
	if c == nil {
		return
	}
	if f := c.sink.Load(); f != nil {
		(*f)(target, state, err)
	}
}

func (c *ConnStates) attach(f func(target, state string, err error)) {
	if c != nil {
		c.sink.Store(&f)
	}
}

// stateForms are the ways a sidebar row can name a state, longest first;
// the row uses the longest that leaves the target's name room.
func stateForms(c engine.Contact) []string {
	switch c.State {
	case engine.Unreachable:
		return []string{c.Label(), "unreachable", "unreach."}
	case engine.Failed:
		return []string{c.Label(), "failed"}
	case engine.AuthFailed:
		return []string{"auth failed", "denied"}
	case engine.HostKeyChanged:
		return []string{"host key changed", "key changed", "bad key"}
	case engine.HostKeyUnknown:
		return []string{"host key unknown", "new key"}
	case engine.Bootstrapping:
		return []string{"bootstrapping", "bootstrap"}
	}
	return []string{string(c.State)}
}
