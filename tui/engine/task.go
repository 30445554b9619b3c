package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
)

// Phase is where a task is on one target.
type Phase int

const (
	Waiting Phase = iota // connecting, or waiting for a concurrency slot
	Running
	Done
)

// SyncState is a /push or /pull on one target: its phase and progress,
// and how it ended when it ended well ("done", "up to date") or with
// conflicts; failures show as their result does.
type SyncState struct {
	Pull  bool
	Local string // the local directory (pull: where the tree is written)
	Phase commands.SyncPhase
	Moved cas.Progress
	End   string
	EndOK bool
}

// Run is one task on one target: its output and how it went.
type Run struct {
	Target string
	Task   *Task
	Buf    *Buffer

	mu      sync.Mutex // guards the fields below, set by fan-out goroutines
	phase   Phase
	started time.Time
	result  *fanout.Result
	sync    *SyncState
	tr      *Transcript // the transcript the run is shown in, if any
}

// SetRunning records that the target started the task.
func (r *Run) SetRunning(now time.Time) {
	r.mu.Lock()
	r.phase, r.started = Running, now
	r.mu.Unlock()
}

// SetResult records how the task ended on the target.
func (r *Run) SetResult(res *fanout.Result) {
	r.mu.Lock()
	r.phase, r.result = Done, res
	tr := r.tr
	r.mu.Unlock()
	if tr != nil {
		tr.ended(r, res)
	}
}

// Status returns the phase, when the target started, and the result once
// done.
func (r *Run) Status() (Phase, time.Time, *fanout.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.phase, r.started, r.result
}

// Running reports whether the target is still busy with the task.
func (r *Run) Running() bool {
	ph, _, _ := r.Status()
	return ph != Done
}

// StartSync makes the run a /push or /pull one.
func (r *Run) StartSync(s SyncState) {
	r.mu.Lock()
	r.sync = &s
	r.mu.Unlock()
}

// SetSync records a sync's progress; it runs on the sync's goroutines.
func (r *Run) SetSync(sp commands.SyncProgress, now time.Time) {
	r.mu.Lock()
	if r.phase == Waiting {
		r.phase, r.started = Running, now
	}
	if r.sync != nil {
		r.sync.Phase, r.sync.Moved = sp.Phase, sp.Progress
	}
	r.mu.Unlock()
	r.Buf.Touch()
}

// EndSync records how a sync ended before its result arrives.
func (r *Run) EndSync(end string, ok bool) {
	r.mu.Lock()
	if r.sync != nil {
		r.sync.End, r.sync.EndOK = end, ok
	}
	r.mu.Unlock()
}

// Sync returns the run's sync state; ok is false for other runs.
func (r *Run) Sync() (SyncState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sync == nil {
		return SyncState{}, false
	}
	return *r.sync, true
}

// Job is a task's work on all its targets: it reports each target's
// start, output and result as fan-out events and returns the summary.
type Job func(ctx context.Context, onEvent func(fanout.Event)) *fanout.Summary

// Task is one command (or push, pull, tool run) on one or more targets.
type Task struct {
	ID      int
	Command string // as the operator sees it
	Spec    string // the TARGETS it ran on
	Started time.Time
	Runs    []*Run

	byName map[string]*Run
	ctx    context.Context // ends when the task is stopped
	cancel context.CancelFunc
	exited chan struct{}

	mu        sync.Mutex
	batch     *fanout.Batch // the batch running now, in a rolling run
	done      bool
	ended     time.Time
	summary   *fanout.Summary
	cancelled bool
	released  bool // its output was let go (Tasks.Retain)
}

// Run returns the task's run on target, or nil.
func (t *Task) Run(target string) *Run { return t.byName[target] }

// Context ends when the task is stopped.
func (t *Task) Context() context.Context { return t.ctx }

// Exited is closed when the task has ended on every target.
func (t *Task) Exited() <-chan struct{} { return t.exited }

// Start runs job in the background; onEnd (may be nil) is called once
// it has ended.
func (t *Task) Start(job Job, now func() time.Time, onEnd func()) {
	go func() {
		defer t.cancel()
		s := job(t.ctx, t.OnEvent(now))
		t.finish(s, now())
		if onEnd != nil {
			onEnd()
		}
	}()
}

// OnEvent files a fan-out event into the target's run. It runs on the
// fan-out goroutines: it only appends under the buffers' locks.
func (t *Task) OnEvent(now func() time.Time) func(fanout.Event) {
	return func(ev fanout.Event) {
		if ev.Kind == fanout.EventBatch {
			t.mu.Lock()
			t.batch = ev.Batch
			t.mu.Unlock()
			return
		}
		r := t.byName[ev.Target]
		if r == nil {
			return
		}
		switch ev.Kind {
		case fanout.EventStdout:
			r.Buf.Write(false, ev.Data)
		case fanout.EventStderr:
			r.Buf.Write(true, ev.Data)
		case fanout.EventStart:
			r.SetRunning(now())
			r.Buf.Touch()
		case fanout.EventResult:
			res := ev.Result
			r.Buf.Flush()
			for _, msg := range res.Messages {
				r.Buf.Note(Note, "rex: "+msg)
			}
			// A sync run holds only what rex says; no prefix is needed
			// to tell it from a program's output.
			prefix := "rex: "
			if _, ok := r.Sync(); ok {
				prefix = ""
			}
			if res.Err != nil {
				r.Buf.Note(Err, prefix+res.Err.Error())
			}
			r.SetResult(res)
			r.Buf.Touch()
		}
	}
}

func (t *Task) finish(s *fanout.Summary, now time.Time) {
	t.mu.Lock()
	t.done, t.summary, t.ended = true, s, now
	t.mu.Unlock()
	close(t.exited)
}

// Batch is the batch of a rolling run (--batch, --canary) that runs now;
// false when the task does not roll.
func (t *Task) Batch() (fanout.Batch, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.batch == nil {
		return fanout.Batch{}, false
	}
	return *t.batch, true
}

// Done reports whether the task has ended everywhere.
func (t *Task) Done() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

// Stop cancels the task on every target; it reports whether there was
// anything left to stop.
func (t *Task) Stop() bool {
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

// Cancelled reports whether the task was stopped.
func (t *Task) Cancelled() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cancelled
}

// Released reports whether the task's output was let go.
func (t *Task) Released() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.released
}

// Duration is how long the task ran, or has run so far.
func (t *Task) Duration(now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return t.ended.Sub(t.Started)
	}
	return now.Sub(t.Started)
}

// Summary is the task's summary once it ended, else nil.
func (t *Task) Summary() *fanout.Summary {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.summary
}

// Outcome counts the task's targets so far: ended well, failed, could
// not be reached, still going.
type Outcome struct{ OK, Failed, Unreachable, Running int }

// Outcome counts the runs by how they went.
func (t *Task) Outcome() Outcome {
	var o Outcome
	for _, r := range t.Runs {
		ph, _, res := r.Status()
		switch {
		case ph != Done:
			o.Running++
		case res != nil && res.Unreachable:
			o.Unreachable++
		case res != nil && res.Err == nil && res.ExitCode != nil && *res.ExitCode == 0:
			o.OK++
		default:
			o.Failed++
		}
	}
	return o
}

// SummaryLine is the one-line account shown when the task ends.
func (t *Task) SummaryLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.summary == nil {
		return ""
	}
	s := strings.TrimPrefix(commands.SummaryLine(t.summary), "rex: ")
	if t.cancelled {
		s = "cancelled: " + s
	}
	return cutText(t.Command, 40) + " — " + s
}

// Version sums the runs' buffer versions and ends: it changes when any
// output arrives or a target finishes.
func (t *Task) Version() uint64 {
	var v uint64
	for _, r := range t.Runs {
		rd := r.Buf.Read()
		v += rd.Version()
		rd.Done()
		if ph, _, _ := r.Status(); ph == Done {
			v += 1 << 40
		}
	}
	return v
}

// ResultText says how a command ended on one target, and whether that
// was well: "exit 0 · 1.2s", "exit 3 · 40ms", "unreachable",
// "cancelled", "timed out", "signal KILL".
func ResultText(r *fanout.Result) (string, bool) {
	if r == nil {
		return "", false
	}
	dur := " · " + FmtDuration(r.Duration)
	switch {
	case r.Unreachable:
		return "unreachable", false
	case r.Err != nil && r.ExitCode == nil:
		if IsCancelled(r.Err) {
			return "cancelled" + dur, false
		}
		return "failed" + dur, false
	case r.TimedOut:
		return "timed out" + dur, false
	case r.Signal != "":
		return "signal " + SignalName(r.Signal) + dur, false
	case r.ExitCode != nil && *r.ExitCode == 0 && r.Err == nil:
		return "exit 0" + dur, true
	case r.ExitCode != nil:
		return fmt.Sprintf("exit %d", *r.ExitCode) + dur, false
	}
	return commands.ResultLine(r), false
}

// IsCancelled reports an error that says a run was stopped.
func IsCancelled(err error) bool {
	if errors.Is(err, context.Canceled) {
		return true
	}
	s := err.Error()
	return strings.HasSuffix(s, "cancelled") || strings.Contains(s, "cancelled;") || strings.HasPrefix(s, "cancelled")
}

// FmtDuration writes a duration short enough for a pane header.
func FmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// cutText cuts plain text to at most w cells, ending in "…" when cut.
func cutText(s string, w int) string {
	if TextWidth(s) <= w {
		return s
	}
	r := []rune(s)
	for len(r) > 0 && TextWidth(string(r))+1 > w {
		r = r[:len(r)-1]
	}
	return string(r) + "…"
}

// SignalName is a signal's name when it looks like one, else "?": the
// client checks it too (rexclient), but a Result can come from elsewhere.
func SignalName(s string) string {
	if !protocol.ValidSignal(s) {
		return "?"
	}
	return s
}
