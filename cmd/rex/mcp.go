package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rexconsole/rex/internal/mcpserver"
	"github.com/rexconsole/rex/internal/server"
	"github.com/rexconsole/rex/internal/toolset"
)

func newMCPCmd(e *env) *cobra.Command {
	var spec mcpserver.Spec
	cmd := &cobra.Command{
		Use:   "mcp [--target TARGETS] [--read-only] [--allow TOOL...] [--allow-retarget]",
		Short: "Serve rex's tools to an MCP client (Claude Code, Cursor, VS Code…) on stdio",
		Long: `Serve the agent's toolset (bash, read, write, edit, list, glob, grep,
job_output, job_kill and the executor chain's tools) plus targets to an MCP
client over stdin and stdout. The client never names a host: every call runs
on --target, else on the console's current target when a rex server runs,
else on local. On a group a call runs on every host and answers with one
block per set of hosts that ended alike and a summary line. Output streams
as progress notifications and log messages; a command still running after
--background-after becomes a job (job_output, job_kill). Every call is in
each host's rexd audit log as rex-mcp/<client name>.

--print-config prints the JSON a client needs to start this server with the
same flags.`,
		Example: `  rex mcp --print-config claude
  rex mcp --target web --read-only --print-config vscode
  claude mcp add rex -- rex mcp --target web`,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := spec.Args(args); err != nil {
				return err
			}
			if spec.PrintConfig != "" {
				return printMCPConfig(e, spec)
			}
			setup, err := e.Setup()
			if err != nil {
				return err
			}
			app, err := e.App()
			if err != nil {
				return err
			}
			return mcpserver.Serve(cmd.Context(), mcpserver.Env{
				App: app, Store: setup.Store, ConsoleTarget: consoleTarget,
				In: readCloser(e.io.In), Out: writeCloser(e.io.Out), Notices: e.io.Err,
			}, spec)
		},
	}
	spec.Bind(cmd.Flags())
	cmd.RegisterFlagCompletionFunc("target", completeTargets(e, -1))
	cmd.RegisterFlagCompletionFunc("exclude", completeTargets(e, -1))
	cmd.RegisterFlagCompletionFunc("print-config", cobra.FixedCompletions([]cobra.Completion{"claude", "cursor", "vscode"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("allow", cobra.FixedCompletions(append(toolset.BuiltinNames(), mcpserver.Targets, mcpserver.UseTarget), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// consoleTarget asks the per-user rex server which target its console is
// on, over its socket: ok false when no server runs, an error when one
// runs but does not answer (the call then fails rather than going to
// local). A server is never started for this.
func consoleTarget(ctx context.Context) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, consoleAskWait)
	defer cancel()
	c, err := dialServer(ctx)
	var none *server.ErrNoServer
	if errors.As(err, &none) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("ask the rex server for the console's target: %w", err)
	}
	defer c.Close()
	t, err := c.Target(ctx)
	if err != nil {
		return "", false, fmt.Errorf("ask the rex server (pid %d) for the console's target: %w", c.Hello.Pid, err)
	}
	return t, true, nil
}

// consoleAskWait bounds asking the rex server for its target.
const consoleAskWait = 5 * time.Second

// printMCPConfig prints the snippet on stdout and where it goes on
// stderr.
func printMCPConfig(e *env, spec mcpserver.Spec) error {
	snippet, where, err := mcpserver.Config(spec.PrintConfig, rexPath(), spec.Flags())
	if err != nil {
		return err
	}
	if _, err := e.io.Out.Write(snippet); err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.io.Err, where)
	return err
}

// rexPath is how a client should start this rex: the path it was started
// by when that is absolute or on PATH (a symlink that upgrades keep
// pointing at the newest rex), else the executable itself.
func rexPath() string {
	arg0 := os.Args[0]
	if strings.Contains(arg0, string(filepath.Separator)) {
		if p, err := filepath.Abs(arg0); err == nil {
			return p
		}
	} else if p, err := exec.LookPath(arg0); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	if p, err := os.Executable(); err == nil {
		return p
	}
	return "rex"
}

func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func writeCloser(w io.Writer) io.WriteCloser {
	if wc, ok := w.(io.WriteCloser); ok {
		return wc
	}
	return nopWriteCloser{w}
}
