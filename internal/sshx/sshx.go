// Package sshx reaches targets over SSH from inside rex's own process (no
// ssh binary, no ControlMaster): it dials as OpenSSH would, honouring
// ~/.ssh/config, known_hosts, ssh-agent and ProxyJump, then bootstraps rexd
// over SFTP onto the target and hands back a ready REXD client.
package sshx

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/fdlimit"
	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/textsafe"
)

// Target is where to connect. Zero fields are filled from ssh_config, then
// from defaults; non-zero fields override ssh_config.
type Target struct {
	Name    string // display name (device name or the ad-hoc spec); default Host
	User    string
	Host    string // a host name or an alias looked up in ssh_config
	Port    int
	KeyPath string // IdentityFile override
	Jump    string // ProxyJump override ("" = from ssh_config, "none" = direct)
	// ConnectTimeout overrides Options.ConnectTimeout and ssh_config's
	// ConnectTimeout for this connection (--connect-timeout).
	ConnectTimeout time.Duration
	// Become, when set, starts rexd through sudo as that user (root,
	// say): sudo -n first, then with the password from
	// Options.SudoPassword when sudo wants one.
	Become string
	// RexdArgs are this target's arguments for rexd after the Dialer's
	// (its --root list, say).
	RexdArgs []string
	// ResumeGrace, when set, opens the session resumable: rexd keeps it
	// that long when the connection drops, and Conn.Resume carries on.
	ResumeGrace time.Duration
	// First, when set, is started with the connection's first session,
	// in the same flight (see rexclient.FirstExec): a cold one-shot run
	// then pays no round trip of its own for it.
	First *rexclient.FirstExec
}

// Options configure a Dialer. The zero value behaves like OpenSSH with the
// user's own files.
type Options struct {
	// ConfigFile is the ssh_config to read; default ~/.ssh/config, "none"
	// reads none.
	ConfigFile string
	// KnownHostsFile is the user known_hosts file; default
	// ~/.ssh/known_hosts. UserKnownHostsFile in ssh_config wins for the
	// hosts it applies to.
	KnownHostsFile string
	// StrictHostKeys is "accept-new" (default), "yes" or "no"; when empty,
	// ssh_config's StrictHostKeyChecking applies. A changed host key is
	// always refused.
	StrictHostKeys string
	// ConnectTimeout bounds reaching a target: TCP connect, SSH key
	// exchange, authentication and, for Connect, bootstrapping rexd.
	// Waiting for a handshake slot or for the operator (a passphrase, a
	// host key question) does not count. Default 10s; ssh_config's
	// ConnectTimeout applies when this is zero.
	ConnectTimeout time.Duration
	// Passphrase is asked for the passphrase of an encrypted key when a
	// server is ready to accept that key. The passphrase is never stored;
	// the decrypted key is kept in memory by the Dialer so a fan-out asks
	// once.
	Passphrase func(keyPath string) ([]byte, error)
	// MaxHandshakes caps simultaneous handshakes (default 32). A handshake
	// the server drops before authentication (OpenSSH MaxStartups) is
	// retried after a jittered pause while the deadline allows.
	MaxHandshakes int
	// Payload provides the rexd builds; default payload.Embedded().
	Payload payload.Source
	// Stderr receives rexd's remote standard error, each line prefixed with
	// the target's name; may be nil. The last few KiB are kept anyway and
	// quoted in errors.
	Stderr io.Writer
	// RexdArgs are extra arguments for the remote `rexd --stdio`.
	RexdArgs []string
	// SudoPassword is asked for the password of user on target when sudo
	// there wants one (see Target.Become). It is given to sudo only and
	// never kept by the Dialer; asking once per run is the caller's.
	SudoPassword func(target, user string) ([]byte, error)
	// SudoRefused, when set, is told that sudo refused password (an answer
	// of SudoPassword), so that it is not given again. May be nil.
	SudoRefused func(password []byte)
	// Session are the session.open params; ClientName defaults to "rex" and
	// ClientVersion to this version.
	Session protocol.SessionOpenParams
	// Notice is told what the operator should know that is not an error,
	// one sentence each: a host key recorded for the first time ("added
	// h1 (127.0.0.1:22) ED25519 SHA256:… to ~/.ssh/known_hosts"), host
	// keys that are not checked at all. May be nil.
	Notice func(target, msg string)
	// AskHostKey asks the operator whether to trust a host key seen for
	// the first time, for StrictHostKeyChecking ask. Without it such a
	// host is refused, as with yes.
	AskHostKey func(ctx context.Context, q HostKeyQuestion) (bool, error)
	// OnState is told how a target progresses: "connecting" when a dial
	// starts, "bootstrapping" while rexd is checked and uploaded, and how
	// every dial ends: "ready" (reached and logged in; for Connect, rexd
	// runs too) or "failed" with the error. A front end can show from it
	// what the last real contact with each target said.
	OnState func(target, state string, err error)

	// HomeDir is the local home directory for ~ in paths and the default
	// files; default os.UserHomeDir().
	HomeDir string
	// StampsFile, when set, keeps the stat stamps of the cached rexds
	// this rex has verified (hashed on the target, or uploaded) across
	// processes, so that a new rex process runs a cached rexd whose file
	// has not changed since without hashing it again there. Empty: they
	// last as long as the Dialer.
	StampsFile string
	// AgentSocket is the ssh-agent socket; default $SSH_AUTH_SOCK (or
	// ssh_config's IdentityAgent), "none" uses no agent.
	AgentSocket string
	// LocalUser is the default remote user name; default the current user.
	LocalUser string
}

// HostKeyQuestion is what the operator is asked about an unknown host.
type HostKeyQuestion struct {
	Target      string // the target's name
	Host        string // the name known_hosts will record (host or [host]:port)
	Addr        string // host:port dialled
	KeyType     string // "ED25519", "ECDSA", "RSA", as OpenSSH shows them
	Fingerprint string // SHA256:…
	File        string // the known_hosts file it will be added to
}

// The states passed to Options.OnState.
const (
	StateConnecting    = "connecting"
	StateBootstrapping = "bootstrapping"
	StateReady         = "ready"
	StateFailed        = "failed"
)

// Defaults, as OpenSSH has them where it has them.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultMaxHandshakes  = 32
	DefaultAliveInterval  = 15 * time.Second
	DefaultAliveCountMax  = 3
)

// Dialer dials targets and bootstraps rexd on them. It is safe for
// concurrent use; it holds the handshake semaphore, the known_hosts lock and
// the decrypted keys.
type Dialer struct {
	opts Options
	sem  chan struct{}

	readBufs sync.Pool // countingConn's read buffers, shared by its connections

	cfgOnce sync.Once
	cfg     *sshConfig
	cfgErr  error

	knownHostsMu sync.Mutex // with a file lock for other processes
	unchecked    sync.Map   // known_hosts paths warned about (/dev/null)

	keysMu   sync.Mutex
	keys     map[string]*keyFile // by path
	promptMu sync.Mutex          // one passphrase prompt at a time

	payloadOnce sync.Once
	builds      []build
	buildsErr   error

	// verified remembers, per target account, the cached rexds this Dialer
	// has seen hashed (or uploaded) with their stat, so a later connection
	// runs an unchanged one without hashing it again.
	verifiedMu sync.Mutex
	verified   map[string]map[string]string // account → path → stamp
	stampsRead bool                         // StampsFile has been read
}

// NewDialer returns a Dialer for opts.
func NewDialer(opts Options) *Dialer {
	if opts.MaxHandshakes <= 0 {
		opts.MaxHandshakes = DefaultMaxHandshakes
	}
	if opts.Payload == nil {
		opts.Payload = payload.Embedded()
	}
	return &Dialer{
		opts: opts,
		sem:  make(chan struct{}, opts.MaxHandshakes),
		keys: map[string]*keyFile{},
	}
}

// Errors are *Error values; errors.Is matches them against these kinds.
var (
	ErrUnreachable    = errors.New("target unreachable")
	ErrTimeout        = errors.New("target did not answer in time")
	ErrAuth           = errors.New("authentication failed")
	ErrHostKeyChanged = errors.New("host key changed")
	ErrHostKeyUnknown = errors.New("host key unknown")
	ErrUnsupported    = errors.New("platform not supported")
	ErrNoCacheDir     = errors.New("no usable directory for rexd")
	ErrBootstrap      = errors.New("bootstrap failed")
	ErrConfig         = errors.New("bad ssh configuration")
	ErrBecome         = errors.New("sudo failed")
)

// Error is an operator-facing failure: Msg is one sentence that says what
// happened and what to do; Kind is one of the Err* values above.
type Error struct {
	Target string
	Kind   error
	Msg    string
	Err    error // the underlying cause, if any
}

func (e *Error) Error() string { return e.Msg }

// Is matches the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

func (e *Error) Unwrap() error { return e.Err }

func newError(target string, kind error, cause error, msg string) *Error {
	if fdlimit.Exhausted(cause) {
		// Whatever was being opened (known_hosts, a socket), the advice
		// for that file would mislead: say what ran out.
		doing := "connect " + target
		if target == "" {
			doing = "connect"
		}
		msg = fdlimit.Explain(doing, cause)
	}
	return &Error{Target: target, Kind: kind, Msg: textsafe.Line(msg), Err: cause}
}
