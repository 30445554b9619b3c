package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/rexconsole/rex/internal/agent"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/server"
	"github.com/rexconsole/rex/tui"
)

// consoleFlags are the root's flags that shape the console; they go to
// the server it starts.
var consoleFlags = []string{"yolo", "provider", "model", "base-url"}

// console opens the console: attached to the per-user rex server
// (started first when none runs), or in this process with --no-server.
func console(ctx context.Context, e *env, cmd *cobra.Command, ag tui.AgentOptions, noServer bool) error {
	if noServer {
		return consoleHere(ctx, e, ag)
	}
	if !term.IsTerminal(int(os.Stdin.Fd())) || !term.IsTerminal(int(os.Stdout.Fd())) {
		return commands.Usagef("the console needs a terminal; rex run, rex ls and the other verbs work without one")
	}
	// A closed terminal (SIGHUP) detaches: the console runs on.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGHUP)
	defer stop()
	var flags []string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		for _, n := range consoleFlags {
			if f.Name == n {
				flags = append(flags, "--"+f.Name+"="+f.Value.String())
			}
		}
	})
	c, err := reachServer(ctx, e, flags)
	if err != nil {
		return err
	}
	defer func() { c.Close() }()
	d, err := server.AttachTerminal(ctx, c, os.Stdin, os.Stdout)
	if err == nil && d.Gone {
		// It was on its way out (it no longer takes clients): a fresh
		// one, once.
		c.Close()
		if c, err = reachServer(ctx, e, flags); err != nil {
			return err
		}
		d, err = server.AttachTerminal(ctx, c, os.Stdin, os.Stdout)
	}
	if err != nil {
		return err
	}
	if ctx.Err() == nil {
		if d.Quit {
			fmt.Fprintf(e.io.Err, "[%s]\n", d.Reason)
		} else {
			fmt.Fprintf(e.io.Err, "[%s: it runs on in the rex server (pid %d); rex attaches again]\n", d.Reason, c.Hello.Pid)
		}
	}
	return nil
}

// reachServer connects to the rex server, starting one when none runs;
// a server of another version is stopped only if the operator says so.
func reachServer(ctx context.Context, e *env, flags []string) (*server.Client, error) {
	c, err := server.Dial(ctx, "rex")
	var gone string
	var none *server.ErrNoServer
	var other *server.VersionError
	switch {
	case err == nil:
		if len(flags) > 0 {
			fmt.Fprintf(e.io.Err, "rex: the console already runs (rex server, pid %d): %s apply when it starts; rex server stop, then rex %s\n",
				c.Hello.Pid, strings.Join(flags, " "), strings.Join(flags, " "))
		}
		return c, nil
	case errors.As(err, &none):
		if none.Gone != nil {
			// Said here, and by the fresh server's console: this line is
			// covered by the console's screen at once.
			gone = none.Gone.GoneSentence()
			fmt.Fprintf(e.io.Err, "rex: %s; starting a fresh one\n", gone)
			server.Forget()
		}
	case errors.As(err, &other):
		if !askYes(e, fmt.Sprintf("rex: %v; it cannot serve this rex. Stop it (what runs in it ends)? [y/N] ", other)) {
			c.Close()
			return nil, commands.Usagef("%v: rex server stop stops it (what runs in it ends), or run the rex of that version", other)
		}
		if _, err := c.Stop(ctx, true); err != nil {
			c.Close()
			return nil, fmt.Errorf("stop the rex server of rex %s: %w", other.Server.Version, err)
		}
		wctx, cancel := context.WithTimeout(ctx, stopWait)
		err := c.WaitGone(wctx)
		cancel()
		c.Close()
		if err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	args := flags
	if gone != "" {
		args = append(slices.Clip(flags), "--notice", "rex: "+gone)
	}
	if err := spawnServer(ctx, e, args); err != nil {
		return nil, err
	}
	return server.Dial(ctx, "rex")
}

// stopWait bounds waiting for a stopped server to end: its tasks get
// their shutdown time (6 s) and a little more.
const stopWait = 15 * time.Second

// spawnServer starts `rex server run` for this user.
func spawnServer(ctx context.Context, e *env, flags []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start the rex server: find this rex: %w", err)
	}
	_, err = server.Spawn(ctx, exe, append([]string{"server", "run"}, flags...), os.Environ(), serverLog(e))
	return err
}

func serverLog(e *env) string { return filepath.Join(e.paths.State, "server.log") }

func bindAgentFlags(fs *pflag.FlagSet, ag *tui.AgentOptions) { agent.BindModelFlags(fs, &ag.Overrides) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// askYes asks a yes/no question on the terminal; no terminal is no.
func askYes(e *env, q string) bool {
	f, ok := e.io.In.(*os.File)
	if !ok || !isTerminal(e.io.Err) && !isTerminalFile(f) {
		return false
	}
	fmt.Fprint(e.io.Err, q)
	line, _ := bufio.NewReader(e.io.In).ReadString('\n')
	line = strings.ToLower(strings.TrimSpace(line))
	return line == "y" || line == "yes"
}

func isTerminalFile(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// consoleOptions wires the console to this rex: the registry, the
// connectors and what the dialer asks of the operator.
func consoleOptions(e *env, ag tui.AgentOptions) (tui.Options, error) {
	states, prompts := &tui.ConnStates{}, &tui.Prompts{}
	secrets := tui.NewSecretAsker() // the sudo password: a masked prompt
	setup, err := commands.NewSetup(e.paths, commands.SetupOptions{Console: true, OnState: states.Report, AskSecret: secrets.Ask,
		Notice: prompts.Notice, AskHostKey: prompts.AskHostKey})
	if err != nil {
		return tui.Options{}, err
	}
	return tui.Options{
		Store:     setup.Store,
		Connector: setup.Connectors,
		Resolver: func(notice func(string)) func(string) ([]fanout.Target, error) {
			return commands.Resolver(setup.Store, notice)
		},
		ConfigDir: e.paths.Config,
		StateDir:  e.paths.State,
		CacheDir:  e.paths.Cache,
		DeviceVerb: func(ctx context.Context, o commands.IO, args []string) error {
			return commands.DeviceWith(ctx, setup.Store, setup.DeviceRemote(), o, args)
		},
		States:  states,
		Secrets: secrets,
		Agent:   ag,
		Prompts: prompts,
	}, nil
}

// consoleHere runs the console in this process (rex --no-server).
func consoleHere(ctx context.Context, e *env, ag tui.AgentOptions) error {
	opts, err := consoleOptions(e, ag)
	if err != nil {
		return err
	}
	return tui.Run(ctx, opts)
}

func newServerCmd(e *env) *cobra.Command {
	cmd := parentCmd(&cobra.Command{
		Use:   "server",
		Short: "The per-user rex server that keeps the console running",
		Long: `rex (the console) runs in a per-user server and attaches to it: closing the
terminal, or ctrl+q → detach, leaves tasks and terminals running there, and
rex attaches again. rex --no-server runs the console in its own process.`,
		Example: `  rex server status
  rex server stop
  rex server stop --force`,
	})
	var force bool
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop the rex server and everything that runs in it (asks when work runs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serverStop(cmd.Context(), e, force)
		},
	}
	stop.Example = `  rex server stop           # asks when tasks or terminals run
  rex server stop --force   # stops whatever runs`
	stop.Flags().BoolVar(&force, "force", false, "stop it without asking, whatever runs")
	var (
		ag     tui.AgentOptions
		notice string
	)
	run := &cobra.Command{
		Use:    "run",
		Short:  "Run the rex server in this process (rex starts it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e.holdsTerminal.Store(true) // it stops its tasks before exiting
			return serverRun(cmd.Context(), e, ag, notice)
		},
	}
	run.Example = `  rex server run   # what rex starts in the background; rex attaches to it`
	run.Flags().BoolVar(&ag.Yolo, "yolo", false, "the console's agent runs every call without asking")
	bindAgentFlags(run.Flags(), &ag)
	run.Flags().StringVar(&notice, "notice", "", "a line the console shows when it starts (rex passes why it started a fresh server)")
	run.Flags().MarkHidden("notice")
	cmd.AddCommand(newStatusCmd(e, "status"), stop, run)
	return cmd
}

// newStatusCmd is rex server status, and rex ls.
func newStatusCmd(e *env, use string) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     use,
		Short:   "What runs in the rex server: tasks, terminals, connections",
		Example: "  " + exampleStatus(use),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serverStatus(cmd.Context(), e, asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return c
}

// exampleStatus is the examples of rex ls and rex server status.
func exampleStatus(use string) string {
	name := "rex ls"
	if use == "status" {
		name = "rex server status"
	}
	return name + "\n  " + name + " --json | jq '.tasks[].command'"
}

func serverStatus(ctx context.Context, e *env, asJSON bool) error {
	c, err := dialServer(ctx)
	if err != nil {
		var none *server.ErrNoServer
		if errors.As(err, &none) {
			if none.Gone != nil {
				return fmt.Errorf("no rex server runs: %s", none.Gone.GoneSentence())
			}
			fmt.Fprintln(e.io.Out, "no rex server runs; rex starts one")
			return nil
		}
		return err
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.io.Out, st)
	}
	printStatus(e.io.Out, st, time.Now())
	return nil
}

// dialServer reaches a running server without starting one; another
// version is an error that says so.
func dialServer(ctx context.Context) (*server.Client, error) {
	c, err := server.Dial(ctx, "rex")
	var other *server.VersionError
	if errors.As(err, &other) {
		return c, nil // status and stop are the same in every version
	}
	return c, err
}

func printStatus(w io.Writer, st server.Status, now time.Time) {
	p := commands.Printable // the agent's commands come from the model
	fmt.Fprintf(w, "rex server pid %d, rex %s, up %s; target %s; %s attached\n", st.Pid, p(st.Version),
		now.Sub(st.StartedAt).Round(time.Second), p(st.Target), count(st.Clients, "client", "clients"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(st.Tasks) == 0 {
		fmt.Fprintf(tw, "tasks\tnone running (%d finished)\n", st.Finished)
	}
	for _, t := range st.Tasks {
		fmt.Fprintf(tw, "task\t%s\ton %s\t%d running\tfor %s\n", p(t.Command), p(strings.Join(t.Targets, ",")), t.Running,
			now.Sub(t.Since).Round(time.Second))
	}
	for _, t := range st.Terminals {
		fmt.Fprintf(tw, "terminal\t%s\t%s\n", p(t.Target), p(t.Command))
	}
	if st.Agent != "" {
		fmt.Fprintf(tw, "agent\t%s\n", p(st.Agent))
	}
	for _, cn := range st.Connections {
		fmt.Fprintf(tw, "connection\t%s\t%s\n", p(cn.Target), p(cn.State))
	}
	tw.Flush()
}

func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func serverStop(ctx context.Context, e *env, force bool) error {
	c, err := dialServer(ctx)
	if err != nil {
		var none *server.ErrNoServer
		if errors.As(err, &none) {
			if none.Gone != nil {
				server.Forget()
				fmt.Fprintf(e.io.Err, "rex: %s\n", none.Gone.GoneSentence())
			}
			fmt.Fprintln(e.io.Out, "no rex server runs")
			return nil
		}
		return err
	}
	defer c.Close()
	st, err := c.Stop(ctx, force)
	var busy *server.BusyError
	if errors.As(err, &busy) {
		printStatus(e.io.Err, busy.Status, time.Now())
		if !askYes(e, "Stop the rex server and all of this? [y/N] ") {
			return &commands.ExitError{Code: 1, Err: errors.New("the rex server runs on: work is running in it (rex server stop --force stops it anyway)")}
		}
		st, err = c.Stop(ctx, true)
	}
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, stopWait)
	defer cancel()
	if err := c.WaitGone(wctx); err != nil {
		return err
	}
	fmt.Fprintf(e.io.Out, "stopped the rex server (pid %d)%s\n", c.Hello.Pid, stoppedWork(st))
	return nil
}

// stoppedWork names what a stop ended (", ending task \"sleep 100\" on
// h1,h2 (2 running) and terminal h3 (bash)"), "" when nothing ran: with
// --force nothing was shown before, and the operator should know what
// they ended, as the remote processes went with it.
func stoppedWork(st server.Status) string {
	p := commands.Printable // the agent's commands come from the model
	var ended []string
	for _, t := range st.Tasks {
		ended = append(ended, fmt.Sprintf("task \"%s\" on %s (%d running)", p(t.Command), p(strings.Join(t.Targets, ",")), t.Running))
	}
	for _, t := range st.Terminals {
		ended = append(ended, fmt.Sprintf("terminal %s (%s)", p(t.Target), p(t.Command)))
	}
	if st.Agent != "" {
		ended = append(ended, fmt.Sprintf("the agent's turn (%s)", p(st.Agent)))
	}
	switch len(ended) {
	case 0:
		return ""
	case 1:
		return ", ending " + ended[0]
	}
	return ", ending " + strings.Join(ended[:len(ended)-1], ", ") + " and " + ended[len(ended)-1]
}

// serverRun is the server itself (rex server run, started by rex).
func serverRun(ctx context.Context, e *env, ag tui.AgentOptions, notice string) error {
	signal.Ignore(syscall.SIGHUP) // no terminal to lose
	ln, err := server.Listen(serverLog(e))
	if err != nil {
		server.Ready(err)
		return err
	}
	defer ln.Close()
	stopPprof, err := server.ServePprof()
	if err != nil {
		server.Ready(err)
		return err
	}
	defer stopPprof()
	opts, err := consoleOptions(e, ag)
	if err != nil {
		server.Ready(err)
		return err
	}
	opts.Notice = notice
	con, err := tui.NewConsole(ctx, opts)
	if err != nil {
		server.Ready(err)
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	con.OnQuit(ln.StopAccepting)
	go func() { served <- ln.Serve(sctx, con) }()
	server.Ready(nil)
	err = con.Run()
	cancel()
	<-served
	return err
}
