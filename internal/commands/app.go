package commands

import (
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/secrets"
)

// App is what the verbs that reach targets share: the connection pool and
// how TARGETS resolves. One App serves a whole CLI invocation or console.
type App struct {
	Pool *fanout.Pool
	// Resolve turns a TARGETS expression into targets.
	Resolve func(spec string) ([]fanout.Target, error)
	// ConnectTimeout, when set, bounds reaching one target (dial,
	// handshake, bootstrap) in place of ssh_config's ConnectTimeout or the
	// 10 s default (--connect-timeout).
	ConnectTimeout time.Duration
	// CASDir is the operator's object store ($XDG_CACHE_HOME/rex/cas).
	CASDir string
	// ConfigDir is $XDG_CONFIG_HOME/rex (the user space of tools lives in
	// its .ai/); CacheDir is $XDG_CACHE_HOME/rex.
	ConfigDir string
	CacheDir  string
	// StateDir is $XDG_STATE_HOME/rex, where rex keeps its own audit log
	// (AuditPath); without it, calls only rex can audit are refused.
	StateDir string
	// AskSecretPassphrase asks for the encrypted secrets file's passphrase
	// when REX_SECRETS_PASSPHRASE is not set; nil means it cannot be asked
	// (the console). See SecretStore.
	AskSecretPassphrase func(confirm bool) (string, error)

	secretsOnce sync.Once
	secrets     secrets.Store
	secretsErr  error
}
