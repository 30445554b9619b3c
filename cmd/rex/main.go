// Command rex is the operator's console (no arguments) and its command-line
// verbs. This file only wires flags and paths to the packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/adrg/xdg"
	"golang.org/x/term"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/version"
	"github.com/rexconsole/rex/tui"
)

const usage = `usage:
  rex                                   open the console
  rex device ...                        manage devices and groups (rex device help)
  rex run TARGETS [--json] [--gather] [--timeout D] [--concurrency N] -- CMD [ARG...]
  rex attach TARGET [-- CMD [ARG...]]   interactive terminal; ctrl+] detaches
  rex push LOCAL_DIR REMOTE_DIR TARGETS send a tree; only what a target lacks crosses the wire
  rex pull REMOTE_DIR LOCAL_DIR TARGET  bring a tree back, merged with local changes
  rex tool list | show ID | run ID [--param K=V]... [--target TARGETS] [--trace]
  rex version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o := commands.IO{In: stdin, Out: stdout, Err: stderr, Styled: isTerminal(stdout)}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	verb := ""
	if len(args) > 0 {
		verb, args = args[0], args[1:]
	}
	paths := commands.Paths{
		Config: filepath.Join(xdg.ConfigHome, "rex"),
		Cache:  filepath.Join(xdg.CacheHome, "rex"),
		State:  filepath.Join(xdg.StateHome, "rex"),
	}
	var err error
	switch verb {
	case "device", "devices":
		setup, serr := commands.NewSetup(paths, commands.SetupOptions{})
		if serr != nil {
			err = serr
			break
		}
		err = commands.DeviceWith(ctx, setup.Store, setup.DeviceRemote(), o, args)
	case "run", "attach", "push", "pull", "tool":
		setup, serr := commands.NewSetup(paths, commands.SetupOptions{})
		if serr != nil {
			err = serr
			break
		}
		app := setup.App(fanout.PoolOptions{})
		defer app.Pool.Close()
		switch verb {
		case "run":
			err = commands.Run(ctx, app, o, args)
		case "attach":
			err = commands.Attach(ctx, app, o, args)
		case "push":
			err = commands.Push(ctx, app, o, args)
		case "pull":
			err = commands.Pull(ctx, app, o, args)
		case "tool":
			err = commands.Tool(ctx, app, o, args)
		}
	case "version", "--version":
		fmt.Fprintf(stdout, "rex %s\n", version.Version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	case "":
		err = console(ctx, paths)
	default:
		fmt.Fprintf(stderr, "rex: unknown command %q\n%s", verb, usage)
		return 2
	}
	if err != nil {
		var ee *commands.ExitError
		if !errors.As(err, &ee) || ee.Err != nil {
			if !errors.Is(err, commands.ErrDetached) {
				fmt.Fprintf(stderr, "rex: %v\n", err)
			}
		}
		if errors.Is(err, commands.ErrDetached) {
			return 0
		}
		return commands.ExitCode(err)
	}
	return 0
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("NO_COLOR") == ""
}

// console opens the full-screen console.
func console(ctx context.Context, paths commands.Paths) error {
	states := &tui.ConnStates{}
	setup, err := commands.NewSetup(paths, commands.SetupOptions{Console: true, OnState: states.Report})
	if err != nil {
		return err
	}
	return tui.Run(ctx, tui.Options{
		Store:     setup.Store,
		Connector: setup.Connectors,
		Resolve:   commands.Resolver(setup.Store),
		ConfigDir: paths.Config,
		StateDir:  paths.State,
		CacheDir:  paths.Cache,
		DeviceVerb: func(ctx context.Context, o commands.IO, args []string) error {
			return commands.DeviceWith(ctx, setup.Store, setup.DeviceRemote(), o, args)
		},
		States: states,
	})
}
