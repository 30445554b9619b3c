package commands

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
)

// RunSpec is a parsed `run` command line.
type RunSpec struct {
	// Targets is TARGETS as given (positional or --target), with the
	// exclusions of -x folded in.
	Targets string
	TargetFlags
	ReachFlags
	JSON    bool
	Gather  bool
	Timeout time.Duration
	Task    fanout.Task
}

// RunUsage is the synopsis of `rex run`.
const RunUsage = "rex run TARGETS [--json] [--gather] [--timeout D] [--connect-timeout D] [--concurrency N] -- CMD [ARG...]"

// Bind declares the flags of `rex run`. Flags stop at the first word
// that is not one (TARGETS, or the command when --target named the
// targets); Args reads on from there.
func (s *RunSpec) Bind(fs *pflag.FlagSet) {
	s.TargetFlags.Bind(fs)
	BindJSON(fs, &s.JSON)
	fs.BoolVarP(&s.Gather, "gather", "b", false, "print identical outputs once, under the folded list of their targets")
	BindTimeout(fs, &s.Timeout)
	s.ReachFlags.Bind(fs)
	fs.SetInterspersed(false)
}

// Args completes the spec from the words the flags left: TARGETS (unless
// --target gave them), more flags, then the command, after `--` or from
// the first word that is not a flag. One command word that holds spaces or
// shell syntax runs through /bin/sh -c, the way `ssh host 'a | b'` does;
// several words are an argv that no shell interprets.
func (s *RunSpec) Args(fs *pflag.FlagSet, args []string) error {
	cmd := args
	if s.Target == "" {
		if len(args) == 0 || args[0] == "" {
			return Usagef("which targets? usage: %s", RunUsage)
		}
		s.Targets = args[0]
		if err := fs.Parse(args[1:]); err != nil {
			return FlagError("rex run", fs, err)
		}
		cmd = fs.Args()
	}
	if helpAsked(fs) {
		return ErrHelp
	}
	s.Targets = s.TargetFlags.Spec(s.Targets)
	if len(cmd) == 0 {
		return Usagef("no command to run; usage: %s", RunUsage)
	}
	if s.JSON && s.Gather {
		return Usagef("--json and --gather do not go together; pick one")
	}
	s.Task = TaskFor(cmd)
	s.Task.Timeout = s.Timeout
	return nil
}

// ParseRun reads `TARGETS [flags] -- CMD [ARG...]` as the console's /run
// gets it.
func ParseRun(args []string) (RunSpec, error) {
	var s RunSpec
	fs := NewFlagSet("run")
	s.Bind(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return s, ErrHelp
		}
		return s, FlagError("rex run", fs, err)
	}
	err := s.Args(fs, fs.Args())
	return s, err
}

// TaskFor turns command words into a task: several words are an argv, one
// word with shell syntax or spaces is a shell command.
func TaskFor(words []string) fanout.Task {
	if len(words) == 1 && strings.ContainsAny(words[0], " \t\n|&;<>()$`\\\"'*?[]#~=%{}!") {
		return fanout.Task{Command: words[0]}
	}
	return fanout.Task{Argv: words}
}

// parseDuration accepts Go durations and bare seconds.
func parseDuration(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad duration %q", v)
	}
	return d, nil
}

// Run is `rex run`: the task on every target, output live, summary on
// stderr, exit status per the contract.
func Run(ctx context.Context, app *App, o IO, spec RunSpec) error {
	targets, err := app.Resolve(spec.Targets)
	if err != nil {
		return err
	}
	var out outputSink
	switch {
	case spec.JSON:
		out = newJSONSink(o.Out)
	case spec.Gather:
		out = newGatherSink(o.Out, o.Styled)
	default:
		out = newPrefixSink(o.Out, o.Err, targets, o.Styled)
	}
	sum := fanout.Run(ctx, app.Pool, targets, spec.Task, fanout.Options{
		Concurrency:    spec.Concurrency,
		ConnectTimeout: cmp.Or(spec.ConnectTimeout, app.ConnectTimeout),
		OnEvent:        out.event,
	})
	out.finish(sum)
	fmt.Fprintln(o.Err, SummaryLine(sum))
	if code := sum.ExitStatus(); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// SummaryLine is the one-line account of a run printed on stderr.
func SummaryLine(s *fanout.Summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rex: %d ok", s.OK)
	if s.Failed > 0 {
		fmt.Fprintf(&b, ", %d failed", s.Failed)
	}
	if s.Unreachable > 0 {
		fmt.Fprintf(&b, ", %d unreachable", s.Unreachable)
	}
	fmt.Fprintf(&b, " in %s", roundDuration(s.Duration))
	if s.Slowest != nil && len(s.Results) > 1 {
		fmt.Fprintf(&b, " (slowest %s, %s)", s.Slowest.Target, roundDuration(s.Slowest.Duration))
	}
	return b.String()
}

func roundDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}

// ResultLine describes how a target ended, or "" for a clean exit 0.
func ResultLine(r *fanout.Result) string {
	switch {
	case r.Err != nil:
		return r.Err.Error()
	case r.TimedOut:
		return "timed out"
	case r.Signal != "":
		return "killed by signal " + r.Signal
	case r.ExitCode != nil && *r.ExitCode != 0:
		return "exit " + strconv.Itoa(*r.ExitCode)
	}
	return ""
}

type outputSink interface {
	event(fanout.Event)
	finish(*fanout.Summary)
}

// prefixSink prints `name: line` for stdout and `name! line` for stderr
// as lines complete, names padded to one width and coloured on a terminal.
type prefixSink struct {
	mu       sync.Mutex
	w        *bufio.Writer
	errw     io.Writer
	prefixes map[string][2]string // stdout, stderr prefix per target
	partial  map[string]*[2][]byte
}

// maxPartial bounds a line kept while waiting for its newline; a longer
// one is printed in pieces.
const maxPartial = 64 << 10

// hostColor picks an ANSI 256-colour code for the i-th target, from a set
// that reads on dark and light backgrounds.
func hostColor(i int) int {
	colors := [...]int{33, 35, 36, 32, 34, 166, 99, 37, 172, 30}
	return colors[i%len(colors)]
}

func newPrefixSink(w, errw io.Writer, targets []fanout.Target, styled bool) *prefixSink {
	width := 0
	for _, t := range targets {
		if len(t.Name) > width {
			width = len(t.Name)
		}
	}
	p := &prefixSink{w: bufio.NewWriterSize(w, 64<<10), errw: errw,
		prefixes: map[string][2]string{}, partial: map[string]*[2][]byte{}}
	for i, t := range targets {
		pad := strings.Repeat(" ", width-len(t.Name))
		out, errp := t.Name+": "+pad, t.Name+"! "+pad
		if styled {
			c := hostColor(i)
			out = fmt.Sprintf("\x1b[38;5;%dm%s:\x1b[0m %s", c, t.Name, pad)
			errp = fmt.Sprintf("\x1b[38;5;%dm%s\x1b[0m\x1b[31m!\x1b[0m %s", c, t.Name, pad)
		}
		p.prefixes[t.Name] = [2]string{out, errp}
		p.partial[t.Name] = &[2][]byte{}
	}
	return p
}

func (p *prefixSink) event(ev fanout.Event) {
	stream := 0
	switch ev.Kind {
	case fanout.EventStdout:
	case fanout.EventStderr:
		stream = 1
	case fanout.EventResult:
		p.mu.Lock()
		p.flushPartial(ev.Target)
		if msg := ResultLine(ev.Result); msg != "" && ev.Result.Err != nil {
			fmt.Fprintf(p.w, "%s%s\n", p.prefixes[ev.Target][1], msg)
		}
		p.w.Flush()
		p.mu.Unlock()
		return
	default:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	part := p.partial[ev.Target]
	data := ev.Data
	prefix := p.prefixes[ev.Target][stream]
	for len(data) > 0 {
		i := indexByte(data, '\n')
		if i < 0 {
			part[stream] = append(part[stream], data...)
			if len(part[stream]) > maxPartial {
				p.w.WriteString(prefix)
				p.w.Write(part[stream])
				p.w.WriteByte('\n')
				part[stream] = part[stream][:0]
			}
			break
		}
		p.w.WriteString(prefix)
		if len(part[stream]) > 0 {
			p.w.Write(part[stream])
			part[stream] = part[stream][:0]
		}
		p.w.Write(data[:i+1])
		data = data[i+1:]
	}
	p.w.Flush()
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// flushPartial prints what is left of a target's last lines.
func (p *prefixSink) flushPartial(target string) {
	part := p.partial[target]
	if part == nil {
		return
	}
	for s := 0; s < 2; s++ {
		if len(part[s]) > 0 {
			p.w.WriteString(p.prefixes[target][s])
			p.w.Write(part[s])
			p.w.WriteByte('\n')
			part[s] = part[s][:0]
		}
	}
}

func (p *prefixSink) finish(*fanout.Summary) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.w.Flush()
}

// gatherSink keeps each target's output and prints identical outputs once
// under the sorted list of the targets that produced them (like dshbak -c
// or clush -b).
type gatherSink struct {
	mu     sync.Mutex
	w      io.Writer
	styled bool
	outs   map[string]*gathered
}

// maxGathered bounds the output kept per target; the digest still covers
// all of it, so grouping stays exact.
const maxGathered = 16 << 20

type gathered struct {
	buf       []byte
	sum       hash.Hash
	truncated bool
}

func newGatherSink(w io.Writer, styled bool) *gatherSink {
	return &gatherSink{w: w, styled: styled, outs: map[string]*gathered{}}
}

func (g *gatherSink) event(ev fanout.Event) {
	if ev.Kind != fanout.EventStdout && ev.Kind != fanout.EventStderr {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	o := g.outs[ev.Target]
	if o == nil {
		o = &gathered{sum: sha256.New()}
		g.outs[ev.Target] = o
	}
	o.sum.Write(ev.Data)
	if room := maxGathered - len(o.buf); room > 0 {
		d := ev.Data
		if len(d) > room {
			d, o.truncated = d[:room], true
		}
		o.buf = append(o.buf, d...)
	} else {
		o.truncated = true
	}
}

// GatherGroup is a set of targets with the same output and status.
type GatherGroup struct {
	Targets []string
	Output  []byte
	Status  string // "" for exit 0, else e.g. "exit 3"
}

// Gather groups results by output and status; groups are ordered by their
// first target name.
func Gather(results []*fanout.Result, output func(target string) ([]byte, string)) []GatherGroup {
	byKey := map[string]*GatherGroup{}
	var groups []*GatherGroup
	for _, r := range results {
		out, digest := output(r.Target)
		status := ResultLine(r)
		k := digest + "\x00" + status
		gr := byKey[k]
		if gr == nil {
			gr = &GatherGroup{Output: out, Status: status}
			byKey[k] = gr
			groups = append(groups, gr)
		}
		gr.Targets = append(gr.Targets, r.Target)
	}
	res := make([]GatherGroup, 0, len(groups))
	for _, gr := range groups {
		sort.Strings(gr.Targets)
		res = append(res, *gr)
	}
	sort.Slice(res, func(i, j int) bool { return res[i].Targets[0] < res[j].Targets[0] })
	return res
}

func (g *gatherSink) finish(s *fanout.Summary) {
	g.mu.Lock()
	defer g.mu.Unlock()
	groups := Gather(s.Results, func(t string) ([]byte, string) {
		o := g.outs[t]
		if o == nil {
			return nil, ""
		}
		b := o.buf
		if o.truncated {
			b = append(append([]byte(nil), b...), []byte("\n[output truncated: more than 16 MiB]\n")...)
		}
		return b, string(o.sum.Sum(nil))
	})
	bw := bufio.NewWriter(g.w)
	for _, gr := range groups {
		head := fmt.Sprintf("%s (%d)", devices.Fold(gr.Targets), len(gr.Targets))
		if gr.Status != "" {
			head += " " + gr.Status
		}
		rule := strings.Repeat("-", 15)
		if g.styled {
			head = "\x1b[1m" + head + "\x1b[0m"
			if gr.Status != "" {
				head = "\x1b[31m" + head + "\x1b[0m"
			}
		}
		fmt.Fprintf(bw, "%s\n%s\n%s\n", rule, head, rule)
		bw.Write(gr.Output)
		if len(gr.Output) > 0 && gr.Output[len(gr.Output)-1] != '\n' {
			bw.WriteByte('\n')
		}
	}
	bw.Flush()
}

// jsonSink prints one JSON object per event per line.
type jsonSink struct {
	mu  sync.Mutex
	enc *json.Encoder
	w   *bufio.Writer
}

// JSONEvent is the shape of `rex run --json` lines.
type JSONEvent struct {
	Target     string `json:"target"`
	Event      string `json:"event"` // stdout, stderr, exit, error
	Data       string `json:"data,omitempty"`
	Encoding   string `json:"encoding,omitempty"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	Signal     string `json:"signal,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	DurationMS *int64 `json:"duration_ms,omitempty"`
	Error      string `json:"error,omitempty"`
	Unreach    bool   `json:"unreachable,omitempty"`
}

func newJSONSink(w io.Writer) *jsonSink {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &jsonSink{enc: enc, w: bw}
}

func (j *jsonSink) event(ev fanout.Event) {
	var e JSONEvent
	e.Target = ev.Target
	switch ev.Kind {
	case fanout.EventStdout, fanout.EventStderr:
		e.Event = "stdout"
		if ev.Kind == fanout.EventStderr {
			e.Event = "stderr"
		}
		e.Data, e.Encoding = protocol.EncodeData(ev.Data)
	case fanout.EventResult:
		r := ev.Result
		if r.Err != nil {
			e.Event, e.Error, e.Unreach = "error", r.Err.Error(), r.Unreachable
		} else {
			d := r.Duration.Milliseconds()
			e.Event, e.ExitCode, e.Signal, e.TimedOut, e.DurationMS = "exit", r.ExitCode, r.Signal, r.TimedOut, &d
		}
	default:
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.enc.Encode(e)
	j.w.Flush()
}

func (j *jsonSink) finish(*fanout.Summary) {}
