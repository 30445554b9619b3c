package rexd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// resumeServer is a Server with its own session directory and audit log,
// and a way to connect to it as many times as a test likes.
type resumeServer struct {
	t     *testing.T
	srv   *Server
	audit string
}

func newResumeServer(t *testing.T, tune func(*Config)) *resumeServer {
	t.Helper()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Roots = []string{t.TempDir()}
	cfg.AuditPath = filepath.Join(dir, "audit.log")
	cfg.CASDir = filepath.Join(dir, "cas")
	cfg.SessionDir = filepath.Join(dir, "sessions")
	cfg.Limits = protocol.Limits{MaxProcessesPerSession: 64, MaxConcurrentSessions: 64, MaxFileReadBytes: 1 << 20}
	if tune != nil {
		tune(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		srv.Linger(ctx) // ends what is left
		srv.Close()
	})
	return &resumeServer{t: t, srv: srv, audit: cfg.AuditPath}
}

// transport is one connection to the server: the client's ends of the
// pipes, and Serve's end.
type transport struct {
	r      io.Reader
	w      io.Writer
	closer io.Closer
	served chan struct{}
}

// dropper closes a transport the way a network does: the client's writes
// stop reaching rexd (which sees the end of its input), and rexd's writes
// stop reaching the client.
type dropper struct {
	cw     *io.PipeWriter
	sw     *io.PipeWriter
	served chan struct{}
	once   sync.Once
}

func (d *dropper) Close() error {
	d.once.Do(func() {
		d.cw.Close()
		<-d.served
		d.sw.Close()
	})
	return nil
}

func (rs *resumeServer) connect() *transport {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		rs.srv.Serve(context.Background(), sr, sw)
	}()
	return &transport{r: cr, w: cw, closer: &dropper{cw: cw, sw: sw, served: served}, served: served}
}

func (rs *resumeServer) client() (*rexclient.Client, *transport) {
	tr := rs.connect()
	c := rexclient.NewConn(tr.r, tr.w, tr.closer)
	rs.t.Cleanup(func() { c.Close() })
	return c, tr
}

// lines collects a process's stdout, line by line.
type lines struct {
	mu   sync.Mutex
	buf  strings.Builder
	cond *sync.Cond
}

func newLines() *lines {
	l := &lines{}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	l.cond.Broadcast()
	l.mu.Unlock()
	return len(p), nil
}

// waitFor waits until s was written, or fails the test after a while.
func (l *lines) waitFor(t *testing.T, s string) {
	t.Helper()
	timer := time.AfterFunc(30*time.Second, func() {
		l.mu.Lock()
		l.cond.Broadcast()
		l.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(30 * time.Second)
	l.mu.Lock()
	defer l.mu.Unlock()
	for !strings.Contains(l.buf.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %q; got %q", s, l.buf.String())
		}
		l.cond.Wait()
	}
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// gated prints line-1..line-half, waits for a line on the FIFO gate, then
// prints line-half+1..line-n.
func gated(gate string, half, n int) []string {
	return []string{"sh", "-c", fmt.Sprintf(`i=0; while [ $i -lt %d ]; do i=$((i+1)); echo line-$i; done; read x < "$1"; `+
		`while [ $i -lt %d ]; do i=$((i+1)); echo line-$i; done`, half, n), "gated", gate}
}

func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func openGate(t *testing.T, gate string) {
	t.Helper()
	f, err := os.OpenFile(gate, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("go\n")
	f.Close()
}

// checkOnce checks that out holds line-1..line-n, each exactly once, in
// order.
func checkOnce(t *testing.T, out string, n int) {
	t.Helper()
	got := strings.Fields(out)
	if len(got) != n {
		t.Fatalf("%d lines, want %d:\n%s", len(got), n, out)
	}
	for i, l := range got {
		if l != fmt.Sprintf("line-%d", i+1) {
			t.Fatalf("line %d is %q:\n%s", i+1, l, out)
		}
	}
}

// TestResumeReplaysWhatArrivedWhileDropped: a resumable session's process
// runs on when the connection drops; the output it wrote meanwhile, and
// its exit, come on the resumed connection, every line exactly once.
func TestResumeReplaysWhatArrivedWhileDropped(t *testing.T) {
	rs := newResumeServer(t, nil)
	c, tr := rs.client()
	ctx := context.Background()
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "test", ResumeGraceMS: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Resumable() || s.Info.ResumeGraceMS != 60_000 || s.Info.ResumeToken != "" {
		t.Fatalf("session %s: resumable %v, grace %d, token kept in Info %q", s.ID, s.Resumable(), s.Info.ResumeGraceMS, s.Info.ResumeToken)
	}
	gate := mkfifo(t)
	out := newLines()
	p, err := s.Exec(ctx, protocol.ExecStartParams{Argv: gated(gate, 500, 1000)}, rexclient.ExecOptions{Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "line-500\n")

	dropped := c.Dropped()
	tr.closer.Close()
	<-dropped
	if _, err := s.SessionInfo(ctx); !errors.Is(err, rexclient.ErrDropped) {
		t.Fatalf("a call while dropped: %v, want ErrDropped", err)
	}
	// The second half is written while nobody is connected.
	openGate(t, gate)
	waitAudit(t, rs.audit, `"event":"exec.exit"`)

	tr2 := rs.connect()
	if err := c.Resume(ctx, tr2.r, tr2.w, tr2.closer); err != nil {
		t.Fatalf("resume: %v", err)
	}
	exit, err := p.Wait(ctx)
	if err != nil || exit.ExitCode == nil || *exit.ExitCode != 0 {
		t.Fatalf("exit after resume: %+v, %v", exit, err)
	}
	checkOnce(t, out.String(), 1000)
	// And the session serves on.
	if _, err := s.SessionInfo(ctx); err != nil {
		t.Fatalf("session.info after resume: %v", err)
	}
}

// waitAudit waits until the audit log has a line containing want.
func waitAudit(t *testing.T, path, want string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, want) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log never said %s:\n%s", want, b)
		}
		time.Sleep(20 * time.Millisecond) // polling a file another process writes
	}
}

// TestResumeBufferBlocksTheProcess: while nobody reads, a process's output
// is kept up to the resume buffer and then the process blocks on its
// pipe; nothing is dropped, and everything comes after the resume.
func TestResumeBufferBlocksTheProcess(t *testing.T) {
	rs := newResumeServer(t, func(c *Config) { c.ResumeBuffer = 64 << 10 })
	c, tr := rs.client()
	ctx := context.Background()
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "test", ResumeGraceMS: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	gate := mkfifo(t)
	out := newLines()
	// 20,000 lines are about 200 KB: three times the buffer.
	p, err := s.Exec(ctx, protocol.ExecStartParams{Argv: gated(gate, 1, 20000)}, rexclient.ExecOptions{Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "line-1\n")
	dropped := c.Dropped()
	tr.closer.Close()
	<-dropped
	openGate(t, gate)

	// The process fills the buffer and blocks: its pump waits for room.
	var proc *process
	deadline := time.Now().Add(30 * time.Second)
	for proc == nil || !proc.roomWait.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the pump never waited for room")
		}
		sess := rs.srv.resumableSession(s.ID)
		sess.mu.Lock()
		proc = sess.procs[p.ID]
		sess.mu.Unlock()
		time.Sleep(10 * time.Millisecond) // polling the server's state
	}
	if proc.ended() {
		t.Fatal("the process ended while its output could not be sent")
	}
	tr2 := rs.connect()
	if err := c.Resume(ctx, tr2.r, tr2.w, tr2.closer); err != nil {
		t.Fatal(err)
	}
	if exit, err := p.Wait(ctx); err != nil || *exit.ExitCode != 0 {
		t.Fatalf("exit: %+v %v", exit, err)
	}
	checkOnce(t, out.String(), 20000)
}

// rawResume sends session.resume by hand on a new connection.
func (rs *resumeServer) rawResume(ctx context.Context, p protocol.SessionResumeParams) (*protocol.SessionResumeResult, *protocol.Error) {
	c, _ := rs.client()
	var res protocol.SessionResumeResult
	err := c.Call(ctx, protocol.MethodSessionResume, p, &res)
	var perr *protocol.Error
	if errors.As(err, &perr) {
		return nil, perr
	}
	if err != nil {
		rs.t.Fatal(err)
	}
	return &res, nil
}

func refusal(t *testing.T, perr *protocol.Error) protocol.ResumeRefusal {
	t.Helper()
	if perr == nil {
		t.Fatal("the resume was accepted")
	}
	var r protocol.ResumeRefusal
	if err := json.Unmarshal(perr.Data, &r); err != nil {
		t.Fatalf("refusal data: %v (%s)", err, perr.Message)
	}
	return r
}

// TestResumeRefusals: a wrong token, a stale seq (events the client
// acknowledged), a seq never sent, an unknown session: all refused, and
// the session is still there for the right resume.
func TestResumeRefusals(t *testing.T) {
	rs := newResumeServer(t, nil)
	ctx := context.Background()
	c, tr := rs.connectRaw(t)
	open := c.open(ctx, 60_000)
	c.exec(ctx, open.SessionID, []string{"sh", "-c", "echo one; echo two"})
	c.waitEvent(t, protocol.EventExecExit)
	last := c.lastSeq()
	if last < 2 {
		t.Fatalf("events numbered up to %d, want at least 2 (output and the exit)", last)
	}
	c.ack(open.SessionID, 1)
	tr.closer.Close()
	<-tr.served

	_, perr := rs.rawResume(ctx, protocol.SessionResumeParams{SessionID: open.SessionID, ResumeToken: "not-the-token", LastSeq: last})
	if r := refusal(t, perr); perr.Code != protocol.CodeUnauthorized || r.Reason != protocol.ResumeWrongToken {
		t.Fatalf("wrong token: %d %+v %s", perr.Code, r, perr.Message)
	}
	_, perr = rs.rawResume(ctx, protocol.SessionResumeParams{SessionID: open.SessionID, ResumeToken: open.ResumeToken, LastSeq: 0})
	if r := refusal(t, perr); r.Reason != protocol.ResumeStaleSeq || r.Acked != 1 {
		t.Fatalf("stale seq: %+v %s", r, perr.Message)
	}
	_, perr = rs.rawResume(ctx, protocol.SessionResumeParams{SessionID: open.SessionID, ResumeToken: open.ResumeToken, LastSeq: last + 5})
	if r := refusal(t, perr); r.Reason != protocol.ResumeAheadSeq || r.NextSeq != last+1 {
		t.Fatalf("seq ahead: %+v %s", r, perr.Message)
	}
	_, perr = rs.rawResume(ctx, protocol.SessionResumeParams{SessionID: "s_99-0123456789abcdef", ResumeToken: open.ResumeToken})
	if r := refusal(t, perr); r.Reason != "unknown_session" {
		t.Fatalf("unknown session: %+v %s", r, perr.Message)
	}
	// The right one still works, and replays what was not acknowledged.
	res, perr := rs.rawResume(ctx, protocol.SessionResumeParams{SessionID: open.SessionID, ResumeToken: open.ResumeToken, LastSeq: 1})
	if perr != nil {
		t.Fatalf("the right resume: %s", perr.Message)
	}
	if res.Replayed != int(last-1) || res.NextSeq != last+1 {
		t.Fatalf("resume result %+v, want %d replayed", res, last-1)
	}
	// The token is in no audit line.
	b, _ := os.ReadFile(rs.audit)
	if strings.Contains(string(b), open.ResumeToken) {
		t.Fatal("the resume token is in the audit log")
	}
}

// TestResumeGraceRunsOut: an orphaned session whose grace runs out ends as
// REXD v1 says: its process is stopped, the audit log says why, and a
// late resume is told the same in one sentence.
func TestResumeGraceRunsOut(t *testing.T) {
	rs := newResumeServer(t, func(c *Config) { c.ResumeGrace = 300 * time.Millisecond })
	ctx := context.Background()
	c, tr := rs.connectRaw(t)
	open := c.open(ctx, 60_000)
	if open.ResumeGraceMS != 300 {
		t.Fatalf("granted %d ms, want the config's 300", open.ResumeGraceMS)
	}
	pid := c.exec(ctx, open.SessionID, []string{"sleep", "300"})
	tr.closer.Close()
	<-tr.served
	line := waitAudit(t, rs.audit, `"event":"session.expired"`)
	if !strings.Contains(line, "resume grace of 300ms") || !strings.Contains(line, "stopped 1 process") {
		t.Fatalf("audit: %s", line)
	}
	waitGone(t, pid)
	_, perr := rs.rawResume(ctx, protocol.SessionResumeParams{SessionID: open.SessionID, ResumeToken: open.ResumeToken})
	if r := refusal(t, perr); r.Reason != protocol.ResumeExpired || !strings.Contains(perr.Message, "not resumed within the resume grace of 300ms") {
		t.Fatalf("late resume: %+v %s", r, perr.Message)
	}
}

// waitGone waits for process pid to end and be reaped.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawConn speaks JSON-RPC by hand, to control every number.
type rawConn struct {
	t   *testing.T
	enc *protocol.Encoder
	id  int

	mu     sync.Mutex
	cond   *sync.Cond
	msgs   []*protocol.Message
	maxSeq uint64
}

func (rs *resumeServer) connectRaw(t *testing.T) (*rawConn, *transport) {
	tr := rs.connect()
	c := &rawConn{t: t, enc: protocol.NewEncoder(tr.w)}
	c.cond = sync.NewCond(&c.mu)
	go func() {
		dec := protocol.NewDecoder(tr.r, 0)
		for {
			line, err := dec.ReadLine()
			if err != nil {
				c.mu.Lock()
				c.msgs = append(c.msgs, nil)
				c.cond.Broadcast()
				c.mu.Unlock()
				return
			}
			m, perr := protocol.ParseMessage(line)
			if perr != nil {
				continue
			}
			var seq struct {
				SessionSeq uint64 `json:"session_seq"`
			}
			if m.IsNotification() {
				jsonUnmarshal(m.Params, &seq)
			}
			c.mu.Lock()
			c.msgs = append(c.msgs, m)
			c.maxSeq = max(c.maxSeq, seq.SessionSeq)
			c.cond.Broadcast()
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { tr.closer.Close() })
	return c, tr
}

// call sends a request and waits for its answer.
func (c *rawConn) call(method string, params, result any) {
	c.t.Helper()
	c.id++
	id := fmt.Sprint(c.id)
	m, err := protocol.NewRequest(int64(c.id), method, params)
	if err != nil {
		c.t.Fatal(err)
	}
	c.enc.Encode(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for _, m := range c.msgs {
			if m == nil {
				c.t.Fatalf("%s: the connection ended", method)
			}
			if m.IsResponse() && string(m.ID) == id {
				if m.Error != nil {
					c.t.Fatalf("%s: %s", method, m.Error.Message)
				}
				if result != nil {
					jsonUnmarshal(m.Result, result)
				}
				return
			}
		}
		c.cond.Wait()
	}
}

func (c *rawConn) open(ctx context.Context, graceMS int64) protocol.SessionOpenResult {
	var res protocol.SessionOpenResult
	c.call(protocol.MethodSessionOpen, protocol.SessionOpenParams{ClientName: "raw", ResumeGraceMS: graceMS}, &res)
	if res.ResumeToken == "" {
		c.t.Fatalf("no resume token: %+v", res)
	}
	return res
}

// exec starts argv and returns its pid.
func (c *rawConn) exec(ctx context.Context, sid string, argv []string) int {
	var res protocol.ExecStartResult
	c.call(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: argv}, &res)
	return res.Pid
}

func (c *rawConn) waitEvent(t *testing.T, method string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for _, m := range c.msgs {
			if m == nil {
				t.Fatalf("the connection ended before %s", method)
			}
			if m.Method == method {
				return
			}
		}
		c.cond.Wait()
	}
}

func (c *rawConn) lastSeq() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxSeq
}

// ack acknowledges up to seq, and waits until rexd has read it (a request
// behind it on the connection is answered).
func (c *rawConn) ack(sid string, seq uint64) {
	m, _ := protocol.NewNotification(protocol.MethodSessionAck, protocol.SessionAckParams{SessionID: sid, SessionSeq: seq})
	c.enc.Encode(m)
	c.call(protocol.MethodSessionInfo, protocol.SessionRef{SessionID: sid}, nil)
}

func jsonUnmarshal(b []byte, v any) { _ = json.Unmarshal(b, v) }
