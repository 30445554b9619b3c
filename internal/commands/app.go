package commands

import (
	"time"

	"github.com/rexconsole/rex/internal/fanout"
)

// App is what the verbs that reach targets share: the connection pool and
// how TARGETS resolves. One App serves a whole CLI invocation or console.
type App struct {
	Pool *fanout.Pool
	// Resolve turns a TARGETS expression into targets.
	Resolve func(spec string) ([]fanout.Target, error)
	// ConnectTimeout bounds reaching one target; 0 means 15 s.
	ConnectTimeout time.Duration
	// CASDir is the operator's object store ($XDG_CACHE_HOME/rex/cas).
	CASDir string
	// ConfigDir is $XDG_CONFIG_HOME/rex (the user space of tools lives in
	// its .ai/); CacheDir is $XDG_CACHE_HOME/rex.
	ConfigDir string
	CacheDir  string
}

// defaultConnectTimeout bounds reaching one target when App says nothing.
const defaultConnectTimeout = 15 * time.Second

func (app *App) connectTimeout() time.Duration {
	if app.ConnectTimeout > 0 {
		return app.ConnectTimeout
	}
	return defaultConnectTimeout
}
