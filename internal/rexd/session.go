package rexd

import (
	"io"
	"sort"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// keepFinished is how many ended processes and PTYs a session remembers
// for a late exec.wait or pty call; older ones are forgotten first, so a
// session kept open for hours, starting one after another, stays bounded.
const keepFinished = 256

// session is a client's scoped state: roots, cwd, limits and processes.
type session struct {
	id         string
	srv        *Server
	conn       *conn // the connection serving it; changes on resume (under mu)
	clientName string
	roots      rootSet
	ownRoots   bool
	cwd        string
	limits     protocol.Limits
	openedAt   time.Time
	// rawOutput: the client asked for raw output frames (capability
	// output.raw). A resumable session's events stay JSON lines, which
	// its log keeps, replays and relays as lines.
	rawOutput bool

	mu    sync.Mutex
	procs map[string]*process // exec processes, live and recently ended
	ptys  map[string]*ptyProc // PTYs, live and recently ended
	// finished are the ids of ended processes (process ids, "p_…") and
	// PTYs (PTY ids, "t_…"), oldest first.
	finished []string
	closed   bool
	cas      casSession // streamed cas puts and updates in progress

	// resume is set for a resumable session (resume.go): its events go
	// through its log, and it outlives its connection.
	resume *resumeState

	// holding counts the detached processes of a closed session still
	// running: the session keeps its place in max_concurrent_sessions (and
	// they keep theirs in max_processes_per_session) until the last ends,
	// so opening and closing sessions cannot get around the limits.
	holding int

	// active are the requests whose handlers hold the session (conn.session);
	// drained is closed when the last of them lets go during close.
	active  map[*request]struct{}
	drained chan struct{}
}

// track holds the session for req's handler; false once it is closing.
func (s *session) track(req *request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.active == nil {
		s.active = map[*request]struct{}{}
	}
	s.active[req] = struct{}{}
	return true
}

// untrack lets go of the session once req's handler has returned.
func (s *session) untrack(req *request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.active, req)
	if len(s.active) == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
}

func sortSessions(ss []*session) {
	sort.Slice(ss, func(i, j int) bool { return sessionSeq(ss[i].id) < sessionSeq(ss[j].id) })
}

// liveCount counts processes and PTYs that have not ended.
func (s *session) liveCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.liveLocked()
}

// A process counts until processEnding, which comes before its exit event:
// a client told a process ended may start the next at once.
func (s *session) liveLocked() int {
	n := 0
	for _, p := range s.procs {
		if !p.finished {
			n++
		}
	}
	for _, t := range s.ptys {
		if !t.proc.finished {
			n++
		}
	}
	return n
}

// reserve checks the process limit before a start. The caller holds s.mu.
func (s *session) reserveLocked() *protocol.Error {
	if s.closed {
		return protocol.Errorf(protocol.CodeInvalidParams, nil, "session %s is closed", s.id)
	}
	if max := s.limits.MaxProcessesPerSession; max > 0 && int64(s.liveLocked()) >= max {
		return protocol.Errorf(protocol.CodeResourceLimit,
			protocol.ResourceLimitData{Limit: "max_processes_per_session", Value: max},
			"too many processes in this session: the limit is %d; wait for one to end or kill it", max)
	}
	if s.resume != nil && s.resume.log.full() {
		b := s.resume.log.sessionBound()
		return protocol.Errorf(protocol.CodeResourceLimit,
			protocol.ResourceLimitData{Limit: "resume_buffer_bytes", Value: b},
			"this resumable session keeps %d bytes of events its client has not acknowledged, its most; acknowledge them (session.ack) before starting more", b)
	}
	return s.srv.usage.reserve(0, 1, 0, s.limits.MaxProcessesPerUser)
}

// processEnding records, before its exit event goes out, that p is done:
// the last detached process of a closed session frees the session's slot.
func (s *session) processEnding(p *process) {
	p.exited.Store(true)
	s.mu.Lock()
	p.finished = true
	free := false
	if p.holdsSlot {
		p.holdsSlot = false
		s.holding--
		free = s.holding == 0
	}
	s.mu.Unlock()
	var ds int64
	if free {
		ds = 1
	}
	s.srv.usage.release(ds, 1)
}

// ended records that the process or PTY id finished and forgets the
// oldest ones: a forgotten id is answered as an unknown one. Process and
// PTY ids never collide (newID gives them different prefixes).
func (s *session) ended(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = append(s.finished, id)
	for len(s.finished) > keepFinished {
		delete(s.procs, s.finished[0])
		delete(s.ptys, s.finished[0])
		s.finished = s.finished[1:]
	}
}

func (s *session) process(id string) (*process, *protocol.Error) {
	s.mu.Lock()
	p := s.procs[id]
	s.mu.Unlock()
	if p == nil {
		return nil, protocol.Errorf(protocol.CodeProcessNotFound, map[string]string{"process_id": id},
			"no process %q in this session", id)
	}
	return p, nil
}

// close ends every process of the session. Detached processes are spared
// and returned so the connection can wait for them before it exits.
func (s *session) close(disconnect bool) []*process {
	s.mu.Lock()
	s.closed = true
	var victims, detached []*process
	for _, p := range s.procs {
		if p.finished {
			continue
		}
		if p.detached {
			detached = append(detached, p)
			p.holdsSlot = true
			s.holding++
			continue
		}
		victims = append(victims, p)
	}
	for _, t := range s.ptys {
		if !t.proc.finished {
			victims = append(victims, t.proc)
		}
	}
	free := s.holding == 0
	s.mu.Unlock()
	if free {
		s.srv.usage.release(1, 0)
	}
	for _, p := range victims {
		p.terminate(reasonClosed)
	}
	deadline := time.After(s.srv.cfg.KillGrace + 3*time.Second)
	for _, p := range victims {
		select {
		case <-p.done:
		case <-deadline:
		}
	}
	// Handlers still at work on the session (a long read, a walk) are
	// cancelled, and waited for before its roots close under them.
	s.mu.Lock()
	var drained chan struct{}
	for r := range s.active {
		r.cancel()
	}
	if len(s.active) > 0 {
		s.drained = make(chan struct{})
		drained = s.drained
	}
	s.mu.Unlock()
	if drained != nil {
		select {
		case <-drained:
		case <-deadline:
		}
	}
	s.cas.close() // before the roots its updates write in
	if s.ownRoots {
		s.roots.close()
	}
	if rs := s.resume; rs != nil {
		s.endResumable("")
		rs.log.close()
		s.srv.unregisterResumable(s) // last: rexd may end now
	}
	return detached
}

// sendOutput sends an output event of process p: straight to the
// connection, or for a resumable session through its log (numbered). line
// is scratch space the caller may reuse; the line written is returned.
func (s *session) sendOutput(p *process, method string, ev *protocol.OutputEvent, data, line []byte) []byte {
	if s.resume == nil && s.rawOutput {
		line = protocol.AppendRawOutputLine(line[:0], method, ev, len(data))
		s.conn.enc.WriteFrame(line, [][]byte{data}) // an error means the client left; keep draining
		return line
	}
	if s.resume == nil {
		line = protocol.AppendOutputEvent(line[:0], method, ev, data)
		s.conn.enc.WriteLine(line) // an error means the client left; keep draining
		return line
	}
	s.resume.log.append(p.id, int64(len(data)), func(seq uint64) []byte {
		ev.SessionSeq = seq
		return protocol.AppendOutputEvent(nil, method, ev, data)
	})
	return line
}

// sendSpliced sends the n bytes sp holds as a raw output frame of process
// p, spliced behind its line (the session takes raw frames and is not
// resumable).
func (s *session) sendSpliced(method string, ev *protocol.OutputEvent, sp *splicer, n int, line []byte) []byte {
	line = protocol.AppendRawOutputLine(line[:0], method, ev, n)
	// An error means the client left; the pump keeps draining.
	s.conn.enc.WriteFrameTo(line, func(w io.Writer) error { return sp.send(w, n) })
	return line
}

// notify sends an event of the session (exec.error, exec.exit, pty.exit).
func (s *session) notify(method string, params any) {
	if s.resume == nil {
		s.conn.notify(method, params)
		return
	}
	s.resume.log.append("", 0, func(seq uint64) []byte { return marshalEvent(method, params, seq) })
}

// waitRoom holds back process p's output while a resumable session keeps
// as much of it as it may.
func (s *session) waitRoom(p *process) {
	if s.resume != nil {
		p.roomWait.Store(true)
		s.resume.log.waitRoom(p.id)
		p.roomWait.Store(false)
	}
}

func (s *session) info(caps []string) protocol.SessionInfoResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := protocol.SessionInfoResult{
		SessionID:      s.id,
		ClientName:     s.clientName,
		Cwd:            s.cwd,
		WorkspaceRoots: s.roots.paths(),
		Limits:         s.limits,
		Capabilities:   caps,
		OpenedAt:       s.openedAt,
		Processes:      []protocol.ProcessInfo{},
	}
	add := func(p *process) {
		if p.ended() {
			return
		}
		res.Processes = append(res.Processes, protocol.ProcessInfo{
			ProcessID: p.id, PTYID: p.ptyID, Argv: p.argv, Pid: p.pid,
			StartedAt: p.startedAt, Status: protocol.StatusRunning, Detached: p.detached,
		})
	}
	for _, p := range s.procs {
		add(p)
	}
	for _, t := range s.ptys {
		add(t.proc)
	}
	sort.Slice(res.Processes, func(i, j int) bool { return res.Processes[i].StartedAt.Before(res.Processes[j].StartedAt) })
	return res
}
