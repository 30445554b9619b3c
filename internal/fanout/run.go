package fanout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/secrets"
)

// DefaultConcurrency is how many targets run at once unless told otherwise.
const DefaultConcurrency = 64

// killWait bounds how long a cancelled run waits for remote processes to
// report their end before it gives up on them.
const killWait = 5 * time.Second

// Task is one command to run on every target.
type Task struct {
	Argv    []string // run without a shell
	Command string   // run with /bin/sh -c when Argv is empty
	Env     map[string]string
	Cwd     string
	// Stdin is sent to the process and then closed; nil sends nothing and
	// closes stdin at once, so a command never waits on a keyboard.
	Stdin   []byte
	Timeout time.Duration // 0: none
}

// EventKind says what an Event carries.
type EventKind int

const (
	EventStdout EventKind = iota
	EventStderr
	EventStart  // the command started on the target
	EventResult // the target is done: Result is set
	EventBatch  // a batch of a rolling run starts: Batch is set, Target is ""
)

// Event is one thing that happened on one target.
type Event struct {
	Target string
	Kind   EventKind
	Data   []byte
	Result *Result
	Batch  *Batch
}

// Result is how a task ended on one target.
type Result struct {
	Target   string
	ExitCode *int
	Signal   string
	TimedOut bool
	// Timeout is the task's timeout, for saying which limit fired.
	Timeout  time.Duration
	Duration time.Duration
	BytesOut int64
	BytesErr int64
	// Err is set when the target could not run the task at all
	// (Unreachable, Cancelled, Skipped) or failed while running it.
	Err error
	// Unreachable: the target could not be reached, or the connection was
	// lost while the command ran.
	Unreachable bool
	// Cancelled: the run was cancelled (ctrl+c) before the target ended;
	// its command, if it had started, was stopped.
	Cancelled bool
	// Skipped: a rolling run stopped before this target (a failed canary,
	// --max-fail reached); nothing ran on it.
	Skipped bool
	// Messages are exec.error reports (timeout, output cap, launch failure).
	Messages []string
}

// OK reports whether the command ran and exited 0.
func (r *Result) OK() bool { return r.Err == nil && r.ExitCode != nil && *r.ExitCode == 0 }

// Options tune Run.
type Options struct {
	Concurrency int // targets in flight; default 64
	// ConnectTimeout, when set, bounds reaching each target (dial,
	// handshake, bootstrap) in place of the connector's default (for SSH:
	// ssh_config's ConnectTimeout, else 10s). The connector enforces it.
	ConnectTimeout time.Duration
	// Batch, when set, runs the targets this many at a time in their
	// order, each batch after the previous one has ended (a rolling run).
	Batch int
	// Canary, when set, runs the first Canary targets alone first; the
	// others run only if every canary exited 0.
	Canary int
	// MaxFail, when set, stops starting targets once this many have
	// failed; the rest are Skipped.
	MaxFail int
	// Stdin, when set, is streamed to every target's command (Task.Stdin
	// is ignored): with backpressure, EOF reaching each.
	Stdin io.Reader
	// Bulk, for Each: give fn the connection's bulk lane (Lease.Bulk), for
	// work that moves a lot of data (push, pull) and must not queue ahead
	// of keystrokes on the connection's own stream.
	Bulk bool
	// ClientName, when set, runs the task in a session of that name on
	// each target's pooled connection (Pool.AcquireAs), so rexd's audit
	// log says who acted: "rex-agent", "rex-mcp/<client>".
	ClientName string
	// Release closes each target's connection as soon as its command (or
	// Each's fn) has ended (Lease.Close), for a one-shot run that will not
	// reuse it: open files and remote rexds then follow Concurrency, not
	// the number of targets. The console keeps its connections and leaves
	// it unset.
	Release bool
	// OnEvent receives every event (an EventBatch as each batch of a
	// rolling run starts). It is called from several goroutines
	// at once (one per target), in order for each target, and must not
	// block for long: it holds back that target's output.
	OnEvent func(Event)
	// Reuse promises that OnEvent keeps no part of an event's Data once
	// it returns (it writes or copies it): output buffers are then used
	// again (rexclient.ExecOptions.Reuse).
	Reuse bool
}

// Batch is one step of a rolling run.
type Batch struct {
	Index, Count int // 1-based
	Targets      []string
	Canary       bool
}

// Summary is the outcome of a run.
type Summary struct {
	Results     []*Result // in the order of the targets
	OK          int
	Failed      int
	Unreachable int
	Cancelled   int
	Skipped     int
	Slowest     *Result
	Duration    time.Duration
}

// ExitStatus follows the command-line contract: 0 when every target exited
// 0; 255 when any target could not be reached; else the highest remote exit
// code (a signal or error counts as 1 at least).
func (s *Summary) ExitStatus() int {
	if s.Unreachable > 0 {
		return 255
	}
	max := 0
	for _, r := range s.Results {
		c := 0
		switch {
		case r.ExitCode != nil:
			c = *r.ExitCode
		case r.Signal != "" || r.Err != nil || r.TimedOut:
			c = 1
		}
		if c > max {
			max = c
		}
	}
	return max
}

// Run runs task on every target through pool and returns when all are done
// or ctx is cancelled, in which case every remote process is stopped and
// the targets that had not ended are Cancelled. Targets start in their
// order. Every command gets REX_TARGET (the target's name) and REX_GROUP
// (the group it was chosen through) in its environment.
func Run(ctx context.Context, pool *Pool, targets []Target, task Task, opts Options) *Summary {
	opts = opts.withDefaults()
	emit := opts.OnEvent
	if emit == nil {
		emit = func(Event) {}
	}
	start := time.Now()
	results := make([]*Result, len(targets))
	var in *broadcast
	if opts.Stdin != nil {
		in = newBroadcast(opts.Stdin, len(targets))
	}
	var mu sync.Mutex
	failed := 0
	var stopped string // why no more targets start, "" while they do
	finish := func(i int, r *Result) {
		mu.Lock()
		results[i] = r
		if !r.OK() && !r.Cancelled && !r.Skipped {
			failed++
			if opts.MaxFail > 0 && failed >= opts.MaxFail && stopped == "" {
				stopped = fmt.Sprintf("%d %s failed (--max-fail %d)", failed, plural(failed, "target", "targets"), opts.MaxFail)
			}
		}
		mu.Unlock()
		emit(Event{Target: r.Target, Kind: EventResult, Result: r})
	}
	// notRun ends a target that never started: cancelled, or skipped.
	notRun := func(i int, t Target, why string) {
		if in != nil {
			in.skip()
		}
		r := &Result{Target: t.Name, Timeout: task.Timeout}
		if why == "" {
			r.Cancelled, r.Err = true, fmt.Errorf("%s: cancelled", t.Name)
		} else {
			r.Skipped, r.Err = true, fmt.Errorf("%s: skipped: %s", t.Name, why)
		}
		finish(i, r)
	}
	waves := plan(len(targets), opts)
	sem := make(chan struct{}, opts.Concurrency)
	for wi, w := range waves {
		if opts.Batch > 0 || opts.Canary > 0 {
			names := make([]string, 0, w.end-w.start)
			for _, t := range targets[w.start:w.end] {
				names = append(names, t.Name)
			}
			emit(Event{Kind: EventBatch, Batch: &Batch{Index: wi + 1, Count: len(waves), Targets: names, Canary: w.canary}})
		}
		var wg sync.WaitGroup
		for i := w.start; i < w.end; i++ {
			t := targets[i]
			// Start in order: wait for a slot before looking at the next.
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
			mu.Lock()
			why := stopped
			mu.Unlock()
			if ctx.Err() != nil || why != "" {
				if ctx.Err() == nil {
					<-sem
				}
				if ctx.Err() != nil {
					why = ""
				}
				notRun(i, t, why)
				continue
			}
			wg.Add(1)
			go func(i int, t Target) {
				defer wg.Done()
				defer func() { <-sem }()
				finish(i, runOne(ctx, pool, t, task, opts, in, emit))
			}(i, t)
		}
		wg.Wait()
		if w.canary {
			mu.Lock()
			for _, r := range results[w.start:w.end] {
				if !r.OK() && stopped == "" {
					stopped = fmt.Sprintf("the canary %s did not succeed", r.Target)
				}
			}
			mu.Unlock()
		}
	}
	return Summarize(results, time.Since(start))
}

// wave is a range of targets that run together.
type wave struct {
	start, end int
	canary     bool
}

// plan splits n targets into waves: the canaries, then batches.
func plan(n int, opts Options) []wave {
	var ws []wave
	i := 0
	if opts.Canary > 0 && n > 0 {
		i = min(opts.Canary, n)
		ws = append(ws, wave{0, i, true})
	}
	size := n - i
	if opts.Batch > 0 {
		size = opts.Batch
	}
	for i < n {
		end := min(i+size, n)
		ws = append(ws, wave{start: i, end: end})
		i = end
	}
	return ws
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Summarize counts results into a Summary.
func Summarize(results []*Result, took time.Duration) *Summary {
	s := &Summary{Results: results, Duration: took}
	for _, r := range results {
		switch {
		case r.Cancelled:
			s.Cancelled++
		case r.Skipped:
			s.Skipped++
		case r.Unreachable:
			s.Unreachable++
		case r.OK():
			s.OK++
		default:
			s.Failed++
		}
		if !r.Unreachable && !r.Skipped && !r.Cancelled && (s.Slowest == nil || r.Duration > s.Slowest.Duration) {
			s.Slowest = r
		}
	}
	return s
}

func runOne(ctx context.Context, pool *Pool, t Target, task Task, opts Options, in *broadcast, emit func(Event)) *Result {
	r := &Result{Target: t.Name, Timeout: task.Timeout}
	subscribed := false
	defer func() {
		if in != nil && !subscribed {
			in.skip()
		}
	}()
	// The device's secrets: a target that cannot have them does not run.
	sec, err := pool.secretEnv(ctx, t)
	if err != nil {
		r.Err = fmt.Errorf("%s: %w", t.Name, err)
		return r
	}

	p := protocol.ExecStartParams{Argv: task.Argv, Env: processEnv(t, task.Env, sec), Cwd: task.Cwd}
	if len(task.Argv) == 0 {
		p.Shell, p.Command = true, task.Command
	}
	if in == nil {
		// Fixed input, or none: stdin is closed once it is written, so a
		// command never waits on a keyboard.
		stdin := ""
		if task.Stdin != nil {
			var enc string
			stdin, enc = protocol.EncodeData(task.Stdin)
			p.StdinEncoding = enc
		}
		p.Stdin = &stdin
	}
	if task.Timeout > 0 {
		p.TimeoutMS = task.Timeout.Milliseconds()
	}
	// Output can arrive before Exec returns (events are routed as soon as
	// the start reply is read): whichever comes first reports the start.
	var startOnce sync.Once
	reportStart := func() { emit(Event{Target: t.Name, Kind: EventStart}) }
	// Output goes out as events, through maskers when there are secrets
	// (flushed before the target's result is reported).
	stdout := io.Writer(&eventWriter{emit: emit, target: t.Name, kind: EventStdout})
	stderr := io.Writer(&eventWriter{emit: emit, target: t.Name, kind: EventStderr})
	if len(sec) > 0 {
		mo := secrets.NewMasker(stdout, secretValues(sec))
		me := secrets.NewMasker(stderr, secretValues(sec))
		defer mo.Flush()
		defer me.Flush()
		stdout, stderr = mo, me
	}
	// A process that outlives its target's result (a cancel rexd did not
	// confirm in time) sends nothing more: the result is the target's
	// last event, and the maskers are flushed then.
	var outMu sync.Mutex
	outDone := false
	defer func() {
		outMu.Lock()
		outDone = true
		outMu.Unlock()
	}()
	eopts := rexclient.ExecOptions{OnEvent: func(ev rexclient.Event) {
		outMu.Lock()
		defer outMu.Unlock()
		if outDone {
			return
		}
		startOnce.Do(reportStart)
		switch ev.Kind {
		case rexclient.Stdout:
			stdout.Write(ev.Data)
		case rexclient.Stderr:
			stderr.Write(ev.Data)
		}
	}, Reuse: opts.Reuse}
	var first *rexclient.FirstExec
	if opts.Release && opts.ClientName == "" {
		// A one-shot run's connection is this command's alone: the
		// command goes out with the session's opening (a cold start
		// then waits for one round trip less), when the connector can.
		// Without secrets, environment of the operator's or input, it may
		// ride in the exec request itself, as ssh sends its command.
		public := len(sec) == 0 && len(task.Env) == 0 && (p.Stdin == nil || *p.Stdin == "")
		first = &rexclient.FirstExec{Params: p, Opts: eopts, Public: public}
		t.First = first
	}
	t.ConnectTimeout = opts.ConnectTimeout
	lease, err := pool.AcquireAs(ctx, t, opts.ClientName)
	if err != nil {
		if ctx.Err() != nil {
			r.Cancelled, r.Err = true, fmt.Errorf("%s: cancelled", t.Name)
			return r
		}
		r.Err, r.Unreachable = err, true
		return r
	}
	defer opts.endLease(lease)
	sess := lease.Session()
	started := time.Now()
	var proc *rexclient.Process
	if first != nil && first.Sent {
		proc, err = first.Proc, first.Err
	} else {
		proc, err = sess.Exec(ctx, p, eopts)
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			r.Cancelled, r.Err = true, fmt.Errorf("%s: cancelled", t.Name)
		case errors.Is(err, rexclient.ErrClosed):
			lease.Drop()
			r.Unreachable = true
			r.Err = fmt.Errorf("%s: connection lost before the command started: %w", t.Name, err)
		case errors.Is(err, rexclient.ErrDropped):
			// The connection is being resumed. The start is not sent
			// again: had it reached rexd, the command could run twice.
			// One that did is stopped there as an orphan once the
			// connection is back (rexclient.Client.Resume), or by rexd
			// when the grace runs out.
			r.Unreachable = true
			r.Err = fmt.Errorf("%s: the connection dropped as the command was being started, so it did not run (rexd stops it if it had begun); run it again once the host is back", t.Name)
		default:
			r.Err = fmt.Errorf("%s: start command: %w", t.Name, err)
		}
		return r
	}
	startOnce.Do(reportStart)

	var pumped chan struct{}
	if in != nil {
		sub, err := in.subscribe()
		subscribed = true
		pumped = make(chan struct{})
		pctx, stopPump := context.WithCancel(ctx)
		defer func() {
			stopPump()
			<-pumped
		}()
		go func() {
			defer close(pumped)
			if err != nil {
				emit(Event{Target: t.Name, Kind: EventStderr, Data: []byte("rex: " + err.Error() + "\n")})
				proc.CloseInput(pctx)
				return
			}
			defer sub.close()
			pump(pctx, sub, proc)
		}()
	}

	exit, err := proc.Wait(ctx)
	cancelled := false
	if err != nil && ctx.Err() != nil {
		// Cancelled: stop the remote process group and wait a little for it.
		cancelled = true
		kctx, kcancel := context.WithTimeout(context.Background(), killWait)
		proc.Kill(kctx, "TERM")
		exit, err = proc.Wait(kctx)
		kcancel()
		if err != nil {
			err = fmt.Errorf("%s: cancelled; the remote process did not confirm its end: %w", t.Name, err)
		}
	}
	r.Duration = time.Since(started)
	for _, e := range proc.Errors() {
		r.Messages = append(r.Messages, e.Message)
	}
	if err != nil {
		if errors.Is(err, rexclient.ErrClosed) {
			lease.Drop()
			var re *rexclient.ResumeError
			switch {
			case cancelled:
			case errors.As(err, &re):
				// rexd's own sentence: why it stopped the command.
				r.Unreachable = true
				err = fmt.Errorf("%s: %w", t.Name, err)
			default:
				r.Unreachable = true
				err = fmt.Errorf("%s: connection lost while the command ran", t.Name)
			}
		}
		r.Err, r.Cancelled = err, cancelled
		return r
	}
	r.ExitCode = exit.ExitCode
	if exit.Signal != nil {
		r.Signal = *exit.Signal
	}
	r.TimedOut = exit.TimedOut
	r.BytesOut, r.BytesErr = exit.BytesStdout, exit.BytesStderr
	if cancelled || ctx.Err() != nil {
		r.Cancelled, r.Err = true, fmt.Errorf("%s: cancelled", t.Name)
	}
	return r
}

// eventWriter sends what is written as one target's output events.
type eventWriter struct {
	emit   func(Event)
	target string
	kind   EventKind
}

func (w *eventWriter) Write(p []byte) (int, error) {
	w.emit(Event{Target: w.target, Kind: w.kind, Data: p})
	return len(p), nil
}

// pump feeds a command's stdin from the broadcast until EOF (which it
// passes on) or the command ends. Each exec.input returns once rexd has
// written the data to the process: that is the backpressure.
func pump(ctx context.Context, sub *subscriber, proc *rexclient.Process) {
	for {
		b, err := sub.next(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				proc.CloseInput(ctx)
			}
			return
		}
		if err := proc.Input(ctx, b); err != nil {
			return
		}
	}
}

// withDefaults fills the zero fields of opts.
func (opts Options) withDefaults() Options {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	return opts
}
