package fanout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
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
)

// Event is one thing that happened on one target.
type Event struct {
	Target string
	Kind   EventKind
	Data   []byte
	Result *Result
}

// Result is how a task ended on one target.
type Result struct {
	Target   string
	ExitCode *int
	Signal   string
	TimedOut bool
	Duration time.Duration
	BytesOut int64
	BytesErr int64
	// Err is set when the target could not run the task at all
	// (Unreachable) or failed while running it.
	Err         error
	Unreachable bool
	// Messages are exec.error reports (timeout, output cap, launch failure).
	Messages []string
}

// OK reports whether the command ran and exited 0.
func (r *Result) OK() bool { return r.Err == nil && r.ExitCode != nil && *r.ExitCode == 0 }

// Options tune Run.
type Options struct {
	Concurrency    int           // targets in flight; default 64
	ConnectTimeout time.Duration // per target; default 15s
	// ClientName, when set, runs the task in a session of that name on
	// each target's pooled connection (Pool.AcquireAs), so rexd's audit
	// log says who acted: "rex-agent", "rex-mcp/<client>".
	ClientName string
	// OnEvent receives every event. It is called from several goroutines
	// at once (one per target), in order for each target, and must not
	// block for long: it holds back that target's output.
	OnEvent func(Event)
}

// Summary is the outcome of a run.
type Summary struct {
	Results     []*Result // in the order of the targets
	OK          int
	Failed      int
	Unreachable int
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
// or ctx is cancelled, in which case every remote process is stopped.
func Run(ctx context.Context, pool *Pool, targets []Target, task Task, opts Options) *Summary {
	opts = opts.withDefaults()
	emit := opts.OnEvent
	if emit == nil {
		emit = func(Event) {}
	}
	start := time.Now()
	results := make([]*Result, len(targets))
	sem := make(chan struct{}, opts.Concurrency)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func(i int, t Target) {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				results[i] = &Result{Target: t.Name, Err: fmt.Errorf("%s: cancelled before it started", t.Name), Unreachable: true}
				emit(Event{Target: t.Name, Kind: EventResult, Result: results[i]})
				return
			}
			defer func() { <-sem }()
			r := runOne(ctx, pool, t, task, opts, emit)
			results[i] = r
			emit(Event{Target: t.Name, Kind: EventResult, Result: r})
		}(i, t)
	}
	wg.Wait()
	return Summarize(results, time.Since(start))
}

// Summarize counts results into a Summary.
func Summarize(results []*Result, took time.Duration) *Summary {
	s := &Summary{Results: results, Duration: took}
	for _, r := range results {
		switch {
		case r.Unreachable:
			s.Unreachable++
		case r.OK():
			s.OK++
		default:
			s.Failed++
		}
		if !r.Unreachable && (s.Slowest == nil || r.Duration > s.Slowest.Duration) {
			s.Slowest = r
		}
	}
	return s
}

func runOne(ctx context.Context, pool *Pool, t Target, task Task, opts Options, emit func(Event)) *Result {
	r := &Result{Target: t.Name}
	lease, err := acquire(ctx, pool, t, opts)
	if err != nil {
		r.Err, r.Unreachable = err, true
		return r
	}
	defer lease.Release()
	sess := lease.Session()

	p := protocol.ExecStartParams{Argv: task.Argv, Env: task.Env, Cwd: task.Cwd}
	if len(task.Argv) == 0 {
		p.Shell, p.Command = true, task.Command
	}
	stdin := ""
	if task.Stdin != nil {
		var enc string
		stdin, enc = protocol.EncodeData(task.Stdin)
		p.StdinEncoding = enc
	}
	p.Stdin = &stdin
	if task.Timeout > 0 {
		p.TimeoutMS = task.Timeout.Milliseconds()
	}
	started := time.Now()
	// Output can arrive before Exec returns (events are routed as soon as
	// the start reply is read): whichever comes first reports the start.
	var startOnce sync.Once
	reportStart := func() { emit(Event{Target: t.Name, Kind: EventStart}) }
	proc, err := sess.Exec(ctx, p, rexclient.ExecOptions{OnEvent: func(ev rexclient.Event) {
		startOnce.Do(reportStart)
		switch ev.Kind {
		case rexclient.Stdout:
			emit(Event{Target: t.Name, Kind: EventStdout, Data: ev.Data})
		case rexclient.Stderr:
			emit(Event{Target: t.Name, Kind: EventStderr, Data: ev.Data})
		}
	}})
	if err != nil {
		if errors.Is(err, rexclient.ErrClosed) {
			lease.Drop()
			r.Unreachable = true
		}
		r.Err = fmt.Errorf("%s: start command: %w", t.Name, err)
		return r
	}
	startOnce.Do(reportStart)

	exit, err := proc.Wait(ctx)
	if err != nil && ctx.Err() != nil {
		// Cancelled: stop the remote process group and wait a little for it.
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
			err = fmt.Errorf("%s: connection lost while the command ran", t.Name)
		}
		r.Err = err
		return r
	}
	r.ExitCode = exit.ExitCode
	if exit.Signal != nil {
		r.Signal = *exit.Signal
	}
	r.TimedOut = exit.TimedOut
	r.BytesOut, r.BytesErr = exit.BytesStdout, exit.BytesStderr
	if ctx.Err() != nil && r.Err == nil {
		r.Err = fmt.Errorf("%s: cancelled", t.Name)
	}
	return r
}

// acquire gets t's session within the connect timeout, with the error an
// operator can act on when the time runs out.
func acquire(ctx context.Context, pool *Pool, t Target, opts Options) (*Lease, error) {
	timeout := opts.ConnectTimeout
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lease, err := pool.AcquireAs(cctx, t, opts.ClientName)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = fmt.Errorf("connect %s: no answer within %s; is the host up and reachable?", t.Name, timeout)
	}
	return lease, err
}

// withDefaults fills the zero fields of opts.
func (opts Options) withDefaults() Options {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 15 * time.Second
	}
	return opts
}
