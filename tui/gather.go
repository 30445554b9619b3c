package tui

import (
	"errors"
	"fmt"
	"time"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/tui/engine"
)

// gatherView is the gathered view of one task: targets with identical
// output and status in one group, the most common group first in accent,
// every other group highlighted as differing.
type gatherView struct {
	task *engine.Task
	pane *outputPane
	at   time.Time // when it was last rebuilt
	v    uint64    // the task's version it was built from
	// table, when set, shows a tool run's JSON results as a table
	// (tooltable.go) instead of grouping outputs.
	table *commands.ToolCollector
}

var errStillRunning = errors.New("still running")

// gatherRefresh is how often a gathered view of a running task is rebuilt.
const gatherRefresh = 250 * time.Millisecond

// refresh rebuilds the view when the task's output changed.
func (g *gatherView) refresh(now time.Time, keys *KeyMap, m *Model) {
	t := g.task
	v := t.Version()
	if g.pane != nil && (v == g.v || now.Sub(g.at) < gatherRefresh && !t.Done()) {
		return
	}
	if g.table != nil {
		g.refreshTable(keys, m)
		g.v, g.at = v, now
		return
	}
	results := make([]*fanout.Result, len(t.Runs))
	for i, r := range t.Runs {
		ph, _, res := r.Status()
		if ph != engine.Done || res == nil {
			res = &fanout.Result{Target: r.Target, Err: errStillRunning}
		}
		results[i] = res
	}
	groups := commands.Gather(results, func(target string) ([]byte, string) {
		sum, n := t.Run(target).Buf.Sum()
		return nil, fmt.Sprintf("%x/%d", sum, n)
	})
	common := 0
	for i, gr := range groups {
		if len(gr.Targets) > len(groups[common].Targets) {
			common = i
		}
	}
	buf := engine.NewBuffer(max(m.cfg.Scrollback, 1), m.seed, nil)
	total := len(t.Runs)
	if len(groups) == 1 {
		buf.Note(engine.Note, fmt.Sprintf("all %d targets agree", total))
	} else {
		buf.Note(engine.Note, fmt.Sprintf("%d different results from %d targets; the most common first", len(groups), total))
	}
	order := append([]int{common}, indexesExcept(len(groups), common)...)
	for _, gi := range order {
		gr := groups[gi]
		kind, note := engine.Head, ""
		if gi != common {
			kind, note = engine.HeadOdd, " · differs"
		}
		status := gr.Status
		if status == "" {
			status = "exit 0"
		}
		buf.Note(kind, fmt.Sprintf("── %s (%d of %d) · %s%s", devices.Fold(gr.Targets), len(gr.Targets), total, status, note))
		rd := t.Run(gr.Targets[0]).Buf.Read()
		var lines []engine.Line
		for i := range rd.Len() {
			l := *rd.Line(i)
			l.Drawn = nil
			lines = append(lines, l)
		}
		rd.Done()
		if len(lines) == 0 {
			lines = append(lines, engine.Line{Text: "(no output)", Width: 11, Kind: engine.Note})
		}
		buf.Push(lines)
	}
	if g.pane == nil {
		g.pane = newTextPane("", buf, keys)
		g.pane.follow = false
	} else {
		// Keep the reader's place in the new text.
		old := g.pane
		rd := old.read()
		start := old.start(rd)
		rd.Done()
		old.buf = buf
		old.matches = nil
		old.scrollTo(start)
	}
	g.pane.title = "gathered · " + t.Command
	g.v, g.at = v, now
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
