package commands

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/rexconsole/rex/internal/fanout"
)

// maxToolOutput bounds the output kept per target and stream for results.
const maxToolOutput = 16 << 20

// ToolResult is one target's end of a tool run with its output gathered:
// what `rex tool run --json` prints, one per line, and what the console's
// table of a group run shows.
type ToolResult struct {
	Target   string `json:"target"`
	ExitCode *int   `json:"exit_code,omitempty"`
	// Result is the tool's standard output read as JSON, when it is JSON.
	Result any `json:"result,omitempty"`
	// Output is the standard output when it is not JSON.
	Output      string `json:"output,omitempty"`
	Stderr      string `json:"stderr,omitempty"`
	Error       string `json:"error,omitempty"`
	Unreachable bool   `json:"unreachable,omitempty"`
	Truncated   bool   `json:"truncated,omitempty"`
	DurationMS  int64  `json:"duration_ms"`
}

// ToolCollector gathers a tool run's events (ToolRunOptions.OnEvent) into
// one ToolResult per target. It is safe for the concurrent calls RunTool
// makes.
type ToolCollector struct {
	mu     sync.Mutex
	order  []string
	out    map[string]*bytes.Buffer
	errb   map[string]*bytes.Buffer
	trunc  map[string]bool
	done   map[string]*ToolResult
	onDone func(ToolResult)
}

// NewToolCollector collects for targets; onDone, when not nil, gets each
// target's result as soon as it ends.
func NewToolCollector(targets []fanout.Target, onDone func(ToolResult)) *ToolCollector {
	c := &ToolCollector{out: map[string]*bytes.Buffer{}, errb: map[string]*bytes.Buffer{},
		trunc: map[string]bool{}, done: map[string]*ToolResult{}, onDone: onDone}
	for _, t := range targets {
		c.order = append(c.order, t.Name)
	}
	return c
}

// Event takes one event of the run.
func (c *ToolCollector) Event(ev fanout.Event) {
	c.mu.Lock()
	switch ev.Kind {
	case fanout.EventStdout, fanout.EventStderr:
		m := c.out
		if ev.Kind == fanout.EventStderr {
			m = c.errb
		}
		b := m[ev.Target]
		if b == nil {
			b = &bytes.Buffer{}
			m[ev.Target] = b
		}
		if room := maxToolOutput - b.Len(); room < len(ev.Data) {
			c.trunc[ev.Target] = true
			if room > 0 {
				b.Write(ev.Data[:room])
			}
		} else {
			b.Write(ev.Data)
		}
		c.mu.Unlock()
		return
	case fanout.EventResult:
	default:
		c.mu.Unlock()
		return
	}
	r := ToolResult{Target: ev.Target, Truncated: c.trunc[ev.Target]}
	if res := ev.Result; res != nil {
		r.ExitCode = res.ExitCode
		r.Unreachable = res.Unreachable
		r.DurationMS = res.Duration.Milliseconds()
		if res.Err != nil {
			r.Error = res.Err.Error()
		}
	}
	if b := c.out[ev.Target]; b != nil {
		if v, ok := oneJSON(b.Bytes()); ok && !r.Truncated {
			r.Result = v
		} else {
			r.Output = b.String()
		}
	}
	if b := c.errb[ev.Target]; b != nil {
		r.Stderr = b.String()
	}
	c.done[ev.Target] = &r
	onDone := c.onDone
	c.mu.Unlock()
	if onDone != nil {
		onDone(r)
	}
}

// oneJSON decodes b when it holds exactly one JSON value.
func oneJSON(b []byte) (any, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if dec.More() {
		return nil, false // more than one value, or text after it
	}
	return v, true
}

// Results returns every target's result, in the order of the targets;
// targets that have not ended are left out.
func (c *ToolCollector) Results() []ToolResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ToolResult, 0, len(c.done))
	for _, n := range c.order {
		if r := c.done[n]; r != nil {
			out = append(out, *r)
		}
	}
	return out
}
