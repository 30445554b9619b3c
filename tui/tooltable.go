package tui

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/tui/engine"
)

// The table of a tool run on several targets with --json: a row per host,
// a column per top-level field of the JSON object each printed, and a last
// column for how it ended. A cell that differs from the value most hosts
// share is marked (reverse video) and its row drawn as differing; a column
// where no two hosts agree (hostnames, uptimes) marks nothing.

// maxCell bounds a cell's width; the whole value is compared.
const maxCell = 24

// tableRow is one host's result, or that it is still running.
type tableRow struct {
	target  string
	result  map[string]any // nil when the output was not a JSON object
	status  string         // "exit 0", "exit 3", an error, "running"
	failed  bool
	pending bool
}

// tableRows reads a run's collected results; targets not in results are
// still running.
func tableRows(targets []string, results []commands.ToolResult) []tableRow {
	byName := map[string]commands.ToolResult{}
	for _, r := range results {
		byName[r.Target] = r
	}
	rows := make([]tableRow, 0, len(targets))
	for _, t := range targets {
		r, done := byName[t]
		row := tableRow{target: t}
		switch {
		case !done:
			row.status, row.pending = "running", true
		case r.Error != "":
			row.status, row.failed = firstLine(r.Error), true
		case r.ExitCode != nil:
			row.status = fmt.Sprintf("exit %d", *r.ExitCode)
			row.failed = *r.ExitCode != 0
		}
		if m, ok := r.Result.(map[string]any); ok {
			row.result = m
		} else if done && r.Error == "" && r.Output != "" {
			row.status += " · not JSON"
		}
		rows = append(rows, row)
	}
	return rows
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// cellText renders a JSON value for a cell: scalars as they are, lists of
// scalars joined, other lists and objects by their size.
func cellText(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		return x
	case json.Number:
		return x.String()
	case bool, float64, int, int64:
		return fmt.Sprint(x)
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				return fmt.Sprintf("%d items", len(x))
			}
			parts = append(parts, cellText(e))
		}
		if len(parts) == 0 {
			return "-"
		}
		return strings.Join(parts, ",")
	case map[string]any:
		return fmt.Sprintf("{%d keys}", len(x))
	}
	return fmt.Sprint(v)
}

// toolTableLines lays the rows out. The first line is the header.
func toolTableLines(rows []tableRow) []engine.Line {
	// Columns: every top-level field any host printed, by name.
	seen := map[string]bool{}
	var cols []string
	for _, r := range rows {
		for k := range r.result {
			if !seen[k] {
				seen[k] = true
				cols = append(cols, k)
			}
		}
	}
	sort.Strings(cols)
	// The cells, and per column the value most hosts share.
	cells := make([][]string, len(rows))
	for i, r := range rows {
		cells[i] = make([]string, len(cols))
		for j, c := range cols {
			if r.result == nil {
				cells[i][j] = ""
				continue
			}
			cells[i][j] = engine.OneLine(cellText(r.result[c])) // a host's text
		}
	}
	common := make([]string, len(cols))
	shared := make([]bool, len(cols))
	for j := range cols {
		count := map[string]int{}
		best, bestN := "", 0
		for i, r := range rows {
			if r.result == nil {
				continue
			}
			v := cells[i][j]
			count[v]++
			if count[v] > bestN {
				best, bestN = v, count[v]
			}
		}
		common[j], shared[j] = best, bestN >= 2
	}
	// Widths. Names and statuses come from the hosts too: cleaned first.
	names := make([]string, len(cols))
	for j, c := range cols {
		names[j] = engine.OneLine(c)
	}
	clip := func(s string) string { return ansi.Truncate(s, maxCell, "…") }
	hostW := len("HOST")
	for _, r := range rows {
		hostW = max(hostW, ansi.StringWidth(r.target))
	}
	widths := make([]int, len(cols))
	for j, c := range names {
		widths[j] = ansi.StringWidth(clip(c))
		for i := range rows {
			widths[j] = max(widths[j], ansi.StringWidth(clip(cells[i][j])))
		}
	}
	pad := func(s string, w int) string { return s + strings.Repeat(" ", max(0, w-ansi.StringWidth(s))) }
	var out []engine.Line
	var b strings.Builder
	b.WriteString(pad("HOST", hostW))
	for j, c := range names {
		b.WriteString("  " + pad(clip(c), widths[j]))
	}
	b.WriteString("  STATUS")
	out = append(out, tableLine(b.String(), engine.Head, nil))
	differ := 0
	for i, r := range rows {
		b.Reset()
		var spans []engine.Span
		odd := false
		b.WriteString(pad(r.target, hostW))
		for j := range cols {
			b.WriteString("  ")
			text := clip(cells[i][j])
			if r.result != nil && shared[j] && cells[i][j] != common[j] {
				odd = true
				start := b.Len()
				spans = append(spans, engine.Span{Start: start, End: start + len(text), Style: uv.Style{Attrs: uv.AttrReverse}})
			}
			b.WriteString(pad(text, widths[j]))
		}
		b.WriteString("  " + engine.OneLine(r.status))
		kind := engine.Out
		switch {
		case odd:
			kind = engine.HeadOdd
			differ++
		case r.failed:
			kind = engine.Err
		}
		out = append(out, tableLine(strings.TrimRight(b.String(), " "), kind, spans))
	}
	note := fmt.Sprintf("%d hosts", len(rows))
	if differ > 0 {
		note += fmt.Sprintf(", %d differ from the rest (marked)", differ)
	}
	out = append(out, tableLine(note, engine.Note, nil))
	return out
}

func tableLine(text string, kind engine.Kind, spans []engine.Span) engine.Line {
	return engine.Line{Text: text, Width: ansi.StringWidth(text), Kind: kind, Spans: spans}
}

// refreshTable rebuilds a table view from the results so far.
func (g *gatherView) refreshTable(keys *KeyMap, m *Model) {
	targets := make([]string, len(g.task.Runs))
	for i, r := range g.task.Runs {
		targets[i] = r.Target
	}
	buf := engine.NewBuffer(max(m.cfg.Scrollback, 1), m.seed, nil)
	buf.Push(toolTableLines(tableRows(targets, g.table.Results())))
	if g.pane == nil {
		g.pane = newTextPane("", buf, keys)
		g.pane.follow = false
	} else {
		g.pane.buf = buf
		g.pane.matches = nil
	}
	g.pane.title = "table · " + g.task.Command
}
