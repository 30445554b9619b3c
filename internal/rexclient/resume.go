package rexclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// Resumable sessions (docs/protocol.md, capability session.resume). A
// session opened with ResumeGraceMS outlives its transport: when the
// transport ends, the Client keeps its processes' routes and waits (calls
// fail with ErrDropped meanwhile) until Resume brings a new transport, on
// which session.resume asks rexd to replay every event after the last one
// received, or Abandon ends everything. Events are numbered per session
// (session_seq); the Client acknowledges them (session.ack) as they
// arrive, so that rexd can forget them, and drops any it has seen.

// ErrDropped is wrapped by the error of calls made while the transport is
// down and the connection waits to be resumed.
var ErrDropped = errors.New("connection to rexd lost; reconnecting")

// ResumeError is how a connection that could not be resumed ended: rexd
// refused (the grace ran out, the session is gone) or it was given up. It
// counts as ErrClosed.
type ResumeError struct {
	SessionID string
	Err       error
}

func (e *ResumeError) Error() string {
	return "connection lost and not resumed: " + e.Err.Error()
}

func (e *ResumeError) Unwrap() error { return e.Err }

// Is makes a ResumeError an ErrClosed too.
func (e *ResumeError) Is(target error) bool { return target == ErrClosed }

// Acknowledgements go out once this many bytes of events arrived since
// the last one, or ackDelay after the first of them: a rexd keeps at most
// its resume buffer unacknowledged per process, far more than this.
const (
	ackBytes = 256 << 10
	ackDelay = 200 * time.Millisecond
)

// resumeState is a resumable session's part of the Client (Client.mu).
type resumeState struct {
	token   string
	grace   time.Duration
	last    uint64 // the highest session_seq received
	unacked int
	timer   *time.Timer
	acking  bool // ackLoop runs
}

type pendingKill struct {
	method string
	params any
}

// register makes s resumable when rexd granted it; the token moves out of
// s.Info (it is a secret: only this Client keeps it).
func (c *Client) register(s *Session) {
	if s.Info.ResumeToken == "" {
		return
	}
	s.resume = &resumeState{token: s.Info.ResumeToken, grace: time.Duration(s.Info.ResumeGraceMS) * time.Millisecond}
	s.Info.ResumeToken = ""
	c.mu.Lock()
	c.resumable[s.ID] = s
	c.mu.Unlock()
}

func (c *Client) unregister(s *Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resumable[s.ID] == s {
		delete(c.resumable, s.ID)
		if s.resume.timer != nil {
			s.resume.timer.Stop()
		}
	}
}

// Resumable reports whether the connection has resumable sessions: a lost
// transport then waits for Resume instead of ending it.
func (c *Client) Resumable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.resumable) > 0
}

// ResumeGrace is the shortest grace rexd granted to the resumable
// sessions: how long it keeps them after the transport ends.
func (c *Client) ResumeGrace() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var g time.Duration
	for _, s := range c.resumable {
		if g == 0 || s.resume.grace < g {
			g = s.resume.grace
		}
	}
	return g
}

// Dropped is closed when the current transport ends. For a resumable
// connection that is not the end (Done says that): Resume carries on.
func (c *Client) Dropped() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.transport
}

// seen records event seq of session sid (n bytes on the wire) and says
// whether to deliver it: false for one delivered before. It has an
// acknowledgement sent when enough arrived.
func (c *Client) seen(sid string, seq uint64, n int) bool {
	c.mu.Lock()
	s := c.resumable[sid]
	if s == nil {
		c.mu.Unlock()
		return true
	}
	r := s.resume
	if seq <= r.last {
		c.mu.Unlock()
		return false
	}
	r.last = seq
	r.unacked += n
	now := r.unacked >= ackBytes && !r.acking
	if now {
		r.unacked = 0
		r.acking = true
		if r.timer != nil {
			r.timer.Stop()
			r.timer = nil
		}
	} else if r.timer == nil && !r.acking {
		r.timer = time.AfterFunc(ackDelay, func() { c.ackLater(s) })
	}
	c.mu.Unlock()
	if now {
		// Off the reader: a transport whose writing half waits (a push's
		// frame, a dead link) must not stop the output of every process
		// on the connection, nor the answers rexd needs to read on.
		go c.ackLoop(s)
	}
	return true
}

// ackLoop acknowledges s's latest event until nothing newer has come
// while it wrote: one writer per session, however long a write waits.
func (c *Client) ackLoop(s *Session) {
	var sent uint64
	for {
		c.mu.Lock()
		r := s.resume
		seq, enc, down := r.last, c.enc, c.dropped != nil || c.err != nil
		if down || seq <= sent {
			r.acking = false
			c.mu.Unlock()
			return
		}
		r.unacked = 0
		c.mu.Unlock()
		sendAck(enc, s.ID, seq)
		sent = seq
	}
}

func (c *Client) ackLater(s *Session) {
	c.mu.Lock()
	r := s.resume
	r.timer, r.unacked = nil, 0
	seq, enc, down := r.last, c.enc, c.dropped != nil || c.err != nil
	c.mu.Unlock()
	if !down && seq > 0 {
		sendAck(enc, s.ID, seq)
	}
}

func sendAck(enc *protocol.Encoder, sid string, seq uint64) {
	if m, err := protocol.NewNotification(protocol.MethodSessionAck, protocol.SessionAckParams{SessionID: sid, SessionSeq: seq}); err == nil {
		enc.Encode(m)
	}
}

// eventSeq reads the session and session_seq of an event other than
// output (exec.exit, exec.error, pty.exit, output off the fast path).
func eventSeq(msg *protocol.Message) (string, uint64) {
	var p struct {
		SessionID  string `json:"session_id"`
		SessionSeq uint64 `json:"session_seq"`
	}
	if json.Unmarshal(msg.Params, &p) != nil {
		return "", 0
	}
	return p.SessionID, p.SessionSeq
}

// drop takes the end of transport: a resumable connection waits for
// Resume (true), and transport is closed; any other ends.
func (c *Client) drop(err error, transport chan struct{}) bool {
	c.mu.Lock()
	if c.closing || c.err != nil || len(c.resumable) == 0 {
		c.mu.Unlock()
		return false
	}
	c.dropped = fmt.Errorf("%w: %v", ErrDropped, err)
	if c.back == nil {
		c.back = make(chan struct{})
	}
	// Closed with dropped set, under the lock: a Resume that brought this
	// transport looks at it under the lock to learn whether it is still
	// up. Closed after unlocking, it let such a Resume mark a connection
	// whose reader had ended as up, and calls went to a dead transport.
	close(transport)
	hook := c.dropHook
	pending := c.pending
	c.pending = map[string]*call{}
	// Processes of sessions that are not resumable ended with the
	// connection (REXD v1's rule).
	var lost []*route
	for pid, r := range c.routes {
		if c.resumable[r.sid] == nil {
			lost = append(lost, r)
			delete(c.routes, pid)
		}
	}
	c.mu.Unlock()
	for _, cl := range pending {
		cl.resp <- nil
	}
	for _, r := range lost {
		r.lost(fmt.Errorf("%w: the connection dropped and its session was not resumable", ErrClosed))
	}
	if hook != nil {
		hook()
	}
	return true
}

// callErr is why a call got no answer.
func (c *Client) callErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.err != nil:
		return c.err
	case c.dropped != nil:
		return c.dropped
	}
	return ErrClosed
}

// Resume carries the connection on over a new transport: reading r,
// writing w, closed by closer (a new `rexd --stdio`, which relays to the
// rexd holding the sessions). Every resumable session is asked back with
// session.resume from the last event received; rexd replays the rest,
// and kills asked for meanwhile go out. A session rexd refuses (its grace
// ran out) loses its processes with the reason; when none comes back the
// connection ends. An error from the transport itself leaves the
// connection waiting: call Resume again with another.
func (c *Client) Resume(ctx context.Context, r io.Reader, w io.Writer, closer io.Closer) error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	if c.dropped == nil {
		c.mu.Unlock()
		return errors.New("resume: the connection has not dropped")
	}
	var sessions []*Session
	for _, s := range c.resumable {
		sessions = append(sessions, s)
	}
	c.mu.Unlock()
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].ID < sessions[j].ID })

	enc := protocol.NewEncoder(&countingWriter{w: w, n: &c.bytesOut})
	transport := make(chan struct{})
	go c.readLoop(protocol.NewDecoder(&countingReader{r: r, n: &c.bytesIn}, 0), enc, transport)

	type liveProc struct {
		sid string
		protocol.ProcessInfo
	}
	var refused error
	var live []liveProc
	back := 0
	for _, s := range sessions {
		c.mu.Lock()
		last, token := s.resume.last, s.resume.token
		c.mu.Unlock()
		var res protocol.SessionResumeResult
		err := c.callOn(ctx, enc, protocol.MethodSessionResume,
			protocol.SessionResumeParams{SessionID: s.ID, ResumeToken: token, LastSeq: last}, &res, nil, nil)
		var perr *protocol.Error
		switch {
		case err == nil:
			back++
			for _, p := range res.Processes {
				live = append(live, liveProc{s.ID, p})
			}
		case errors.As(err, &perr):
			// rexd's word: this session is over.
			lost := &ResumeError{SessionID: s.ID, Err: errors.New(perr.Message)}
			c.lose(s, lost)
			if refused == nil {
				refused = lost
			}
		default:
			closer.Close()
			<-transport
			return fmt.Errorf("resume: %w", err)
		}
	}
	if back == 0 {
		if refused == nil {
			refused = &ResumeError{Err: errors.New("no session to resume")}
		}
		// Ended with rexd's reason before the new transport closes: its
		// reader, finding nothing resumable, would end it with a bare
		// ErrClosed.
		c.Abandon(refused)
		closer.Close()
		<-transport
		return refused
	}
	c.mu.Lock()
	hook := c.resumeHook
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	c.mu.Lock()
	if c.err != nil {
		// Closed or abandoned while rexd answered: the new transport is
		// nobody's (over SSH, a connection and its relay left open).
		err := c.err
		c.mu.Unlock()
		closer.Close()
		<-transport
		return err
	}
	old := c.closer
	c.enc, c.closer, c.transport = enc, closer, transport
	var kills []pendingKill
	var orphans []liveProc
	select {
	case <-transport:
		// It dropped again already: still waiting. The kills stay
		// queued for the Resume that brings it back (sent now, they
		// would fail), which finds the orphans again.
	default:
		c.dropped = nil
		if c.back != nil {
			close(c.back)
			c.back = nil
		}
		kills, c.kills = c.kills, nil
		for _, p := range live {
			if c.routes[p.ProcessID] == nil {
				orphans = append(orphans, p)
			}
		}
	}
	c.mu.Unlock()
	if old != nil {
		go old.Close() // the dead transport's leftovers (an SSH client)
	}
	for _, k := range kills {
		c.Call(ctx, k.method, k.params, nil)
	}
	// A start whose answer was lost with the old transport left a
	// process nobody here knows: it is stopped, never left running.
	for _, p := range orphans {
		if p.PTYID != "" {
			c.Call(ctx, protocol.MethodPTYClose, protocol.PTYCloseParams{SessionID: p.sid, PTYID: p.PTYID}, nil)
		} else {
			c.Call(ctx, protocol.MethodExecKill, protocol.ExecKillParams{SessionID: p.sid, ProcessID: p.ProcessID, Signal: "TERM"}, nil)
		}
	}
	return refused
}

// lose ends session s's processes with err.
func (c *Client) lose(s *Session, err error) {
	c.unregister(s)
	c.mu.Lock()
	var lost []*route
	for pid, r := range c.routes {
		if r.sid == s.ID {
			lost = append(lost, r)
			delete(c.routes, pid)
		}
	}
	c.mu.Unlock()
	for _, r := range lost {
		r.lost(err)
	}
}

// Abandon ends a dropped connection for good: its processes end with err
// (rexd stops them when their grace runs out).
func (c *Client) Abandon(err error) {
	var re *ResumeError
	if !errors.As(err, &re) {
		err = &ResumeError{Err: err}
	}
	c.mu.Lock()
	c.closing = true
	closer := c.closer
	c.mu.Unlock()
	c.end(err)
	if closer != nil {
		closer.Close()
	}
}

// waitBack waits, when the transport has dropped, until the connection
// is resumed (true) or ends, or ctx does (false); it returns true at once
// on a connection that is up.
func (c *Client) waitBack(ctx context.Context) bool {
	c.mu.Lock()
	back, done := c.back, c.done
	up := c.dropped == nil && c.err == nil
	c.mu.Unlock()
	if up {
		return true
	}
	if back == nil {
		return false
	}
	select {
	case <-back:
		return true
	case <-done:
	case <-ctx.Done():
	}
	return false
}

// queueKill keeps a kill asked for while the transport is down, for
// Resume to send; it reports whether it did.
func (c *Client) queueKill(err error, method string, params any) bool {
	if !errors.Is(err, ErrDropped) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped == nil {
		return false
	}
	c.kills = append(c.kills, pendingKill{method: method, params: params})
	return true
}

// closeResumable closes the resumable sessions before the transport: a
// connection closed on purpose must not leave rexd keeping them.
func (c *Client) closeResumable() {
	c.mu.Lock()
	var sessions []*Session
	for _, s := range c.resumable {
		sessions = append(sessions, s)
	}
	down := c.dropped != nil || c.err != nil
	c.mu.Unlock()
	if down {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	for _, s := range sessions {
		s.Close(ctx)
	}
}

// closeWait bounds closing resumable sessions when the connection closes.
const closeWait = 5 * time.Second
