package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// Process is a process started with its standard input and output as
// streams: an MCP server speaking on them.
type Process interface {
	Stdin() io.WriteCloser
	Stdout() io.ReadCloser
	// Wait waits for the process to end (after its stdin is closed, or it
	// was stopped).
	Wait() (RunResult, error)
	// Stop ends the process and what it started.
	Stop()
}

// Starter is a Target that can start a process with streams.
type Starter interface {
	Start(ctx context.Context, req RunRequest) (Process, error)
}

// Start starts req.Argv on this machine with pipes for stdin and stdout;
// stderr goes to req.Stderr. Cancelling ctx stops it.
func (t *LocalTarget) Start(ctx context.Context, req RunRequest) (Process, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, errors.New("start: empty command")
	}
	env, err := t.Environ(ctx)
	if err != nil {
		return nil, err
	}
	for k, v := range req.Env {
		env[k] = v
	}
	prog := req.Argv[0]
	if !strings.Contains(prog, "/") {
		if prog, err = t.LookPath(ctx, prog, env["PATH"]); err != nil {
			return nil, fmt.Errorf("start %s: %w", req.Argv[0], err)
		}
	}
	cmd := exec.CommandContext(ctx, prog, req.Argv[1:]...)
	cmd.Args[0] = req.Argv[0]
	cmd.Dir = req.Cwd
	cmd.Env = envList(env)
	cmd.Stderr = orDiscard(req.Stderr)
	setProcessGroup(cmd)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", req.Argv[0], err)
	}
	return &localProcess{cmd: cmd, in: in, out: out}, nil
}

type localProcess struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out io.ReadCloser
}

func (p *localProcess) Stdin() io.WriteCloser { return p.in }
func (p *localProcess) Stdout() io.ReadCloser { return p.out }

func (p *localProcess) Wait() (RunResult, error) {
	err := p.cmd.Wait()
	var res RunResult
	if ps := p.cmd.ProcessState; ps != nil {
		res.ExitCode = ps.ExitCode()
		if sig, ok := exitSignal(ps); ok {
			res.Signal, res.ExitCode = sig.name, 128+sig.num
		}
		return res, nil
	}
	return res, err
}

func (p *localProcess) Stop() {
	if p.cmd.Cancel != nil {
		p.cmd.Cancel()
	} else if p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
}
