package rexd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// How a connection is served (the model is x/tools' jsonrpc2_v2): one
// goroutine reads requests and starts them in the order they arrive, each
// with a context of its own.
//
//   - Quick methods (session.open and .info, exec.start, .kill and .input,
//     pty.open, .input and .resize, unknown methods) are handled on the
//     reading goroutine itself, so they stay in order: a client may
//     pipeline session.open and exec.start, and input to one process is
//     written in the order it was sent.
//   - Methods that touch the file system or the store (fs.*, cas.*) and
//     those that wait for processes (exec.wait, session.close, pty.close)
//     run on goroutines of their own and answer when done, while the
//     reader goes on: a slow read or a large push never holds up a
//     keystroke on the same connection.
//
// A request's context ends when it is answered, when the client sends
// $/cancelRequest with its id, or when the connection ends.
const (
	// maxWorking bounds file and store requests running at once.
	maxWorking = 64
	// maxOutstanding bounds requests admitted to run on their own (running
	// or waiting for a slot); past it the reader waits for one to end,
	// which pushes back on the client.
	maxOutstanding = 256
	// maxOutstandingBytes bounds the bytes of those requests (their lines
	// and raw cas.put data): 256 fs.write lines of MaxLine would otherwise
	// be 4 GiB. One larger than what is free is admitted alone, when
	// nothing else is held, so a single request of MaxLine still runs.
	maxOutstandingBytes = 64 << 20
	// handlerGrace bounds how long the end of a connection waits for
	// running requests (one stuck in a system call cannot keep rexd up).
	handlerGrace = 5 * time.Second
)

// conn is one client connection: its writer, its sessions and the
// requests it has not answered yet.
type conn struct {
	srv *Server
	enc *protocol.Encoder
	ctx context.Context // ends with the connection; every request's parent

	mu       sync.Mutex
	sessions map[string]*session
	// opened maps the id of a session.open request (as sent) to the
	// session it opened, for an exec.start that names its session so
	// (session_open_id); only the last maxOpened are kept.
	opened     map[string]string
	openedKeys []string
	closed     bool
	inflight   map[string]*request // by id, as sent

	handlers    sync.WaitGroup
	outstanding chan struct{}
	held        byteBudget // bytes of the outstanding requests
	working     chan struct{}

	// relay, once set, is the socket of the rexd holding the session this
	// connection resumed (resume.go): every line read goes there, every
	// line it writes comes back, and relayEnd is closed when it ends.
	relay    *net.UnixConn
	relayEnd chan struct{}

	// resumeFirst marks a connection on a session's socket (resume.go)
	// that has not resumed a session yet: it serves a session.resume with
	// the right token first, or nothing (refused ends it), so that only
	// the holder of a token gets this rexd's policy, which may be wider
	// than the connecting process's own rexd's. Read and written by the
	// reader only.
	resumeFirst, refused bool
}

// Serve answers requests read from r on w until r ends or ctx is done. On
// the way out it ends every process of the connection's sessions except the
// detached ones, then waits for those to finish.
func (s *Server) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	return s.serve(ctx, r, w, false)
}

// serve is Serve; resumeFirst is set for a connection on a session's
// socket (see conn.resumeFirst).
func (s *Server) serve(ctx context.Context, r io.Reader, w io.Writer, resumeFirst bool) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &conn{
		srv:         s,
		enc:         protocol.NewEncoder(w),
		ctx:         cctx,
		sessions:    map[string]*session{},
		inflight:    map[string]*request{},
		outstanding: make(chan struct{}, maxOutstanding),
		held:        byteBudget{max: maxOutstandingBytes},
		working:     make(chan struct{}, maxWorking),
		relayEnd:    make(chan struct{}),
		resumeFirst: resumeFirst,
	}
	dec := protocol.NewDecoder(r, s.cfg.MaxLine)

	lines := make(chan inLine)
	readErr := make(chan error, 1)
	go func() {
		defer close(lines)
		for {
			line, err := dec.ReadLine()
			if errors.Is(err, protocol.ErrLineTooLong) {
				perr := protocol.Errorf(protocol.CodeInvalidRequest,
					map[string]int{"max_line_bytes": s.cfg.MaxLine},
					"request line longer than %d bytes; send large files in pieces", s.cfg.MaxLine)
				c.reply(protocol.NewErrorResponse(nil, perr))
				c.auditRefused(nil, perr)
				continue
			}
			if err != nil {
				if err != io.EOF {
					readErr <- err
				}
				return
			}
			in := inLine{line: bytes.Clone(line)}
			n, isRaw, ferr := protocol.CASRawFrameLen(line, cas.MaxBatchBytes)
			if ferr != nil {
				// The bytes that follow cannot be skipped in step: answer,
				// then end the connection as if the input ended.
				perr := protocol.Errorf(protocol.CodeResourceLimit, map[string]int64{"max_bytes": cas.MaxBatchBytes},
					"cas.put of %d raw bytes refused (at most %d per call); the connection is closed, send smaller batches", n, cas.MaxBatchBytes)
				c.reply(protocol.NewErrorResponse(nil, perr))
				c.auditRefused(nil, perr)
				return
			}
			if isRaw {
				if in.raw, err = dec.ReadRaw(int(n)); err != nil {
					return // the input ended inside the frame: as at its end
				}
			}
			select {
			case lines <- in:
			case <-cctx.Done():
				return
			}
		}
	}()

	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		case in, ok := <-lines:
			if !ok {
				break loop
			}
			if c.relay != nil {
				if _, werr := c.relay.Write(append(append(in.line, '\n'), in.raw...)); werr != nil {
					break loop
				}
				continue
			}
			c.handleLine(in.line, in.raw)
			if c.resumeFirst {
				c.mu.Lock()
				resumed := len(c.sessions) > 0
				c.mu.Unlock()
				if c.refused || !resumed {
					break loop
				}
				c.resumeFirst = false
			}
		case <-c.relayEnd:
			break loop
		}
	}
	select {
	case e := <-readErr:
		err = e
	default:
	}
	// A connection that ended on its own orphans its resumable sessions;
	// rexd being stopped (ctx) ends them.
	c.shutdown(cancel, ctx.Err() == nil)
	return err
}

// inLine is a line read from the client and, for a raw cas.put, the bytes
// that followed it.
type inLine struct {
	line []byte
	raw  []byte
}

// relayAnswerWait bounds how long the rexd holding a session may take to
// answer the session.resume relayed to it.
const relayAnswerWait = 10 * time.Second

// startRelay makes this connection a relay to the rexd that holds the
// session it resumes: first the line that asked for it (msg), then, once
// that rexd has granted the resume, everything. A refusal is passed on and
// the connection stays here, under this rexd's policy: the other rexd's
// may be wider, and a wrong token must not buy a connection to it.
// relayed reports whether the relay began; when it did not, perr is the
// answer to give, or nil when the other rexd's refusal was passed on.
func (c *conn) startRelay(sock *net.UnixConn, msg *protocol.Message, first []byte) (relayed bool, perr *protocol.Error) {
	dec := protocol.NewDecoder(sock, c.srv.cfg.MaxLine+1024)
	sock.SetDeadline(time.Now().Add(relayAnswerWait))
	_, err := sock.Write(append(first, '\n'))
	var answer []byte
	if err == nil {
		answer, err = dec.ReadLine()
	}
	var m *protocol.Message
	if err == nil {
		m, _ = protocol.ParseMessage(answer)
	}
	if m == nil || !m.IsResponse() { // nothing else comes before it on a new connection
		sock.Close()
		return false, resumeRefused("", protocol.ResumeGone, protocol.CodeInvalidParams,
			"the rexd that holds the session did not answer the resume; try again")
	}
	if m.Error != nil {
		sock.Close()
		c.auditRefused(msg, m.Error)
		c.enc.WriteLine(append(bytes.Clone(answer), '\n'))
		return false, nil
	}
	sock.SetDeadline(time.Time{})
	if c.enc.WriteLine(append(bytes.Clone(answer), '\n')) != nil {
		sock.Close()
		return true, nil // the client is gone; the reader notices too
	}
	c.relay = sock
	go func() {
		defer close(c.relayEnd)
		var data []byte
		for {
			line, err := dec.ReadLine()
			if err != nil {
				return
			}
			// A raw output frame's bytes follow its line as they are (a
			// plain session opened after the resume may ask for them):
			// they go on whole, never read as lines.
			n, raw, err := protocol.RawOutputLen(line, protocol.MaxRawOutput)
			if err != nil {
				return
			}
			if !raw {
				if c.enc.WriteLine(append(line, '\n')) != nil {
					return
				}
				continue
			}
			if cap(data) < n {
				data = make([]byte, n)
			}
			data = data[:n]
			if dec.ReadRawInto(data) != nil || c.enc.WriteFrame(append(line, '\n'), [][]byte{data}) != nil {
				return
			}
		}
	}()
	return true, nil
}

func (c *conn) reply(m *protocol.Message) {
	// A write error means the client is gone; the read side notices too.
	_ = c.enc.Encode(m)
}

func (c *conn) notify(method string, params any) {
	m, err := protocol.NewNotification(method, params)
	if err != nil {
		return
	}
	_ = c.enc.Encode(m)
}

// requestKind says where a method runs.
type requestKind int

const (
	quick requestKind = iota // on the reader, in order
	work                     // on its own, holding a working slot
	wait                     // on its own: it waits for processes
)

func kindOf(method string) requestKind {
	switch {
	case method == protocol.MethodExecWait, method == protocol.MethodSessionClose, method == protocol.MethodPTYClose:
		return wait
	case strings.HasPrefix(method, "fs."), strings.HasPrefix(method, "cas."):
		return work
	}
	return quick
}

// handleLine parses one line and starts what it asks for; raw is the
// bytes of a raw cas.put that followed it.
func (c *conn) handleLine(line, raw []byte) {
	msg, perr := protocol.ParseMessage(line)
	if perr != nil {
		var id json.RawMessage
		if msg != nil {
			id = msg.ID
		}
		c.reply(protocol.NewErrorResponse(id, perr))
		c.auditRefused(msg, perr)
		return
	}
	if c.resumeFirst && !(msg.IsRequest() && msg.Method == protocol.MethodSessionResume) {
		perr := protocol.Errorf(protocol.CodeInvalidRequest, nil,
			"a session's socket serves only a session.resume, as the first request; this connection is ended")
		if msg.IsRequest() {
			c.reply(protocol.NewErrorResponse(msg.ID, perr))
		}
		c.auditRefused(msg, perr)
		c.refused = true
		return
	}
	if msg.IsNotification() {
		switch msg.Method {
		case protocol.MethodCancelRequest:
			c.cancelRequest(msg.Params)
		case protocol.MethodSessionAck:
			c.sessionAck(msg.Params)
		}
		return // other notifications mean nothing here
	}
	if !msg.IsRequest() {
		return // a stray response
	}
	if msg.Method == protocol.MethodSessionResume && !c.holdsResumed(msg.Params) {
		sock, perr := c.relayResume(msg)
		if perr == nil {
			var relayed bool
			if relayed, perr = c.startRelay(sock, msg, line); relayed || perr == nil {
				return
			}
		}
		c.finish(c.begin(msg), nil, perr)
		return
	}
	req := c.begin(msg)
	req.raw = raw
	kind := kindOf(msg.Method)
	if kind == quick {
		c.dispatch(req)
		return
	}
	select {
	case c.outstanding <- struct{}{}:
	case <-c.ctx.Done():
		c.finish(req, nil, c.cancelled(req))
		return
	}
	size := int64(len(line) + len(raw))
	if !c.held.tryTake(size) {
		if c.srv.testHook != nil {
			c.srv.testHook(c.ctx, admitWaitBytes)
		}
		if !c.held.take(c.ctx, size) {
			<-c.outstanding
			c.finish(req, nil, c.cancelled(req))
			return
		}
	}
	c.handlers.Add(1)
	go func() {
		defer func() { c.held.give(size); <-c.outstanding; c.handlers.Done() }()
		if kind == work {
			select {
			case c.working <- struct{}{}:
				defer func() { <-c.working }()
			case <-req.ctx.Done():
				c.finish(req, nil, c.cancelled(req))
				return
			}
		}
		c.dispatch(req)
	}()
}

// admitWaitBytes is the testHook's name for the moment the reader starts
// waiting for outstanding requests to end because their bytes are at
// maxOutstandingBytes.
const admitWaitBytes = "rexd/admit-wait-bytes"

// byteBudget counts the bytes of a connection's outstanding requests. Only
// the reader takes (so no waiter can starve another); handlers give back.
type byteBudget struct {
	max int64

	mu    sync.Mutex
	held  int64
	freed chan struct{} // closed when bytes are given back; nil when none waits
}

// tryTake takes n bytes if they are free, or if nothing is held (a request
// larger than max runs alone).
func (b *byteBudget) tryTake(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.takeLocked(n)
}

func (b *byteBudget) takeLocked(n int64) bool {
	if b.held > 0 && b.held+n > b.max {
		return false
	}
	b.held += n
	return true
}

// take waits until n bytes can be taken; false when ctx ended first.
func (b *byteBudget) take(ctx context.Context, n int64) bool {
	for {
		b.mu.Lock()
		if b.takeLocked(n) {
			b.mu.Unlock()
			return true
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
}

// give returns n bytes and wakes the reader if it waits.
func (b *byteBudget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
}

// handler answers one method. It returns a result or an error; handlers
// that answer later set req.deferred and call finish themselves.
type handler func(c *conn, ctx context.Context, req *request) (any, *protocol.Error)

type request struct {
	msg    *protocol.Message
	ctx    context.Context
	cancel context.CancelFunc
	key    string // the id as sent

	session *session
	// raw holds the object bytes that followed a raw cas.put's line.
	raw []byte
	// deferred is set by handlers that answer asynchronously.
	deferred bool
	audit    auditEntry
	answered bool // guarded by conn.mu
}

// begin registers a request so that $/cancelRequest can find it.
func (c *conn) begin(msg *protocol.Message) *request {
	ctx, cancel := context.WithCancel(c.ctx)
	req := &request{msg: msg, ctx: ctx, cancel: cancel, key: string(msg.ID)}
	req.audit = auditEntry{Method: msg.Method}
	if !strings.HasPrefix(msg.Method, "cas.") { // cas handlers audit their own params: counts, not megabytes of data
		req.audit.Params = redactParams(msg.Params)
	}
	c.mu.Lock()
	c.inflight[req.key] = req
	c.mu.Unlock()
	return req
}

// cancelRequest ends the context of the request named by params.id.
func (c *conn) cancelRequest(params json.RawMessage) {
	var p protocol.CancelParams
	if json.Unmarshal(params, &p) != nil || len(p.ID) == 0 {
		return
	}
	c.mu.Lock()
	req := c.inflight[string(p.ID)]
	c.mu.Unlock()
	if req != nil {
		req.cancel()
	}
}

// cancelled is the answer to a request whose context ended first.
func (c *conn) cancelled(req *request) *protocol.Error {
	if c.ctx.Err() != nil {
		return protocol.Errorf(protocol.CodeRequestCancelled, map[string]string{"reason": "shutdown"},
			"%s was cut short: rexd is shutting down", req.msg.Method)
	}
	return protocol.Errorf(protocol.CodeRequestCancelled, map[string]string{"reason": "cancelled"},
		"%s was cancelled by the client", req.msg.Method)
}

func (c *conn) dispatch(req *request) {
	h := lookup(req.msg.Method)
	if h == nil {
		c.finish(req, nil, protocol.Errorf(protocol.CodeMethodNotFound, map[string]string{"method": req.msg.Method},
			"method %q not found", req.msg.Method))
		return
	}
	if c.srv.testHook != nil {
		c.srv.testHook(req.ctx, req.msg.Method)
	}
	if req.ctx.Err() != nil { // cancelled before it began: not run at all
		c.finish(req, nil, c.cancelled(req))
		return
	}
	res, perr := h(c, req.ctx, req)
	if s := req.session; s != nil {
		s.untrack(req)
	}
	if req.deferred {
		return
	}
	if perr != nil && req.ctx.Err() != nil {
		perr = c.cancelled(req)
	}
	c.finish(req, res, perr)
}

// finish sends the response of req and records it in the audit log. Only
// the first call for a request answers it.
func (c *conn) finish(req *request, res any, perr *protocol.Error) {
	c.mu.Lock()
	if req.answered {
		c.mu.Unlock()
		return
	}
	req.answered = true
	if c.inflight[req.key] == req {
		delete(c.inflight, req.key)
	}
	s := req.session
	if s == nil {
		s = c.sessionNamedLocked(req.msg.Params)
	}
	c.mu.Unlock()
	req.cancel()
	if s != nil {
		req.audit.SessionID = s.id
		req.audit.ClientName = s.clientName
		if s.resume != nil && kindOf(req.msg.Method) == wait {
			// It answers after the events it waited for, which a
			// resumable session sends from its log.
			s.resume.log.waitSent()
		}
	}
	var m *protocol.Message
	if perr == nil {
		var err error
		if m, err = protocol.NewResponse(req.msg.ID, res); err != nil {
			perr = protocol.Errorf(protocol.CodeInternalError, nil, "%v", err)
		} else {
			req.audit.Result = summarize(res)
		}
	}
	if perr != nil {
		req.audit.Error = &auditError{Code: perr.Code, Message: perr.Message}
		m = protocol.NewErrorResponse(req.msg.ID, perr)
	}
	// Audited before answered: whatever a client was told has happened is
	// in the log, in the order it was told (a request answered on its own
	// goroutine could otherwise be logged after the next one).
	c.srv.audit.Write(req.audit)
	c.reply(m)
}

// auditRefused records a line that was not a request rexd could start.
func (c *conn) auditRefused(msg *protocol.Message, perr *protocol.Error) {
	e := auditEntry{Error: &auditError{Code: perr.Code, Message: perr.Message}}
	var params json.RawMessage
	if msg != nil {
		e.Method, params = msg.Method, msg.Params
		e.Params = redactParams(params)
	}
	c.mu.Lock()
	s := c.sessionNamedLocked(params)
	c.mu.Unlock()
	if s != nil {
		e.SessionID, e.ClientName = s.id, s.clientName
	}
	c.srv.audit.Write(e)
}

// sessionNamedLocked is the session an audit entry of this connection
// names when its request found none: the one its params name if that is
// open here, else the connection's oldest open session. c.mu is held.
func (c *conn) sessionNamedLocked(params json.RawMessage) *session {
	var p struct {
		SessionID string `json:"session_id"`
	}
	if json.Unmarshal(params, &p) == nil && p.SessionID != "" {
		if s := c.sessions[p.SessionID]; s != nil {
			return s
		}
	}
	var oldest *session
	for _, s := range c.sessions {
		if oldest == nil || sessionSeq(s.id) < sessionSeq(oldest.id) {
			oldest = s
		}
	}
	return oldest
}

// sessionSeq is the number in a session id ("s_12" is 12, "s_3-9f2c…" of
// a resumable session 3).
func sessionSeq(id string) int {
	num, _, _ := strings.Cut(strings.TrimPrefix(id, "s_"), "-")
	n, _ := strconv.Atoi(num)
	return n
}

// holdsResumed reports whether the session a session.resume names is held
// by this process.
func (c *conn) holdsResumed(params json.RawMessage) bool {
	var p struct {
		SessionID string `json:"session_id"`
	}
	json.Unmarshal(params, &p)
	return c.srv.resumableSession(p.SessionID) != nil
}

// decode unmarshals params strictly enough to catch wrong types.
func decode(raw json.RawMessage, v any) *protocol.Error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return protocol.Errorf(protocol.CodeInvalidParams, nil, "invalid params: %v", err)
	}
	return nil
}

func unknownSession(id string) *protocol.Error {
	return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"session_id": id, "reason": "unknown_session"},
		"unknown session %q; call session.open first", id)
}

// session finds the caller's session by id and holds it for the handler:
// closing the session waits for (and first cancels) the handlers that
// hold it, so none runs on a closed session's roots.
func (c *conn) session(req *request, id string) *protocol.Error {
	if id == "" {
		return protocol.Errorf(protocol.CodeInvalidParams, nil, "session_id is required; call session.open first")
	}
	c.mu.Lock()
	s := c.sessions[id]
	c.mu.Unlock()
	if s == nil || !s.track(req) {
		return unknownSession(id)
	}
	req.session = s
	return nil
}

// maxOpened bounds how many session.open ids a connection remembers for
// session_open_id: a pipelining client names the one it has just sent.
const maxOpened = 16

// rememberOpened records that the session.open request key opened id.
// c.mu is held.
func (c *conn) rememberOpenedLocked(key, id string) {
	if c.opened == nil {
		c.opened = map[string]string{}
	}
	if _, ok := c.opened[key]; !ok {
		c.openedKeys = append(c.openedKeys, key)
	}
	c.opened[key] = id
	for len(c.openedKeys) > maxOpened {
		delete(c.opened, c.openedKeys[0])
		c.openedKeys = c.openedKeys[1:]
	}
}

// sessionByOpen is the id of the session the session.open request with
// JSON-RPC id openID opened on this connection, for exec.start's
// session_open_id. Requests are read in order and session.open is handled
// before the next line is read, so an open sent just before is known.
func (c *conn) sessionByOpen(openID json.RawMessage) (string, *protocol.Error) {
	c.mu.Lock()
	id, ok := c.opened[string(openID)]
	c.mu.Unlock()
	if !ok {
		return "", protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "unknown_session"},
			"no session was opened by request %s on this connection; session_open_id names an earlier session.open that succeeded", truncate(string(openID), 64))
	}
	return id, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// takeSession removes the session id from the connection; of two
// session.close calls for one session, only one gets it.
func (c *conn) takeSession(id string) *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[id]
	delete(c.sessions, id)
	return s
}

// shutdown ends every request and closes every session once the client
// is gone (orphaning the resumable ones when orphan is set), then waits
// for detached processes.
func (c *conn) shutdown(cancel context.CancelFunc, orphan bool) {
	if c.relay != nil {
		c.relay.Close() // the rexd holding the session sees its end
		<-c.relayEnd
	}
	c.mu.Lock()
	c.closed = true
	sessions := make([]*session, 0, len(c.sessions))
	for id, s := range c.sessions {
		if s.resume != nil && orphan {
			delete(c.sessions, id)
			s.orphan(c)
			continue
		}
		sessions = append(sessions, s)
	}
	c.mu.Unlock()
	cancel()
	handled := make(chan struct{})
	go func() { c.handlers.Wait(); close(handled) }()
	t := time.NewTimer(handlerGrace)
	select {
	case <-handled:
	case <-t.C:
	}
	t.Stop()
	sortSessions(sessions)
	var detached []*process
	for _, s := range sessions {
		detached = append(detached, s.close(true)...)
	}
	for _, p := range detached {
		<-p.done
	}
	// Nothing reaches the writer once Serve has returned: a process that
	// outlived close's grace, or was reaped but had not sent its exit
	// event yet, finds the writer closed (its client is gone anyway).
	c.enc.Close()
}
