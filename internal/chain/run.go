package chain

import (
	"context"
	"fmt"
	"io"
)

// Run runs a plan on t, streaming the tool's output to stdout and stderr,
// and returns its exit code (128+n when killed by signal n). A non-zero exit
// is not an error. When the plan's timeout passes, Run returns 124 and an
// error; when the process cannot be started, -1 and an error.
func Run(ctx context.Context, p *Plan, t Target, stdout, stderr io.Writer) (int, error) {
	return RunWith(ctx, p, t, nil, stdout, stderr)
}

// RunWith is Run with variables laid over the plan's environment: the
// values of the plan's secrets and REX_OUTPUT. They reach the process's
// environment and nothing else; the plan never holds them.
func RunWith(ctx context.Context, p *Plan, t Target, extra map[string]string, stdout, stderr io.Writer) (int, error) {
	env := p.Env
	if len(extra) > 0 {
		env = make(map[string]string, len(p.Env)+len(extra))
		for k, v := range p.Env {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
	}
	res, err := t.Run(ctx, RunRequest{
		Argv:    p.Argv,
		Env:     env,
		Cwd:     p.Cwd,
		Stdin:   p.Stdin,
		Timeout: p.Timeout,
		Stdout:  stdout,
		Stderr:  stderr,
	})
	if err != nil {
		return -1, fmt.Errorf("run tool %s on %s: %w", p.ID, t.Name(), err)
	}
	if res.TimedOut {
		return 124, fmt.Errorf("tool %s on %s did not finish within %s and was stopped; raise timeout in its config if it needs longer", p.ID, t.Name(), p.Timeout)
	}
	return res.ExitCode, nil
}
