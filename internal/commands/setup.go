package commands

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/term"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/sshx"
	"github.com/rexconsole/rex/internal/version"
)

// Paths are rex's directories: $XDG_CONFIG_HOME/rex, $XDG_CACHE_HOME/rex
// and $XDG_STATE_HOME/rex.
type Paths struct {
	Config string
	Cache  string
	State  string
}

// Setup is everything a front end needs to reach targets.
type Setup struct {
	Store      *devices.Store
	Connectors Connectors
	Dialer     *sshx.Dialer
	Paths      Paths
	// Passwords is the run's sudo password, asked once when a target's
	// sudo wants one.
	Passwords *SudoPasswords

	console bool
	lock    *sync.Mutex
	// notices is SetupOptions.Notices outside the console: where the
	// CLI's App says what TARGETS folded.
	notices io.Writer
}

// SetupOptions change how targets are reached for one front end.
type SetupOptions struct {
	// Console is set for the full-screen console: no passphrase prompt on
	// the terminal (it would tear the screen; keys must be in ssh-agent).
	Console bool
	// OnState reports SSH progress (connecting, bootstrapping) and how
	// every dial ends (ready, or failed with its error).
	OnState func(target, state string, err error)
	// Lock, when set, is held while the operator is asked something, so
	// that a prompt never lands inside output written under it (IO.Lock).
	Lock *sync.Mutex
	// Notices, when set, receives one line per notice (a host key just
	// recorded), written under Lock; Notice, when set, is told instead
	// (the console shows them in its message area).
	Notices io.Writer
	Notice  func(target, msg string)
	// AskHostKey asks whether to trust a new host key (StrictHostKeyChecking
	// ask). Outside the console it defaults to a question on the terminal.
	AskHostKey func(ctx context.Context, q sshx.HostKeyQuestion) (bool, error)
	// AskSecret asks the operator for a secret (the sudo password) with
	// the prompt given: the console's masked prompt. Outside the console
	// the terminal is asked, with echo off.
	AskSecret func(prompt string) ([]byte, error)
}

// NewSetup opens the registry and prepares the local and SSH connectors.
func NewSetup(p Paths, opts SetupOptions) (*Setup, error) {
	store, err := devices.OpenDefault()
	if err != nil {
		return nil, err
	}
	ask := opts.AskSecret
	if ask == nil && !opts.Console {
		ask = func(prompt string) ([]byte, error) {
			defer locked(opts.Lock)() // not in the middle of another target's output
			return AskTTY(prompt)
		}
	}
	passwords := &SudoPasswords{Ask: ask}
	if opts.Console {
		passwords.Keep = ConsoleSudoKeep
	}
	dialer := NewDialer(opts, passwords, p.Cache)
	s := &Setup{Store: store, Dialer: dialer, Paths: p, Passwords: passwords, console: opts.Console, lock: opts.Lock, notices: opts.Notices}
	s.Connectors = Connectors{
		Local: fanout.ConnectorFunc(s.connectLocal),
		SSH:   SSHConnector{Dialer: dialer},
	}
	return s, nil
}

// connectLocal finds (or installs) the local rexd on first use, so verbs
// that never touch `local` never pay for it.
func (s *Setup) connectLocal(ctx context.Context, t fanout.Target) (*fanout.Conn, error) {
	path, err := payload.LocalRexd(payload.Embedded(), s.Paths.Cache, version.Version)
	if err != nil {
		return nil, err
	}
	args := append(fanout.OperatorLimits(), RootArgs(nil)...)
	if su, ok := t.Spec.(SudoSpec); ok {
		return connectLocalSudo(ctx, path, args, su.User, s.Passwords.Get, s.Passwords.Refused)
	}
	return fanout.LocalConnector(path, args...).Connect(ctx, t)
}

// App returns an App with a fresh pool; close the pool when done.
func (s *Setup) App(opts fanout.PoolOptions) *App {
	var notice func(string)
	if s.notices != nil && !s.console {
		notice = func(msg string) {
			defer locked(s.lock)()
			fmt.Fprintln(s.notices, "rex: "+msg)
		}
	}
	app := &App{
		Resolve:   Resolver(s.Store, notice),
		CASDir:    filepath.Join(s.Paths.Cache, "cas"),
		ConfigDir: s.Paths.Config,
		CacheDir:  s.Paths.Cache,
		StateDir:  s.Paths.State,
	}
	if opts.Secrets == nil {
		opts.Secrets = app.DeviceSecrets
	}
	app.Pool = fanout.NewPool(s.Connectors, opts)
	if !s.console {
		app.AskSecretPassphrase = func(confirm bool) (string, error) {
			defer locked(s.lock)()
			return AskSecretPassphrase(confirm)
		}
	}
	return app
}

// DeviceRemote is the SSH half of `rex device`.
func (s *Setup) DeviceRemote() DeviceRemote { return SSHDeviceRemote{Dialer: s.Dialer} }

// NewDialer is SSH as the operator's own OpenSSH files configure it, with
// the rexd builds this rex carries (or the rexd beside a development build),
// outside the console a terminal prompt for key passphrases, and the run's
// sudo password (nil: none can be asked).
func NewDialer(opts SetupOptions, passwords *SudoPasswords, cacheDir string) *sshx.Dialer {
	sources := []payload.Source{payload.Embedded()}
	if exe, err := os.Executable(); err == nil {
		sources = append(sources, payload.File(runtime.GOOS, runtime.GOARCH, filepath.Join(filepath.Dir(exe), "rexd")))
	}
	o := sshx.Options{
		Payload:    payload.Chain(sources...),
		RexdArgs:   fanout.OperatorLimits(),
		OnState:    opts.OnState,
		Notice:     opts.Notice,
		AskHostKey: opts.AskHostKey,
	}
	if cacheDir != "" {
		// A new rex process runs a cached rexd it verified before
		// without hashing it again (while its file is unchanged).
		o.StampsFile = filepath.Join(cacheDir, "rexd-stamps.json")
	}
	if o.Notice == nil && opts.Notices != nil {
		o.Notice = func(_, msg string) {
			defer locked(opts.Lock)()
			fmt.Fprintln(opts.Notices, msg)
		}
	}
	if !opts.Console {
		o.Passphrase = func(keyPath string) ([]byte, error) {
			defer locked(opts.Lock)()
			return AskPassphrase(keyPath)
		}
		if o.AskHostKey == nil {
			o.AskHostKey = func(ctx context.Context, q sshx.HostKeyQuestion) (bool, error) {
				defer locked(opts.Lock)()
				return AskHostKey(q)
			}
		}
	}
	if passwords != nil {
		o.SudoPassword = passwords.Get
		o.SudoRefused = passwords.Refused
	}
	return sshx.NewDialer(o)
}

// HostKeyQuestion is what the operator is asked about a host key seen for
// the first time (StrictHostKeyChecking ask).
type HostKeyQuestion = sshx.HostKeyQuestion

// locked locks l (when set) and returns its unlock.
func locked(l *sync.Mutex) func() {
	if l == nil {
		return func() {}
	}
	l.Lock()
	return l.Unlock
}

// AskHostKey asks on the controlling terminal, as OpenSSH does, whether to
// trust a host key seen for the first time. As with OpenSSH, pasting the
// fingerprint the operator got from the host's owner is a yes when it is
// this key's; anything else is asked again, five times at most.
func AskHostKey(q sshx.HostKeyQuestion) (bool, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return false, errors.New("there is no terminal to ask on")
	}
	defer tty.Close()
	fmt.Fprintf(tty, "The authenticity of host '%s (%s)' can't be established.\n%s key fingerprint is %s.\n", q.Target, q.Addr, q.KeyType, q.Fingerprint)
	fmt.Fprint(tty, "Are you sure you want to continue connecting (yes/no/[fingerprint])? ")
	r := bufio.NewReader(tty)
	for range 5 {
		line, err := r.ReadString('\n')
		if err != nil {
			return false, fmt.Errorf("read the answer: %w", err)
		}
		answer := strings.TrimSpace(line)
		switch {
		case strings.EqualFold(answer, "yes"), answer == q.Fingerprint:
			return true, nil
		case strings.EqualFold(answer, "no"):
			return false, nil
		}
		fmt.Fprint(tty, "Please type 'yes', 'no' or the fingerprint: ")
	}
	fmt.Fprintln(tty, "No answer after five tries: the key is not trusted.")
	return false, nil
}

// AskPassphrase reads a key's passphrase from the controlling terminal,
// echo off; without a terminal there is no way to ask.
func AskPassphrase(keyPath string) ([]byte, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("%s is encrypted and there is no terminal to ask for its passphrase; add it to ssh-agent", keyPath)
	}
	defer tty.Close()
	fmt.Fprintf(tty, "Enter passphrase for %s: ", keyPath)
	pw, err := term.ReadPassword(int(tty.Fd()))
	fmt.Fprintln(tty)
	return pw, err
}
