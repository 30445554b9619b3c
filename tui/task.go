package tui

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
)

// runFunc runs a task on targets; fanout.Run over the console's pool, or a
// scripted stand-in in model tests.
type runFunc func(ctx context.Context, targets []fanout.Target, t fanout.Task, opts fanout.Options) *fanout.Summary

// task is one command on one or more targets: a pane per target.
type task struct {
	id      int
	command string // shown in pane headers
	spec    string // the TARGETS it ran on
	started time.Time
	ctx     context.Context // ends when the task is stopped
	cancel  context.CancelFunc
	panes   []*outputPane
	byName  map[string]*outputPane
	// gather is the gathered view, made the first time it is shown.
	gather   *outputPane
	gatherAt time.Time // when gather was last rebuilt
	gatherV  uint64    // the panes' versions it was built from

	mu        sync.Mutex
	done      bool
	summary   *fanout.Summary
	cancelled bool
	reported  bool // its summary has been shown
	exited    chan struct{}
}

// onEvent files a fan-out event into the target's pane. It runs on the
// fan-out goroutines: it only appends under the pane's locks, and the
// frame tick draws the result.
func (t *task) onEvent(now func() time.Time) func(fanout.Event) {
	return func(ev fanout.Event) {
		p := t.byName[ev.Target]
		if p == nil {
			return
		}
		switch ev.Kind {
		case fanout.EventStdout:
			p.sb.Write(false, ev.Data)
		case fanout.EventStderr:
			p.sb.Write(true, ev.Data)
		case fanout.EventStart:
			p.setRunning(now())
			p.sb.touch()
		case fanout.EventResult:
			r := ev.Result
			p.sb.Flush()
			for _, msg := range r.Messages {
				p.sb.Note(lineNote, "rex: "+msg)
			}
			// A sync pane holds only what rex says; no prefix is needed
			// to tell it from a program's output.
			prefix := "rex: "
			if p.sync != nil {
				prefix = ""
			}
			if r.Err != nil {
				p.sb.Note(lineErr, prefix+r.Err.Error())
			}
			p.setResult(r)
			p.sb.touch()
		}
	}
}

func (t *task) finish(s *fanout.Summary) {
	t.mu.Lock()
	t.done, t.summary = true, s
	t.mu.Unlock()
	close(t.exited)
}

func (t *task) isDone() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

// stop cancels the task on every target; it reports whether there was
// anything left to stop.
func (t *task) stop() bool {
	t.mu.Lock()
	running := !t.done
	if running {
		t.cancelled = true
	}
	t.mu.Unlock()
	if running {
		t.cancel()
	}
	return running
}

// summaryLine is the one-line account shown when the task ends.
func (t *task) summaryLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.summary == nil {
		return ""
	}
	s := strings.TrimPrefix(commands.SummaryLine(t.summary), "rex: ")
	if t.cancelled {
		s = "cancelled: " + s
	}
	return cut(t.command, 40) + " — " + s
}

// version sums the panes' buffer versions: it changes when any output
// arrives.
func (t *task) version() uint64 {
	var v uint64
	for _, p := range t.panes {
		p.sb.mu.Lock()
		v += p.sb.version
		p.sb.mu.Unlock()
		if ph, _, _ := p.status(); ph == phaseDone {
			v += 1 << 40
		}
	}
	return v
}

var errStillRunning = errors.New("still running")

// gatherRefresh is how often a gathered view of a running task is rebuilt.
const gatherRefresh = 250 * time.Millisecond

// refreshGather rebuilds the gathered view when output changed: targets
// with identical output and status in one group, the most common group
// first in accent, every other group highlighted as differing.
func (t *task) refreshGather(now time.Time, keys *KeyMap, limit int, seed maphash.Seed) {
	v := t.version()
	if t.gather != nil && (v == t.gatherV || now.Sub(t.gatherAt) < gatherRefresh && !t.isDone()) {
		return
	}
	results := make([]*fanout.Result, len(t.panes))
	for i, p := range t.panes {
		ph, _, r := p.status()
		if ph != phaseDone || r == nil {
			r = &fanout.Result{Target: p.target, Err: errStillRunning}
		}
		results[i] = r
	}
	groups := commands.Gather(results, func(target string) ([]byte, string) {
		sum, n := t.byName[target].sb.Sum()
		return nil, fmt.Sprintf("%x/%d", sum, n)
	})
	common := 0
	for i, g := range groups {
		if len(g.Targets) > len(groups[common].Targets) {
			common = i
		}
	}
	sb := newScrollback(max(limit, 1), seed, nil)
	total := len(t.panes)
	if len(groups) == 1 {
		sb.Note(lineNote, fmt.Sprintf("all %d targets agree", total))
	} else {
		sb.Note(lineNote, fmt.Sprintf("%d different results from %d targets; the most common first", len(groups), total))
	}
	order := append([]int{common}, indexesExcept(len(groups), common)...)
	for _, gi := range order {
		g := groups[gi]
		kind, note := lineHead, ""
		if gi != common {
			kind, note = lineHeadOdd, " · differs"
		}
		status := g.Status
		if status == "" {
			status = "exit 0"
		}
		sb.Note(kind, fmt.Sprintf("── %s (%d of %d) · %s%s", devices.Fold(g.Targets), len(g.Targets), total, status, note))
		src := t.byName[g.Targets[0]].sb
		src.mu.Lock()
		var scratch outLine
		var lines []outLine
		for i := range src.lenLocked() {
			l := *src.lineLocked(i, &scratch)
			l.cache, l.cacheW = nil, -1
			lines = append(lines, l)
		}
		src.mu.Unlock()
		if len(lines) == 0 {
			lines = append(lines, outLine{text: "(no output)", width: 11, kind: lineNote, cacheW: -1})
		}
		sb.mu.Lock()
		sb.pushLocked(lines)
		sb.version++
		sb.mu.Unlock()
	}
	if t.gather == nil {
		t.gather = newOutputPane(-t.id, "", nil, keys, sb)
		t.gather.follow = false
	} else {
		// Keep the reader's place in the new text.
		old := t.gather
		old.sb.mu.Lock()
		start := old.startLocked()
		old.sb.mu.Unlock()
		old.sb = sb
		old.matches = nil
		old.scrollTo(start)
	}
	t.gather.title = "gathered · " + t.command
	t.gatherV, t.gatherAt = v, now
}

func indexesExcept(n, skip int) []int {
	var out []int
	for i := range n {
		if i != skip {
			out = append(out, i)
		}
	}
	return out
}
