package commands

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/maphash"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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
	RollingFlags
	JSON   bool
	Gather bool
	Quiet  bool
	OutDir string
	// NoPrefix prints the output as it comes, with no target names
	// (-N, as pdsh -N and clush -N).
	NoPrefix bool
	NoStdin  bool
	Timeout  time.Duration
	Sudo     bool
	Task     fanout.Task
	// OneShot closes each target's connection once its command has ended
	// (`rex run`, which exits after): a run over many targets then holds
	// open files for the running ones only. The console leaves it unset.
	OneShot bool
}

// RunUsage is the synopsis of `rex run`.
const RunUsage = "rex run TARGETS [flags] -- CMD [ARG...]"

// Bind declares the flags of `rex run`. Flags stop at the first word
// that is not one (TARGETS, or the command when --target named the
// targets); Args reads on from there.
func (s *RunSpec) Bind(fs *pflag.FlagSet) {
	s.TargetFlags.Bind(fs)
	BindJSON(fs, &s.JSON)
	fs.BoolVarP(&s.Gather, "gather", "b", false, "print identical outputs once, under the folded list of their targets")
	BindTimeout(fs, &s.Timeout)
	s.ReachFlags.Bind(fs)
	s.RollingFlags.Bind(fs)
	BindQuiet(fs, &s.Quiet)
	fs.BoolVarP(&s.NoPrefix, "no-prefix", "N", false, "print output as it comes, without target names (one target: its bytes as they are; several: whole lines)")
	fs.StringVar(&s.OutDir, "outdir", "", "write each target's output to DIR/<target>.out and .err instead of the terminal")
	fs.BoolVar(&s.NoStdin, "no-stdin", false, "do not forward stdin to the targets (it is forwarded when it is not a terminal)")
	BindSudo(fs, &s.Sudo)
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
	if s.OutDir != "" && (s.JSON || s.Gather) {
		return Usagef("--outdir writes the output to files; it does not go with --json or --gather")
	}
	if s.NoPrefix && (s.JSON || s.Gather || s.OutDir != "") {
		return Usagef("--no-prefix prints the output as it comes; it does not go with --json, --gather or --outdir")
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

// paceGC lets a one-shot run on a few targets pile up more garbage before
// it is collected, unless GOGC says otherwise. A stream's garbage (x/crypto/
// ssh's copy of every packet, and events too big for the reused buffers)
// sits over a live heap of a few MB: with Go's default pace one host's
// 256 MiB took 122 collections and 13% of rex's CPU (26 at 400%). Many targets keep the default: their buffers in flight
// make a live heap big enough to space collections out, and 5x of it
// would be memory for nothing (32 targets x 10 MB: 439 MB against 290).
// It changes the process, so only `rex run` (OneShot) calls it.
func paceGC(targets int) {
	if targets <= 4 && os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// cancelGrace is how long a cancelled run waits for its targets to report
// their end before it reports them cancelled anyway (a blocked stdout must
// not hold rex; the remote processes end with their connections).
const cancelGrace = 2 * time.Second

// Run is `rex run`: the task on every target, output live, one line per
// target that did not exit 0 and a summary on stderr, exit status per the
// contract.
func Run(ctx context.Context, app *App, o IO, spec RunSpec) error {
	targets, err := app.Resolve(spec.Targets)
	if err != nil {
		return err
	}
	if spec.Sudo {
		targets = WithSudo(targets)
	}
	if spec.OneShot && !spec.Gather {
		paceGC(len(targets))
	}
	var out outputSink
	switch {
	case spec.JSON:
		out = newJSONSink(o)
	case spec.Gather:
		out = newGatherSink(o)
	case spec.OutDir != "":
		if out, err = newOutdirSink(spec.OutDir); err != nil {
			return err
		}
	case spec.NoPrefix:
		out = newPlainSink(o, targets)
	default:
		out = newPrefixSink(o, targets)
	}
	opts := fanout.Options{
		Concurrency:    spec.Concurrency,
		ConnectTimeout: cmp.Or(spec.ConnectTimeout, app.ConnectTimeout),
		Release:        spec.OneShot,
		// Every sink writes or copies what it is given before it returns.
		Reuse: true,
	}
	spec.RollingFlags.apply(&opts, len(targets))
	if !spec.NoStdin && !isTerminal(o.In) && o.In != nil {
		opts.Stdin = o.In
	}
	// Results are kept here too, so that a cancelled run whose output is
	// stuck (a stalled pager) can still say how each target ended.
	var mu sync.Mutex
	ended := map[string]*fanout.Result{}
	opts.OnEvent = func(ev fanout.Event) {
		if ev.Kind == fanout.EventResult {
			mu.Lock()
			ended[ev.Target] = ev.Result
			mu.Unlock()
		}
		out.event(ev)
	}
	start := time.Now()
	done := make(chan *fanout.Summary, 1)
	go func() { done <- fanout.Run(ctx, app.Pool, targets, spec.Task, opts) }()
	var sum *fanout.Summary
	select {
	case sum = <-done:
	case <-ctx.Done():
		select {
		case sum = <-done:
		case <-time.After(cancelGrace):
		}
	}
	errOut := o.Err
	if sum != nil {
		out.finish(sum)
	} else {
		// The output is stuck: report without waiting for it.
		mu.Lock()
		results := make([]*fanout.Result, len(targets))
		for i, t := range targets {
			if r := ended[t.Name]; r != nil {
				results[i] = r
			} else {
				results[i] = &fanout.Result{Target: t.Name, Cancelled: true, Err: fmt.Errorf("%s: cancelled", t.Name)}
			}
		}
		mu.Unlock()
		sum = fanout.Summarize(results, time.Since(start))
		errOut = o.Err // unlocked: the lock may be held by the stuck writer
	}
	if !spec.JSON {
		writeLines(errOut, failureLines(sum, targets, o.Styled))
	}
	if !spec.Quiet {
		fmt.Fprintln(errOut, SummaryLine(sum))
	}
	code := sum.ExitStatus()
	if f, ok := out.(interface{ Err() error }); ok && f.Err() != nil {
		return &ExitError{Code: max(code, 1), Err: f.Err()}
	}
	if code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// writeLines writes lines in one write, so that they stay whole.
func writeLines(w io.Writer, lines []string) {
	if len(lines) > 0 {
		io.WriteString(w, strings.Join(lines, "\n")+"\n")
	}
}

// failureLines are `name! how` for every target that did not exit 0, in
// target order: the end of `rex run`'s output, in pdsh's spirit.
func failureLines(s *fanout.Summary, targets []fanout.Target, styled bool) []string {
	width := 0
	for _, t := range targets {
		width = max(width, len(t.Name))
	}
	var lines []string
	for i, r := range s.Results {
		msg := ResultLine(r)
		if msg == "" {
			continue
		}
		pad := strings.Repeat(" ", max(width-len(r.Target), 0))
		if styled {
			lines = append(lines, fmt.Sprintf("\x1b[38;5;%dm%s\x1b[0m\x1b[31m!\x1b[0m %s%s", hostColor(i), r.Target, pad, msg))
		} else {
			lines = append(lines, r.Target+"! "+pad+msg)
		}
	}
	return lines
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
	if s.Skipped > 0 {
		fmt.Fprintf(&b, ", %d skipped", s.Skipped)
	}
	if s.Cancelled > 0 {
		fmt.Fprintf(&b, ", %d cancelled", s.Cancelled)
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

// ResultLine describes how a target ended, or "" for a clean exit 0:
// "exit 1", "timed out after 1s", "unreachable: …", "cancelled",
// "skipped: …".
func ResultLine(r *fanout.Result) string {
	reason := func() string {
		if r.Err == nil {
			return ""
		}
		return strings.TrimPrefix(r.Err.Error(), r.Target+": ")
	}
	switch {
	case r.Cancelled:
		return "cancelled"
	case r.Skipped:
		return reason()
	case r.Unreachable:
		return "unreachable: " + reason()
	case r.Err != nil:
		return reason()
	case r.TimedOut && r.Timeout > 0:
		return "timed out after " + r.Timeout.String()
	case r.TimedOut:
		return "timed out"
	case r.Signal != "":
		return "killed by signal " + r.Signal
	case r.ExitCode != nil && *r.ExitCode != 0:
		return "exit " + strconv.Itoa(*r.ExitCode)
	case r.ExitCode == nil:
		return "ended without an exit status"
	}
	return ""
}

type outputSink interface {
	event(fanout.Event)
	finish(*fanout.Summary)
}

// prefixSink prints `name: line` for stdout and `name! line` for stderr
// as lines complete, names padded to one width and coloured on a terminal.
// A line longer than MaxLine is printed in pieces of MaxLine bytes (less
// at most 3, to end on a whole UTF-8 character); every piece after the
// first has the continuation prefix `name:+` or `name!+` in place of
// `name: ` or `name! `, so the line can be joined again.
//
// Each target's lines are cut and prefixed apart from the others' (targets
// run on their own goroutines); only the write of an event's lines, whole,
// holds the printer.
type prefixSink struct {
	mu       sync.Mutex // held while writing to o.Out
	o        IO
	prefixes map[string]*hostPrefix // not changed after newPrefixSink
}

type hostPrefix struct {
	mu          sync.Mutex
	first, cont [2]string // stdout, stderr
	partial     [2][]byte
	continued   [2]bool // a piece of the current line was printed
	out         []byte  // lines cut and prefixed, not yet written
}

// MaxLine is the longest piece of a line `rex run` prints at once.
const MaxLine = 64 << 10

// hostColor picks an ANSI 256-colour code for the i-th target, from a set
// that reads on dark and light backgrounds.
func hostColor(i int) int {
	colors := [...]int{33, 35, 36, 32, 34, 166, 99, 37, 172, 30}
	return colors[i%len(colors)]
}

func newPrefixSink(o IO, targets []fanout.Target) *prefixSink {
	width := 0
	for _, t := range targets {
		if len(t.Name) > width {
			width = len(t.Name)
		}
	}
	p := &prefixSink{o: o, prefixes: map[string]*hostPrefix{}}
	for i, t := range targets {
		pad := strings.Repeat(" ", width-len(t.Name))
		hp := &hostPrefix{}
		for s, mark := range []string{":", "!"} {
			name := t.Name
			if o.Styled {
				c := fmt.Sprintf("\x1b[38;5;%dm", hostColor(i))
				if s == 1 {
					name, mark = c+t.Name+"\x1b[0m", "\x1b[31m!\x1b[0m"
				} else {
					name, mark = c+t.Name+":\x1b[0m", ""
				}
			}
			hp.first[s] = name + mark + " " + pad
			hp.cont[s] = name + mark + "+" + pad
		}
		p.prefixes[t.Name] = hp
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
	default:
		return
	}
	hp := p.prefixes[ev.Target]
	if hp == nil {
		return
	}
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if ev.Kind == fanout.EventResult {
		hp.flushPartial()
		p.write(hp)
		return
	}
	data := ev.Data
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			hp.partial[stream] = append(hp.partial[stream], data...)
			for len(hp.partial[stream]) > MaxLine {
				n := pieceLen(hp.partial[stream])
				hp.piece(stream, hp.partial[stream][:n], false)
				hp.partial[stream] = append(hp.partial[stream][:0], hp.partial[stream][n:]...)
			}
			break
		}
		line := data[:i]
		if len(hp.partial[stream]) > 0 {
			line = append(hp.partial[stream], line...)
			hp.partial[stream] = hp.partial[stream][:0]
		}
		for len(line) > MaxLine {
			n := pieceLen(line)
			hp.piece(stream, line[:n], false)
			line = line[n:]
		}
		hp.piece(stream, line, true)
		data = data[i+1:]
	}
	p.write(hp)
}

// pieceLen is where a line longer than MaxLine (len(b) > MaxLine) is cut:
// at MaxLine, or before the UTF-8 character that straddles it. It looks
// only at the bytes around MaxLine, so every host cuts the same line at
// the same place.
func pieceLen(b []byte) int {
	for k := 0; k < utf8.UTFMax; k++ {
		if utf8.RuneStart(b[MaxLine-k]) {
			return MaxLine - k
		}
	}
	return MaxLine
}

// piece adds one piece of a line to what hp prints next; last ends the
// line.
func (hp *hostPrefix) piece(stream int, b []byte, last bool) {
	prefix := hp.first[stream]
	if hp.continued[stream] {
		prefix = hp.cont[stream]
	}
	hp.out = append(hp.out, prefix...)
	hp.out = append(hp.out, b...)
	hp.out = append(hp.out, '\n')
	hp.continued[stream] = !last
}

// write prints hp's pending lines in one write, holding the terminal (a
// prompt never lands inside output).
func (p *prefixSink) write(hp *hostPrefix) {
	if len(hp.out) == 0 {
		return
	}
	p.mu.Lock()
	p.o.lock()
	p.o.Out.Write(hp.out)
	p.o.unlock()
	p.mu.Unlock()
	if cap(hp.out) > 1<<20 {
		hp.out = nil // one huge line does not pin its buffer
	} else {
		hp.out = hp.out[:0]
	}
}

// flushPartial adds what is left of the target's last lines.
func (hp *hostPrefix) flushPartial() {
	for s := 0; s < 2; s++ {
		if len(hp.partial[s]) > 0 || hp.continued[s] {
			hp.piece(s, hp.partial[s], true)
			hp.partial[s] = hp.partial[s][:0]
		}
	}
}

func (p *prefixSink) finish(*fanout.Summary) {} // every event was written whole

// plainSink prints output with no target names (-N). One target's bytes
// go through as they arrive, stdout to stdout and stderr to stderr, as ssh
// prints them. With several targets only whole lines are written (a line
// of one target never runs into another's): a line longer than MaxLine is
// cut into pieces of MaxLine bytes, each ended by a newline, and a
// target's last line without a newline gets one.
type plainSink struct {
	mu       sync.Mutex // held while writing to o.Out or o.Err
	o        IO
	whole    bool
	partials map[string]*plainPartial // not changed after newPlainSink
}

type plainPartial struct {
	mu   sync.Mutex
	tail [2][]byte // stdout, stderr: the start of a line not yet ended
}

func newPlainSink(o IO, targets []fanout.Target) *plainSink {
	p := &plainSink{o: o, whole: len(targets) > 1, partials: map[string]*plainPartial{}}
	for _, t := range targets {
		p.partials[t.Name] = &plainPartial{}
	}
	return p
}

func (p *plainSink) event(ev fanout.Event) {
	stream := 0
	switch ev.Kind {
	case fanout.EventStdout:
	case fanout.EventStderr:
		stream = 1
	case fanout.EventResult:
		p.flush(ev.Target)
		return
	default:
		return
	}
	if !p.whole {
		p.write(stream, ev.Data)
		return
	}
	pp := p.partials[ev.Target]
	if pp == nil {
		return
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	data := ev.Data
	i := bytes.LastIndexByte(data, '\n')
	switch {
	case i < 0:
		pp.tail[stream] = append(pp.tail[stream], data...)
		for len(pp.tail[stream]) > MaxLine { // a line that long goes in pieces
			n := pieceLen(pp.tail[stream])
			piece := append(pp.tail[stream][:n:n], '\n')
			p.write(stream, piece)
			pp.tail[stream] = pp.tail[stream][n:]
		}
		if len(pp.tail[stream]) == 0 {
			pp.tail[stream] = nil // a long line does not pin its buffer
		}
		return
	case len(pp.tail[stream]) > 0:
		pp.tail[stream] = append(pp.tail[stream], data[:i+1]...)
		p.writeLines(stream, pp.tail[stream])
		pp.tail[stream] = pp.tail[stream][:0]
	default:
		p.writeLines(stream, data[:i+1])
	}
	pp.tail[stream] = append(pp.tail[stream], data[i+1:]...)
}

// writeLines writes whole lines (b ends with a newline), each line longer
// than MaxLine in newline-ended pieces cut where the tail of a line that
// comes in several events is cut: the output does not depend on how the
// host's bytes were chunked. Runs of shorter lines go in one write.
func (p *plainSink) writeLines(stream int, b []byte) {
	if len(b) <= MaxLine {
		p.write(stream, b)
		return
	}
	start := 0 // the first byte not yet written
	for pos := 0; pos < len(b); {
		end := pos + bytes.IndexByte(b[pos:], '\n') + 1
		if line := b[pos : end-1]; len(line) > MaxLine {
			if pos > start {
				p.write(stream, b[start:pos])
			}
			for len(line) > MaxLine {
				n := pieceLen(line)
				p.write(stream, append(line[:n:n], '\n'))
				line = line[n:]
			}
			p.write(stream, b[end-1-len(line):end])
			start = end
		}
		pos = end
	}
	if start < len(b) {
		p.write(stream, b[start:])
	}
}

// flush ends a target's last lines once it has ended (whole lines only).
func (p *plainSink) flush(target string) {
	pp := p.partials[target]
	if pp == nil || !p.whole {
		return
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for s := range pp.tail {
		if len(pp.tail[s]) > 0 {
			p.write(s, append(pp.tail[s], '\n'))
			pp.tail[s] = nil
		}
	}
}

// write prints b whole on the stream's writer, holding the terminal.
func (p *plainSink) write(stream int, b []byte) {
	w := p.o.Out
	if stream == 1 {
		w = p.o.Err
	}
	p.mu.Lock()
	p.o.lock()
	w.Write(b)
	p.o.unlock()
	p.mu.Unlock()
}

func (p *plainSink) finish(*fanout.Summary) {} // each target's rest went with its result

// gatherSink keeps each target's output and prints identical outputs once
// under the sorted list of the targets that produced them (like dshbak -c
// or clush -b). A target's output is kept in chunks of gatherChunk bytes,
// up to maxGathered: a full chunk identical to one already kept (the same
// output on many hosts, the point of gathering) is kept once, and nothing
// is copied again to print it. Past memCap bytes of chunks in memory, new
// chunks go to a spill file (created 0600 and unlinked at once, so it is
// gone when rex exits however it exits): memory stays bounded whatever the
// number of targets.
type gatherSink struct {
	mu     sync.Mutex
	o      IO
	outs   map[string]*gathered
	seed   maphash.Seed
	chunks map[uint64][]chunk // full chunks kept, by hash

	memCap   int64 // bytes of chunks kept in memory before spilling
	inMem    int64
	spill    *os.File
	spillOff int64
	spillErr error // why spilling stopped; new chunks past memCap are then not kept
	cut      int   // targets whose output was cut so
}

// maxGathered bounds the output kept per target; the digest still covers
// all of it, so grouping stays exact.
const maxGathered = 16 << 20

// gatherChunk is the unit a target's output is kept and shared in.
const gatherChunk = 256 << 10

// gatherMemory is how much gathered output is kept in memory; the rest is
// spilled to a temporary file.
const gatherMemory = 256 << 20

// chunk is a full chunk of output: in memory, or gatherChunk bytes at off
// in the spill file.
type chunk struct {
	mem []byte
	off int64
}

type gathered struct {
	chunks    []chunk // full chunks, shared between targets
	tail      []byte  // the chunk being filled
	kept      int
	sum       hash.Hash
	truncated bool // past maxGathered
	cut       bool // past the memory budget with no spill file: not kept
}

func newGatherSink(o IO) *gatherSink {
	return &gatherSink{o: o, outs: map[string]*gathered{}, seed: maphash.MakeSeed(), chunks: map[uint64][]chunk{}, memCap: gatherMemory}
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
	g.keep(o, ev.Data)
}

// keep adds d to what o keeps, up to maxGathered.
func (g *gatherSink) keep(o *gathered, d []byte) {
	for len(d) > 0 {
		if o.cut {
			return
		}
		room := maxGathered - o.kept
		if room <= 0 {
			o.truncated = true
			return
		}
		take := min(len(d), room, gatherChunk-len(o.tail))
		if cap(o.tail)-len(o.tail) < take {
			// Grow the tail by hand, never past a chunk: small outputs
			// stay small, big ones are never copied whole.
			c := min(max(2*cap(o.tail), len(o.tail)+take, 4<<10), gatherChunk)
			o.tail = append(make([]byte, 0, c), o.tail...)
		}
		o.tail = append(o.tail, d[:take]...)
		o.kept += take
		d = d[take:]
		if len(o.tail) == gatherChunk {
			kept, reuse, ok := g.intern(o.tail)
			if !ok {
				// No room in memory and no spill file: what follows is
				// not kept (the digest still groups the target).
				o.cut, o.tail = true, nil
				g.cut++
				return
			}
			o.chunks = append(o.chunks, kept)
			o.tail = reuse
		}
	}
}

// intern returns the kept chunk equal to c (c itself, in memory or
// spilled, when it is new) and a buffer for the next chunk (c again when
// it is not kept in memory). It keeps nothing (ok false) when c is new,
// the memory budget is spent and spilling failed.
func (g *gatherSink) intern(c []byte) (kept chunk, next []byte, ok bool) {
	h := maphash.Bytes(g.seed, c)
	for _, k := range g.chunks[h] {
		if g.equal(k, c) {
			return k, c[:0], true
		}
	}
	if g.inMem+int64(len(c)) > g.memCap {
		if g.spillErr == nil {
			if off, err := g.spillChunk(c); err == nil {
				k := chunk{off: off}
				g.chunks[h] = append(g.chunks[h], k)
				return k, c[:0], true
			}
		}
		return chunk{}, nil, false
	}
	g.inMem += int64(len(c))
	k := chunk{mem: c}
	g.chunks[h] = append(g.chunks[h], k)
	return k, nil, true
}

// equal compares a kept chunk with c (a spilled one is read back: only
// for chunks whose hashes are equal).
func (g *gatherSink) equal(k chunk, c []byte) bool {
	if k.mem != nil {
		return bytes.Equal(k.mem, c)
	}
	buf := make([]byte, gatherChunk)
	if _, err := g.spill.ReadAt(buf, k.off); err != nil {
		return false
	}
	return bytes.Equal(buf, c)
}

// spillChunk appends c to the spill file, creating it on first use.
func (g *gatherSink) spillChunk(c []byte) (int64, error) {
	if g.spill == nil {
		f, err := os.CreateTemp("", "rex-gather-*")
		if err != nil {
			g.spillErr = err
			return 0, err
		}
		// Unlinked at once: nothing is left behind, even after kill -9.
		os.Remove(f.Name())
		g.spill = f
	}
	if _, err := g.spill.WriteAt(c, g.spillOff); err != nil {
		g.spillErr = err
		return 0, err
	}
	off := g.spillOff
	g.spillOff += int64(len(c))
	return off, nil
}

// write prints a kept chunk.
func (g *gatherSink) write(w io.Writer, k chunk) error {
	if k.mem != nil {
		_, err := w.Write(k.mem)
		return err
	}
	_, err := io.Copy(w, io.NewSectionReader(g.spill, k.off, gatherChunk))
	return err
}

// close drops the spill file.
func (g *gatherSink) close() {
	if g.spill != nil {
		g.spill.Close()
		g.spill = nil
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
	defer g.close()
	if g.spillErr != nil && g.o.Err != nil && g.cut > 0 {
		fmt.Fprintf(g.o.Err, "rex: gathered output past %d MiB could not be spilled to a temporary file (%v), so the output of %d target(s) is cut (marked below); set TMPDIR to a writable directory with room, or use --outdir\n", g.memCap>>20, g.spillErr, g.cut)
	}
	groups := Gather(s.Results, func(t string) ([]byte, string) {
		o := g.outs[t]
		if o == nil {
			return nil, ""
		}
		return nil, string(o.sum.Sum(nil))
	})
	g.o.lock()
	defer g.o.unlock()
	bw := bufio.NewWriter(g.o.Out)
	for _, gr := range groups {
		head := fmt.Sprintf("%s (%d)", devices.Fold(gr.Targets), len(gr.Targets))
		if gr.Status != "" {
			head += " " + gr.Status
		}
		rule := strings.Repeat("-", 15)
		if g.o.Styled {
			head = "\x1b[1m" + head + "\x1b[0m"
			if gr.Status != "" {
				head = "\x1b[31m" + head + "\x1b[0m"
			}
		}
		fmt.Fprintf(bw, "%s\n%s\n%s\n", rule, head, rule)
		// Every target of the group printed the same: the first one's.
		if o := g.outs[gr.Targets[0]]; o != nil {
			for _, c := range o.chunks {
				if err := g.write(bw, c); err != nil {
					fmt.Fprintf(bw, "\n[rex: reading the output kept on disk failed: %v]\n", err)
					break
				}
			}
			bw.Write(o.tail)
			last := o.tail
			if len(last) == 0 && len(o.chunks) > 0 {
				var end [1]byte
				if lc := o.chunks[len(o.chunks)-1]; lc.mem != nil {
					end[0] = lc.mem[len(lc.mem)-1]
				} else if _, err := g.spill.ReadAt(end[:], lc.off+gatherChunk-1); err != nil {
					end[0] = '\n'
				}
				last = end[:]
			}
			if o.truncated || o.cut {
				if len(last) > 0 && last[len(last)-1] != '\n' {
					bw.WriteByte('\n')
				}
				if o.cut {
					bw.WriteString("[output cut: no memory or disk left to gather it; see above]\n")
				} else {
					bw.WriteString("[output truncated: more than 16 MiB]\n")
				}
			} else if len(last) > 0 && last[len(last)-1] != '\n' {
				bw.WriteByte('\n')
			}
		}
	}
	bw.Flush()
}

// jsonSink prints one JSON object per event per line.
type jsonSink struct {
	mu  sync.Mutex
	o   IO
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
	Cancelled  bool   `json:"cancelled,omitempty"`
	Skipped    bool   `json:"skipped,omitempty"`
}

func newJSONSink(o IO) *jsonSink {
	bw := bufio.NewWriterSize(o.Out, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &jsonSink{o: o, enc: enc, w: bw}
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
			e.Cancelled, e.Skipped = r.Cancelled, r.Skipped
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
	j.o.lock()
	j.w.Flush()
	j.o.unlock()
}

func (j *jsonSink) finish(*fanout.Summary) {}
