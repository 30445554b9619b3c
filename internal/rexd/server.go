// Package rexd is the REXD v1 server: sessions, exec with streamed output,
// file operations confined to allowed roots, PTYs, limits and an audit log,
// served as newline-delimited JSON-RPC over any byte stream (stdio in
// practice, an SSH channel's stdio in production).
package rexd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rexconsole/rex/internal/auditlog"
	"github.com/rexconsole/rex/internal/protocol"
)

// Server holds the policy and the state shared by connections.
type Server struct {
	cfg   Config
	roots rootSet
	audit *auditLog
	// auditFile is the audit log's identity, which file methods must not
	// change: it sits in the default roots (see isAuditLog).
	auditFile fs.FileInfo
	cas       casState

	// testHook, when set (by tests in this package), runs before every
	// handler, on the goroutine and with the context the handler gets.
	testHook func(ctx context.Context, method string)

	// usage counts the sessions and processes of this rexd and, through
	// the registry (usage.go), of the user's other rexd processes.
	usage    usage
	ids      [3]atomic.Uint64 // sessions, processes, PTYs
	hostname string

	// resume holds the resumable sessions of this process; life is the
	// context of connections accepted on their sockets, ended by Close.
	resume  resumeRegistry
	life    context.Context
	endLife context.CancelFunc

	// guard stops the process groups should this rexd be killed.
	guard *guard
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
	s := &Server{cfg: cfg, roots: roots, guard: &guard{exe: cfg.GuardExe, grace: cfg.KillGrace}}
	s.usage.roots = cfg.UsageDirs
	s.usage.warn = cfg.Warn
	s.life, s.endLife = context.WithCancel(context.Background())
	s.hostname, _ = os.Hostname()
	if cfg.AuditPath != "" {
		a, err := auditlog.Open(cfg.AuditPath)
		if err != nil {
			roots.close()
			return nil, err
		}
		s.audit = a
		if s.auditFile, err = a.Stat(); err != nil {
			a.Close()
			roots.close()
			return nil, fmt.Errorf("open audit log %s: %w", cfg.AuditPath, err)
		}
	}
	return s, nil
}

// isAuditLog reports whether fi is this rexd's audit log (by device and
// inode: a hard link or a symlink to it counts). A client whose commands
// allow_commands limits could otherwise erase its own tracks with fs.write
// or a push, since the log's default place is inside the default roots.
func (s *Server) isAuditLog(fi fs.FileInfo) bool {
	return s.auditFile != nil && fi != nil && os.SameFile(fi, s.auditFile)
}

// auditLogRefused refuses a file method that would change or remove the
// audit log.
func (s *Server) auditLogRefused(op, path string) *protocol.Error {
	return protocol.Errorf(protocol.CodeForbiddenPath,
		protocol.ForbiddenPathData{Path: path, AllowedRoots: s.roots.paths(), Reason: "audit_log"},
		"%s: %s is rexd's audit log, which no client may change or remove; leave it out", op, path)
}

// Close releases the roots and the audit log.
func (s *Server) Close() error {
	s.endLife()
	s.guard.release()
	s.usage.mu.Lock()
	s.usage.close()
	s.usage.mu.Unlock()
	s.roots.close()
	if s.audit != nil {
		return s.audit.Close()
	}
	return nil
}

// WaitProcesses returns once every process this rexd started has ended
// (detached processes of closed sessions included), or when ctx ends:
// they count against the user's limits for as long as it lives.
func (s *Server) WaitProcesses(ctx context.Context) { s.usage.waitProcesses(ctx) }

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
	caps := []string{protocol.CapExec, protocol.CapFS, protocol.CapEvents, protocol.CapExecInput, protocol.CapPTY, protocol.CapCAS, protocol.CapCASRaw, protocol.CapCancel, protocol.CapPipeline, protocol.CapOutputRaw}
	if s.cfg.ResumeGrace > 0 {
		caps = append(caps, protocol.CapResume)
	}
	return caps
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

// lookup returns the handler of a method, or nil.
func lookup(method string) handler {
	switch method {
	case protocol.MethodSessionOpen:
		return (*conn).sessionOpen
	case protocol.MethodSessionClose:
		return (*conn).sessionClose
	case protocol.MethodSessionInfo:
		return (*conn).sessionInfo
	case protocol.MethodSessionResume:
		return (*conn).sessionResume
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
	case protocol.MethodCASNeeded:
		return (*conn).casNeeded
	case protocol.MethodCASCommit:
		return (*conn).casCommit
	case protocol.MethodCASAbort:
		return (*conn).casAbort
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
	if len(p.BuildHashes) > 0 && !slices.Contains(p.BuildHashes, c.srv.cfg.BuildHash) {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "build_hash", "build_hash": c.srv.cfg.BuildHash},
			"this rexd's build hash %s is not one the client asked for; no session was opened", c.srv.cfg.BuildHash)
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
	if n := len(p.WorkspaceRoots); n > maxWorkspaceRoots {
		return nil, protocol.Errorf(protocol.CodeResourceLimit, protocol.ResourceLimitData{Limit: "workspace_roots", Value: maxWorkspaceRoots},
			"session.open names %d workspace roots; at most %d are allowed (each holds a descriptor open for the session's life): name their common parent instead", n, maxWorkspaceRoots)
	}
	if e := c.srv.usage.reserve(1, 0, c.srv.cfg.Limits.MaxConcurrentSessions, 0); e != nil {
		return nil, e
	}
	roots, own := c.srv.roots, false
	if len(p.WorkspaceRoots) > 0 {
		nr, perr := c.srv.roots.narrow(p.WorkspaceRoots)
		if perr != nil {
			c.srv.usage.release(1, 0)
			return nil, perr
		}
		roots, own = nr, true
	}
	grace := time.Duration(p.ResumeGraceMS) * time.Millisecond
	if grace > c.srv.cfg.ResumeGrace || p.ResumeGraceMS > math.MaxInt64/int64(time.Millisecond) {
		grace = c.srv.cfg.ResumeGrace
	}
	id := c.srv.newID
	if grace > 0 {
		id = func(string) string { return c.srv.newResumeID() }
	}
	s := &session{
		id:         id("s"),
		srv:        c.srv,
		conn:       c,
		clientName: p.ClientName,
		roots:      roots,
		ownRoots:   own,
		cwd:        roots.home(),
		limits:     lowerLimits(c.srv.cfg.Limits, p.Limits),
		openedAt:   time.Now(),
		rawOutput:  grace == 0 && slices.Contains(p.RequestedCapabilities, protocol.CapOutputRaw),
		procs:      map[string]*process{},
		ptys:       map[string]*ptyProc{},
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.srv.usage.release(1, 0)
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, nil, "connection is closing")
	}
	c.sessions[s.id] = s
	c.rememberOpenedLocked(req.key, s.id)
	c.mu.Unlock()
	req.session = s
	var token, resumeErr string
	if grace > 0 {
		t, err := c.srv.makeResumable(s, c, grace)
		if err != nil {
			// The session works, as a plain one: the client is told why.
			grace, resumeErr = 0, "this session is not resumable: "+err.Error()
		}
		token = t
	}
	return protocol.SessionOpenResult{
		ResumeGraceMS:  grace.Milliseconds(),
		ResumeToken:    token,
		ResumeError:    resumeErr,
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

// maxWorkspaceRoots bounds the workspace roots of one session: each is a
// descriptor held while the session lives, and descriptors are shared by
// every session, process and file operation of this rexd.
const maxWorkspaceRoots = 64

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
	if p.SessionID == "" {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "session_id is required; call session.open first")
	}
	s := c.takeSession(p.SessionID)
	if s == nil {
		return nil, unknownSession(p.SessionID)
	}
	req.session = s
	killed := s.liveCount()
	detached := s.close(false)
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
