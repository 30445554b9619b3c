package commands

import (
	"fmt"
	"os"
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
	// WorkDir says where the project space of tools is looked for (.ai/
	// in it or a directory above); nil or "" means the process's working
	// directory. The console's rex server sets it to the attached
	// client's, which the operator sees as "here".
	WorkDir func() string

	secretsOnce sync.Once
	secrets     secrets.Store
	secretsErr  error
}

// workDir is where the project space of tools is looked for (WorkDir).
func (app *App) workDir() (string, error) {
	if app.WorkDir != nil {
		if wd := app.WorkDir(); wd != "" {
			return wd, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the working directory: %w", err)
	}
	return wd, nil
}
