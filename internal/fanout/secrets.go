package fanout

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/secrets"
)

// Every process rex starts on a target is started here or in runOne, for
// every front end (rex run, rex attach, the console's lines, /run and
// /attach, the agent's and MCP's tools): this is where a device's secrets
// join its environment and their echoes are masked. The values travel in
// the request's env only; rexd's audit log redacts env values.

// secretEnv is what PoolOptions.Secrets gives t; nil when nothing.
func (p *Pool) secretEnv(ctx context.Context, t Target) (map[string]string, error) {
	if p.opts.Secrets == nil {
		return nil, nil
	}
	return p.opts.Secrets(ctx, t)
}

// processEnv is the environment of a process rex starts on t, in a new
// map: env, the target's secrets over it, and REX_TARGET and REX_GROUP
// over both (the target's name, and the group TARGETS chose it through),
// which nothing else may set.
func processEnv(t Target, env, sec map[string]string) map[string]string {
	out := make(map[string]string, len(env)+len(sec)+2)
	for k, v := range env {
		out[k] = v
	}
	for k, v := range sec {
		out[k] = v
	}
	out["REX_TARGET"], out["REX_GROUP"] = t.Name, t.Group
	return out
}

// secretValues lists the values to mask.
func secretValues(sec map[string]string) []string {
	out := make([]string, 0, len(sec))
	for _, v := range sec {
		out = append(out, v)
	}
	return out
}

// termHold bounds how long a terminal's output that could begin a
// secret's value waits for the rest (secrets.Masker.HoldAtMost): short
// enough not to be seen as lag on a keystroke's echo, long enough for
// the rest of a value a program printed at once.
const termHold = 30 * time.Millisecond

// OpenPTY opens a terminal on the lease's session running what p says,
// its output to out. It gets the target's secrets (PoolOptions.Secrets),
// REX_TARGET and REX_GROUP in its environment, as a command does, and
// the secrets' values show as *** in out.
func (l *Lease) OpenPTY(ctx context.Context, p protocol.PTYOpenParams, out io.Writer) (*rexclient.PTY, error) {
	sec, err := l.p.secretEnv(ctx, l.t)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.t.Name, err)
	}
	p.Env = processEnv(l.t, p.Env, sec)
	if len(sec) > 0 {
		m := secrets.NewMasker(out, secretValues(sec))
		m.HoldAtMost(termHold)
		out = m
	}
	return l.Session().OpenPTY(ctx, p, rexclient.ExecOptions{Stdout: out})
}
