package toolset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aymanbagabas/go-udiff"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/rexclient"
)

// prepare decodes a call's input into a and works out what it will do.
func (ts *Toolset) prepare(ctx context.Context, a *Action, raw json.RawMessage) error {
	if a.Tool.ChainID != "" {
		return ts.prepareChain(a, raw)
	}
	in, err := a.Tool.decode(raw)
	if err != nil {
		return err
	}
	a.input = in
	switch in := in.(type) {
	case *BashInput:
		if strings.TrimSpace(in.Command) == "" {
			return errors.New("command is empty")
		}
		if in.TimeoutS < 0 {
			return errors.New("timeout_s must be positive")
		}
		a.Command, a.Stdin = in.Command, in.Stdin
		if in.Stdin != "" {
			// What a command reads can be what it runs (sh, python3 -).
			a.Detail = fmt.Sprintf("stdin (%s):\n%s", commands.HumanBytes(int64(len(in.Stdin))), compact(text(in.Stdin), 40))
		}
	case *ReadInput:
		if in.Offset < 0 || in.Limit < 0 {
			return errors.New("offset and limit must be positive")
		}
		a.Path, a.Command = in.Path, "read "+in.Path
	case *WriteInput:
		a.Path = in.Path
		a.Command = fmt.Sprintf("write %s (%s) to %s", plural(strings.Count(in.Content, "\n")+boolInt(!strings.HasSuffix(in.Content, "\n") && in.Content != ""), "line"),
			commands.HumanBytes(int64(len(in.Content))), in.Path)
		a.Detail = compact(text(in.Content), 40)
	case *EditInput:
		if in.Old == "" {
			return errors.New("old is empty; to create a file use write")
		}
		if in.Old == in.New {
			return errors.New("old and new are the same; nothing would change")
		}
		a.Path, a.Command = in.Path, "edit "+in.Path
		if in.ReplaceAll {
			a.Command += " (every occurrence)"
		}
		a.Detail = editDiff(in.Path, in.Old, in.New)
	case *ListInput:
		if in.Depth < 0 {
			return errors.New("depth must be positive")
		}
		a.Path, a.Command = in.Path, "list "+in.Path
	case *GlobInput:
		a.Path, a.Command = in.Path, "glob "+in.Pattern
	case *GrepInput:
		a.Path, a.Command = in.Path, "grep "+in.Pattern
	case *JobInput:
		ts.prepareJob(a, in.JobID)
	case *JobKillInput:
		ts.prepareJob(a, in.JobID)
	}
	return nil
}

// editDiff is the unified diff of an edit's old and new text.
func editDiff(path, old, new string) string {
	if !strings.HasSuffix(old, "\n") || !strings.HasSuffix(new, "\n") {
		old, new = old+"\n", new+"\n"
	}
	return udiff.Unified(path, path, old, new)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (ts *Toolset) runBash(ctx context.Context, a *Action, progress func(Event)) *Result {
	in := a.input.(*BashInput)
	task := fanout.Task{Command: in.Command}
	if in.Stdin != "" {
		task.Stdin = []byte(in.Stdin)
	}
	timeout := ts.lim.defaultTimeout
	if in.TimeoutS > 0 {
		timeout = min(time.Duration(in.TimeoutS)*time.Second, ts.lim.maxTimeout)
	}
	j := ts.startJob(a, progress, exitStatus, func(ctx context.Context, onEvent func(fanout.Event)) {
		fanout.Run(ctx, ts.opts.App.Pool, a.targets, task, ts.fanOpts(onEvent))
	})
	return ts.wait(ctx, j, timeout)
}

// grepStatus: grep exits 1 when nothing matched, which is an answer.
func grepStatus(r *fanout.Result) (bool, string) {
	if r.Err == nil && r.ExitCode != nil && *r.ExitCode == 1 {
		return true, "no matches"
	}
	if r.Err == nil && r.ExitCode != nil && *r.ExitCode == 0 {
		return true, "matches"
	}
	return exitStatus(r)
}

// runGrep runs grep on the hosts as an argv: the pattern and paths are
// arguments, never shell text.
func (ts *Toolset) runGrep(ctx context.Context, a *Action, progress func(Event)) *Result {
	in := a.input.(*GrepInput)
	argv := append([]string{"grep", "-rnIE", "--color=never"}, grepExcludes()...)
	if in.Glob != "" {
		argv = append(argv, "--include="+in.Glob)
	}
	path := in.Path
	if path == "" {
		path = "."
	}
	path = expandTilde(path)
	argv = append(argv, "-e", in.Pattern, "--", path)
	j := ts.startJob(a, progress, grepStatus, func(ctx context.Context, onEvent func(fanout.Event)) {
		// grep reads whatever path it is given: rexd first checks the
		// path against each host's roots, as it does the file tools'
		// paths, and a host where it lies outside answers with that.
		// (grep -r follows no symbolic link below the path.)
		var inside []fanout.Target
		checked := fanout.Each(ctx, ts.opts.App.Pool, a.targets, ts.fanOpts(nil),
			func(ctx context.Context, t fanout.Target, s *rexclient.Session) error {
				if err := credentialPath(path, s.Info.Cwd, t.Name == commands.LocalName); err != nil {
					return err
				}
				if _, err := s.Stat(ctx, path); err != nil {
					return errors.New(homeRel(s, fsError(err)))
				}
				return nil
			})
		for i, r := range checked {
			if r.Err == nil {
				inside = append(inside, a.targets[i])
				continue
			}
			onEvent(fanout.Event{Target: r.Target, Kind: fanout.EventResult,
				Result: &fanout.Result{Target: r.Target, Err: r.Err, Unreachable: r.Unreachable}})
		}
		if len(inside) > 0 {
			fanout.Run(ctx, ts.opts.App.Pool, inside, fanout.Task{Argv: argv}, ts.fanOpts(onEvent))
		}
	})
	return ts.wait(ctx, j, ts.lim.defaultTimeout)
}

// expandTilde makes "~/x" relative: a process starts in the remote home,
// and no shell is there to expand it.
func expandTilde(p string) string {
	if p == "~" {
		return "."
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if rest == "" {
			return "."
		}
		return rest
	}
	return p
}
