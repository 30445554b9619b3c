package commands

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/secrets"
	"github.com/rexconsole/rex/internal/sudo"
	"github.com/rexconsole/rex/internal/version"
)

// BindSudo declares --sudo: the targets' rexd runs through sudo, as root
// (or a device's become_user), pooled apart from the plain connection.
func BindSudo(fs *pflag.FlagSet, b *bool) {
	fs.BoolVar(b, "sudo", false, "run as root (or the device's become_user) through sudo; a password is asked once if wanted")
}

// SudoPasswords asks for the sudo password once per run and gives the
// same one to every target that wants it (as Ansible's become password).
// It keeps it in memory only: for the run, or for Keep.
type SudoPasswords struct {
	// Ask reads the password from the operator: a terminal with echo off,
	// a masked prompt in the console.
	Ask func(prompt string) ([]byte, error)
	// Keep, when set, is how long a password stands after it was given
	// (the console, whose run is the rex server's life, keeps it as long
	// as sudo keeps its own timestamp by default); a decline stands at
	// most declineKeep, long enough for the targets of the command it
	// answered. Zero: for the life of the SudoPasswords (one CLI run).
	Keep time.Duration

	now   func() time.Time // tests move it
	mu    sync.Mutex
	asked bool
	at    time.Time // when it was answered
	pw    []byte
	err   error
}

// ConsoleSudoKeep is Keep in the console: sudo's default timestamp_timeout.
const ConsoleSudoKeep = 5 * time.Minute

// declineKeep is how long a declined password stands when Keep is set:
// the targets of one command that wait on the question get the decline,
// a later command asks again.
const declineKeep = 30 * time.Second

// Get is sshx.Options.SudoPassword: the password, asked for the first
// time it is wanted (and again once its answer has expired).
func (s *SudoPasswords) Get(target, user string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	if s.asked && s.Keep > 0 {
		keep := s.Keep
		if s.err != nil {
			keep = min(keep, declineKeep)
		}
		if now().Sub(s.at) >= keep {
			clear(s.pw)
			s.pw, s.err, s.asked = nil, nil, false
		}
	}
	if !s.asked {
		s.asked = true
		if s.Ask == nil {
			s.err = errors.New("there is no way to ask for it here")
		} else {
			kept := "asked once for this run"
			if s.Keep > 0 {
				kept = fmt.Sprintf("kept %.0f minutes", s.Keep.Minutes())
			}
			s.pw, s.err = s.Ask(fmt.Sprintf("sudo password on %s (for %s; %s): ", target, user, kept))
		}
		s.at = now()
	}
	if s.err != nil {
		return nil, s.err
	}
	return append([]byte(nil), s.pw...), nil
}

// Refused is sshx.Options.SudoRefused: sudo refused pw, so it is
// forgotten and the next target that wants a password asks again, rather
// than piling up failed attempts (which lock accounts) with a typo kept
// for the life of the Setup (the console's: the rex server's).
func (s *SudoPasswords) Refused(pw []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.asked && s.err == nil && bytes.Equal(pw, s.pw) {
		clear(s.pw)
		s.pw, s.asked = nil, false
	}
}

// AskTTY reads a secret from the controlling terminal with echo off;
// without a terminal there is no way to ask.
func AskTTY(prompt string) ([]byte, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, errors.New("there is no terminal to ask for it; allow NOPASSWD in sudoers for the targets, or run rex from a terminal")
	}
	defer tty.Close()
	fmt.Fprint(tty, prompt)
	pw, err := term.ReadPassword(int(tty.Fd()))
	fmt.Fprintln(tty)
	return pw, err
}

// localSudoCloseGrace is how long a local rexd under sudo has to finish
// after its input closes; it cannot be killed from here (it runs as
// another user), so its input closing is what ends it.
const localSudoCloseGrace = 5 * time.Second

// connectLocalSudo starts the local rexd through sudo as user: sudo -n,
// then with the password from passwords when sudo wants one; refused, when
// not nil, is told of a password sudo refused.
func connectLocalSudo(ctx context.Context, rexdPath string, args []string, user string, passwords func(target, user string) ([]byte, error), refused func(pw []byte)) (*fanout.Conn, error) {
	c, err := startLocalSudo(ctx, rexdPath, args, user, nil)
	if errors.Is(err, sudo.ErrPasswordRequired) {
		if passwords == nil {
			return nil, fmt.Errorf("sudo on this machine wants a password for %s and there is no way to ask for it here; allow NOPASSWD for rexd", user)
		}
		pw, perr := passwords(LocalName, user)
		if perr != nil {
			return nil, fmt.Errorf("sudo on this machine wants a password for %s: %v", user, perr)
		}
		c, err = startLocalSudo(ctx, rexdPath, args, user, pw)
		if errors.Is(err, sudo.ErrWrongPassword) && refused != nil {
			refused(pw)
		}
		clear(pw)
	}
	if err != nil {
		var re *sudo.RefusedError
		switch {
		case errors.Is(err, sudo.ErrWrongPassword), errors.Is(err, sudo.ErrPasswordRequired):
			return nil, fmt.Errorf("sudo on this machine refused the password for %s; nothing was done, run again with the right password", user)
		case errors.As(err, &re):
			return nil, fmt.Errorf("sudo on this machine will not run rexd as %s (%s); allow it in sudoers, or drop --sudo", user, re.Said)
		}
		return nil, fmt.Errorf("start the local rexd through sudo as %s: %w", user, err)
	}
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "rex", ClientVersion: version.Version, RequestedCapabilities: []string{protocol.CapOutputRaw}})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("local rexd through sudo: %w", err)
	}
	return &fanout.Conn{Session: s, Closer: c}, nil
}

func startLocalSudo(ctx context.Context, rexdPath string, args []string, user string, password []byte) (*rexclient.Client, error) {
	argv := sudo.Args(user, password != nil, append([]string{rexdPath, "--stdio"}, args...)...)
	cmd := exec.Command("sudo", argv...)
	// Not rex's passphrase: sudo keeps what sudoers lets through, and
	// rexd as root would hand it to every process it starts.
	cmd.Env = secrets.Environ()
	// Its own process group: a ctrl+c meant for rex does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	watch := sudo.NewWatcher()
	cmd.Stderr = watch
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, &sudo.RefusedError{Said: "sudo is not installed"}
		}
		return nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	closer := &sudoCloser{stdin: stdin, exited: exited}
	r := bufio.NewReader(stdout)
	next := func() (string, error) { return r.ReadString('\n') }
	err = sudo.Wait(ctx, next, watch, stdin, password)
	if errors.Is(err, sudo.ErrEnded) {
		select { // all of stderr is read once sudo has ended
		case <-exited:
		case <-time.After(localSudoCloseGrace):
		}
		err = watch.Failure()
	}
	if err != nil {
		closer.Close()
		if errors.Is(err, sudo.ErrNotStarted) {
			return nil, fmt.Errorf("rexd did not start: %s", strings.TrimSpace(watch.Said()))
		}
		return nil, err
	}
	return rexclient.NewConn(r, stdin, closer), nil
}

type sudoCloser struct {
	stdin  io.Closer
	exited chan struct{}
	once   sync.Once
}

func (s *sudoCloser) Close() error {
	s.once.Do(func() {
		s.stdin.Close()
		select {
		case <-s.exited:
		case <-time.After(localSudoCloseGrace):
		}
	})
	return nil
}
