package commands

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
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
	// recorded), written under Lock.
	Notices io.Writer
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
			if opts.Lock != nil { // not in the middle of another target's output
				opts.Lock.Lock()
				defer opts.Lock.Unlock()
			}
			return AskTTY(prompt)
		}
	}
	passwords := &SudoPasswords{Ask: ask}
	dialer := NewDialer(opts, passwords)
	s := &Setup{Store: store, Dialer: dialer, Paths: p, Passwords: passwords, console: opts.Console}
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
		return connectLocalSudo(ctx, path, args, su.User, s.Passwords.Get)
	}
	return fanout.LocalConnector(path, args...).Connect(ctx, t)
}

// App returns an App with a fresh pool; close the pool when done.
func (s *Setup) App(opts fanout.PoolOptions) *App {
	app := &App{
		Pool:      fanout.NewPool(s.Connectors, opts),
		Resolve:   Resolver(s.Store),
		CASDir:    filepath.Join(s.Paths.Cache, "cas"),
		ConfigDir: s.Paths.Config,
		CacheDir:  s.Paths.Cache,
	}
	if !s.console {
		app.AskSecretPassphrase = AskSecretPassphrase
	}
	return app
}

// DeviceRemote is the SSH half of `rex device`.
func (s *Setup) DeviceRemote() DeviceRemote { return SSHDeviceRemote{Dialer: s.Dialer} }

// NewDialer is SSH as the operator's own OpenSSH files configure it, with
// the rexd builds this rex carries (or the rexd beside a development build),
// outside the console a terminal prompt for key passphrases, and the run's
// sudo password (nil: none can be asked).
func NewDialer(opts SetupOptions, passwords *SudoPasswords) *sshx.Dialer {
	sources := []payload.Source{payload.Embedded()}
	if exe, err := os.Executable(); err == nil {
		sources = append(sources, payload.File(runtime.GOOS, runtime.GOARCH, filepath.Join(filepath.Dir(exe), "rexd")))
	}
	o := sshx.Options{
		Payload:  payload.Chain(sources...),
		RexdArgs: fanout.OperatorLimits(),
		OnState:  opts.OnState,
	}
	if !opts.Console {
		o.Passphrase = func(keyPath string) ([]byte, error) {
			if opts.Lock != nil {
				opts.Lock.Lock()
				defer opts.Lock.Unlock()
			}
			return AskPassphrase(keyPath)
		}
	}
	if passwords != nil {
		o.SudoPassword = passwords.Get
	}
	return sshx.NewDialer(o)
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
