package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/pflag"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
)

// Usage is the synopsis of rex mcp.
const Usage = "rex mcp [--target TARGETS] [--read-only] [--allow TOOL...] [--allow-retarget] [--print-config claude|cursor|vscode]"

// Spec is `rex mcp`'s command line.
type Spec struct {
	Targets         commands.TargetFlags
	Reach           commands.ReachFlags
	ReadOnly        bool
	Allow           []string
	AllowRetarget   bool
	BackgroundAfter time.Duration
	PrintConfig     string
}

// Bind declares rex mcp's flags.
func (s *Spec) Bind(fs *pflag.FlagSet) {
	s.Targets.Bind(fs)
	s.Reach.Bind(fs)
	fs.BoolVar(&s.ReadOnly, "read-only", false, "offer only the tools that change nothing (read, list, glob, grep, job_output, targets)")
	fs.StringSliceVar(&s.Allow, "allow", nil, "offer only these tools (repeatable or comma-separated); job_output and job_kill come with bash, grep and chain tools")
	fs.BoolVar(&s.AllowRetarget, "allow-retarget", false, "offer use_target, with which the client changes the target")
	fs.DurationVar(&s.BackgroundAfter, "background-after", DefaultBackgroundAfter, "move a command still running after D to the background (a job), so no client request times out")
	fs.StringVar(&s.PrintConfig, "print-config", "", "print the JSON that adds this server to `CLIENT` (claude, cursor or vscode) and exit")
}

// Args checks the words after the flags: there are none.
func (s *Spec) Args(args []string) error {
	if len(args) > 0 {
		return commands.Usagef("rex mcp takes no arguments (the target is --target); usage: %s", Usage)
	}
	if s.BackgroundAfter <= 0 {
		return commands.Usagef("--background-after must be more than 0")
	}
	if s.PrintConfig != "" {
		if _, ok := clients[s.PrintConfig]; !ok {
			return commands.Usagef("--print-config %s: the clients are claude, cursor and vscode", s.PrintConfig)
		}
	}
	return nil
}

// Flags are the arguments that give a server this spec's settings, for
// a client's configuration.
func (s *Spec) Flags() []string {
	args := []string{"mcp"}
	if s.Targets.Target != "" {
		args = append(args, "--target", s.Targets.Target)
	}
	for _, x := range s.Targets.Exclude {
		args = append(args, "--exclude", x)
	}
	if s.Reach.ConnectTimeout > 0 {
		args = append(args, "--connect-timeout", s.Reach.ConnectTimeout.String())
	}
	if s.Reach.Concurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(s.Reach.Concurrency))
	}
	if s.ReadOnly {
		args = append(args, "--read-only")
	}
	for _, a := range s.Allow {
		args = append(args, "--allow", a)
	}
	if s.AllowRetarget {
		args = append(args, "--allow-retarget")
	}
	if s.BackgroundAfter != DefaultBackgroundAfter && s.BackgroundAfter > 0 {
		args = append(args, "--background-after", s.BackgroundAfter.String())
	}
	return args
}

// client is how one MCP client is configured.
type client struct {
	// key holds the servers; typed adds "type": "stdio".
	key   string
	typed bool
	where string
}

var clients = map[string]client{
	"claude": {key: "mcpServers", where: "Add it to .mcp.json in your project (Claude Code) or to claude_desktop_config.json (Claude Desktop), or run: claude mcp add rex -- %s"},
	"cursor": {key: "mcpServers", where: "Add it to .cursor/mcp.json in your project or to ~/.cursor/mcp.json."},
	"vscode": {key: "servers", typed: true, where: "Add it to .vscode/mcp.json in your workspace (or run MCP: Add Server in VS Code)."},
}

// Config writes the JSON snippet that adds `exe args...` as the MCP
// server "rex" to the named client, and the sentence that says where it
// goes.
func Config(name, exe string, args []string) (snippet []byte, where string, err error) {
	c, ok := clients[name]
	if !ok {
		return nil, "", commands.Usagef("--print-config %s: the clients are claude, cursor and vscode", name)
	}
	type server struct {
		Type    string   `json:"type,omitempty"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	srv := server{Command: exe, Args: args}
	if c.typed {
		srv.Type = "stdio"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{c.key: map[string]any{"rex": srv}}); err != nil {
		return nil, "", err
	}
	where = c.where
	if strings.Contains(where, "%s") {
		where = fmt.Sprintf(where, shellWords(append([]string{exe}, args...)))
	}
	return b.Bytes(), where, nil
}

// shellWords writes argv for a POSIX shell.
func shellWords(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@%+") == "" {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// Env is what rex mcp needs of the command line's setup.
type Env struct {
	App   *commands.App
	Store *devices.Store
	// ConsoleTarget is the rex server's answer; nil is NoConsole.
	ConsoleTarget ConsoleTargetFunc
	// In and Out carry the protocol; Notices gets operator messages
	// (stderr: the client shows or logs it).
	In      io.ReadCloser
	Out     io.WriteCloser
	Notices io.Writer
}

// Serve is `rex mcp`: the server on In and Out until the client closes
// them or ctx ends; then every command the client left running is
// stopped.
func Serve(ctx context.Context, env Env, spec Spec) error {
	if spec.Reach.ConnectTimeout > 0 {
		env.App.ConnectTimeout = spec.Reach.ConnectTimeout
	}
	srv, err := New(Options{
		App: env.App, Store: env.Store, ConsoleTarget: env.ConsoleTarget,
		Target:   spec.Targets.Spec(spec.Targets.Target),
		ReadOnly: spec.ReadOnly, Allow: spec.Allow, AllowRetarget: spec.AllowRetarget,
		Concurrency: spec.Reach.Concurrency, BackgroundAfter: spec.BackgroundAfter,
		Notices: env.Notices,
	})
	if err != nil {
		return err
	}
	where := "the console's /target when a rex server runs, else local"
	if t := spec.Targets.Spec(spec.Targets.Target); t != "" {
		where = t
	}
	srv.notice("rex mcp: serving %s on %s; calls are audited as %s<client>", strings.Join(srv.Tools(), ", "), where, ClientPrefix)
	return srv.Run(ctx, &mcp.IOTransport{Reader: env.In, Writer: env.Out})
}
