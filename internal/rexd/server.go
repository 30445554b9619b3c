// Package rexd is the REXD v1 server: sessions, exec with streamed output,
// file operations confined to allowed roots, PTYs, limits and an audit log,
// served as newline-delimited JSON-RPC over any byte stream (stdio in
// practice, an SSH channel's stdio in production).
package rexd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// maxInflight bounds requests handled at once per connection; the reader
// stops reading when it is reached, which pushes back on the client.
const maxInflight = 64

// Server holds the policy and the state shared by connections.
type Server struct {
	cfg   Config
	roots rootSet
	audit *auditLog
	cas   casState

	sessions atomic.Int64     // open sessions, all connections
	ids      [3]atomic.Uint64 // sessions, processes, PTYs
	hostname string
}

// New opens the configured roots and the audit log.
func New(cfg Config) (*Server, error) {
	if len(cfg.Roots) == 0 {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("no allowed roots configured and no home directory: pass --root DIR")
		}
		cfg.Roots = []string{home}
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = time.Second
	}
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = protocol.DefaultMaxLine
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	roots, err := openRoots(cfg.Roots)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, roots: roots}
	s.hostname, _ = os.Hostname()
	if cfg.AuditPath != "" {
		a, err := openAudit(cfg.AuditPath)
		if err != nil {
			roots.close()
			return nil, err
		}
		s.audit = a
	}
	return s, nil
}

// Close releases the roots and the audit log.
func (s *Server) Close() error {
	s.roots.close()
	if s.audit != nil {
		return s.audit.close()
	}
	return nil
}

// Roots lists the server's allowed roots.
func (s *Server) Roots() []string { return s.roots.paths() }

func (s *Server) newID(prefix string) string {
	i := 0
	switch prefix {
	case "p":
		i = 1
	case "t":
		i = 2
	}
	return fmt.Sprintf("%s_%d", prefix, s.ids[i].Add(1))
}

// capabilities are what this server implements.
func (s *Server) capabilities() []string {
	return []string{protocol.CapExec, protocol.CapFS, protocol.CapEvents, protocol.CapExecInput, protocol.CapPTY, protocol.CapCAS}
}

// BuildHash returns the SHA-256 of the running executable.
func BuildHash() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find own executable: %w", err)
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", fmt.Errorf("hash own executable: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash own executable: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// conn is one client connection: its writer and its sessions.
type conn struct {
	srv *Server
	enc *protocol.Encoder

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool

	handlers sync.WaitGroup
}

// Serve answers requests read from r on w until r ends or ctx is done. On
// the way out it ends every process of the connection's sessions except the
// detached ones, then waits for those to finish.
func (s *Server) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	c := &conn{srv: s, enc: protocol.NewEncoder(w), sessions: map[string]*session{}}
	dec := protocol.NewDecoder(r, s.cfg.MaxLine)
	sem := make(chan struct{}, maxInflight)

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		defer close(lines)
		for {
			line, err := dec.ReadLine()
			if errors.Is(err, protocol.ErrLineTooLong) {
				c.reply(protocol.NewErrorResponse(nil, protocol.Errorf(protocol.CodeInvalidRequest,
					map[string]int{"max_line_bytes": s.cfg.MaxLine},
					"request line longer than %d bytes; send large files in pieces", s.cfg.MaxLine)))
				continue
			}
			if err != nil {
				if err != io.EOF {
					readErr <- err
				}
				return
			}
			cp := make([]byte, len(line))
			copy(cp, line)
			select {
			case lines <- cp:
			case <-ctx.Done():
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
		case line, ok := <-lines:
			if !ok {
				break loop
			}
			c.handleLine(ctx, line, sem)
		}
	}
	select {
	case e := <-readErr:
		err = e
	default:
	}
	c.shutdown()
	return err
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

// handleLine parses one line and dispatches it. Requests are handled in the
// order they arrive, so a client may pipeline session.open and exec.start;
// only the methods that wait for processes to end run on their own
// goroutine, so a long exec.wait never holds up the connection.
func (c *conn) handleLine(ctx context.Context, line []byte, sem chan struct{}) {
	msg, perr := protocol.ParseMessage(line)
	if perr != nil {
		var id json.RawMessage
		if msg != nil {
			id = msg.ID
		}
		c.reply(protocol.NewErrorResponse(id, perr))
		return
	}
	if !msg.IsRequest() {
		return // notifications and stray responses from a client mean nothing here
	}
	switch msg.Method {
	case protocol.MethodExecWait, protocol.MethodSessionClose, protocol.MethodPTYClose:
	default:
		c.dispatch(ctx, msg)
		return
	}
	sem <- struct{}{}
	c.handlers.Add(1)
	go func() {
		defer func() { <-sem; c.handlers.Done() }()
		c.dispatch(ctx, msg)
	}()
}

// handler answers one method. It returns a result or an error; queued
// handlers may instead answer later through reply and return (nil, nil).
type handler func(c *conn, ctx context.Context, req *request) (any, *protocol.Error)

type request struct {
	msg     *protocol.Message
	session *session
	// deferred is set by handlers that answer asynchronously.
	deferred bool
	audit    auditEntry
}

func (c *conn) dispatch(ctx context.Context, msg *protocol.Message) {
	h := lookup(msg.Method)
	req := &request{msg: msg}
	req.audit = auditEntry{Method: msg.Method, Params: redactParams(msg.Params)}
	if h == nil {
		c.finish(req, nil, protocol.Errorf(protocol.CodeMethodNotFound, map[string]string{"method": msg.Method},
			"method %q not found", msg.Method))
		return
	}
	res, perr := h(c, ctx, req)
	if req.deferred {
		return
	}
	c.finish(req, res, perr)
}

// finish sends the response of req and records it in the audit log.
func (c *conn) finish(req *request, res any, perr *protocol.Error) {
	if req.session != nil {
		req.audit.SessionID = req.session.id
		req.audit.ClientName = req.session.clientName
	}
	if perr != nil {
		req.audit.Error = &auditError{Code: perr.Code, Message: perr.Message}
		c.reply(protocol.NewErrorResponse(req.msg.ID, perr))
	} else {
		m, err := protocol.NewResponse(req.msg.ID, res)
		if err != nil {
			perr = protocol.Errorf(protocol.CodeInternalError, nil, "%v", err)
			c.reply(protocol.NewErrorResponse(req.msg.ID, perr))
		} else {
			req.audit.Result = summarize(res)
			c.reply(m)
		}
	}
	c.srv.audit.write(req.audit)
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

// session finds the caller's session by id.
func (c *conn) session(req *request, id string) *protocol.Error {
	if id == "" {
		return protocol.Errorf(protocol.CodeInvalidParams, nil, "session_id is required; call session.open first")
	}
	c.mu.Lock()
	s := c.sessions[id]
	c.mu.Unlock()
	if s == nil {
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"session_id": id, "reason": "unknown_session"},
			"unknown session %q; call session.open first", id)
	}
	req.session = s
	return nil
}

// shutdown closes every session once the client is gone.
func (c *conn) shutdown() {
	c.mu.Lock()
	c.closed = true
	sessions := make([]*session, 0, len(c.sessions))
	for _, s := range c.sessions {
		sessions = append(sessions, s)
	}
	c.mu.Unlock()
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].id < sessions[j].id })
	var detached []*process
	for _, s := range sessions {
		detached = append(detached, s.close(true)...)
		c.srv.sessions.Add(-1)
	}
	c.handlers.Wait()
	for _, p := range detached {
		<-p.done
	}
}

// lookup returns the handler of a method, or nil.
func lookup(method string) handler {
	switch method {
	case protocol.MethodSessionOpen:
		return (*conn).sessionOpen
	case protocol.MethodSessionClose:
		return (*conn).sessionClose
	case protocol.MethodSessionInfo:
		return (*conn).sessionInfo
	case protocol.MethodExecStart:
		return (*conn).execStart
	case protocol.MethodExecWait:
		return (*conn).execWait
	case protocol.MethodExecKill:
		return (*conn).execKill
	case protocol.MethodExecInput:
		return (*conn).execInput
	case protocol.MethodFSRead:
		return (*conn).fsRead
	case protocol.MethodFSWrite:
		return (*conn).fsWrite
	case protocol.MethodFSList:
		return (*conn).fsList
	case protocol.MethodFSGlob:
		return (*conn).fsGlob
	case protocol.MethodFSStat:
		return (*conn).fsStat
	case protocol.MethodPTYOpen:
		return (*conn).ptyOpen
	case protocol.MethodPTYInput:
		return (*conn).ptyInput
	case protocol.MethodPTYResize:
		return (*conn).ptyResize
	case protocol.MethodPTYClose:
		return (*conn).ptyClose
	case protocol.MethodCASHas:
		return (*conn).casHas
	case protocol.MethodCASPut:
		return (*conn).casPut
	case protocol.MethodCASGet:
		return (*conn).casGet
	case protocol.MethodCASPutChunk:
		return (*conn).casPutChunk
	case protocol.MethodCASGetChunk:
		return (*conn).casGetChunk
	case protocol.MethodCASMaterialize:
		return (*conn).casMaterialize
	case protocol.MethodCASIngest:
		return (*conn).casIngest
	}
	return nil
}

func (c *conn) sessionOpen(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.SessionOpenParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	if p.ClientName == "" {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "client_name is required")
	}
	caps := c.srv.capabilities()
	var unsupported []string
	for _, rc := range p.RequestedCapabilities {
		found := false
		for _, have := range caps {
			if rc == have {
				found = true
			}
		}
		if !found {
			unsupported = append(unsupported, rc)
		}
	}
	if len(unsupported) > 0 {
		return nil, protocol.Errorf(protocol.CodeUnsupportedCapability,
			map[string][]string{"unsupported": unsupported, "capabilities": caps},
			"capability %q is not supported by this rexd", unsupported[0])
	}
	limit := c.srv.cfg.Limits.MaxConcurrentSessions
	if n := c.srv.sessions.Add(1); limit > 0 && n > limit {
		c.srv.sessions.Add(-1)
		return nil, protocol.Errorf(protocol.CodeResourceLimit,
			protocol.ResourceLimitData{Limit: "max_concurrent_sessions", Value: limit},
			"too many sessions: the limit is %d; close one first", limit)
	}
	roots, own := c.srv.roots, false
	if len(p.WorkspaceRoots) > 0 {
		nr, perr := c.srv.roots.narrow(p.WorkspaceRoots)
		if perr != nil {
			c.srv.sessions.Add(-1)
			return nil, perr
		}
		roots, own = nr, true
	}
	s := &session{
		id:         c.srv.newID("s"),
		conn:       c,
		clientName: p.ClientName,
		roots:      roots,
		ownRoots:   own,
		cwd:        roots.home(),
		limits:     lowerLimits(c.srv.cfg.Limits, p.Limits),
		openedAt:   time.Now(),
		procs:      map[string]*process{},
		ptys:       map[string]*ptyProc{},
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.srv.sessions.Add(-1)
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, nil, "connection is closing")
	}
	c.sessions[s.id] = s
	c.mu.Unlock()
	req.session = s
	return protocol.SessionOpenResult{
		SessionID:      s.id,
		Protocol:       protocol.Version,
		ServerVersion:  c.srv.cfg.Version,
		BuildHash:      c.srv.cfg.BuildHash,
		Capabilities:   caps,
		Limits:         s.limits,
		WorkspaceRoots: roots.paths(),
		Cwd:            s.cwd,
		Platform:       runtime.GOOS + "/" + runtime.GOARCH,
		Hostname:       c.srv.hostname,
	}, nil
}

// lowerLimits applies a session's override; it can only lower limits.
func lowerLimits(l protocol.Limits, o *protocol.LimitsOverride) protocol.Limits {
	if o == nil {
		return l
	}
	lower := func(cur *int64, want int64) {
		if want > 0 && (*cur == 0 || want < *cur) {
			*cur = want
		}
	}
	lower(&l.DefaultTimeoutMS, o.DefaultTimeoutMS)
	lower(&l.HardTimeoutMS, o.HardTimeoutMS)
	lower(&l.MaxOutputBytes, o.MaxOutputBytes)
	lower(&l.MaxFileReadBytes, o.MaxFileReadBytes)
	lower(&l.MaxProcessesPerSession, o.MaxProcessesPerSession)
	if l.HardTimeoutMS > 0 && l.DefaultTimeoutMS > l.HardTimeoutMS {
		l.DefaultTimeoutMS = l.HardTimeoutMS
	}
	return l
}

func (c *conn) sessionClose(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.SessionRef
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	if e := c.session(req, p.SessionID); e != nil {
		return nil, e
	}
	c.mu.Lock()
	delete(c.sessions, p.SessionID)
	c.mu.Unlock()
	s := req.session
	killed := s.liveCount()
	detached := s.close(false)
	c.srv.sessions.Add(-1)
	return protocol.SessionCloseResult{OK: true, ProcessesKilled: killed - len(detached), ProcessesDetached: len(detached)}, nil
}

func (c *conn) sessionInfo(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.SessionRef
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	if e := c.session(req, p.SessionID); e != nil {
		return nil, e
	}
	return req.session.info(c.srv.capabilities()), nil
}
