package engine

import (
	"context"
	"errors"
	"net"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/sshx"
)

// State is a target's connection state as the sidebar shows it: what the
// last real contact said, or that a dial is in flight.
type State string

// The states. Connecting and Bootstrapping last exactly as long as a dial
// (or an upload of rexd) is in flight; the others are how the last
// contact ended.
const (
	Idle           State = "idle" // not reached this session
	Connecting     State = "connecting"
	Bootstrapping  State = "bootstrapping"
	Ready          State = "ready"
	Unreachable    State = "unreachable"
	AuthFailed     State = "auth failed"
	HostKeyChanged State = "host key changed"
	HostKeyUnknown State = "host key unknown"
	Failed         State = "failed"
	// Reconnecting: a connection with resumable sessions dropped and the
	// pool is getting it back; what ran there runs on.
	Reconnecting State = "reconnecting…"
)

// Failure reports whether s is how a contact failed.
func (s State) Failure() bool {
	switch s {
	case Unreachable, AuthFailed, HostKeyChanged, HostKeyUnknown, Failed:
		return true
	}
	return false
}

// Contact is what the console knows about reaching one target.
type Contact struct {
	State State
	// Reason says in a few words why a contact failed ("connection
	// refused", "no answer"); Err is the whole sentence.
	Reason string
	Err    string
	// At is when the last contact ended; zero before any.
	At time.Time
}

// Label is the state with its reason: "unreachable: connection refused".
func (c Contact) Label() string {
	if c.Reason != "" && (c.State == Unreachable || c.State == Failed) {
		return string(c.State) + ": " + c.Reason
	}
	return string(c.State)
}

// Source tells apart the reporters of dials, each of which pairs every
// start with one end: the connection pool (tasks and terminals) and the
// SSH dialer (which also serves /device check, prepare and clean).
type Source int

const (
	FromPool Source = iota
	FromSSH
	sources
)

// contact is one target's record: the last contact and the dials in
// flight, per source.
type contact struct {
	last         Contact
	dials        [sources]int
	bootstrap    bool
	reconnecting bool // the pool is resuming it: that wins over its dials
}

// Contacts holds every target's connection state. Reports come from the
// pool's and the dialer's goroutines; the UI reads. It is safe for
// concurrent use.
type Contacts struct {
	now      func() time.Time
	onChange func()

	mu sync.Mutex
	m  map[string]*contact
}

// NewContacts returns an empty board; onChange (may be nil) is called
// after every change, outside the board's lock.
func NewContacts(now func() time.Time, onChange func()) *Contacts {
	if now == nil {
		now = time.Now
	}
	return &Contacts{now: now, onChange: onChange, m: map[string]*contact{}}
}

// Report files a state report from src about target: the states of
// fanout.PoolOptions.OnState (connecting, ready, error, idle, closed) and
// of sshx.Options.OnState (connecting, bootstrapping, ready, failed).
func (c *Contacts) Report(src Source, target, state string, err error) {
	c.mu.Lock()
	r := c.m[target]
	if r == nil {
		r = &contact{last: Contact{State: Idle}}
		c.m[target] = r
	}
	end := func() {
		if r.dials[src] > 0 {
			r.dials[src]--
		}
		if r.dials == [sources]int{} {
			r.bootstrap = false
		}
	}
	switch state {
	case fanout.StateConnecting: // the same word as sshx.StateConnecting
		r.dials[src]++
	case sshx.StateBootstrapping:
		r.bootstrap = true
	case fanout.StateReconnecting:
		r.reconnecting = true
	case fanout.StateReady:
		end()
		if src == FromPool {
			r.reconnecting = false
		}
		r.last = Contact{State: Ready, At: c.now()}
	case fanout.StateError, sshx.StateFailed:
		end()
		if src == FromPool {
			r.reconnecting = false
		}
		if st, reason := Classify(err); st != "" {
			r.last = Contact{State: st, Reason: reason, At: c.now()}
			if err != nil {
				r.last.Err = Sanitize([]byte(err.Error())) // it may quote a host's stderr
			}
		}
	case fanout.StateIdle, fanout.StateClosed:
		// A connection closed when unused: the last contact still
		// stands.
	}
	c.mu.Unlock()
	if c.onChange != nil {
		c.onChange()
	}
}

// Get returns target's contact: Connecting (or Bootstrapping) while a
// dial is in flight, else how the last contact ended.
func (c *Contacts) Get(target string) Contact {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.m[target]
	if r == nil {
		return Contact{State: Idle}
	}
	out := r.last
	if r.reconnecting {
		out.State, out.Reason = Reconnecting, ""
		return out
	}
	if r.dials != [sources]int{} {
		out.State, out.Reason = Connecting, ""
		if r.bootstrap {
			out.State = Bootstrapping
		}
	}
	return out
}

// Names lists the targets with a record, sorted: the console shows the
// ad-hoc hosts among them that the registry does not list.
func (c *Contacts) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.m))
	for n := range c.m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Classify says what a failed contact means for the sidebar: the state
// and a few words of reason. A cancelled dial (the operator stopped it)
// is no contact: the state is "".
func Classify(err error) (State, string) {
	if err == nil {
		return Failed, ""
	}
	if errors.Is(err, context.Canceled) {
		return "", ""
	}
	switch {
	case errors.Is(err, sshx.ErrAuth):
		return AuthFailed, ""
	case errors.Is(err, sshx.ErrHostKeyChanged):
		return HostKeyChanged, ""
	case errors.Is(err, sshx.ErrHostKeyUnknown):
		return HostKeyUnknown, ""
	case errors.Is(err, sshx.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return Unreachable, "no answer"
	case errors.Is(err, syscall.ECONNREFUSED):
		return Unreachable, "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return Unreachable, "no route to host"
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return Unreachable, "unknown host"
	}
	// Errors that crossed a boundary as text (the pool's "connection
	// lost", a connector's own wording) are read by their words.
	text := strings.ToLower(err.Error())
	for _, w := range []struct{ words, reason string }{
		{"connection refused", "connection refused"},
		{"no route to host", "no route to host"},
		{"network is unreachable", "no route to host"},
		{"cannot resolve", "unknown host"},
		{"no such host", "unknown host"},
		{"lost", "connection lost"},
		{"connection reset", "connection lost"},
		{"timed out", "no answer"},
		{"no answer", "no answer"},
	} {
		if strings.Contains(text, w.words) {
			return Unreachable, w.reason
		}
	}
	if errors.Is(err, sshx.ErrUnreachable) {
		return Unreachable, ""
	}
	var se *sshx.Error
	if errors.As(err, &se) && se.Kind != nil {
		return Failed, se.Kind.Error()
	}
	return Failed, ""
}
