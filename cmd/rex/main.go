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
	"runtime"
	"syscall"

	"github.com/adrg/xdg"
	"golang.org/x/term"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/sshx"
	"github.com/rexconsole/rex/internal/version"
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
	var err error
	switch verb {
	case "device", "devices":
		store, serr := devices.OpenDefault()
		if serr != nil {
			err = serr
			break
		}
		err = commands.DeviceWith(ctx, store, commands.SSHDeviceRemote{Dialer: newDialer(stderr)}, o, args)
	case "run", "attach", "push", "pull", "tool":
		app, cleanup, aerr := newApp()
		if aerr != nil {
			err = aerr
			break
		}
		defer cleanup()
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
		fmt.Fprint(stderr, usage)
		return 2
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

// newApp wires the connection pool and target resolution.
func newApp() (*commands.App, func(), error) {
	store, err := devices.OpenDefault()
	if err != nil {
		return nil, nil, err
	}
	rexdPath, err := payload.LocalRexd(payload.Embedded(), filepath.Join(xdg.CacheHome, "rex"), version.Version)
	if err != nil {
		return nil, nil, err
	}
	connectors := commands.Connectors{
		Local: fanout.LocalConnector(rexdPath, fanout.OperatorLimits()...),
		SSH:   commands.SSHConnector{Dialer: newDialer(os.Stderr)},
	}
	pool := fanout.NewPool(connectors, fanout.PoolOptions{})
	app := &commands.App{
		Pool:      pool,
		Resolve:   commands.Resolver(store),
		CASDir:    filepath.Join(xdg.CacheHome, "rex", "cas"),
		ConfigDir: filepath.Join(xdg.ConfigHome, "rex"),
		CacheDir:  filepath.Join(xdg.CacheHome, "rex"),
	}
	return app, func() { pool.Close() }, nil
}

// newDialer is SSH as the operator's own OpenSSH files configure it, with
// the rexd builds this rex carries (or the rexd beside a development build)
// and a terminal prompt for key passphrases.
func newDialer(stderr io.Writer) *sshx.Dialer {
	var sources []payload.Source
	sources = append(sources, payload.Embedded())
	if exe, err := os.Executable(); err == nil {
		sources = append(sources, payload.File(runtime.GOOS, runtime.GOARCH, filepath.Join(filepath.Dir(exe), "rexd")))
	}
	return sshx.NewDialer(sshx.Options{
		Payload:    payload.Chain(sources...),
		RexdArgs:   fanout.OperatorLimits(),
		Passphrase: askPassphrase(stderr),
	})
}

// askPassphrase reads a key's passphrase from the controlling terminal,
// echo off; without a terminal there is no way to ask.
func askPassphrase(stderr io.Writer) func(string) ([]byte, error) {
	return func(keyPath string) ([]byte, error) {
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
}
