package chain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/rexconsole/rex/internal/secrets"
)

// Target is the machine a tool runs on. Interpreter resolution probes it
// (Environ, Stat, LookPath, and Run for resolve commands), because the
// interpreter that matters is the one where the tool runs. LocalTarget is
// this machine; a rexd-backed implementation serves remote devices.
type Target interface {
	// Name labels the target in errors and traces ("local", a device name).
	Name() string
	// Environ returns the environment a process started by Run inherits
	// before RunRequest.Env is laid over it.
	Environ(ctx context.Context) (map[string]string, error)
	// Stat describes path on the target, following symlinks. A path that
	// does not exist is FileInfo{Exists: false} and no error.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// LookPath finds an executable regular file called name in the
	// colon-separated directories of pathList, like `command -v`. It
	// returns an error wrapping ErrNotFound when there is none.
	// LookPathWithStat implements it on top of Stat.
	LookPath(ctx context.Context, name, pathList string) (string, error)
	// Run runs req.Argv (never a shell string) and returns how it ended. A
	// non-zero exit is a result, not an error; an error means the process
	// could not be started or waited for.
	Run(ctx context.Context, req RunRequest) (RunResult, error)
}

// FileInfo is what Stat reports.
type FileInfo struct {
	Exists bool
	IsDir  bool
	Mode   fs.FileMode // permission bits at least
}

// Executable reports whether the file is a regular file with an execute bit.
func (fi FileInfo) Executable() bool {
	return fi.Exists && !fi.IsDir && fi.Mode.Perm()&0o111 != 0
}

// RunRequest is one process to run on a target.
type RunRequest struct {
	Argv    []string
	Env     map[string]string // laid over the target's environment
	Cwd     string            // "" means the target's default
	Stdin   []byte            // written to the process, then closed
	Timeout time.Duration     // 0 means none
	Stdout  io.Writer         // nil discards
	Stderr  io.Writer         // nil discards
}

// RunResult is how a process ended.
type RunResult struct {
	ExitCode int    // 128+n when killed by signal n
	Signal   string // the signal's name when killed by one
	TimedOut bool   // killed because Timeout passed
}

// LookPathWithStat searches pathList for an executable called name using
// only stat, so any Target with a Stat probe can implement LookPath with it.
// Empty entries in pathList are skipped rather than meaning ".", which could
// pick up files from whatever the working directory is.
func LookPathWithStat(ctx context.Context, stat func(ctx context.Context, path string) (FileInfo, error), name, pathList string) (string, error) {
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("look up %q: not a plain program name: %w", name, ErrNotFound)
	}
	for _, dir := range strings.Split(pathList, ":") {
		if dir == "" || !path.IsAbs(dir) {
			continue
		}
		p := path.Join(dir, name)
		fi, err := stat(ctx, p)
		if err != nil {
			return "", fmt.Errorf("look up %s: %w", name, err)
		}
		if fi.Executable() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not in PATH: %w", name, ErrNotFound)
}

// LocalTarget runs on this machine with os/exec.
type LocalTarget struct {
	// Env, when not nil, replaces os.Environ() as the inherited
	// environment; tests use it to stay hermetic.
	Env map[string]string
	// KillGrace is how long a process may take to exit after it was told to
	// stop (timeout or cancelled context) before it is killed; 0 means 2s.
	KillGrace time.Duration
}

// Name returns "local".
func (t *LocalTarget) Name() string { return "local" }

// Environ returns Env or the process environment.
func (t *LocalTarget) Environ(context.Context) (map[string]string, error) {
	if t.Env != nil {
		out := make(map[string]string, len(t.Env))
		for k, v := range t.Env {
			out[k] = v
		}
		return out, nil
	}
	out := map[string]string{}
	// Without rex's passphrase: a tool planned or run here must not
	// expand or inherit what opens every secret rex keeps.
	for _, kv := range secrets.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			out[k] = v
		}
	}
	return out, nil
}

// Stat stats path on this machine.
func (t *LocalTarget) Stat(_ context.Context, p string) (FileInfo, error) {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
			return FileInfo{}, nil
		}
		return FileInfo{}, err
	}
	return FileInfo{Exists: true, IsDir: fi.IsDir(), Mode: fi.Mode()}, nil
}

// LookPath searches pathList on this machine.
func (t *LocalTarget) LookPath(ctx context.Context, name, pathList string) (string, error) {
	return LookPathWithStat(ctx, t.Stat, name, pathList)
}

// Run runs the request with os/exec. The program is looked up in the PATH
// of the merged environment, not rex's own.
func (t *LocalTarget) Run(ctx context.Context, req RunRequest) (RunResult, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return RunResult{}, errors.New("run: empty command")
	}
	env, err := t.Environ(ctx)
	if err != nil {
		return RunResult{}, err
	}
	for k, v := range req.Env {
		env[k] = v
	}
	prog := req.Argv[0]
	if !strings.Contains(prog, "/") {
		if prog, err = t.LookPath(ctx, prog, env["PATH"]); err != nil {
			return RunResult{}, fmt.Errorf("run %s: %w", req.Argv[0], err)
		}
	}
	parent := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, prog, req.Argv[1:]...)
	cmd.Args[0] = req.Argv[0]
	cmd.Dir = req.Cwd
	cmd.Env = envList(env)
	cmd.Stdin = bytes.NewReader(req.Stdin)
	cmd.Stdout, cmd.Stderr = orDiscard(req.Stdout), orDiscard(req.Stderr)
	grace := t.KillGrace
	if grace <= 0 {
		grace = 2 * time.Second
	}
	cmd.WaitDelay = grace
	setProcessGroup(cmd)
	err = cmd.Run()
	var res RunResult
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
		if sig, ok := exitSignal(cmd.ProcessState); ok {
			res.Signal = sig.name
			res.ExitCode = 128 + sig.num
		}
	}
	if perr := parent.Err(); perr != nil {
		return res, fmt.Errorf("run %s: %w", req.Argv[0], perr)
	}
	if req.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		res.TimedOut = true
		return res, nil
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		if cmd.ProcessState == nil {
			return res, fmt.Errorf("run %s: %w", req.Argv[0], err)
		}
	}
	return res, nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
