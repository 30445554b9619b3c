package rexd

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/rexconsole/rex/internal/protocol"
)

// ptyProc is a process on a pseudo-terminal; its process is the session
// leader of the terminal, so its pid names every program started on it.
type ptyProc struct {
	id     string
	proc   *process
	master *os.File

	// mu orders closing the master with resizing it: the program's end
	// closes it on its own goroutines while a pty.resize may be under way.
	mu     sync.Mutex
	closed bool
}

// Close closes the terminal's master side, once.
func (t *ptyProc) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	return t.master.Close()
}

// setSize resizes the terminal; ended is true when it is already closed.
func (t *ptyProc) setSize(cols, rows int) (ended bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return true, nil
	}
	// Not pty.Setsize: it takes the master's Fd, which would put it back
	// in blocking mode and out of the poller's hands.
	rc, err := t.master.SyscallConn()
	if err != nil {
		return false, err
	}
	ws := &unix.Winsize{Col: uint16(cols), Row: uint16(rows)}
	if cerr := rc.Control(func(fd uintptr) { err = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, ws) }); cerr != nil {
		return false, cerr
	}
	return false, err
}

// Terminal sizes beyond this are refused: a mistake, not a screen.
const maxTermDim = 10000

func checkSize(cols, rows int) *protocol.Error {
	if cols < 0 || rows < 0 || cols > maxTermDim || rows > maxTermDim {
		return protocol.Errorf(protocol.CodeInvalidParams, nil, "terminal size %dx%d is out of range (1..%d)", cols, rows, maxTermDim)
	}
	return nil
}

func (c *conn) ptyOpen(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.PTYOpenParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	if e := c.session(req, p.SessionID); e != nil {
		return nil, e
	}
	s := req.session
	if e := checkSize(p.Cols, p.Rows); e != nil {
		return nil, e
	}
	argv, perr := c.buildArgv(commandSpec{argv: p.Argv, shell: p.Shell, command: p.Command}, true)
	if perr != nil {
		return nil, perr
	}
	argv0 := ""
	if argv == nil {
		sh := loginShell()
		if !c.srv.cfg.AllowShell {
			return nil, protocol.Errorf(protocol.CodeUnauthorized, map[string]string{"command": sh, "reason": "shell_disabled"},
				"a terminal without argv runs the login shell, and shells are disabled on this rexd (security.allow_shell = false); name a program in argv")
		}
		argv = []string{sh}
		argv0 = "-" + filepath.Base(sh) // a login shell, as sshd starts it
	}
	dir, dirFile, abs, perr := s.workDir(p.Cwd)
	if perr != nil {
		return nil, perr
	}
	defer dirFile.Close()
	extra := map[string]string{}
	for k, v := range p.Env {
		extra[k] = v
	}
	if _, ok := extra["TERM"]; !ok {
		extra["TERM"] = p.Term
		if p.Term == "" {
			extra["TERM"] = protocol.DefaultTerm
		}
	}
	if perr := c.srv.checkEnv(p.Env); perr != nil {
		return nil, perr
	}
	env, perr := buildEnv(extra, abs)
	if perr != nil {
		return nil, perr
	}
	env = c.srv.childEnv(env)
	path, notFound, perr := c.srv.program(argv[0], abs, env)
	if perr != nil {
		return nil, perr
	}
	cols, rows := p.Cols, p.Rows
	if cols == 0 {
		cols = protocol.DefaultCols
	}
	if rows == 0 {
		rows = protocol.DefaultRows
	}

	s.mu.Lock()
	if e := s.reserveLocked(); e != nil {
		s.mu.Unlock()
		return nil, e
	}
	proc := &process{
		id:        c.srv.newID("p"),
		ptyID:     c.srv.newID("t"),
		sess:      s,
		argv:      argv,
		isPTY:     true,
		grace:     c.srv.cfg.KillGrace,
		remaining: -1, // a terminal is interactive: no output cap
		reaped:    make(chan struct{}),
		done:      make(chan struct{}),
	}
	t := &ptyProc{id: proc.ptyID, proc: proc}
	s.ptys[t.id] = t
	s.mu.Unlock()

	err := notFound
	if err == nil {
		cmd := &exec.Cmd{Path: path, Args: append([]string(nil), argv...), Env: env, Dir: dir}
		if argv0 != "" {
			cmd.Args[0] = argv0
		}
		proc.startedAt = time.Now().UTC()
		t.master, err = pty.StartWithAttrs(cmd, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)},
			&syscall.SysProcAttr{Setsid: true, Setctty: true})
		if err == nil {
			// pty leaves the master blocking (it asks for its Fd):
			// hand it to the poller (see pollable), or keep it so.
			if m, perr := pollable(t.master); perr == nil {
				t.master = m
			}
			proc.cmd = cmd
			proc.pid = cmd.Process.Pid
			s.srv.guard.watch(proc.pid) // its session's first group: Setsid
		}
	}
	if err != nil {
		s.mu.Lock()
		delete(s.ptys, t.id)
		s.mu.Unlock()
		s.srv.usage.release(0, 1)
		return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"argv0": argv[0]},
			"start %s on a terminal: %v", argv[0], err)
	}
	proc.input = newInputQueue(nopCloser{t.master})
	c.finish(req, protocol.PTYOpenResult{PTYID: t.id, ProcessID: proc.id, Pid: proc.pid, StartedAt: proc.startedAt}, nil)
	req.deferred = true

	pumps := make(chan struct{})
	go func() {
		defer close(pumps)
		proc.pump(t.master, protocol.EventPTYOutput, &proc.bytesOut, -1, false)
	}()
	go func() {
		proc.waitAndReport(pumps, []io.Closer{t})
	}()
	go func() {
		// Once the program is gone, hang up whatever else still holds the
		// terminal (background jobs), as closing an ssh session does: at
		// once, not after the exit event, which waits for the terminal to
		// be let go of.
		<-proc.reaped
		proc.signal(syscall.SIGHUP)
		proc.signal(syscall.SIGCONT) // a stopped job cannot act on HUP
		<-proc.done
		t.Close()
	}()
	return nil, nil
}

// nopCloser keeps the input queue from closing the master, which the
// output side still reads.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func (c *conn) pty(req *request, sessionID, ptyID string) (*ptyProc, *protocol.Error) {
	if e := c.session(req, sessionID); e != nil {
		return nil, e
	}
	s := req.session
	s.mu.Lock()
	t := s.ptys[ptyID]
	s.mu.Unlock()
	if t == nil {
		return nil, protocol.Errorf(protocol.CodeProcessNotFound, map[string]string{"pty_id": ptyID},
			"no PTY %q in this session", ptyID)
	}
	return t, nil
}

func (c *conn) ptyInput(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.PTYInputParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	t, perr := c.pty(req, p.SessionID, p.PTYID)
	if perr != nil {
		return nil, perr
	}
	return c.queueInput(req, t.proc, p.Data, p.Encoding, false)
}

func (c *conn) ptyResize(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.PTYResizeParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	t, perr := c.pty(req, p.SessionID, p.PTYID)
	if perr != nil {
		return nil, perr
	}
	if p.Cols < 1 || p.Rows < 1 {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "cols and rows must be at least 1")
	}
	if e := checkSize(p.Cols, p.Rows); e != nil {
		return nil, e
	}
	ended, err := t.setSize(p.Cols, p.Rows)
	if ended || t.proc.ended() {
		return nil, protocol.Errorf(protocol.CodeProcessNotFound, map[string]string{"pty_id": t.id, "reason": "exited"},
			"the program on PTY %s has ended", t.id)
	}
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, nil, "resize PTY %s: %v", t.id, err)
	}
	return protocol.OKResult{OK: true}, nil
}

// ptyClose ends the terminal's programs and answers once they are gone (or
// the grace period is over), after the pty.exit event.
func (c *conn) ptyClose(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.PTYCloseParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	t, perr := c.pty(req, p.SessionID, p.PTYID)
	if perr != nil {
		return nil, perr
	}
	if t.proc.ended() {
		return protocol.OKResult{OK: false}, nil
	}
	t.proc.terminate(reasonPTYClose)
	select {
	case <-t.proc.done:
	case <-time.After(c.srv.cfg.KillGrace + 3*time.Second):
	}
	return protocol.OKResult{OK: true}, nil
}
