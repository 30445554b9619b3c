// Command rexd serves REXD v1 (JSON-RPC 2.0, one JSON object per line) on
// its standard input and output.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexd"
	"github.com/rexconsole/rex/internal/version"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 2 && args[0] == rexd.GuardFlag {
		grace, err := rexd.ParseGuardGrace(args[1])
		if err != nil {
			fmt.Fprintf(stderr, "rexd: %v\n", err)
			return 2
		}
		rexd.RunGuard(stdin, grace)
		return 0
	}
	fs := flag.NewFlagSet("rexd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		stdio, showVersion, noAudit bool
		configPath, auditPath       string
		buildHash                   string
		roots, limits               multiFlag
		nice                        int
		niceSSH                     bool
	)
	fs.BoolVar(&stdio, "stdio", false, "serve REXD v1 on standard input and output")
	fs.StringVar(&configPath, "config", "", "read configuration from `PATH` (default "+rexd.SystemConfigPath+" if present)")
	fs.Var(&roots, "root", "allow file operations and cwd under `DIR` (repeatable; default: the home directory)")
	fs.StringVar(&auditPath, "audit", "", "append the audit log to `PATH` (default ~/.local/state/rexd/audit.log)")
	fs.BoolVar(&noAudit, "no-audit", false, "do not write an audit log")
	fs.Var(&limits, "limit", "set a limit, `NAME=VALUE` with NAME as in the config's [limits] (repeatable); 0 means none for timeouts and output")
	fs.IntVar(&nice, "nice", 0, "run at nice `N` (rex starts a bulk lane's rexd so: a transfer yields the CPU to interactive work)")
	fs.BoolVar(&niceSSH, "nice-ssh", false, "with --nice, also lower the sshd that started rexd (rex asks it for a lane with an SSH connection of its own)")
	fs.StringVar(&buildHash, "build-hash", "", "this executable's SHA-256 as `HEX`, as the one who starts it checked it: rexd does not hash itself then (rex's boot script passes it when a stat shows the file unchanged since it was hashed)")
	fs.BoolVar(&showVersion, "version", false, "print \"rexd <version> <build-hash>\" and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rexd --stdio [--config PATH] [--root DIR]... [--audit PATH] [--limit NAME=VALUE]... [--nice N [--nice-ssh]]")
		fmt.Fprintln(stderr, "       rexd --version")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	hash := buildHash
	if hash == "" || showVersion {
		// Hashing the 4 MB executable is most of a start's own time: a
		// starter that has checked it says so instead. --version always
		// reports what the file holds.
		var err error
		if hash, err = rexd.BuildHash(); err != nil {
			fmt.Fprintf(stderr, "rexd: %v\n", err)
			return 1
		}
	} else if !isSHA256(hash) {
		fmt.Fprintf(stderr, "rexd: --build-hash %q is not a SHA-256 in hex\n", hash)
		return 2
	}
	if showVersion {
		fmt.Fprintf(stdout, "rexd %s %s\n", version.Version, hash)
		return 0
	}
	if !stdio || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}

	if nice > 0 {
		if err := lowerPriority(nice, niceSSH); err != nil {
			fmt.Fprintf(stderr, "rexd: --nice %d: %v; going on at the usual priority\n", nice, err)
		}
	}
	cfg := rexd.DefaultConfig()
	cfg.Version, cfg.BuildHash = version.Version, hash
	cfg.UsageDirs = rexd.DefaultUsageDirs()
	var warnOnce sync.Once
	cfg.Warn = func(err error) {
		warnOnce.Do(func() { fmt.Fprintf(stderr, "rexd: %v\n", err) })
	}
	if configPath == "" {
		if _, err := os.Stat(rexd.SystemConfigPath); err == nil {
			configPath = rexd.SystemConfigPath
		}
	}
	if configPath != "" {
		if err := cfg.LoadFile(configPath); err != nil {
			fmt.Fprintf(stderr, "rexd: %v\n", err)
			return 2
		}
	}
	if len(roots) > 0 {
		cfg.Roots = roots
	}
	if auditPath != "" {
		cfg.AuditPath = auditPath
	}
	if noAudit {
		cfg.AuditPath = ""
	}
	for _, l := range limits {
		if err := setLimit(&cfg, l); err != nil {
			fmt.Fprintf(stderr, "rexd: %v\n", err)
			return 2
		}
	}
	if exe, err := os.Executable(); err == nil {
		cfg.GuardExe = exe
	}
	srv, err := rexd.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "rexd: %v\n", err)
		return 1
	}
	defer srv.Close()

	// A write to a closed stdout must be an error, not a silent death, so
	// the children still get cleaned up. Notify (unlike Ignore) is not
	// inherited by the children.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	if f, ok := stdin.(*os.File); ok {
		// Only here, serving: the non-blocking flag belongs to the pipe's
		// open file and outlives rexd, which is why --version and the
		// other paths leave it alone (rex's boot script execs rexd, so
		// nothing else reads that pipe after it).
		others := []*os.File{}
		for _, w := range []io.Writer{stdout, stderr} {
			if o, ok := w.(*os.File); ok {
				others = append(others, o)
			}
		}
		stdin = rexd.PollableStdin(f, others...)
	}
	if v, ok := os.LookupEnv(protocol.FirstEnv); ok {
		os.Unsetenv(protocol.FirstEnv) // not for the processes it starts
		first, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			fmt.Fprintf(stderr, "rexd: %s is not base64: %v\n", protocol.FirstEnv, err)
			return 2
		}
		stdin = io.MultiReader(bytes.NewReader(first), stdin)
	}
	err = srv.Serve(ctx, stdin, stdout)
	// Resumable sessions outlive the connection: this rexd stays while
	// they wait to be resumed (or are served again, relayed by another
	// rexd), until they are closed or their grace runs out.
	srv.Linger(ctx)
	// Detached processes of closed sessions may still run: this rexd
	// stays (holding their place in the per-user limits) until they end,
	// or until it is told to stop.
	srv.WaitProcesses(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "rexd: %v\n", err)
		return 1
	}
	return 0
}

func setLimit(cfg *rexd.Config, kv string) error {
	name, val, ok := strings.Cut(kv, "=")
	n, err := strconv.ParseInt(val, 10, 64)
	if !ok || err != nil || n < 0 {
		return fmt.Errorf("--limit %q: want NAME=VALUE with a non-negative integer", kv)
	}
	l := &cfg.Limits
	switch name {
	case "default_timeout_ms":
		l.DefaultTimeoutMS = n
	case "hard_timeout_ms":
		l.HardTimeoutMS = n
	case "max_output_bytes":
		l.MaxOutputBytes = n
	case "max_file_read_bytes":
		l.MaxFileReadBytes = n
	case "max_processes_per_session":
		l.MaxProcessesPerSession = n
	case "max_concurrent_sessions":
		l.MaxConcurrentSessions = n
	case "max_processes_per_user":
		l.MaxProcessesPerUser = n
	case "resume_grace_ms":
		cfg.ResumeGrace = time.Duration(n) * time.Millisecond
	case "resume_buffer_bytes":
		if n == 0 {
			return fmt.Errorf("--limit %q: resume_buffer_bytes must be positive", kv)
		}
		cfg.ResumeBuffer = n
	default:
		return fmt.Errorf("--limit %q: unknown limit %q", kv, name)
	}
	return nil
}

// isSHA256 reports whether s is 64 lowercase hex digits.
func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
