// Command rex is the operator's console (no arguments) and its command-line
// verbs. Each verb is one file here that declares its cobra command and
// wires it to internal/commands; the flags themselves are declared in
// internal/commands, which the console's slash commands share.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/adrg/xdg"
	"github.com/charmbracelet/fang"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rexconsole/rex/internal/agent"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/fdlimit"
	"github.com/rexconsole/rex/internal/version"
	"github.com/rexconsole/rex/tui"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the process's exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// A fan-out holds a socket per running target: use all the open files
	// the hard limit allows, as OpenSSH's tools do (a failure leaves the
	// limit as it was, and running out is reported as such).
	fdlimit.Raise()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	e := newEnv(stdin, stdout, stderr)
	stop := e.watchSignals(cancel)
	defer stop()
	root := newRoot(e)
	e.keepReported(root)
	root.SetArgs(args)
	err := fang.Execute(ctx, root,
		fang.WithVersion(version.Version),
		fang.WithoutManpage(), // rex man is ours: it adds the sections operators look for
		fang.WithErrorHandler(e.printError),
	)
	if err == nil {
		err = e.reported
	}
	var sig signalError
	if errors.As(context.Cause(ctx), &sig) {
		e.closeWithin(closeGrace)
		return sig.code()
	}
	e.close()
	return exitCode(err)
}

// signalError is why a command was cancelled: ctrl+c (SIGINT) or SIGTERM.
type signalError struct{ sig os.Signal }

func (s signalError) Error() string { return "interrupted by " + s.sig.String() }

// code is the shell's exit status for death by the signal: 130, 143.
func (s signalError) code() int {
	if n, ok := s.sig.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 130
}

// exitGrace bounds how long rex takes to end after ctrl+c or SIGTERM; a
// second signal ends it at once. Commands report what they cancelled well
// within it (commands.Run gives up on a stuck output after 2 s).
const exitGrace = 5 * time.Second

// closeGrace bounds closing connections after a signal: whatever is not
// closed by then ends with the process, and rexd stops what ran for it.
const closeGrace = 2 * time.Second

// watchSignals cancels ctx with the signal's cause on SIGINT or SIGTERM.
// If the command has not ended within exitGrace, or a second signal comes,
// rex exits at once (unless it holds the terminal: the console, attach).
// The returned func stops watching.
func (e *env) watchSignals(cancel context.CancelCauseFunc) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	// The terminal as rex found it: a secret prompt may be reading with
	// echo off when rex exits at once, and the shell must get it back.
	restore := func() {}
	tty, err := os.Open("/dev/tty")
	if err == nil {
		if st, err := term.GetState(int(tty.Fd())); err == nil {
			restore = func() { term.Restore(int(tty.Fd()), st) }
		}
	}
	var signalled atomic.Bool
	go func() {
		var first signalError
		select {
		case s := <-sigs:
			first = signalError{s}
			signalled.Store(true)
			cancel(first)
		case <-done:
			return
		}
		select {
		case <-sigs:
		case <-time.After(exitGrace):
		case <-done:
			return
		}
		if !e.holdsTerminal.Load() {
			restore()
			os.Exit(first.code())
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		// A command that ends by itself after the signal may leave a
		// prompt reading with echo off too (its read is not cancelled).
		if signalled.Load() && !e.holdsTerminal.Load() {
			restore()
		}
		if tty != nil {
			tty.Close()
		}
	}
}

// exitCode maps a command's error to the process's exit status.
func exitCode(err error) int {
	if errors.Is(err, commands.ErrDetached) {
		return 0
	}
	return commands.ExitCode(err)
}

// env is what every command shares for one invocation: stdio, rex's
// directories, and the registry and connection pool, opened on first use.
type env struct {
	io     commands.IO
	paths  commands.Paths
	errTTY bool
	// holdsTerminal is set by commands that put the terminal in raw mode
	// (the console, attach): they must restore it before rex exits.
	holdsTerminal atomic.Bool

	setup *commands.Setup
	app   *commands.App
	// pool tunes the pool App makes (rex run --resumable).
	pool fanout.PoolOptions
	// reported is a command's error that was reported already, kept out
	// of fang's way (keepReported).
	reported error
}

func newEnv(stdin io.Reader, stdout, stderr io.Writer) *env {
	return &env{
		io:     commands.IO{In: stdin, Out: stdout, Err: stderr, Styled: isTerminal(stdout), Lock: &sync.Mutex{}},
		errTTY: isTerminal(stderr),
		paths: commands.Paths{
			Config: filepath.Join(xdg.ConfigHome, "rex"),
			Cache:  filepath.Join(xdg.CacheHome, "rex"),
			State:  filepath.Join(xdg.StateHome, "rex"),
		},
	}
}

// Setup opens the registry and prepares the connectors.
func (e *env) Setup() (*commands.Setup, error) {
	if e.setup == nil {
		s, err := commands.NewSetup(e.paths, commands.SetupOptions{Lock: e.io.Lock, Notices: e.io.Err})
		if err != nil {
			return nil, err
		}
		e.setup = s
	}
	return e.setup, nil
}

// App is the Setup with a connection pool, closed when rex exits.
func (e *env) App() (*commands.App, error) {
	if e.app == nil {
		s, err := e.Setup()
		if err != nil {
			return nil, err
		}
		e.app = s.App(e.pool)
	}
	return e.app, nil
}

func (e *env) close() {
	if e.app != nil {
		e.app.Pool.Close()
	}
}

// closeWithin closes the connections, giving up after d.
func (e *env) closeWithin(d time.Duration) {
	done := make(chan struct{})
	go func() {
		e.close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// printError prints a command's error once: styled on a terminal, else
// one plain `rex: …` line for scripts and logs. Errors that were already
// reported (an exit status carried up) print nothing.
func (e *env) printError(w io.Writer, styles fang.Styles, err error) {
	if reported(err) {
		return
	}
	if e.errTTY {
		fang.DefaultErrorHandler(w, styles, err)
		return
	}
	fmt.Fprintf(w, "rex: %v\n", err)
}

// reported reports whether err needs no printing: an exit status carried
// up from what the command said itself, or a detach.
func reported(err error) bool {
	var ee *commands.ExitError
	return errors.As(err, &ee) && ee.Err == nil || errors.Is(err, commands.ErrDetached)
}

// keepReported keeps the errors that were reported already (reported)
// from fang, which builds its styles for every error it gets, printed or
// not, and on a terminal asks it for its background colour (OSC 11 and
// DA1): every failed `rex run h1 -- false` left that query on the screen,
// and waited seconds for the answer where the terminal gives none
// (script(1), a serial console). Run takes e.reported back as the error.
func (e *env) keepReported(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(c *cobra.Command, args []string) error {
			err := run(c, args)
			if reported(err) {
				e.reported = err
				return nil
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		e.keepReported(sub)
	}
}

// trimLines writes through to w without the blanks that end a line. fang
// lays --help out to a width (120 columns when stdout is no terminal) and
// pads every line to it with spaces, which a pager, a file or a diff keeps;
// it offers no way not to. The blanks of a line are held back until
// something other than a newline follows them.
type trimLines struct {
	w      io.Writer
	blanks int // spaces held back
	buf    []byte
}

func (t *trimLines) Write(p []byte) (int, error) {
	t.buf = t.buf[:0]
	for _, b := range p {
		switch b {
		case ' ':
			t.blanks++
			continue
		case '\n':
			t.blanks = 0
		}
		for ; t.blanks > 0; t.blanks-- {
			t.buf = append(t.buf, ' ')
		}
		t.buf = append(t.buf, b)
	}
	if _, err := t.w.Write(t.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("NO_COLOR") == ""
}

// newRoot builds the whole command tree.
func newRoot(e *env) *cobra.Command {
	var ag tui.AgentOptions
	var noServer bool
	root := &cobra.Command{
		Use:   "rex",
		Short: "A console and command line for many machines at once",
		Long: `rex drives many machines at once. Without arguments it opens the console;
with a verb it runs once and exits, for shells and scripts.

TARGETS is a comma-separated list of device and group names, all, local,
globs (web-*), ranges (node[1-16], n[01-08]), hosts that are not registered
(user@host:port, ssh://host) and Host aliases of ~/.ssh/config.`,
		Example: `  rex
  rex device add web1 root@10.0.0.5
  rex run web -- uptime
  rex attach web1`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			e.holdsTerminal.Store(true)
			return console(cmd.Context(), e, cmd, ag, noServer)
		},
	}
	root.Flags().BoolVar(&ag.Yolo, "yolo", false, "the console's agent runs every call without asking (deny patterns still ask); the status bar says YOLO")
	root.Flags().BoolVar(&noServer, "no-server", false, "run the console in this process, not in the per-user rex server (closing the terminal then stops everything)")
	agent.BindModelFlags(root.Flags(), &ag.Overrides)
	root.SetIn(e.io.In)
	if e.io.Styled {
		root.SetOut(e.io.Out)
	} else {
		root.SetOut(&trimLines{w: e.io.Out})
	}
	root.SetErr(e.io.Err)
	root.SetVersionTemplate("rex {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return commands.FlagError(c.CommandPath(), c.Flags(), err)
	})
	root.AddGroup(
		&cobra.Group{ID: "fleet", Title: "Reaching machines"},
		&cobra.Group{ID: "setup", Title: "Devices, tools and rex itself"},
	)
	for _, c := range []*cobra.Command{newRunCmd(e), newAttachCmd(e), newPushCmd(e), newPullCmd(e), newAskCmd(e), newMCPCmd(e)} {
		c.GroupID = "fleet"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newDeviceCmd(e), newToolCmd(e), newSecretCmd(e), newServerCmd(e), newStatusCmd(e, "ls"), newVersionCmd(), newManCmd()} {
		c.GroupID = "setup"
		root.AddCommand(c)
	}
	root.SetHelpCommandGroupID("setup")
	root.SetCompletionCommandGroupID("setup")
	usageArgs(root)
	completeTargetFlags(e, root)
	return root
}

// completeTargetFlags completes --target and --exclude with target names
// on every command that has them.
func completeTargetFlags(e *env, c *cobra.Command) {
	for _, name := range []string{"target", "exclude"} {
		if c.LocalFlags().Lookup(name) != nil {
			if _, ok := c.GetFlagCompletionFunc(name); !ok {
				c.RegisterFlagCompletionFunc(name, completeTargets(e, -1))
			}
		}
	}
	for _, sub := range c.Commands() {
		completeTargetFlags(e, sub)
	}
}

// usageArgs makes the positional-argument checks of c and its subcommands
// (cobra.NoArgs and the like) usage errors: exit 2, as a bad flag.
func usageArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			var ue *commands.UsageError
			if err != nil && !errors.As(err, &ue) {
				return commands.Usagef("%s: %v; %s --help shows how to call it", cmd.CommandPath(), err, cmd.CommandPath())
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

// unknownCommand is the usage error for a word that names no subcommand
// of cmd, with cobra's suggestions.
func unknownCommand(cmd *cobra.Command, word string) error {
	hint := ""
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(word); len(s) > 0 {
		hint = "; did you mean " + s[0] + "?"
	}
	return commands.Usagef("unknown command %q for %s%s; %s --help lists the commands", word, cmd.CommandPath(), hint, cmd.CommandPath())
}

// parentCmd is a command that only holds subcommands: alone it prints its
// help; with an unknown word it fails as a usage error (cobra would print
// the help and exit 0).
func parentCmd(c *cobra.Command) *cobra.Command {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return unknownCommand(cmd, args[0])
	}
	return c
}

// helpOr shows cmd's help when err asks for it (a --help after TARGETS),
// else returns err.
func helpOr(cmd *cobra.Command, err error) error {
	if errors.Is(err, commands.ErrHelp) {
		return cmd.Help()
	}
	return err
}
