package rexd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// commandSpec is what exec.start and pty.open have in common.
type commandSpec struct {
	argv    []string
	shell   bool
	command string
}

// buildArgv applies the shell rules: argv by default, "/bin/sh -c command"
// only when shell is true, and never both.
func (c *conn) buildArgv(spec commandSpec, allowEmpty bool) ([]string, *protocol.Error) {
	switch {
	case spec.shell:
		if !c.srv.cfg.AllowShell {
			return nil, protocol.Errorf(protocol.CodeUnauthorized, map[string]string{"reason": "shell_disabled"},
				"shell commands are disabled on this rexd (security.allow_shell = false); send argv instead")
		}
		if spec.command == "" {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "shell: true needs a command")
		}
		if len(spec.argv) > 0 {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "give either argv or shell+command, not both")
		}
		return []string{"/bin/sh", "-c", spec.command}, nil
	case spec.command != "":
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "command is only used with shell: true; send argv for a plain command")
	case len(spec.argv) == 0:
		if allowEmpty {
			return nil, nil
		}
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "argv is required and must not be empty")
	}
	for _, a := range spec.argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "argv contains a NUL byte")
		}
	}
	if spec.argv[0] == "" {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "argv[0] is empty")
	}
	return spec.argv, nil
}

// buildEnv is rexd's environment with the request's variables on top.
func buildEnv(extra map[string]string, pwd string) ([]string, *protocol.Error) {
	env := os.Environ()
	keep := env[:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := extra[k]; over || k == "PWD" {
			continue
		}
		keep = append(keep, kv)
	}
	env = keep
	for k, v := range extra {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"name": k},
				"environment variable %q is invalid: names must be non-empty without '=' or NUL", k)
		}
		env = append(env, k+"="+v)
	}
	return append(env, "PWD="+pwd), nil
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// workDir checks cwd against the roots and opens it. The child changes into
// the opened directory through /proc/self/fd, so a symlink swapped in after
// the check cannot move it elsewhere.
func (s *session) workDir(cwd string) (dir string, f *os.File, abs string, perr *protocol.Error) {
	if cwd == "" {
		cwd = s.cwd
	}
	rp, perr := s.roots.resolve(cwd, s.cwd)
	if perr != nil {
		return "", nil, "", perr
	}
	f, err := openDir(rp.root.dir, relOrDot(rp.rel))
	if errors.Is(err, syscall.ENOTDIR) {
		return "", nil, "", protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"cwd": rp.abs},
			"cwd %s is not a directory", rp.abs)
	}
	if err != nil {
		return "", nil, "", s.roots.fsError("open cwd", rp, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.IsDir() {
		f.Close()
		return "", nil, "", protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"cwd": rp.abs},
			"cwd %s is not a directory", rp.abs)
	}
	dir = rp.abs
	if _, err := os.Stat("/proc/self/fd"); err == nil {
		dir = "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	}
	return dir, f, rp.abs, nil
}

// effectiveTimeout applies the session's default and hard limits.
func (s *session) effectiveTimeout(requested int64) time.Duration {
	t := s.limits.DefaultTimeoutMS
	if requested > 0 {
		t = requested
	}
	if h := s.limits.HardTimeoutMS; h > 0 && (t == 0 || t > h) {
		t = h
	}
	if t > math.MaxInt64/int64(time.Millisecond) {
		return 0 // more than a Duration holds: no limit, not a wrapped one
	}
	return time.Duration(t) * time.Millisecond
}

func (s *session) effectiveOutputCap(requested int64) int64 {
	c := s.limits.MaxOutputBytes
	if requested > 0 && (c == 0 || requested < c) {
		c = requested
	}
	if c == 0 {
		return -1
	}
	return c
}

func (c *conn) execStart(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.ExecStartParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	if p.SessionID == "" && len(p.SessionOpenID) > 0 {
		id, e := c.sessionByOpen(p.SessionOpenID)
		if e != nil {
			return nil, e
		}
		p.SessionID = id
	}
	if e := c.session(req, p.SessionID); e != nil {
		return nil, e
	}
	s := req.session
	argv, perr := c.buildArgv(commandSpec{argv: p.Argv, shell: p.Shell, command: p.Command}, false)
	if perr != nil {
		return nil, perr
	}
	var stdin []byte
	if p.Stdin != nil {
		b, err := protocol.DecodeData(*p.Stdin, p.StdinEncoding)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "stdin: %v", err)
		}
		stdin = b
	}
	dir, dirFile, abs, perr := s.workDir(p.Cwd)
	if perr != nil {
		return nil, perr
	}
	defer dirFile.Close()
	if perr := c.srv.checkEnv(p.Env); perr != nil {
		return nil, perr
	}
	env, perr := buildEnv(p.Env, abs)
	if perr != nil {
		return nil, perr
	}
	env = c.srv.childEnv(env)
	path, notFound, perr := c.srv.program(argv[0], abs, env)
	if perr != nil {
		return nil, perr
	}

	s.mu.Lock()
	if e := s.reserveLocked(); e != nil {
		s.mu.Unlock()
		return nil, e
	}
	proc := &process{
		id:        c.srv.newID("p"),
		sess:      s,
		argv:      argv,
		detached:  p.Detach,
		grace:     c.srv.cfg.KillGrace,
		remaining: s.effectiveOutputCap(p.MaxOutputBytes),
		reaped:    make(chan struct{}),
		done:      make(chan struct{}),
	}
	s.procs[proc.id] = proc
	s.mu.Unlock()
	capTotal := proc.remaining

	startErr := notFound
	if startErr == nil {
		startErr = proc.start(path, dir, env)
	} else {
		proc.startedAt = time.Now().UTC()
		startErr = fmt.Errorf("%w: %s", exec.ErrNotFound, argv[0])
	}
	res := protocol.ExecStartResult{ProcessID: proc.id, StartedAt: proc.startedAt, Pid: proc.pid}
	// The response goes out before any event of the process.
	c.finish(req, res, nil)
	req.deferred = true
	if startErr != nil {
		s.notify(protocol.EventExecError, protocol.ErrorEvent{
			SessionID: s.id, ProcessID: proc.id, Code: protocol.CodeInvalidParams,
			Message: fmt.Sprintf("start %s: %v", argv[0], startErr),
		})
		code := 126
		if errors.Is(startErr, exec.ErrNotFound) || errors.Is(startErr, os.ErrNotExist) {
			code = 127
		}
		ev := &protocol.ExitEvent{SessionID: s.id, ProcessID: proc.id, ExitCode: &code}
		proc.mu.Lock()
		proc.exit = ev
		proc.mu.Unlock()
		s.processEnding(proc)
		s.notify(protocol.EventExecExit, ev)
		close(proc.done)
		s.ended(proc.id)
		return nil, nil
	}
	if timeout := s.effectiveTimeout(p.TimeoutMS); timeout > 0 {
		proc.timer = time.AfterFunc(timeout, func() {
			proc.mu.Lock()
			proc.timedOut = true
			proc.mu.Unlock()
			s.notify(protocol.EventExecError, protocol.ErrorEvent{
				SessionID: s.id, ProcessID: proc.id, Code: protocol.CodeTimeout,
				Message: fmt.Sprintf("timed out after %s; the process was stopped", timeout),
			})
			proc.terminate(reasonTimeout)
		})
	}
	if stdin != nil {
		proc.input.push(inputItem{data: stdin, eof: true})
	}
	proc.run(capTotal)
	return nil, nil
}

// start launches the program at path as an exec process with its own
// process group and pipes.
func (p *process) start(path, dir string, env []string) error {
	p.startedAt = time.Now().UTC()
	cmd := &exec.Cmd{Path: path, Args: p.argv, Env: env, Dir: dir,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		outR.Close()
		outW.Close()
		return err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, outW, errW
	err = cmd.Start()
	stdinR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		stdinW.Close()
		outR.Close()
		errR.Close()
		return err
	}
	p.cmd = cmd
	p.pid = cmd.Process.Pid
	if !p.detached {
		p.sess.srv.guard.watch(p.pid) // its group: Setpgid
	}
	p.input = newInputQueue(stdinW)
	p.readers = []io.ReadCloser{outR, errR}
	return nil
}

// run pumps the output and reports the exit.
func (p *process) run(capTotal int64) {
	pumps := make(chan struct{})
	outDone, errDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(outDone)
		p.pump(p.readers[0], protocol.EventExecStdout, &p.bytesOut, capTotal, true)
	}()
	go func() {
		defer close(errDone)
		p.pump(p.readers[1], protocol.EventExecStderr, &p.bytesErr, capTotal, true)
	}()
	go func() { <-outDone; <-errDone; close(pumps) }()
	go p.waitAndReport(pumps, []io.Closer{p.readers[0], p.readers[1]})
}

func (c *conn) execWait(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.ExecWaitParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	if e := c.session(req, p.SessionID); e != nil {
		return nil, e
	}
	proc, perr := req.session.process(p.ProcessID)
	if perr != nil {
		return nil, perr
	}
	var timeout <-chan time.Time
	if p.TimeoutMS != nil {
		if *p.TimeoutMS < 0 {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "timeout_ms must not be negative")
		}
		// Past what a Duration holds (~292 years) is no limit: the
		// product would wrap to a timer that fires at once.
		if *p.TimeoutMS <= math.MaxInt64/int64(time.Millisecond) {
			t := time.NewTimer(time.Duration(*p.TimeoutMS) * time.Millisecond)
			defer t.Stop()
			timeout = t.C
		}
	}
	select {
	case <-proc.done:
	case <-timeout:
	case <-ctx.Done():
		return nil, c.cancelled(req)
	}
	return proc.status(), nil
}

func (c *conn) execKill(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.ExecKillParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	if e := c.session(req, p.SessionID); e != nil {
		return nil, e
	}
	proc, perr := req.session.process(p.ProcessID)
	if perr != nil {
		return nil, perr
	}
	sig, err := parseSignal(p.Signal)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "%v", err)
	}
	if proc.ended() {
		return protocol.OKResult{OK: false}, nil
	}
	switch sig {
	case syscall.SIGTERM:
		proc.terminate(reasonKilled)
	default:
		proc.mu.Lock()
		if sig == syscall.SIGKILL && proc.stopReason == "" {
			proc.stopReason = reasonKilled
		}
		proc.mu.Unlock()
		proc.signal(sig)
	}
	return protocol.OKResult{OK: true}, nil
}

// execInput runs on the connection's reader so input stays in order; the
// answer is sent once the bytes were written.
func (c *conn) execInput(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.ExecInputParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	if e := c.session(req, p.SessionID); e != nil {
		return nil, e
	}
	proc, perr := req.session.process(p.ProcessID)
	if perr != nil {
		return nil, perr
	}
	return c.queueInput(req, proc, p.Data, p.Encoding, p.EOF)
}

func (c *conn) queueInput(req *request, proc *process, data, encoding string, eof bool) (any, *protocol.Error) {
	b, err := protocol.DecodeData(data, encoding)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "data: %v", err)
	}
	ended := func() *protocol.Error {
		return protocol.Errorf(protocol.CodeProcessNotFound, map[string]string{"process_id": proc.id, "reason": "exited"},
			"process %s has ended; it takes no more input", proc.id)
	}
	if proc.ended() || proc.input == nil {
		return nil, ended()
	}
	perr := proc.input.push(inputItem{data: b, eof: eof, done: func(n int, err error) {
		if err != nil && !errors.Is(err, io.ErrClosedPipe) {
			c.finish(req, nil, protocol.Errorf(protocol.CodeProcessNotFound, map[string]string{"process_id": proc.id},
				"write to process %s: %v", proc.id, err))
			return
		}
		c.finish(req, protocol.ExecInputResult{AcceptedBytes: n}, nil)
	}})
	if errors.Is(perr, errProcessEnded) {
		return nil, ended()
	}
	if perr != nil {
		return nil, protocol.Errorf(protocol.CodeResourceLimit, protocol.ResourceLimitData{Limit: "input_queue_bytes", Value: inputQueueBytes},
			"process %s is not reading its input fast enough (at most %d writes and %d bytes wait for it); wait for earlier input to be accepted", proc.id, inputQueueLen, inputQueueBytes)
	}
	req.deferred = true
	return nil, nil
}
