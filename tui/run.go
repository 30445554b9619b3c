// Package tui is rex's console: a sidebar of devices and groups with
// their connection states, split panes of live output, and a command
// line that runs shell commands on the current target and slash commands
// that share their implementation with the rex command line.
//
// One root Model routes every message and lays the screen out in Update;
// View only draws. The state that is not about drawing lives in package
// engine: the session's tasks and every target's output (bounded
// buffers that keep programs' colours), the per-host transcripts the
// panes of the current target read like that host's terminal history,
// and what the last contact with each target said. Fan-out goroutines
// append under the engine's locks and a frame tick, running only while
// something changes, draws the result, so a flood of output never floods
// the program with messages and keys stay responsive.
//
// /attach opens terminal panes: remote PTYs whose output is interpreted by
// a terminal emulator (github.com/charmbracelet/x/vt) on the connection's
// goroutine and drawn from its screen on the same frame tick. While one
// has the keys, every key but the detach key (ctrl+]) is encoded as an
// xterm would send it and goes to the remote program, or to all terminals
// of the /attach while broadcasting.
//
// /push, /pull and /tool run are tasks too, run by the same functions as
// rex push, rex pull and rex tool run (package commands): a sync pane
// draws its target's progress (phase and bar) above the lines the command
// line prints.
package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/tui/engine"
)

// Options wire the console to the rest of rex.
type Options struct {
	// Store is the device registry for the sidebar, completion and the
	// default /device implementation.
	Store *devices.Store
	// Connector reaches `local` and SSH targets.
	Connector fanout.Connector
	// Resolver makes the function that turns a TARGETS expression into
	// targets (local, devices, groups, globs, ranges, ad-hoc hosts):
	// commands.Resolver over the registry, given notice, which it tells
	// what resolving folded (one machine named twice). The console queues
	// those lines and shows each once; notice may be called off the event
	// loop (the agent's tools resolve there).
	Resolver func(notice func(msg string)) func(spec string) ([]fanout.Target, error)
	// ConfigDir holds config.toml and themes/ ($XDG_CONFIG_HOME/rex).
	ConfigDir string
	// StateDir holds the command-line history ($XDG_STATE_HOME/rex).
	StateDir string
	// CacheDir holds the local object store of /push and /pull (its cas/)
	// and the tools' system files ($XDG_CACHE_HOME/rex).
	CacheDir string
	// WorkDir is where relative local paths of /push and /pull start;
	// empty means the working directory rex was started in.
	WorkDir string
	// DeviceVerb runs `rex device ARGS`, writing to io.Out and io.Err.
	// When nil, the registry-only verbs of commands.Device serve.
	DeviceVerb func(ctx context.Context, io commands.IO, args []string) error
	// NoColor draws task output without the colours programs print (the
	// NO_COLOR convention); rex sets it from the environment.
	NoColor bool
	// Agent is what the command line says about the agent (--yolo,
	// --model...).
	Agent AgentOptions
	// States, when set, carries connection progress only the connector
	// knows (sshx's "bootstrapping") to the sidebar; give its Report
	// method to the connector.
	States *ConnStates
	// Secrets, when set, is how the connector asks the operator for a
	// secret (a sudo password): a masked prompt on the command line.
	Secrets *SecretAsker
	// Prompts, when set, carries the dialer's notices and host key
	// questions into the console; give its methods to the dialer.
	Prompts *Prompts
	// Notice, when set, is a line the console shows in its message area
	// when it starts (the rex server that was gone before this one).
	Notice string
}

// shutdownWait bounds how long Run waits, after the console closed, for
// cancelled tasks to stop their remote processes (fanout waits up to 5 s
// for each).
const shutdownWait = 6 * time.Second

// Run opens the console on the terminal and returns when the operator
// quits or ctx ends. Running tasks are cancelled on the way out.
func Run(ctx context.Context, opts Options) error {
	if opts.Connector == nil {
		return errors.New("the console needs a connector to reach targets")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A closed terminal window (SIGHUP) cannot be asked anything: the
	// console ends as on a quit, stopping its tasks and waiting for their
	// remote processes to end.
	ctx, stopHUP := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stopHUP()

	e := newRuntime(ctx, opts)
	defer e.pool.Close()
	p := tea.NewProgram(e.m, tea.WithContext(ctx))
	e.start(p.Send)
	_, err := p.Run()
	e.stop()
	return closeErr(ctx, err)
}

// consoleRuntime is the console's model with what it runs on: the connection
// pool and the wiring of the connector's reports, shared by Run (one
// process) and Console (the rex server).
type consoleRuntime struct {
	ctx  context.Context
	opts Options
	m    *Model
	pool *fanout.Pool
}

// newRuntime builds the model and its pool.
func newRuntime(ctx context.Context, opts Options) *consoleRuntime {
	var m *Model
	// A broken config.toml is reported by the model; its defaults serve.
	cfg, _ := loadConfig(opts.ConfigDir)
	pool := fanout.NewPool(opts.Connector, fanout.PoolOptions{
		IdleTimeout: cfg.IdleTimeout,
		// What runs outlives a dropped connection: the pool reconnects
		// and resumes it.
		ResumeGrace: cfg.ResumeGrace,
		OnState:     func(target, state string, err error) { m.states.Report(engine.FromPool, target, state, err) },
		// Every process the console starts gets its device's secrets.
		Secrets: func(ctx context.Context, t fanout.Target) (map[string]string, error) {
			return m.app.DeviceSecrets(ctx, t)
		},
	})
	run := func(ctx context.Context, targets []fanout.Target, t fanout.Task, o fanout.Options) *fanout.Summary {
		return fanout.Run(ctx, pool, targets, t, o)
	}
	opts.NoColor = opts.NoColor || os.Getenv("NO_COLOR") != ""
	m = newModel(ctx, opts, run, time.Now)
	if opts.Notice != "" {
		m.notice(opts.Notice)
	}
	m.app.Pool = pool
	m.openTerm = poolTerminals(pool)
	return &consoleRuntime{ctx: ctx, opts: opts, m: m, pool: pool}
}

// start connects the reports of the connector, the dialer's prompts, the
// frame signal and the registry's watch to the program that runs the
// model (send is its Send).
func (e *consoleRuntime) start(send func(tea.Msg)) {
	m, opts := e.m, e.opts
	opts.States.attach(func(target, state string, err error) { m.states.Report(engine.FromSSH, target, state, err) })
	opts.Prompts.attach(send)
	m.signal.send.Store(&send)
	if opts.Store != nil {
		// devices.json changed by `rex device` in another shell, or an
		// editor, shows in the sidebar at once.
		if err := opts.Store.Watch(e.ctx, func() { send(registryChangedMsg{}) }); err != nil {
			m.msg = message{kind: msgError, lines: append(m.msg.lines, err.Error()+"; the sidebar shows changes made elsewhere after the next /device command")}
		}
	}
}

// stop runs once the program has ended: nothing more is asked of it, and
// whatever still runs is stopped, giving remote processes a moment to end.
func (e *consoleRuntime) stop() {
	m, opts := e.m, e.opts
	m.signal.send.Store(nil)
	opts.Prompts.detach()
	opts.States.attach(func(string, string, error) {})
	if opts.Secrets != nil {
		// The question on screen, if any, was taken off the queue: its
		// asker (a dial the pool's Close waits for) is answered too.
		if m.secret != nil {
			clear(m.secret.buf)
			m.secret.req.answer <- secretAnswer{err: errors.New("the console has closed")}
			m.secret = nil
		}
		opts.Secrets.close()
	}
	for _, t := range m.tasks.List() {
		t.Stop()
	}
	var ended []<-chan struct{}
	for _, p := range m.panes {
		if tp, ok := p.(*ptyPane); ok {
			ended = append(ended, tp.shutdown())
		}
	}
	for _, t := range m.tasks.List() {
		ended = append(ended, t.Exited())
	}
	deadline := time.NewTimer(shutdownWait)
	defer deadline.Stop()
	for _, c := range ended {
		select {
		case <-c:
		case <-deadline.C:
			return
		}
	}
}

// termConnectTimeout bounds reaching a target for a terminal (dial,
// bootstrap, session).
const termConnectTimeout = 30 * time.Second

// poolTerminals opens terminals over the console's connection pool: the
// pane holds one use of its target's connection while its terminal is
// open. A connection that dropped is dialled again by the pool.
func poolTerminals(pool *fanout.Pool) openTermFunc {
	return func(ctx context.Context, t fanout.Target, p protocol.PTYOpenParams, out io.Writer) (remoteTerm, func(), error) {
		actx, cancel := context.WithTimeout(ctx, termConnectTimeout)
		lease, err := pool.Acquire(actx, t)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("connect %s: no answer within %s; is the host up and reachable?", t.Name, termConnectTimeout)
		}
		if err != nil {
			return nil, nil, err
		}
		pty, err := lease.OpenPTY(ctx, p, out)
		if err != nil {
			lease.Release()
			return nil, nil, fmt.Errorf("open a terminal on %s: %w", t.Name, err)
		}
		return pty, lease.Release, nil
	}
}

// closeErr maps how the program ended to Run's error: an ended context is
// a normal way out.
func closeErr(ctx context.Context, err error) error {
	// An ended context or a SIGINT from outside (ctrl+c itself is a key)
	// is a normal way out.
	if err == nil || ctx.Err() != nil && errors.Is(err, tea.ErrProgramKilled) || errors.Is(err, tea.ErrInterrupted) {
		return nil
	}
	return fmt.Errorf("console: %w", err)
}
