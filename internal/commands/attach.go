package commands

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/muesli/cancelreader"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
)

// DetachKey is ctrl+]: the byte that hands the terminal back.
const DetachKey = 0x1d

// AttachUsage is the synopsis of `rex attach`.
const AttachUsage = "rex attach TARGET [--connect-timeout D] [--sudo] [-- CMD [ARG...]]"

// AttachSpec is a parsed `rex attach`.
type AttachSpec struct {
	Target         string
	Cmd            []string
	ConnectTimeout time.Duration
	Sudo           bool
}

// Bind declares the flags of `rex attach`; like run's, they stop at the
// first word that is not one.
func (s *AttachSpec) Bind(fs *pflag.FlagSet) {
	BindConnectTimeout(fs, &s.ConnectTimeout)
	BindSudo(fs, &s.Sudo)
	fs.SetInterspersed(false)
}

// Args reads `TARGET [flags] [-- CMD...]` from what the flags left.
func (s *AttachSpec) Args(fs *pflag.FlagSet, args []string) error {
	if len(args) == 0 || args[0] == "" {
		return Usagef("which target? usage: %s", AttachUsage)
	}
	s.Target = args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return FlagError("rex attach", fs, err)
	}
	if helpAsked(fs) {
		return ErrHelp
	}
	rest := fs.Args()
	if fs.ArgsLenAtDash() < 0 && len(rest) > 0 {
		return Usagef("unexpected %q; usage: %s", rest[0], AttachUsage)
	}
	s.Cmd = rest
	return nil
}

// Attach is `rex attach`: a PTY on one target in the real terminal. It
// returns with the remote program's exit status.
func Attach(ctx context.Context, app *App, o IO, spec AttachSpec) error {
	name, cmd := spec.Target, spec.Cmd
	targets, err := app.Resolve(name)
	if err != nil {
		return err
	}
	if spec.Sudo {
		targets = WithSudo(targets)
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
	t.ConnectTimeout = cmp.Or(spec.ConnectTimeout, app.ConnectTimeout)
	lease, err := app.Pool.Acquire(ctx, t)
	if err != nil {
		return &ExitError{Code: 255, Err: err}
	}
	defer lease.Release()
	code, err := AttachTerminal(ctx, lease, in, out, cmd)
	if errors.Is(err, ErrDetached) {
		// Said aloud because "detach" promises, to tmux and screen users,
		// a shell that keeps running: this one has ended.
		fmt.Fprintf(o.Err, "rex: ctrl+] closed the terminal on %s and ended what ran in it; the console's /attach keeps terminals running\n", t.Name)
		return nil
	}
	if err != nil {
		return &ExitError{Code: 255, Err: fmt.Errorf("attach %s: %w", t.Name, err)}
	}
	if code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// ErrDetached is returned by AttachTerminal and HandOver when the operator
// pressed the detach key.
var ErrDetached = errors.New("detached")

// Terminal is an open remote terminal that a real one can be handed to:
// a *rexclient.PTY, or a console pane that keeps its own copy of the screen.
type Terminal interface {
	// Write sends keystrokes (any bytes).
	Write(ctx context.Context, data []byte) error
	// Resize changes the remote terminal's size.
	Resize(ctx context.Context, cols, rows int) error
	// Done is closed once the remote program has ended or its connection
	// was lost.
	Done() <-chan struct{}
}

// PTYParams are pty.open's parameters for cmd on a cols×rows terminal of
// type termName: the login shell when cmd is empty, one word with shell
// syntax through sh -c, else the argv as given (no shell parses it).
func PTYParams(cmd []string, cols, rows int, termName string) protocol.PTYOpenParams {
	p := protocol.PTYOpenParams{Cols: cols, Rows: rows, Term: termName}
	if len(cmd) == 1 {
		if t := TaskFor(cmd); t.Command != "" {
			p.Shell, p.Command = true, t.Command
			return p
		}
	}
	if len(cmd) > 0 {
		p.Argv = cmd
	}
	return p
}

// AttachTerminal opens a PTY running cmd (the login shell when empty) on
// the lease's session, sized like the terminal, with the target's secrets
// (Lease.OpenPTY), and hands the terminal to it (HandOver) until the
// program ends or ctrl+] is pressed; the terminal is restored on every
// way out. It returns the program's exit status (128+n for a signal); on
// detach it closes the PTY and returns 0 and ErrDetached, which is not an
// error for the caller of the CLI.
func AttachTerminal(ctx context.Context, lease *fanout.Lease, in, out *os.File, cmd []string) (int, error) {
	cols, rows, err := term.GetSize(int(out.Fd()))
	if err != nil {
		cols, rows = protocol.DefaultCols, protocol.DefaultRows
	}
	pty, err := lease.OpenPTY(ctx, PTYParams(cmd, cols, rows, os.Getenv("TERM")), out)
	if err != nil {
		return 0, err
	}
	if err := HandOver(ctx, pty, in, out, []byte{DetachKey}); err != nil {
		pty.Close(context.Background())
		return 0, err
	}
	exit, err := pty.Wait(context.Background())
	if err != nil {
		return 0, fmt.Errorf("connection lost: %w", err)
	}
	return exitStatus(exit), nil
}

// HandOver gives the real terminal to t: it sizes t like the terminal,
// puts the terminal in raw mode and forwards keystrokes to t, in order and
// without a round trip per key, until t's program ends (nil), the operator
// types detach (ErrDetached; the bytes before it are still sent) or ctx
// ends (its error). A window size change resizes t. t's output must
// already go to out. The terminal mode is restored on every way out; t is
// left open.
func HandOver(ctx context.Context, t Terminal, in, out *os.File, detach []byte) error {
	if len(detach) == 0 {
		detach = []byte{DetachKey}
	}
	fd := int(in.Fd())
	if c, r, err := term.GetSize(int(out.Fd())); err == nil {
		t.Resize(ctx, c, r)
	}
	state, err := term.MakeRaw(fd)
	if err != nil {
		return fmt.Errorf("put the terminal in raw mode: %w", err)
	}
	defer term.Restore(fd, state)

	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)

	cr, err := cancelreader.NewReader(in)
	if err != nil {
		return fmt.Errorf("read the terminal: %w", err)
	}
	defer cr.Close()

	detached := make(chan struct{})
	inputDone := make(chan struct{})
	sender := NewInputSender(t)
	go func() {
		defer close(inputDone)
		buf := make([]byte, 4096)
		for {
			n, err := cr.Read(buf)
			if n > 0 {
				chunk := buf[:n]
				if i := bytes.Index(chunk, detach); i >= 0 {
					sender.Send(chunk[:i])
					close(detached)
					return
				}
				sender.Send(chunk)
			}
			if err != nil {
				return
			}
		}
	}()
	// The reader goroutine must be gone before the terminal is restored
	// and handed back, or it would eat the next owner's first keystrokes.
	stopInput := func() {
		cr.Cancel()
		<-inputDone
	}

	for {
		select {
		case <-t.Done():
			stopInput()
			return nil
		case <-detached:
			<-inputDone
			return ErrDetached
		case <-winch:
			if c, r, err := term.GetSize(int(out.Fd())); err == nil {
				t.Resize(ctx, c, r)
			}
		case <-ctx.Done():
			stopInput()
			return ctx.Err()
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

// InputSender forwards keystrokes in order without waiting a round trip
// per key: while one write is in flight, later input is collected and sent
// as the next write. After a write fails, input is dropped; so is input
// past maxPendingInput while the remote side takes nothing (a stalled
// connection must not grow memory without bound).
type InputSender struct {
	w       InputWriter
	mu      sync.Mutex
	pending []byte
	busy    bool
	failed  bool
}

// maxPendingInput bounds the input an InputSender holds unsent.
const maxPendingInput = 8 << 20

// InputWriter takes keystrokes: a PTY.
type InputWriter interface {
	Write(ctx context.Context, data []byte) error
}

// NewInputSender returns a sender writing to w.
func NewInputSender(w InputWriter) *InputSender {
	return &InputSender{w: w}
}

// Send queues b; it never blocks on the network.
func (s *InputSender) Send(b []byte) {
	if len(b) == 0 {
		return
	}
	s.mu.Lock()
	if s.failed {
		s.mu.Unlock()
		return
	}
	if len(s.pending)+len(b) > maxPendingInput {
		s.mu.Unlock()
		return
	}
	s.pending = append(s.pending, b...)
	if s.busy {
		s.mu.Unlock()
		return
	}
	s.busy = true
	s.mu.Unlock()
	go s.loop()
}

func (s *InputSender) loop() {
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
		if err := s.w.Write(context.Background(), b); err != nil {
			s.mu.Lock()
			s.pending, s.busy, s.failed = nil, false, true
			s.mu.Unlock()
			return
		}
	}
}
