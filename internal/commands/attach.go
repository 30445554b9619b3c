package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/muesli/cancelreader"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// DetachKey is ctrl+]: the byte that hands the terminal back.
const DetachKey = 0x1d

// AttachUsage is the synopsis of `rex attach`.
const AttachUsage = "rex attach TARGET [-- CMD [ARG...]]"

// ParseAttach reads `TARGET [-- CMD...]`.
func ParseAttach(args []string) (target string, cmd []string, err error) {
	for i, a := range args {
		if a == "--" {
			cmd = args[i+1:]
			break
		}
		if target != "" {
			return "", nil, Usagef("unexpected %q; usage: %s", a, AttachUsage)
		}
		target = a
	}
	if target == "" {
		return "", nil, Usagef("which target? usage: %s", AttachUsage)
	}
	return target, cmd, nil
}

// Attach is `rex attach`: a PTY on one target in the real terminal. It
// returns with the remote program's exit status.
func Attach(ctx context.Context, app *App, o IO, args []string) error {
	name, cmd, err := ParseAttach(args)
	if err != nil {
		return err
	}
	targets, err := app.Resolve(name)
	if err != nil {
		return err
	}
	if len(targets) != 1 {
		return Usagef("attach takes one target; %q names %d", name, len(targets))
	}
	in, ok := o.In.(*os.File)
	out, ok2 := o.Out.(*os.File)
	if !ok || !ok2 || !term.IsTerminal(int(in.Fd())) {
		return fmt.Errorf("attach needs a terminal on stdin and stdout; use `rex run` for commands without one")
	}
	t := targets[0]
	cctx, cancel := context.WithTimeout(ctx, app.connectTimeout())
	sess, err := app.Pool.Acquire(cctx, t)
	cancel()
	if err != nil {
		return &ExitError{Code: 255, Err: err}
	}
	defer app.Pool.Release(t)
	code, err := AttachTerminal(ctx, sess, in, out, cmd)
	if err != nil {
		return &ExitError{Code: 255, Err: fmt.Errorf("attach %s: %w", t.Name, err)}
	}
	if code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// ErrDetached is returned by AttachTerminal when the operator pressed the
// detach key.
var ErrDetached = errors.New("detached")

// AttachTerminal opens a PTY running cmd (the login shell when empty) on
// sess, sized like the terminal, puts the terminal in raw mode and forwards
// bytes both ways until the program ends or ctrl+] is pressed; the
// terminal is restored on every way out. It returns the program's exit
// status (128+n for a signal); on detach it returns 0 and ErrDetached is
// not an error for the caller of the CLI.
func AttachTerminal(ctx context.Context, sess *rexclient.Session, in, out *os.File, cmd []string) (int, error) {
	fd := int(in.Fd())
	cols, rows, err := term.GetSize(int(out.Fd()))
	if err != nil {
		cols, rows = protocol.DefaultCols, protocol.DefaultRows
	}
	p := protocol.PTYOpenParams{Cols: cols, Rows: rows, Term: os.Getenv("TERM")}
	if len(cmd) == 1 {
		t := TaskFor(cmd)
		if t.Command != "" {
			p.Shell, p.Command = true, t.Command
		} else {
			p.Argv = cmd
		}
	} else {
		p.Argv = cmd
	}
	pty, err := sess.OpenPTY(ctx, p, rexclient.ExecOptions{Stdout: out})
	if err != nil {
		return 0, err
	}
	state, err := term.MakeRaw(fd)
	if err != nil {
		pty.Close(context.Background())
		return 0, fmt.Errorf("put the terminal in raw mode: %w", err)
	}
	defer term.Restore(fd, state)

	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)

	cr, err := cancelreader.NewReader(in)
	if err != nil {
		pty.Close(context.Background())
		return 0, fmt.Errorf("read the terminal: %w", err)
	}
	defer cr.Close()

	detached := make(chan struct{})
	inputDone := make(chan struct{})
	sender := newInputSender(pty)
	go func() {
		defer close(inputDone)
		buf := make([]byte, 4096)
		for {
			n, err := cr.Read(buf)
			if n > 0 {
				chunk := buf[:n]
				if i := bytes.IndexByte(chunk, DetachKey); i >= 0 {
					sender.send(chunk[:i])
					close(detached)
					return
				}
				sender.send(chunk)
			}
			if err != nil {
				return
			}
		}
	}()

	for {
		select {
		case <-pty.Done():
			cr.Cancel()
			<-inputDone
			exit, err := pty.Wait(context.Background())
			if err != nil {
				return 0, fmt.Errorf("connection lost: %w", err)
			}
			return exitStatus(exit), nil
		case <-detached:
			pty.Close(context.Background())
			return 0, ErrDetached
		case <-winch:
			if c, r, err := term.GetSize(int(out.Fd())); err == nil {
				pty.Resize(ctx, c, r)
			}
		case <-ctx.Done():
			cr.Cancel()
			pty.Close(context.Background())
			return 0, ctx.Err()
		}
	}
}

// exitStatus maps an exit event to a shell-style status.
func exitStatus(e *protocol.ExitEvent) int {
	if e.ExitCode != nil {
		return *e.ExitCode
	}
	if e.Signal != nil {
		if sig := unix.SignalNum("SIG" + *e.Signal); sig != 0 {
			return 128 + int(sig)
		}
		return 128 + int(syscall.SIGTERM)
	}
	return 1
}

// inputSender forwards keystrokes in order without waiting a round trip
// per key: while one pty.input is in flight, later input is collected and
// sent as the next call.
type inputSender struct {
	pty     *rexclient.PTY
	mu      sync.Mutex
	pending []byte
	busy    bool
}

func newInputSender(p *rexclient.PTY) *inputSender { return &inputSender{pty: p} }

func (s *inputSender) send(b []byte) {
	if len(b) == 0 {
		return
	}
	s.mu.Lock()
	s.pending = append(s.pending, b...)
	if s.busy {
		s.mu.Unlock()
		return
	}
	s.busy = true
	s.mu.Unlock()
	go s.loop()
}

func (s *inputSender) loop() {
	for {
		s.mu.Lock()
		if len(s.pending) == 0 {
			s.busy = false
			s.mu.Unlock()
			return
		}
		b := s.pending
		s.pending = nil
		s.mu.Unlock()
		if err := s.pty.Write(context.Background(), b); err != nil {
			s.mu.Lock()
			s.pending, s.busy = nil, false
			s.mu.Unlock()
			return
		}
	}
}
