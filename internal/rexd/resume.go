package rexd

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/usock"
)

// Resumable sessions (capability session.resume, docs/protocol.md).
//
// A session opened with resume_grace_ms numbers its events (session_seq)
// and sends them through an eventLog that keeps every event until the
// client acknowledges it (session.ack). When its connection ends, the
// session is orphaned rather than closed: its processes run on, their
// output accumulates in the log (at most ResumeBuffer unacknowledged bytes
// per process; past that the pump stops reading and the process blocks on
// its pipe, as with a slow reader), and a timer of the grace period starts.
//
// Over SSH, the rexd that held the connection has lost its stdin, so the
// session must be reachable from the rexd a new connection starts: each
// resumable session listens on a Unix socket named after it in the user's
// session directory (0700, checked; peers must be this uid). session.resume
// arriving at a rexd that does not hold the session turns that rexd into a
// relay to the socket, and the rexd that holds it serves the connection.
// When the grace runs out unresumed, REXD v1's rule applies: the session's
// processes are stopped, the audit log says why, and a note left in the
// session directory lets a late resume say so in one sentence.

// Defaults of the extension's limits.
const (
	DefaultResumeGrace  = 10 * time.Minute
	DefaultResumeBuffer = 8 << 20
)

// DefaultSessionDir is $XDG_CACHE_HOME/rexd/sessions, else
// ~/.cache/rexd/sessions.
func DefaultSessionDir() string {
	if d := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "rexd", "sessions")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "rexd", "sessions")
}

// resumeRegistry is the server's resumable sessions and their directory.
type resumeRegistry struct {
	once   sync.Once
	dir    *usock.Dir
	dirErr error

	mu       sync.Mutex
	sessions map[string]*session // live resumable sessions of this process
	sockets  int                 // connections accepted on their sockets, still served
	changed  chan struct{}       // closed and renewed when either changes
	// swept, when set (tests), runs when the sweep of the directory that
	// opening it starts is over.
	swept func()
}

func (s *Server) sessionDir() (*usock.Dir, error) {
	r := &s.resume
	r.once.Do(func() {
		dir := s.cfg.SessionDir
		if dir == "" {
			dir = DefaultSessionDir()
		}
		if dir == "" {
			r.dirErr = errors.New("no session directory: set XDG_CACHE_HOME or HOME")
			return
		}
		r.dir, r.dirErr = usock.OpenPrivate(dir)
		if r.dirErr == nil {
			go s.sweepTombstones()
		}
	})
	return r.dir, r.dirErr
}

// notifyLocked wakes Linger. r.mu is held.
func (r *resumeRegistry) notifyLocked() {
	if r.changed != nil {
		close(r.changed)
	}
	r.changed = make(chan struct{})
}

func (s *Server) registerResumable(sess *session) {
	r := &s.resume
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions == nil {
		r.sessions = map[string]*session{}
	}
	r.sessions[sess.id] = sess
	r.notifyLocked()
}

func (s *Server) unregisterResumable(sess *session) {
	r := &s.resume
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions[sess.id] == sess {
		delete(r.sessions, sess.id)
		r.notifyLocked()
	}
}

func (s *Server) resumableSession(id string) *session {
	r := &s.resume
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessions[id]
}

// Linger waits, after the connection Serve was serving has ended, for the
// resumable sessions of this process to be resumed and closed, or to
// expire; it returns at once when there are none. When ctx ends first,
// every one of them is closed (their processes stopped) before it returns.
func (s *Server) Linger(ctx context.Context) {
	r := &s.resume
	for {
		r.mu.Lock()
		if len(r.sessions) == 0 && r.sockets == 0 {
			r.mu.Unlock()
			return
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			r.mu.Lock()
			var all []*session
			for _, sess := range r.sessions {
				all = append(all, sess)
			}
			r.mu.Unlock()
			for _, sess := range all {
				sess.endResumable("rexd was stopped")
				sess.close(true)
			}
			return
		}
	}
}

// resumeState is what a resumable session has beyond a plain one.
type resumeState struct {
	grace    time.Duration
	tokenSum [sha256.Size]byte
	log      *eventLog
	ln       *net.UnixListener

	mu         sync.Mutex
	orphaned   bool
	ended      bool
	timer      *time.Timer
	orphanedAt time.Time
	// endReason and endedAt say why and when the session ended, for a
	// resume that comes before the tombstone is written.
	endReason string
	endedAt   time.Time
	// expiring, when set (tests), runs in expire once the session is
	// claimed, before it is ended.
	expiring func()
}

// newResumeID names a resumable session: its number, and random bytes so
// that the name (which is also its socket's) is unique across processes.
func (s *Server) newResumeID() string {
	var b [8]byte
	rand.Read(b[:])
	return s.newID("s") + "-" + hex.EncodeToString(b[:])
}

// makeResumable gives a new session its token, log and socket. The
// session is served by c from now on.
func (s *Server) makeResumable(sess *session, c *conn, grace time.Duration) (token string, err error) {
	dir, err := s.sessionDir()
	if err != nil {
		return "", err
	}
	ln, err := dir.Listen(sess.id + ".sock")
	if err != nil {
		return "", err
	}
	var raw [32]byte
	rand.Read(raw[:])
	token = base64.RawURLEncoding.EncodeToString(raw[:])
	limit := s.cfg.ResumeBuffer
	if limit <= 0 {
		limit = DefaultResumeBuffer
	}
	rs := &resumeState{grace: grace, tokenSum: sha256.Sum256([]byte(token)), log: newEventLog(limit), ln: ln}
	sess.resume = rs
	s.registerResumable(sess)
	out := rs.log.attach(c)
	go rs.log.run(out)
	go s.acceptResumes(ln)
	return token, nil
}

// acceptResumes serves connections on a session's socket (from the rexd
// that a new connection started, relaying) until the listener closes.
// A peer of another uid is refused before anything is read.
func (s *Server) acceptResumes(ln *net.UnixListener) {
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		if err := usock.SameUser(c); err != nil {
			s.audit.Write(auditEntry{Event: "session.resume_refused", Error: &auditError{
				Code: protocol.CodeUnauthorized, Message: "a connection to a session's socket was refused: " + err.Error()}})
			c.Close()
			continue
		}
		r := &s.resume
		r.mu.Lock()
		r.sockets++
		r.notifyLocked()
		r.mu.Unlock()
		go func() {
			defer func() {
				c.Close()
				r.mu.Lock()
				r.sockets--
				r.notifyLocked()
				r.mu.Unlock()
			}()
			s.serve(s.life, c, c, true)
		}()
	}
}

// orphan keeps the session after its connection c ended: its processes
// run on and its events wait in the log for grace.
func (sess *session) orphan(c *conn) {
	rs := sess.resume
	rs.log.detach(c)
	rs.mu.Lock()
	// A resume may have moved the session to another connection since c's
	// shutdown found it: that one holds it now (sessionResume moves it
	// under rs.mu).
	sess.mu.Lock()
	moved := sess.conn != c
	sess.mu.Unlock()
	if rs.ended || rs.orphaned || moved {
		rs.mu.Unlock()
		return
	}
	rs.orphaned, rs.orphanedAt = true, time.Now()
	rs.timer = time.AfterFunc(rs.grace, sess.expire)
	rs.mu.Unlock()
	sess.srv.audit.Write(auditEntry{SessionID: sess.id, ClientName: sess.clientName, Event: "session.orphaned",
		Result: map[string]any{"resume_grace_ms": rs.grace.Milliseconds(), "processes": sess.liveCount()}})
}

// expire ends an orphaned session whose grace ran out: REXD v1's rule.
func (sess *session) expire() {
	rs := sess.resume
	n := sess.liveCount()
	reason := fmt.Sprintf("its connection was not resumed within the resume grace of %s, so rexd stopped %s (REXD v1's disconnect rule)",
		rs.grace, plural(n, "process", "processes"))
	rs.mu.Lock()
	if !rs.orphaned || rs.ended {
		rs.mu.Unlock()
		return
	}
	// Claimed in the critical section that checked: a session.resume
	// that lands from here on is refused (it looks at ended as it moves
	// the session), where before it was answered and then closed under
	// its client.
	rs.endLocked(reason)
	hook := rs.expiring
	rs.mu.Unlock()
	if hook != nil {
		hook()
	}
	sess.leaveTombstone(reason)
	sess.srv.audit.Write(auditEntry{SessionID: sess.id, ClientName: sess.clientName, Event: "session.expired",
		Error:  &auditError{Code: protocol.CodeInvalidParams, Message: "session " + sess.id + " expired: " + reason},
		Result: map[string]any{"processes_stopped": n}})
	sess.close(true)
}

// endResumable marks the session as ended for good: no resume from now on.
// reason, when not empty, is left in the session directory for a late
// session.resume to report. The session stays registered (rexd stays up)
// until close has stopped its processes.
func (sess *session) endResumable(reason string) {
	rs := sess.resume
	rs.mu.Lock()
	if rs.ended {
		rs.mu.Unlock()
		return
	}
	rs.endLocked(reason)
	rs.mu.Unlock()
	sess.leaveTombstone(reason)
}

// endLocked marks the session ended. rs.mu is held.
func (rs *resumeState) endLocked(reason string) {
	rs.ended, rs.endReason, rs.endedAt = true, reason, time.Now().UTC()
	if rs.timer != nil {
		rs.timer.Stop()
	}
}

// leaveTombstone closes the session's socket and, when reason is not
// empty, leaves it in the session directory for a later rexd's resume.
// The note comes first, so a resume never finds neither; the socket's
// name goes before its listener closes, so another rexd's sweep never
// sees a live rexd's socket refuse a connection (it would take it for
// the socket of a dead one).
func (sess *session) leaveTombstone(reason string) {
	if dir, err := sess.srv.sessionDir(); err == nil {
		if reason != "" {
			b, _ := json.Marshal(tombstone{Reason: reason, At: sess.resume.endedAt})
			dir.WriteFile(sess.id+".ended", b)
		}
		dir.Remove(sess.id + ".sock")
	}
	sess.resume.ln.Close()
}

// goneLocked is the refusal of a resume of the ended session. rs.mu is
// held.
func (rs *resumeState) goneLocked(s *Server, id string) *protocol.Error {
	if rs.endReason != "" {
		return resumeRefused(id, protocol.ResumeExpired, protocol.CodeInvalidParams,
			"session %s ended at %s: %s", id, rs.endedAt.Format(time.RFC3339), rs.endReason)
	}
	return s.goneSession(id)
}

// tombstone is what a session that expired leaves behind, or what is
// left for one whose rexd died (Gone), in place of its stale socket.
type tombstone struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	Gone   bool      `json:"gone,omitempty"`
}

// goneSentence is the refusal of a session whose rexd died.
const goneSentence = "session %s is gone: the rexd that held it has died, and its processes with it"

// buryStale replaces the socket of session id, which no process listens
// on any more (its rexd was killed), by a note saying so, so that a late
// resume still gets that sentence. A note already there (the session
// ended and said why) is kept.
func buryStale(dir *usock.Dir, id string) {
	b, _ := json.Marshal(tombstone{At: time.Now().UTC(), Gone: true})
	dir.WriteFileNew(id+".ended", b)
	dir.Remove(id + ".sock")
}

// tombstoneKeep bounds how long a tombstone is kept.
const tombstoneKeep = 24 * time.Hour

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func resumeRefused(id, reason string, code int, format string, args ...any) *protocol.Error {
	return protocol.Errorf(code, protocol.ResumeRefusal{SessionID: id, Reason: reason}, format, args...)
}

// sessionResume hands a session of this process to connection c.
func (c *conn) sessionResume(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.SessionResumeParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	sess := c.srv.resumableSession(p.SessionID)
	if sess == nil {
		return nil, c.srv.goneSession(p.SessionID)
	}
	rs := sess.resume
	sum := sha256.Sum256([]byte(p.ResumeToken))
	if subtle.ConstantTimeCompare(sum[:], rs.tokenSum[:]) != 1 {
		return nil, resumeRefused(sess.id, protocol.ResumeWrongToken, protocol.CodeUnauthorized,
			"resume refused: the token does not match session %s", sess.id)
	}
	// The session moves to c, and an old connection still up loses it,
	// in one critical section with the check that it has not ended: so
	// that an expiry cannot end it after this answer (see expire), and
	// the old connection's shutdown, which may have found the session in
	// its map, cannot orphan it (see orphan).
	rs.mu.Lock()
	if rs.ended {
		perr := rs.goneLocked(c.srv, sess.id)
		rs.mu.Unlock()
		return nil, perr
	}
	out, perr := rs.log.resume(c, p.LastSeq, sess.id)
	if perr != nil {
		rs.mu.Unlock()
		return nil, perr
	}
	if rs.timer != nil {
		rs.timer.Stop()
	}
	rs.orphaned = false
	sess.mu.Lock()
	old := sess.conn
	sess.conn = c
	sess.mu.Unlock()
	rs.mu.Unlock()
	if old != c {
		old.mu.Lock()
		if old.sessions[sess.id] == sess {
			delete(old.sessions, sess.id)
		}
		old.mu.Unlock()
	}
	c.mu.Lock()
	c.sessions[sess.id] = sess
	c.mu.Unlock()
	req.session = sess
	info := sess.info(c.srv.capabilities())
	res := protocol.SessionResumeResult{
		SessionID: sess.id, Replayed: int(out.pending()), NextSeq: out.next(),
		ResumeGraceMS: rs.grace.Milliseconds(), Processes: info.Processes,
	}
	// The answer goes out before the replayed events.
	c.finish(req, res, nil)
	req.deferred = true
	go rs.log.run(out)
	return nil, nil
}

// goneSession is the answer to resuming a session this process does not
// hold and no socket leads to: expired (with the reason it left), or
// unknown.
func (s *Server) goneSession(id string) *protocol.Error {
	if dir, err := s.sessionDir(); err == nil && validResumeID(id) {
		if b, err := dir.ReadFile(id + ".ended"); err == nil {
			var t tombstone
			if json.Unmarshal(b, &t) == nil && t.Gone {
				return resumeRefused(id, protocol.ResumeGone, protocol.CodeInvalidParams, goneSentence, id)
			}
			if t.Reason != "" {
				return resumeRefused(id, protocol.ResumeExpired, protocol.CodeInvalidParams,
					"session %s ended at %s: %s", id, t.At.Format(time.RFC3339), t.Reason)
			}
		}
	}
	return resumeRefused(id, "unknown_session", protocol.CodeInvalidParams,
		"unknown session %q: no rexd of this user holds it (it was closed, or belongs to another user)", id)
}

// validResumeID reports whether id can name a file in the session
// directory: what a resumable session's id looks like, and nothing that
// could leave the directory.
func validResumeID(id string) bool {
	if !strings.HasPrefix(id, "s_") || len(id) > 64 {
		return false
	}
	for _, r := range id[2:] {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r == '-') {
			return false
		}
	}
	return strings.Contains(id, "-")
}

// relayResume is session.resume arriving at a rexd that does not hold the
// session: the first request of a connection, it connects to the session's
// socket and relays the whole connection there (this line included). It
// returns the socket, or the error to answer with.
func (c *conn) relayResume(msg *protocol.Message) (*net.UnixConn, *protocol.Error) {
	var p protocol.SessionResumeParams
	if e := decode(msg.Params, &p); e != nil {
		return nil, e
	}
	if !validResumeID(p.SessionID) {
		return nil, c.srv.goneSession(p.SessionID)
	}
	c.mu.Lock()
	first := len(c.sessions) == 0 && len(c.inflight) == 0
	c.mu.Unlock()
	if !first {
		return nil, resumeRefused(p.SessionID, protocol.ResumeNotFirst, protocol.CodeInvalidRequest,
			"session %s is held by another rexd process: resume it as the first request of a new connection", p.SessionID)
	}
	dir, err := c.srv.sessionDir()
	if err != nil {
		return nil, resumeRefused(p.SessionID, "unknown_session", protocol.CodeInvalidParams,
			"cannot look for session %s: %v", p.SessionID, err)
	}
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	sock, err := dir.Dial(ctx, p.SessionID+".sock")
	switch {
	case err == nil:
		return sock, nil
	case usock.IsStale(err):
		// Its rexd died without a word (killed): nothing runs for it.
		buryStale(dir, p.SessionID)
		return nil, resumeRefused(p.SessionID, protocol.ResumeGone, protocol.CodeInvalidParams, goneSentence, p.SessionID)
	case errors.Is(err, usock.ErrOtherUser):
		return nil, resumeRefused(p.SessionID, "unknown_session", protocol.CodeUnauthorized,
			"resume refused: session %s is held by another user", p.SessionID)
	}
	return nil, c.srv.goneSession(p.SessionID)
}

// staleSocketAge is how old a socket must be before a sweep tries it: a
// socket just bound refuses connections until its rexd listens on it.
const staleSocketAge = time.Minute

// sweepTombstones removes notes of sessions that ended long ago, and
// replaces by a note the sockets no process listens on any more (their
// rexd was killed): a connection to one is refused. A live rexd's socket
// accepts it (and the connection, ending at once, is served as nothing).
func (s *Server) sweepTombstones() {
	defer func() {
		if s.resume.swept != nil {
			s.resume.swept()
		}
	}()
	dir, err := s.sessionDir()
	if err != nil {
		return
	}
	entries, err := os.ReadDir(dir.Path())
	if err != nil {
		return
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".ended"):
			if time.Since(fi.ModTime()) > tombstoneKeep {
				dir.Remove(name)
			}
		case strings.HasSuffix(name, ".sock") && fi.Mode()&os.ModeSocket != 0:
			id := strings.TrimSuffix(name, ".sock")
			if !validResumeID(id) || time.Since(fi.ModTime()) < staleSocketAge || s.resumableSession(id) != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(s.life, 5*time.Second)
			c, err := dir.Dial(ctx, name)
			cancel()
			if err == nil {
				c.Close()
			} else if usock.IsStale(err) {
				buryStale(dir, id)
			}
		}
	}
}

// eventLog is the outgoing events of a resumable session: numbered, kept
// until acknowledged, written to the attached connection by a sender of
// its own so that a dead connection's blocked write holds up nothing.
type eventLog struct {
	mu     sync.Mutex
	cond   *sync.Cond
	events []loggedEvent // seq first, first+1, …
	first  uint64        // session_seq of events[0]; everything before is acknowledged
	nextSq uint64        // session_seq of the next event
	held   map[string]int64
	limit  int64
	// kept is the bytes of every event line kept; a client that does not
	// acknowledge cannot make it grow past sessionBound: output waits, and
	// new processes are refused (ended processes' output and exit events
	// would otherwise pile up without end).
	kept   int64
	closed bool
	out    *sender
	// sent is the last session_seq written to any connection: a client
	// can have no event after it.
	sent uint64
}

type loggedEvent struct {
	line []byte
	proc string
	n    int64
}

// sessionBuffers is how many processes' worth of unacknowledged events
// (resume_buffer_bytes each) a resumable session keeps in all.
const sessionBuffers = 4

// sessionBound is the most a session's log keeps unacknowledged.
func (l *eventLog) sessionBound() int64 { return sessionBuffers * l.limit }

// sender writes the log's events to one connection from cursor on.
type sender struct {
	l       *eventLog
	c       *conn
	cursor  uint64 // the next session_seq to write
	stopped bool
}

func newEventLog(limit int64) *eventLog {
	l := &eventLog{first: 1, nextSq: 1, held: map[string]int64{}, limit: limit}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// append numbers an event and keeps it; build makes its line for the
// number. n is the output bytes it holds for proc.
func (l *eventLog) append(proc string, n int64, build func(seq uint64) []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed && l.out == nil {
		return // nobody can ever read it
	}
	seq := l.nextSq
	l.nextSq++
	line := build(seq)
	l.events = append(l.events, loggedEvent{line: line, proc: proc, n: n})
	l.kept += int64(len(line))
	if n > 0 {
		l.held[proc] += n
	}
	l.cond.Broadcast()
}

// waitRoom blocks a process's pump while its unacknowledged output is at
// the limit; the process then blocks on its pipe.
func (l *eventLog) waitRoom(proc string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.closed && (l.held[proc] >= l.limit || l.kept >= l.sessionBound()) {
		l.cond.Wait()
	}
}

// full says whether the log keeps as much as the session may: the client
// has not acknowledged what it was sent.
func (l *eventLog) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.kept >= l.sessionBound()
}

// ack forgets the events up to seq, which the client has; never past what
// was sent to it.
func (l *eventLog) ack(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.out != nil && seq >= l.out.cursor {
		seq = l.out.cursor - 1
	}
	l.dropLocked(seq)
}

func (l *eventLog) dropLocked(seq uint64) {
	if seq < l.first {
		return
	}
	k := int(min(seq-l.first+1, uint64(len(l.events))))
	for _, e := range l.events[:k] {
		l.kept -= int64(len(e.line))
		if e.n > 0 {
			if l.held[e.proc] -= e.n; l.held[e.proc] <= 0 {
				delete(l.held, e.proc)
			}
		}
	}
	l.events = append(l.events[:0:0], l.events[k:]...)
	l.first += uint64(k)
	l.cond.Broadcast()
}

// attach starts sending to c from the first event on (a new session).
func (l *eventLog) attach(c *conn) *sender {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out = &sender{l: l, c: c, cursor: l.first}
	return l.out
}

// resume checks last against the log and starts sending to c after it;
// the connection it was sending to before loses it.
func (l *eventLog) resume(c *conn, last uint64, id string) (*sender, *protocol.Error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if last+1 < l.first {
		return nil, protocol.Errorf(protocol.CodeInvalidParams,
			protocol.ResumeRefusal{SessionID: id, Reason: protocol.ResumeStaleSeq, Acked: l.first - 1},
			"resume refused: events up to %d were acknowledged and are gone, so a resume from %d would miss some", l.first-1, last)
	}
	if last > l.sent {
		return nil, protocol.Errorf(protocol.CodeInvalidParams,
			protocol.ResumeRefusal{SessionID: id, Reason: protocol.ResumeAheadSeq, NextSeq: l.sent + 1},
			"resume refused: event %d was never sent (the next is %d)", last, l.sent+1)
	}
	l.dropLocked(last)
	if l.out != nil {
		l.out.stopped = true
	}
	l.out = &sender{l: l, c: c, cursor: last + 1}
	l.cond.Broadcast()
	return l.out, nil
}

// detach stops sending to c.
func (l *eventLog) detach(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.out != nil && l.out.c == c {
		l.out.stopped = true
		l.out = nil
	}
	l.cond.Broadcast()
}

// close ends the log: pumps no longer wait for room.
func (l *eventLog) close() {
	l.mu.Lock()
	l.closed = true
	l.cond.Broadcast()
	l.mu.Unlock()
}

// waitSent waits until every event logged so far was written to the
// connection (or there is none to write it to): a method that waits for a
// process answers after its exit event.
func (l *eventLog) waitSent() {
	l.mu.Lock()
	defer l.mu.Unlock()
	target := l.nextSq
	for l.out != nil && !l.out.stopped && l.out.cursor < target {
		l.cond.Wait()
	}
}

func (o *sender) pending() uint64 {
	o.l.mu.Lock()
	defer o.l.mu.Unlock()
	return o.l.nextSq - o.cursor
}

func (o *sender) next() uint64 {
	o.l.mu.Lock()
	defer o.l.mu.Unlock()
	return o.l.nextSq
}

// run writes events to the sender's connection as they come, until the
// sender is stopped or its connection fails.
func (l *eventLog) run(o *sender) {
	var batch [][]byte
	for {
		l.mu.Lock()
		for !o.stopped && o.cursor >= l.nextSq && !l.closed {
			l.cond.Wait()
		}
		if o.stopped || o.cursor >= l.nextSq {
			l.mu.Unlock()
			return
		}
		batch = batch[:0]
		for i := int(o.cursor - l.first); i < len(l.events); i++ {
			batch = append(batch, l.events[i].line)
		}
		l.mu.Unlock()
		for _, line := range batch {
			err := o.c.enc.WriteLine(line)
			l.mu.Lock()
			if err == nil {
				// Counted even when the sender was stopped meanwhile: the
				// client may have it, and may resume from it.
				o.cursor++
				l.sent = max(l.sent, o.cursor-1)
			}
			if err != nil || o.stopped {
				o.stopped = true
				l.cond.Broadcast()
				l.mu.Unlock()
				return
			}
			l.cond.Broadcast()
			l.mu.Unlock()
		}
	}
}

// marshalEvent is the line of a notification whose params carry seq.
func marshalEvent(method string, params any, seq uint64) []byte {
	switch v := params.(type) {
	case protocol.ErrorEvent:
		v.SessionSeq = seq
		params = v
	case *protocol.ExitEvent:
		c := *v
		c.SessionSeq = seq
		params = &c
	}
	m, err := protocol.NewNotification(method, params)
	if err != nil {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return append(b, '\n')
}

// sessionAck is the session.ack notification.
func (c *conn) sessionAck(params json.RawMessage) {
	var p protocol.SessionAckParams
	if json.Unmarshal(params, &p) != nil {
		return
	}
	c.mu.Lock()
	sess := c.sessions[p.SessionID]
	c.mu.Unlock()
	if sess != nil && sess.resume != nil {
		sess.resume.log.ack(p.SessionSeq)
	}
}
