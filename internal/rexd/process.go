package rexd

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rexconsole/rex/internal/protocol"
)

// Why a process was stopped by rexd rather than ending on its own.
const (
	reasonKilled   = "killed"
	reasonTimeout  = "timeout"
	reasonOutput   = "output_limit"
	reasonClosed   = "closed"
	reasonPTYClose = "pty_closed"
)

// drainAfterExit is how long output is still read once the process and its
// whole group are gone but something outside the group holds the pipe.
const drainAfterExit = 100 * time.Millisecond

// process is one child of rexd, plain or on a PTY. Its pid is also its
// process group id (exec) or session id (PTY), so signals reach every
// descendant that stayed in the group.
type process struct {
	id        string
	ptyID     string
	sess      *session
	argv      []string
	cmd       *exec.Cmd
	pid       int
	startedAt time.Time
	detached  bool
	isPTY     bool
	grace     time.Duration

	input   *inputQueue
	readers []io.ReadCloser

	bytesOut atomic.Int64
	bytesErr atomic.Int64

	mu            sync.Mutex
	remaining     int64 // output budget; <0 means no cap
	limitExceeded bool
	timedOut      bool
	stopReason    string
	exit          *protocol.ExitEvent

	// finished and holdsSlot are guarded by sess.mu (processEnding).
	finished  bool
	holdsSlot bool

	gone atomic.Bool // the group was seen empty: never signal it again
	// exited is set before the exit event goes out (done only after it), so
	// a client that saw the event never finds the process running.
	exited atomic.Bool
	// roomWait is set while the pump waits for a resumable session's log
	// to make room: output is pending, not lost, so the exit waits.
	roomWait atomic.Bool
	// sending counts the pumps handing output on to the client (which a
	// slow link can hold up): their pipes are not given up on meanwhile.
	sending atomic.Int32
	timer   *time.Timer
	reaped  chan struct{} // closed once the child has been waited for
	done    chan struct{} // closed after the exit event went out
}

func (p *process) ended() bool {
	if p.exited.Load() {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process group (exec) or to every member of the
// process's session (PTY).
func (p *process) signal(sig syscall.Signal) {
	if p.gone.Load() || p.pid <= 0 {
		return
	}
	if err := syscall.Kill(-p.pid, sig); errors.Is(err, syscall.ESRCH) && !p.isPTY {
		p.gone.Store(true)
		return
	}
	if p.isPTY {
		members := sessionMembers(p.pid)
		for _, pid := range members {
			syscall.Kill(pid, sig)
		}
		if len(members) == 0 && !p.alive() {
			p.gone.Store(true)
		}
	}
}

// alive reports whether any process of the group (or PTY session) remains.
func (p *process) alive() bool {
	if p.gone.Load() {
		return false
	}
	if p.isPTY {
		if len(sessionMembers(p.pid)) > 0 {
			return true
		}
	}
	return syscall.Kill(-p.pid, 0) == nil
}

// terminate stops the whole group: TERM (and HUP for a terminal) now, KILL
// after the grace period for whatever is left.
func (p *process) terminate(reason string) {
	p.mu.Lock()
	if p.stopReason == "" {
		p.stopReason = reason
	}
	p.mu.Unlock()
	if p.isPTY {
		p.signal(syscall.SIGHUP)
	}
	p.signal(syscall.SIGTERM)
	p.signal(syscall.SIGCONT) // a stopped job cannot act on TERM
	go func() {
		t := time.NewTimer(p.grace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.groupGone():
			return
		}
		p.signal(syscall.SIGKILL)
	}()
}

// groupGone is closed once the group has no members, polled.
func (p *process) groupGone() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for i := 0; i < 1000 && p.alive(); i++ { // bounded: 1000 × 20 ms
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return ch
}

// take spends n bytes of the output budget and returns how many may be
// sent. The first overrun stops the process.
func (p *process) take(n int) (allowed int, overrun bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.remaining < 0 {
		return n, false
	}
	if int64(n) <= p.remaining {
		p.remaining -= int64(n)
		return n, false
	}
	allowed = int(p.remaining)
	p.remaining = 0
	first := !p.limitExceeded
	p.limitExceeded = true
	return allowed, first
}

// readSize is a read of a pipe (a pipe holds 64 KiB), and maxEvent the most
// output one event carries: a command that fills its pipe gets a pipe and
// a buffer of that size.
const (
	readSize = 64 << 10
	maxEvent = 256 << 10
)

// pump reads one output stream and sends it as events. Chunks never split a
// UTF-8 sequence; bytes past the output cap are read and dropped so the
// child never blocks on a full pipe. coalesce batches a stream of small
// writes (exec output; a terminal's echo must not wait).
func (p *process) pump(r io.Reader, method string, counter *atomic.Int64, limitTotal int64, coalesce bool) {
	s := p.sess
	var lastRead time.Time
	buf := make([]byte, readSize)
	grown := false
	// sp, once set, moves the stream's bytes without reading them (see
	// splicer): for a command that fills its pipe, in a session that takes
	// raw frames straight from its connection.
	var sp *splicer
	defer func() {
		if sp != nil {
			sp.close()
		}
	}()
	// grow gives a command that writes faster than its output goes out a
	// bigger pipe and buffer, once: each read and each event then carries
	// more, which costs less per byte here, in sshd and in the client.
	grow := func() {
		if !grown {
			grown = true
			if growPipe(r, maxEvent) {
				buf = append(buf, make([]byte, maxEvent-len(buf))...)
			}
			if coalesce && s.resume == nil && s.rawOutput {
				sp = newSplicer(r)
			}
		}
	}
	pending := 0
	var seq uint64
	ev := protocol.OutputEvent{SessionID: p.sess.id, ProcessID: p.id, PTYID: p.ptyID}
	var line []byte
	overran := func() {
		s.notify(protocol.EventExecError, protocol.ErrorEvent{
			SessionID: p.sess.id, ProcessID: p.id, Code: protocol.CodeOutputLimitExceeded,
			Message: "output exceeded the limit of " + strconv.FormatInt(limitTotal, 10) + " bytes; the process was stopped",
		})
		p.terminate(reasonOutput)
	}
	send := func(b []byte) {
		if len(b) == 0 {
			return
		}
		p.sending.Add(1)
		defer p.sending.Add(-1)
		allowed, overrun := p.take(len(b))
		if allowed > 0 {
			seq++
			ev.Seq = seq
			line = s.sendOutput(p, method, &ev, b[:allowed], line)
		}
		if overrun {
			overran()
		}
	}
	// sendHeld sends the n bytes sp holds as one event.
	sendHeld := func(n int) {
		p.sending.Add(1)
		defer p.sending.Add(-1)
		allowed, overrun := p.take(n)
		if allowed > 0 {
			seq++
			ev.Seq = seq
			line = s.sendSpliced(method, &ev, sp, allowed, line)
		}
		// Past the cap, or what a client that left did not take. Should
		// rexd's own pipe fail to give it up, its bytes would land in the
		// next frame: the stream is read and written from then on.
		if sp.drop() != nil {
			sp.close()
			sp = nil
		}
		if overrun {
			overran()
		}
	}
	// pace batches a stream of small writes (stdio's 4 KiB) when coalesce
	// is set: it gives the pipe a moment to fill before the next read, so
	// that one event carries many writes instead of one each (every event
	// costs syscalls and wakeups here, in sshd and in the client). What
	// was read has been sent: only the bytes of a burst that is already
	// flowing wait, at most coalesceWait.
	pace := func(n int) {
		if !coalesce || n == 0 {
			return
		}
		now := time.Now()
		if n < coalesceBelow && now.Sub(lastRead) < coalesceWait {
			grow()
			select {
			case <-time.After(coalesceWait):
			case <-p.reaped: // the rest is in the pipe already
			}
			now = time.Now()
		}
		lastRead = now
	}
	for {
		s.waitRoom(p)
		if sp != nil {
			send(buf[:pending]) // a character's start, held for its end: raw frames need not wait
			pending = 0
			n, err := sp.fill()
			if n > 0 {
				counter.Add(int64(n))
				sendHeld(n)
			}
			if err != nil {
				return
			}
			pace(n)
			continue
		}
		n, err := r.Read(buf[pending:])
		if n == len(buf)-pending {
			grow() // the pipe was full
		}
		if n > 0 {
			counter.Add(int64(n))
			total := pending + n
			cut := protocol.CompleteUTF8(buf[:total])
			if cut == 0 && total < 4 {
				pending = total // wait for the rest of the character
			} else {
				if cut == 0 {
					cut = total
				}
				send(buf[:cut])
				pending = copy(buf, buf[cut:total])
			}
		}
		if err != nil {
			send(buf[:pending])
			return
		}
		pace(n)
	}
}

// A read shorter than coalesceBelow that comes within coalesceWait of the
// previous one means a command is streaming in small writes: the pump then
// waits coalesceWait before it reads again.
const (
	coalesceBelow = 16 << 10
	coalesceWait  = 2 * time.Millisecond
)

// waitAndReport waits for the child, drains its output and sends the exit
// event. pumps is closed when every output stream hit EOF; closers are the
// read ends to close if something keeps them open after the group is gone.
func (p *process) waitAndReport(pumps <-chan struct{}, closers []io.Closer) {
	werr := p.cmd.Wait()
	p.sess.srv.guard.forget(p.pid)
	finished := time.Now()
	close(p.reaped)
	drained := false
	for i := 0; i < 100000 && !drained; i++ { // bounded; each turn sleeps
		select {
		case <-pumps:
			drained = true
			continue
		case <-time.After(20 * time.Millisecond):
		}
		if !p.alive() && !p.roomWait.Load() {
			select {
			case <-pumps:
				drained = true
				continue
			case <-time.After(drainAfterExit):
			}
			// Give up on the pipes only when they are empty and no pump is
			// handing output on: what the group wrote before it ended is
			// read to its end even when the client takes it slowly.
			drained = !p.roomWait.Load() && p.sending.Load() == 0 && !unread(closers)
		}
	}
	for _, c := range closers {
		c.Close()
	}
	<-pumps
	if p.timer != nil {
		p.timer.Stop()
	}

	ev := &protocol.ExitEvent{
		SessionID:   p.sess.id,
		ProcessID:   p.id,
		PTYID:       p.ptyID,
		DurationMS:  finished.Sub(p.startedAt).Milliseconds(),
		BytesStdout: p.bytesOut.Load(),
		BytesStderr: p.bytesErr.Load(),
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) || werr == nil {
		ps := p.cmd.ProcessState
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			name := signalName(ws.Signal())
			ev.Signal = &name
		} else {
			code := ps.ExitCode()
			ev.ExitCode = &code
		}
	}
	p.mu.Lock()
	ev.TimedOut = p.timedOut
	ev.OutputLimitExceeded = p.limitExceeded
	p.exit = ev
	p.mu.Unlock()
	method := protocol.EventExecExit
	if p.isPTY {
		method = protocol.EventPTYExit
	}
	p.sess.processEnding(p)
	// Counted among the ended before its exit event goes out, so that a
	// client told of the exit finds the session's window already moved.
	if p.isPTY {
		p.sess.ended(p.ptyID) // the PTY id is what its session keeps it by
	} else {
		p.sess.ended(p.id)
	}
	p.sess.notify(method, ev)
	p.sess.srv.audit.Write(auditEntry{
		SessionID: p.sess.id, ClientName: p.sess.clientName, Event: method,
		Result: map[string]any{"process_id": p.id, "exit_code": ev.ExitCode, "signal": ev.Signal,
			"timed_out": ev.TimedOut, "bytes_stdout": ev.BytesStdout, "bytes_stderr": ev.BytesStderr,
			"duration_ms": ev.DurationMS},
	})
	if p.input != nil {
		p.input.stop()
	}
	close(p.done)
}

// status is the exec.wait view of the process.
func (p *process) status() protocol.ExecWaitResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	res := protocol.ExecWaitResult{
		Status:      protocol.StatusRunning,
		BytesStdout: p.bytesOut.Load(),
		BytesStderr: p.bytesErr.Load(),
	}
	if p.exit == nil {
		return res
	}
	res.ExitCode, res.Signal = p.exit.ExitCode, p.exit.Signal
	res.OutputLimitExceeded = p.exit.OutputLimitExceeded
	switch {
	case p.timedOut:
		res.Status = protocol.StatusTimedOut
	case p.stopReason != "" || p.exit.Signal != nil:
		res.Status = protocol.StatusKilled
	default:
		res.Status = protocol.StatusExited
	}
	return res
}

// inputQueue writes to a process's stdin (or PTY) in order, off the
// connection's reader, so a child that does not read cannot stall rexd.
type inputQueue struct {
	w  io.WriteCloser
	mu sync.Mutex
	ch chan inputItem
	// stopped is closed when the process ended; later input fails.
	stopped chan struct{}
	closed  bool
	queued  int // bytes pushed and not yet written
}

type inputItem struct {
	data []byte
	eof  bool
	done func(n int, err error)
}

// inputQueueLen bounds queued writes per process, and inputQueueBytes
// their bytes: a process that does not read cannot make rexd hold more
// than that (one larger write is taken when nothing else waits).
const (
	inputQueueLen   = 256
	inputQueueBytes = 4 << 20
)

func newInputQueue(w io.WriteCloser) *inputQueue {
	q := &inputQueue{w: w, ch: make(chan inputItem, inputQueueLen), stopped: make(chan struct{})}
	go q.run()
	return q
}

func (q *inputQueue) run() {
	for {
		select {
		case it := <-q.ch:
			var n int
			var err error
			if len(it.data) > 0 {
				n, err = q.w.Write(it.data)
			}
			q.mu.Lock()
			q.queued -= len(it.data)
			q.mu.Unlock()
			if it.eof {
				if cerr := q.w.Close(); err == nil && cerr != nil && !errors.Is(cerr, os.ErrClosed) {
					err = cerr
				}
			}
			if it.done != nil {
				it.done(n, err)
			}
		case <-q.stopped:
			for {
				select {
				case it := <-q.ch:
					if it.done != nil {
						it.done(0, errProcessEnded)
					}
				default:
					return
				}
			}
		}
	}
}

var (
	errProcessEnded   = errors.New("the process has ended")
	errInputQueueFull = errors.New("the input queue is full")
)

// push queues an item. It fails with errProcessEnded once the queue was
// stopped (the process ended, its exit event may already be out) and with
// errInputQueueFull when the items or bytes waiting reach the bounds.
func (q *inputQueue) push(it inputItem) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return errProcessEnded
	}
	if q.queued > 0 && q.queued+len(it.data) > inputQueueBytes {
		return errInputQueueFull
	}
	select {
	case q.ch <- it:
		q.queued += len(it.data)
		return nil
	default:
		return errInputQueueFull
	}
}

func (q *inputQueue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.stopped)
		q.w.Close()
	}
}

// unread reports whether any of the pipes still holds bytes to read.
func unread(pipes []io.Closer) bool {
	for _, c := range pipes {
		f, ok := c.(*os.File)
		if !ok {
			continue
		}
		rc, err := f.SyscallConn()
		if err != nil {
			continue
		}
		n := 0
		rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), fionread) })
		if n > 0 {
			return true
		}
	}
	return false
}
