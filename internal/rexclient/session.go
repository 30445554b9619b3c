package rexclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// EventKind says what an Event carries.
type EventKind int

const (
	Stdout EventKind = iota
	Stderr
	PTYOutput
	Error // exec.error: a launch failure or a limit; Exit follows
	Exit  // the last event of a process
)

// Event is one event of a process, decoded.
type Event struct {
	Kind EventKind
	Seq  uint64
	Data []byte
	Exit *protocol.ExitEvent
	Err  *protocol.ErrorEvent

	buf *[]byte // Data's buffer, used again once the event is handled (ExecOptions.Reuse)
}

// routeQueue bounds events buffered for one process. When a consumer falls
// behind, the connection's reader waits, which slows rexd down through the
// transport's flow control instead of growing memory.
const routeQueue = 32

type route struct {
	sid     string // the session of its process
	reuse   bool   // ExecOptions.Reuse
	ch      chan Event
	gone    chan struct{}
	goneErr error
	once    sync.Once
}

func newRoute() *route {
	return &route{ch: make(chan Event, routeQueue), gone: make(chan struct{})}
}

func (r *route) deliver(ev Event) {
	select {
	case r.ch <- ev:
	case <-r.gone:
	}
}

func (r *route) lost(err error) {
	r.once.Do(func() {
		r.goneErr = err
		close(r.gone)
	})
}

// Session is an open rexd session.
type Session struct {
	c    *Client
	ID   string
	Info protocol.SessionOpenResult

	resume *resumeState // a resumable session's, guarded by c.mu
}

// OpenSession calls session.open.
func (c *Client) OpenSession(ctx context.Context, p protocol.SessionOpenParams) (*Session, error) {
	var res protocol.SessionOpenResult
	err := c.call(ctx, protocol.MethodSessionOpen, p, &res, nil, c.closeAbandoned)
	if raw := slices.Index(p.RequestedCapabilities, protocol.CapOutputRaw); raw >= 0 && protocol.ErrorCode(err) == protocol.CodeUnsupportedCapability {
		// A rexd of an older build (one beside a rex installed over it)
		// sends output as JSON lines: ask again without raw frames.
		p.RequestedCapabilities = slices.Delete(slices.Clone(p.RequestedCapabilities), raw, raw+1)
		err = c.call(ctx, protocol.MethodSessionOpen, p, &res, nil, c.closeAbandoned)
	}
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	if res.Protocol != protocol.Version {
		return nil, fmt.Errorf("open session: rexd speaks %q, this client %q; update one of them", res.Protocol, protocol.Version)
	}
	s := &Session{c: c, ID: res.SessionID, Info: res}
	c.register(s)
	return s, nil
}

// closeAbandoned closes the session a session.open opened for a caller
// that gave up before the answer (it runs on its own goroutine): else it
// stays open as long as the connection, counted against the user's
// max_concurrent_sessions on the host.
func (c *Client) closeAbandoned(raw json.RawMessage) {
	var r protocol.SessionOpenResult
	if json.Unmarshal(raw, &r) == nil && r.SessionID != "" {
		c.stopAbandoned(protocol.MethodSessionClose, protocol.SessionRef{SessionID: r.SessionID})
	}
}

// ErrMayHaveStarted marks an OpenSessionExec that failed after its
// exec.start went out: rexd may have started the process before the
// answers were given up on (it is stopped then, by onAbandon or by rexd
// when the connection closes), so the caller must not say it never ran.
var ErrMayHaveStarted = errors.New("the command was sent and may have started")

// OpenSessionExec opens a session and starts a process in it in one
// flight: exec.start goes out right behind session.open, naming the
// session by that request's id (capability pipeline), so a cold start pays
// one round trip for both. It returns the session and, separately, the
// start's outcome: startErr is set when the session opened but the process
// did not start. A rexd without the capability refuses the early start
// (it names no session) and the process is then started the usual way.
// When op names BuildHashes, a rexd of another build opens nothing and
// starts nothing.
func (c *Client) OpenSessionExec(ctx context.Context, op protocol.SessionOpenParams, p protocol.ExecStartParams, opts ExecOptions) (s *Session, proc *Process, startErr, err error) {
	po, err := c.SendSessionExec(op, p, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	return po.Wait(ctx)
}

// PendingOpen is a session.open with an exec.start behind it, both sent
// (SendSessionExec), whose answers Wait collects.
type PendingOpen struct {
	c     *Client
	s     *Session
	p     protocol.ExecStartParams
	opts  ExecOptions
	open  *sent
	proc  *Process
	start *sent
	serr  error
}

// SendSessionExec sends what OpenSessionExec sends and returns without
// waiting for an answer: a caller that holds the Client's writer (see
// NewConn) can take both requests to deliver them another way.
func (c *Client) SendSessionExec(op protocol.SessionOpenParams, p protocol.ExecStartParams, opts ExecOptions) (*PendingOpen, error) {
	s := &Session{c: c}
	// Given up on, the open closes its session (closeAbandoned): s.ID is
	// then never set, so the exec.start's own undo cannot name it, and the
	// close stops the process (rexd handled the start before reading it).
	open, err := c.send(context.Background(), nil, protocol.MethodSessionOpen, op, func(raw json.RawMessage) {
		// On the reader, before exec.start's answer is read: the
		// process's route names its session.
		var r protocol.SessionOpenResult
		if json.Unmarshal(raw, &r) == nil {
			s.ID = r.SessionID
		}
	}, c.closeAbandoned)
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	p.SessionID, p.SessionOpenID = "", open.id
	po := &PendingOpen{c: c, s: s, p: p, opts: opts, open: open}
	po.proc, po.start, po.serr = s.sendExec(context.Background(), p, opts)
	return po, nil
}

// Wait collects the answers of what SendSessionExec sent; see
// OpenSessionExec.
func (po *PendingOpen) Wait(ctx context.Context) (s *Session, proc *Process, startErr, err error) {
	c, s, p, proc, serr := po.c, po.s, po.p, po.proc, po.serr
	sent := serr == nil
	var res protocol.SessionOpenResult
	err = c.await(ctx, po.open, &res)
	if serr == nil {
		// Always collected: when ctx ended, a start rexd made anyway is
		// stopped (onAbandon).
		serr = proc.started(ctx, po.start)
	}
	if err != nil && sent {
		return nil, nil, nil, fmt.Errorf("open session: %w (%w)", err, ErrMayHaveStarted)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open session: %w", err)
	}
	if res.Protocol != protocol.Version {
		return nil, nil, nil, fmt.Errorf("open session: rexd speaks %q, this client %q; update one of them", res.Protocol, protocol.Version)
	}
	s.Info = res // s.ID was set on the reader, which may be reading it now
	c.register(s)
	if serr != nil && !slices.Contains(res.Capabilities, protocol.CapPipeline) && ctx.Err() == nil {
		// An older rexd: it could not tell which session was meant.
		p.SessionOpenID = nil
		proc, serr = s.Exec(ctx, p, po.opts)
	}
	if serr != nil {
		return s, nil, serr, nil
	}
	return s, proc, nil, nil
}

// Resumable reports whether rexd keeps this session when the connection
// drops.
func (s *Session) Resumable() bool { return s.resume != nil }

// Client returns the session's connection.
func (s *Session) Client() *Client { return s.c }

// Close calls session.close; rexd stops the session's processes.
func (s *Session) Close(ctx context.Context) error {
	err := s.c.Call(ctx, protocol.MethodSessionClose, protocol.SessionRef{SessionID: s.ID}, nil)
	if s.resume != nil && err == nil {
		s.c.unregister(s)
	}
	return err
}

// SessionInfo calls session.info.
func (s *Session) SessionInfo(ctx context.Context) (protocol.SessionInfoResult, error) {
	var res protocol.SessionInfoResult
	err := s.c.Call(ctx, protocol.MethodSessionInfo, protocol.SessionRef{SessionID: s.ID}, &res)
	return res, err
}

// ExecOptions says where a process's output goes. Writers and OnEvent are
// called from one goroutine per process, in the order rexd sent the events.
// They must not wait on their own Client (Input, Kill, any call): once the
// process's queue is full, the connection's reader waits for them, so the
// answer would never be read. Hand such calls to another goroutine.
type ExecOptions struct {
	Stdout  io.Writer
	Stderr  io.Writer
	OnEvent func(Event)
	// Reuse promises that OnEvent keeps no part of an event's Data after
	// it returns (the writers never do: io.Writer's rule): output is then
	// read into buffers the client uses again, instead of a new one per
	// event for the collector to sweep.
	Reuse bool
}

// Process is a running (or ended) rexd process.
type Process struct {
	ID        string
	Pid       int
	StartedAt time.Time

	s    *Session
	done chan struct{}
	mu   sync.Mutex
	exit *protocol.ExitEvent
	errs []protocol.ErrorEvent
	err  error
}

// Exec calls exec.start and streams the process's events to opts.
func (s *Session) Exec(ctx context.Context, p protocol.ExecStartParams, opts ExecOptions) (*Process, error) {
	p.SessionID = s.ID
	proc, st, err := s.sendExec(ctx, p, opts)
	if err != nil {
		return nil, err
	}
	return proc, proc.started(ctx, st)
}

// started waits for the answer to the exec.start of p.
func (p *Process) started(ctx context.Context, st *sent) error {
	var res protocol.ExecStartResult
	if err := p.s.c.await(ctx, st, &res); err != nil {
		return err
	}
	p.Pid, p.StartedAt = res.Pid, res.StartedAt
	return nil
}

// sendExec sends exec.start without waiting for its answer. The process
// is routed from the answer on (on the reader, before the next message),
// so no event is missed; s.ID is read only then. ctx bounds the write.
func (s *Session) sendExec(ctx context.Context, p protocol.ExecStartParams, opts ExecOptions) (*Process, *sent, error) {
	proc := &Process{s: s, done: make(chan struct{})}
	st, err := s.c.send(ctx, nil, protocol.MethodExecStart, p, func(raw json.RawMessage) {
		var r protocol.ExecStartResult
		if json.Unmarshal(raw, &r) == nil {
			proc.startRoute(r.ProcessID, opts)
		}
	}, func(raw json.RawMessage) {
		// The caller gave up before the reply: nobody owns the process.
		var r protocol.ExecStartResult
		if json.Unmarshal(raw, &r) == nil {
			s.c.stopAbandoned(protocol.MethodExecKill, protocol.ExecKillParams{SessionID: s.ID, ProcessID: r.ProcessID, Signal: "TERM"})
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return proc, st, nil
}

// abandonWait bounds the call that stops a process whose start the caller
// gave up on.
const abandonWait = 30 * time.Second

// stopAbandoned stops what a late answer started for a caller that is gone
// (its context ended before the reply came): a process, a terminal, a
// session, an update. It runs on its own goroutine.
func (c *Client) stopAbandoned(method string, params any) {
	ctx, cancel := context.WithTimeout(context.Background(), abandonWait)
	defer cancel()
	c.Call(ctx, method, params, nil) // an error means the connection is gone, and rexd stops it then
}

func (p *Process) startRoute(id string, opts ExecOptions) {
	p.ID = id
	r := newRoute()
	r.sid = p.s.ID
	r.reuse = opts.Reuse
	p.s.c.addRoute(id, r)
	go p.consume(r, opts)
}

func (p *Process) consume(r *route, opts ExecOptions) {
	handleEvent := func(ev Event) bool {
		if opts.OnEvent != nil {
			opts.OnEvent(ev)
		}
		switch ev.Kind {
		case Stdout, PTYOutput:
			if opts.Stdout != nil {
				opts.Stdout.Write(ev.Data)
			}
		case Stderr:
			if opts.Stderr != nil {
				opts.Stderr.Write(ev.Data)
			}
		case Error:
			p.mu.Lock()
			p.errs = append(p.errs, *ev.Err)
			p.mu.Unlock()
		case Exit:
			p.mu.Lock()
			p.exit = ev.Exit
			p.mu.Unlock()
			return true
		}
		return false
	}
	handle := func(ev Event) bool {
		end := handleEvent(ev)
		if ev.buf != nil {
			p.s.c.bufs.put(ev.buf)
		}
		return end
	}
	defer close(p.done)
	for {
		select {
		case ev := <-r.ch:
			if handle(ev) {
				return
			}
		case <-r.gone:
			for {
				select {
				case ev := <-r.ch:
					if handle(ev) {
						return
					}
				default:
					p.mu.Lock()
					p.err = r.goneErr
					p.mu.Unlock()
					return
				}
			}
		}
	}
}

// Done is closed once the process has ended (or its connection was lost)
// and all its output was delivered.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the exit event. It returns an error when the connection
// was lost first or ctx ended.
func (p *Process) Wait(ctx context.Context) (*protocol.ExitEvent, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit == nil {
		if p.err != nil {
			return nil, p.err
		}
		return nil, ErrClosed
	}
	return p.exit, nil
}

// Errors returns the exec.error events seen so far (launch failure,
// timeout, output cap).
func (p *Process) Errors() []protocol.ErrorEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]protocol.ErrorEvent(nil), p.errs...)
}

// Input writes data to the process's stdin.
func (p *Process) Input(ctx context.Context, data []byte) error {
	d, enc := protocol.EncodeData(data)
	return p.s.c.Call(ctx, protocol.MethodExecInput,
		protocol.ExecInputParams{SessionID: p.s.ID, ProcessID: p.ID, Data: d, Encoding: enc}, nil)
}

// CloseInput closes the process's stdin.
func (p *Process) CloseInput(ctx context.Context) error {
	return p.s.c.Call(ctx, protocol.MethodExecInput,
		protocol.ExecInputParams{SessionID: p.s.ID, ProcessID: p.ID, EOF: true}, nil)
}

// Kill signals the process group; "" means TERM (then KILL after rexd's
// grace period).
func (p *Process) Kill(ctx context.Context, signal string) error {
	params := protocol.ExecKillParams{SessionID: p.s.ID, ProcessID: p.ID, Signal: signal}
	err := p.s.c.Call(ctx, protocol.MethodExecKill, params, nil)
	if p.s.c.queueKill(err, protocol.MethodExecKill, params) {
		return nil // sent when the connection is resumed
	}
	return err
}

// PTY is a process on a remote pseudo-terminal.
type PTY struct {
	*Process
	PTYID string
}

// OpenPTY calls pty.open; the terminal's output goes to opts.Stdout (or
// OnEvent as PTYOutput events).
func (s *Session) OpenPTY(ctx context.Context, p protocol.PTYOpenParams, opts ExecOptions) (*PTY, error) {
	p.SessionID = s.ID
	proc := &Process{s: s, done: make(chan struct{})}
	var res protocol.PTYOpenResult
	err := s.c.call(ctx, protocol.MethodPTYOpen, p, &res, func(raw json.RawMessage) {
		var r protocol.PTYOpenResult
		if json.Unmarshal(raw, &r) == nil {
			proc.startRoute(r.ProcessID, opts)
		}
	}, func(raw json.RawMessage) {
		var r protocol.PTYOpenResult
		if json.Unmarshal(raw, &r) == nil {
			s.c.stopAbandoned(protocol.MethodPTYClose, protocol.PTYCloseParams{SessionID: s.ID, PTYID: r.PTYID})
		}
	})
	if err != nil {
		return nil, err
	}
	proc.Pid, proc.StartedAt = res.Pid, res.StartedAt
	return &PTY{Process: proc, PTYID: res.PTYID}, nil
}

// Write sends keystrokes (any bytes) to the terminal.
//
// On a resumable session whose connection has dropped, it waits for the
// connection to be resumed and sends the keys then: typing while the
// network is away is not lost (a write that was in flight when the
// connection dropped is sent again; rexd may have had it).
func (t *PTY) Write(ctx context.Context, data []byte) error {
	d, enc := protocol.EncodeData(data)
	return t.s.c.callResumed(ctx, protocol.MethodPTYInput,
		protocol.PTYInputParams{SessionID: t.s.ID, PTYID: t.PTYID, Data: d, Encoding: enc})
}

// Resize changes the terminal's size (after a resume, as Write).
func (t *PTY) Resize(ctx context.Context, cols, rows int) error {
	return t.s.c.callResumed(ctx, protocol.MethodPTYResize,
		protocol.PTYResizeParams{SessionID: t.s.ID, PTYID: t.PTYID, Cols: cols, Rows: rows})
}

// callResumed is Call that, when the connection has dropped, waits for
// the resume and calls again.
func (c *Client) callResumed(ctx context.Context, method string, params any) error {
	for {
		err := c.Call(ctx, method, params, nil)
		if !errors.Is(err, ErrDropped) || !c.waitBack(ctx) {
			return err
		}
	}
}

// Close ends the terminal's programs.
func (t *PTY) Close(ctx context.Context) error {
	params := protocol.PTYCloseParams{SessionID: t.s.ID, PTYID: t.PTYID}
	err := t.s.c.Call(ctx, protocol.MethodPTYClose, params, nil)
	if t.s.c.queueKill(err, protocol.MethodPTYClose, params) {
		return nil // sent when the connection is resumed
	}
	return err
}

// ReadFile calls fs.read.
func (s *Session) ReadFile(ctx context.Context, p protocol.FSReadParams) (protocol.FSReadResult, error) {
	p.SessionID = s.ID
	var res protocol.FSReadResult
	err := s.c.Call(ctx, protocol.MethodFSRead, p, &res)
	return res, err
}

// WriteFile calls fs.write.
func (s *Session) WriteFile(ctx context.Context, p protocol.FSWriteParams) (protocol.FSWriteResult, error) {
	p.SessionID = s.ID
	var res protocol.FSWriteResult
	err := s.c.Call(ctx, protocol.MethodFSWrite, p, &res)
	return res, err
}

// Stat calls fs.stat.
func (s *Session) Stat(ctx context.Context, path string) (protocol.FSStatResult, error) {
	var res protocol.FSStatResult
	err := s.c.Call(ctx, protocol.MethodFSStat, protocol.FSStatParams{SessionID: s.ID, Path: path}, &res)
	return res, err
}

// List calls fs.list.
func (s *Session) List(ctx context.Context, p protocol.FSListParams) (protocol.FSListResult, error) {
	p.SessionID = s.ID
	var res protocol.FSListResult
	err := s.c.Call(ctx, protocol.MethodFSList, p, &res)
	return res, err
}

// Glob calls fs.glob.
func (s *Session) Glob(ctx context.Context, p protocol.FSGlobParams) (protocol.FSGlobResult, error) {
	p.SessionID = s.ID
	var res protocol.FSGlobResult
	err := s.c.Call(ctx, protocol.MethodFSGlob, p, &res)
	return res, err
}

// FirstExec is a process to start together with a connection's first
// session (OpenSessionExec), handed down to whoever opens that session.
// Params and Opts are the caller's; Sent, Proc and Err say what became of
// it: when Sent is false it was never sent and the caller starts it
// itself; otherwise Proc is the started process, or Err why it did not
// start.
type FirstExec struct {
	Params protocol.ExecStartParams
	Opts   ExecOptions
	// Public says that Params hold nothing a command line may not show
	// (no secret in the environment, no input data; input streamed later
	// with exec.input is not in them): the connector may carry them in
	// the exec request that starts rexd (protocol.FirstEnv).
	Public bool

	Sent bool
	Proc *Process
	Err  error
}
