package tui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/tui/engine"
)

// pushFunc and pullFunc are how /push and /pull do their work
// (commands.PushTargets and commands.PullFrom).
type (
	pushFunc func(ctx context.Context, app *commands.App, req commands.PushRequest, targets []fanout.Target, opts commands.SyncOptions) ([]commands.PushOutcome, error)
	pullFunc func(ctx context.Context, app *commands.App, targets []fanout.Target, req commands.PullRequest, opts commands.SyncOptions) []commands.PullOutcome
)

// syncRowCount is how many rows a sync pane's progress takes: what it is
// doing, then a bar.
const syncRowCount = 2

func (p *outputPane) syncHeight() int {
	if _, ok := p.sync(); !ok {
		return 0
	}
	return min(syncRowCount, max(0, p.h-2))
}

// syncEnd returns how to draw the header of a finished sync pane, or nil
// when the pane is not one or its result says it better (a failure).
func (p *outputPane) syncEnd() func(st *Styles, r *fanout.Result) []boxSeg {
	s, ok := p.sync()
	if !ok || s.End == "" {
		return nil
	}
	end, good := s.End, s.EndOK
	return func(st *Styles, r *fanout.Result) []boxSeg {
		style := st.Pane.ExitOK
		if !good {
			style = st.Pane.ExitFail
		}
		segs := []boxSeg{}
		if r != nil {
			segs = append(segs, seg(style, end+" · "+fmtDuration(r.Duration)))
		}
		return append(segs, seg(style, end), seg(style, "✓"))
	}
}

// syncRows draws a sync's progress w cells wide: a line saying what it
// does, and a bar.
func (p *outputPane) syncRows(c *paneCtx, w int) []string {
	s, _ := p.sync()
	ph, _, r := p.run.Status()
	conn := ""
	if c.states != nil {
		conn = string(c.states.Get(p.run.Target).State)
	}
	text, frac := syncText(s, p.run.Target, conn, ph == engine.Done, r)
	st := c.st
	style, failed := st.Pane.Info, false
	if ph == engine.Done {
		style = st.Pane.ExitOK
		if !s.EndOK {
			style, failed = st.Pane.ExitFail, s.End == ""
		}
	}
	return []string{styled(style, text, w), progressBar(st, frac, w, failed)}
}

// maxFailedFrac is the most of its bar a failed sync fills: it moved all
// its data, perhaps, but did not finish.
const maxFailedFrac = 0.99

// syncText says what a sync is doing, and how far along it is (0 to 1).
// conn is the target's connection state; done and r say how it ended.
func syncText(s engine.SyncState, target, conn string, done bool, r *fanout.Result) (string, float64) {
	moved := s.Moved.Blobs + s.Moved.Trees
	frac := 0.0
	switch {
	case s.Phase == commands.SyncMoving && !s.Moved.Walking && s.Moved.TotalBytes > 0:
		frac = float64(s.Moved.Bytes) / float64(s.Moved.TotalBytes)
	case s.Phase == commands.SyncMoving && !s.Moved.Walking && s.Moved.TotalObjects > 0:
		frac = float64(moved) / float64(s.Moved.TotalObjects)
	case s.Phase >= commands.SyncMerging:
		frac = 1
	}
	frac = min(1, max(0, frac))
	verb, past, base := "sending", "sent", "send"
	if s.Pull {
		verb, past, base = "receiving", "received", "receive"
	}
	if done {
		switch {
		case s.End != "" && s.EndOK && moved > 0:
			return fmt.Sprintf("%s · %s %s · %s", s.End, past, plural(moved, "object", "objects"), commands.HumanBytes(s.Moved.Bytes)), 1
		case s.End != "" && s.EndOK:
			return fmt.Sprintf("%s · nothing to %s", s.End, base), 1
		case s.End != "":
			return s.End, 1
		case r != nil && r.Unreachable:
			return "unreachable", 0
		}
		// Where it stopped, and the bar where it was: a sync that failed
		// is never drawn complete.
		word := "failed"
		if r != nil && r.Err != nil && strings.HasPrefix(r.Err.Error(), "cancelled") {
			word = "cancelled"
		}
		where, _ := syncText(s, target, conn, false, nil)
		if s.Phase == commands.SyncConnecting {
			where = "connecting to " + target
		}
		if where != "" {
			word += " while " + where
		}
		return word, min(frac, maxFailedFrac)
	}
	switch s.Phase {
	case commands.SyncReading:
		if s.Pull {
			return "reading the tree on " + target, 0
		}
		return "reading " + s.Local, 0
	case commands.SyncConnecting:
		switch conn {
		case stateConnecting:
			return "connecting to " + target, 0
		case stateBootstrapping:
			return "installing rexd on " + target, 0
		}
		return "waiting for " + target, 0
	case commands.SyncAsking:
		if s.Pull {
			return "finding what is missing here", 0
		}
		return fmt.Sprintf("asking what %s lacks · %s", target, plural(s.Moved.Queries, "query", "queries")), 0
	case commands.SyncMoving:
		if s.Moved.Walking {
			return fmt.Sprintf("%s directories · %d so far", verb, moved), 0
		}
		return fmt.Sprintf("%s %d/%d objects · %s/%s", verb, moved, s.Moved.TotalObjects,
			commands.HumanBytes(s.Moved.Bytes), commands.HumanBytes(s.Moved.TotalBytes)), frac
	case commands.SyncMerging:
		return "merging with the local changes", frac
	case commands.SyncWriting:
		if s.Pull {
			return "writing " + s.Local, frac
		}
		return "writing the tree on " + target, frac
	}
	return "", frac
}

// progressBar draws frac (0 to 1) as a bar and a percentage, w cells;
// the bar of a sync that failed is drawn in the failure colour.
func progressBar(st *Styles, frac float64, w int, failed bool) string {
	pct := fmt.Sprintf(" %3d%%", int(math.Floor(frac*100)))
	bw := w - len(pct)
	if bw < 4 {
		return styled(st.Muted, strings.TrimSpace(pct), w)
	}
	full := int(math.Floor(frac * float64(bw)))
	fill := st.Accent
	if failed {
		fill = st.Pane.ExitFail
	}
	return fill.Render(strings.Repeat("█", full)) + st.Muted.Render(strings.Repeat("░", bw-full)+pct)
}

// localPath makes a LOCAL_DIR absolute: relative to workDir (the
// directory of the rex that typed it), "~/" in the operator's home (there
// is no shell to expand it).
func (m *Model) localPath(dir string) (string, error) {
	if dir == "~" || strings.HasPrefix(dir, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("%s: no home directory to expand ~ in; give the full path", dir)
		}
		dir = filepath.Join(home, strings.TrimPrefix(dir, "~"))
	}
	if filepath.IsAbs(dir) {
		return filepath.Clean(dir), nil
	}
	return filepath.Join(m.workDir.get(), dir), nil
}

// resultLog keeps each target's result as a job reports it, for the
// task's summary.
type resultLog struct {
	mu      sync.Mutex
	results map[string]*fanout.Result
	onEvent func(fanout.Event)
}

func newResultLog(onEvent func(fanout.Event)) *resultLog {
	return &resultLog{results: map[string]*fanout.Result{}, onEvent: onEvent}
}

func (l *resultLog) event(ev fanout.Event) {
	if ev.Kind == fanout.EventResult {
		l.mu.Lock()
		l.results[ev.Target] = ev.Result
		l.mu.Unlock()
	}
	l.onEvent(ev)
}

// summary counts the results in the order of targets; a target that
// reported none failed.
func (l *resultLog) summary(targets []fanout.Target, d time.Duration) *fanout.Summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	results := make([]*fanout.Result, 0, len(targets))
	for _, t := range targets {
		r := l.results[t.Name]
		if r == nil {
			r = &fanout.Result{Target: t.Name, Err: errors.New("no result")}
		}
		results = append(results, r)
	}
	return fanout.Summarize(results, d)
}

// cancelled turns the error of a sync stopped by ctrl+c into what the
// pane says.
func cancelled(ctx context.Context, err error, again string) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		if again == "" {
			return errors.New("cancelled")
		}
		return errors.New("cancelled; " + again)
	}
	return err
}

// needPool is the error for a sync or a remote tool in a console that has
// no connections (model tests without a fleet).
func (m *Model) needPool(what string) error {
	if m.app.Pool == nil {
		return fmt.Errorf("%s needs connections to targets, which this console was started without", what)
	}
	return nil
}

// cmdPush is /push SRC... DEST [TARGETS] [flags]: what rex push does, to
// every target at once, a pane each with its progress and its lines.
// With one SRC and no TARGETS (last or -w) it goes to the current target.
func (m *Model) cmdPush(args []string) tea.Cmd {
	spec, err := commands.ParsePushDefault(args, m.target)
	if err != nil {
		var ue *commands.UsageError
		if errors.As(err, &ue) && strings.HasPrefix(ue.Msg, "usage:") {
			err = errors.New("usage: /push SRC... DEST [TARGETS] [--delete|--atomic] [--dry-run] [--sudo] [--chmod SPEC] [--chown USER] [--max-bytes N] [--force] [-w TARGETS] [-x NAMES]; TARGETS defaults to the current target")
		}
		m.fail(err)
		return nil
	}
	if err := m.needPool("/push"); err != nil {
		m.fail(err)
		return nil
	}
	sources := make([]string, len(spec.Sources))
	for i, src := range spec.Sources {
		if sources[i], err = m.localPath(src); err != nil {
			m.fail(fmt.Errorf("/push: %w", err))
			return nil
		}
	}
	targets, err := m.resolve(spec.Targets)
	if err != nil {
		m.fail(fmt.Errorf("/push %s: %w", spec.Targets, err))
		return nil
	}
	if len(targets) == 0 {
		m.fail(fmt.Errorf("/push: %s names no targets; add devices to it first", spec.Targets))
		return nil
	}
	if spec.Sudo {
		targets = commands.WithSudo(targets)
	}
	display := "push " + strings.Join(spec.Sources, " ") + " " + spec.Dest
	if spec.DryRun {
		display += " (dry run)"
	}
	t := m.newTask(spec.Targets, display, targets, false)
	for _, r := range t.Runs {
		r.StartSync(engine.SyncState{Local: strings.Join(spec.Sources, " ")})
	}
	app, now, push := m.app, m.now, m.push
	req := commands.PushRequest{Sources: sources, Dest: spec.Dest, Options: spec.PushOptions}
	m.runJob(t, func(ctx context.Context, onEvent func(fanout.Event)) *fanout.Summary {
		log := newResultLog(onEvent)
		_, err := push(ctx, app, req, targets, commands.SyncOptions{
			Progress: func(target string, sp commands.SyncProgress) {
				if r := t.Run(target); r != nil {
					r.SetSync(sp, now())
				}
			},
			Pushed: func(po commands.PushOutcome) {
				p := t.Run(po.Target)
				if p == nil {
					return
				}
				r := &fanout.Result{Target: po.Target, Duration: now().Sub(t.Started), Unreachable: po.Unreachable}
				if po.Err != nil {
					r.Err = cancelled(ctx, po.Err, "run /push again to finish")
					// Stopped, not unreachable, when ctrl+c cut the connecting.
					r.Unreachable = r.Unreachable && r.Err == po.Err
				} else {
					p.EndSync(pushEnd(po), true)
					for _, l := range po.Lines() {
						p.Buf.Note(engine.Out, l)
					}
					r.ExitCode = new(int)
				}
				log.event(fanout.Event{Target: po.Target, Kind: fanout.EventResult, Result: r})
			},
		})
		if err != nil {
			// Nothing was sent anywhere: each pane says why.
			for _, tg := range targets {
				log.event(fanout.Event{Target: tg.Name, Kind: fanout.EventResult,
					Result: &fanout.Result{Target: tg.Name, Err: cancelled(ctx, err, ""), Duration: now().Sub(t.Started)}})
			}
		}
		return log.summary(targets, now().Sub(t.Started))
	})
	return m.ensureTick()
}

// pushEnd is how a push pane's header ends: "done", "up to date", "dry
// run"; the pane's lines say the rest.
func pushEnd(po commands.PushOutcome) string {
	switch {
	case po.DryRun:
		return "dry run"
	case po.UpToDate():
		return "up to date"
	}
	return "done"
}

// cmdPull is /pull REMOTE LOCAL [TARGETS] [flags]: the tree back from
// each target, merged with the local changes (LOCAL/<target> for several
// targets); what it wrote and what conflicted is listed in each pane.
func (m *Model) cmdPull(args []string) tea.Cmd {
	spec, err := commands.ParsePullDefault(args, m.target)
	if err != nil {
		var ue *commands.UsageError
		if errors.As(err, &ue) && strings.HasPrefix(ue.Msg, "usage:") {
			err = errors.New("usage: /pull REMOTE LOCAL [TARGETS] [--dry-run] [--sudo] [--max-bytes N] [-w TARGETS] [-x NAMES]; TARGETS defaults to the current target")
		}
		m.fail(err)
		return nil
	}
	if err := m.needPool("/pull"); err != nil {
		m.fail(err)
		return nil
	}
	local, err := m.localPath(spec.LocalDir)
	if err != nil {
		m.fail(fmt.Errorf("/pull: %w", err))
		return nil
	}
	targets, err := m.resolve(spec.Targets)
	if err != nil {
		m.fail(fmt.Errorf("/pull %s: %w", spec.Targets, err))
		return nil
	}
	if len(targets) == 0 {
		m.fail(fmt.Errorf("/pull: %s names no targets; add devices to it first", spec.Targets))
		return nil
	}
	if spec.Sudo {
		targets = commands.WithSudo(targets)
	}
	display := "pull " + spec.RemoteDir + " " + spec.LocalDir
	if spec.DryRun {
		display += " (dry run)"
	}
	t := m.newTask(spec.Targets, display, targets, false)
	many := len(targets) > 1
	for _, r := range t.Runs {
		r.StartSync(engine.SyncState{Pull: true, Local: commands.LocalFor(spec.LocalDir, r.Target, many)})
	}
	app, now, pull := m.app, m.now, m.pull
	req := commands.PullRequest{Remote: spec.RemoteDir, Local: local, Options: spec.PullOptions}
	m.runJob(t, func(ctx context.Context, onEvent func(fanout.Event)) *fanout.Summary {
		log := newResultLog(onEvent)
		pull(ctx, app, targets, req, commands.SyncOptions{
			Progress: func(target string, sp commands.SyncProgress) {
				if r := t.Run(target); r != nil {
					r.SetSync(sp, now())
				}
			},
			Pulled: func(res commands.PullResult, er fanout.EachResult) {
				p := t.Run(er.Target)
				if p == nil {
					return
				}
				r := &fanout.Result{Target: er.Target, Duration: now().Sub(t.Started), Unreachable: er.Unreachable}
				if er.Err != nil {
					r.Err = cancelled(ctx, er.Err, "")
					r.Unreachable = r.Unreachable && r.Err == er.Err
				} else {
					// The operator typed the local directory; say it their way.
					res.LocalDir = commands.LocalFor(spec.LocalDir, er.Target, many)
					lines := res.Lines()
					conflicts := len(res.ConflictLines())
					for _, l := range lines[:len(lines)-conflicts] {
						p.Buf.Note(engine.Out, l)
					}
					for _, l := range lines[len(lines)-conflicts:] {
						p.Buf.Note(engine.Err, l)
					}
					if cerr := res.ConflictError(); cerr != nil {
						p.EndSync(plural(len(res.Conflicts), "conflict", "conflicts"), false)
						r.Err = cerr
					} else {
						end := "done"
						if res.DryRun {
							end = "dry run"
						} else if res.What() == "up to date" {
							end = "up to date"
						}
						p.EndSync(end, true)
						r.ExitCode = new(int)
					}
				}
				log.event(fanout.Event{Target: er.Target, Kind: fanout.EventResult, Result: r})
			},
		})
		return log.summary(targets, now().Sub(t.Started))
	})
	return m.ensureTick()
}
