package toolset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
)

// keepJobs bounds the ended jobs remembered for job_output.
const keepJobs = 32

// job is one command's fan-out: bash, grep or a chain tool. It runs in the
// foreground of its call until the call's timeout, then, still running,
// in the background under an id until it ends, is killed with job_kill, or
// the toolset closes.
type job struct {
	ts       *Toolset
	action   *Action
	cancel   context.CancelFunc
	done     chan struct{}
	progress func(Event)
	// classify turns a host's end into its status.
	classify func(*fanout.Result) (ok bool, status string)

	mu      sync.Mutex
	id      string
	caps    map[string]*capture
	results map[string]*fanout.Result
	killed  bool
	ended   time.Time
	// graph is set once events come named node@host: a state graph.
	graph bool
	// hosts are those the result names (Action.reported).
	hosts []string
}

// runner runs a job's fan-out, sending every fan-out event to onEvent.
type runner func(ctx context.Context, onEvent func(fanout.Event))

// startJob starts a job. Its context hangs off the toolset, not the call:
// a job that moves to the background must outlive the call that started
// it. The call stops it itself when it is cancelled before then.
func (ts *Toolset) startJob(a *Action, progress func(Event), classify func(*fanout.Result) (bool, string), run runner) *job {
	jctx, cancel := context.WithCancel(ts.ctx)
	j := &job{ts: ts, action: a, cancel: cancel, done: make(chan struct{}), progress: progress, classify: classify,
		caps: map[string]*capture{}, results: map[string]*fanout.Result{}, hosts: a.reported()}
	for _, h := range j.hosts {
		j.caps[h] = newCapture()
	}
	progress(Event{Kind: EventStart, Tool: a.Tool.Name, Hosts: j.hosts})
	ts.wg.Add(1)
	go func() {
		defer ts.wg.Done()
		defer cancel()
		run(jctx, j.event)
		j.mu.Lock()
		j.ended = time.Now()
		id := j.id
		j.mu.Unlock()
		close(j.done)
		progress(Event{Kind: EventDone, Tool: a.Tool.Name, JobID: id})
	}()
	return j
}

func (j *job) event(ev fanout.Event) {
	switch ev.Kind {
	case fanout.EventStdout, fanout.EventStderr:
		j.mu.Lock()
		host := j.hostOf(ev.Target)
		c := j.caps[host]
		if c == nil {
			c = newCapture()
			j.caps[host] = c
		}
		j.mu.Unlock()
		c.write(ev.Data)
		j.progress(Event{Kind: EventOutput, Tool: j.action.Tool.Name, JobID: j.jobID(), Host: ev.Target, Data: ev.Data, Stderr: ev.Kind == fanout.EventStderr})
	case fanout.EventResult:
		j.mu.Lock()
		// A graph node the walk did not reach says nothing of its host.
		if !errors.Is(ev.Result.Err, commands.ErrSkipped) {
			j.results[j.hostOf(ev.Target)] = ev.Result
		}
		j.mu.Unlock()
		ok, status := j.classify(ev.Result)
		j.progress(Event{Kind: EventHostDone, Tool: j.action.Tool.Name, JobID: j.jobID(), Host: ev.Target, Status: status, OK: ok, Result: ev.Result})
	}
}

// hostOf is the host an event's target names: a state graph names each
// node's run node@host (a host ends as its last node does). Callers hold
// mu.
func (j *job) hostOf(target string) string {
	if _, ok := j.caps[target]; ok {
		return target
	}
	if i := strings.LastIndexByte(target, '@'); i >= 0 {
		if _, ok := j.caps[target[i+1:]]; ok {
			j.graph = true
			return target[i+1:]
		}
	}
	return target
}

func (j *job) jobID() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.id
}

func (j *job) finished() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// exitStatus is the status of a command's end on one host.
func exitStatus(r *fanout.Result) (bool, string) {
	switch {
	case r.Unreachable:
		return false, "unreachable"
	case r.Err != nil:
		if strings.Contains(r.Err.Error(), "cancelled") {
			return false, "stopped"
		}
		return false, "failed"
	case r.TimedOut:
		return false, "timed out"
	case r.Signal != "":
		return false, "killed by SIG" + r.Signal
	case r.ExitCode != nil:
		return *r.ExitCode == 0, "exit " + strconv.Itoa(*r.ExitCode)
	}
	return false, "failed"
}

// result renders the job as it stands. note ends the text.
func (j *job) result(note string) *Result {
	j.mu.Lock()
	defer j.mu.Unlock()
	outs := make([]outcome, 0, len(j.hosts))
	graphEnded := j.graph && j.finishedLocked()
	for _, h := range j.hosts {
		o := outcome{host: h, status: statusRunning}
		if graphEnded {
			// A state graph leaves a host without an end when none of
			// the nodes it walked ran there.
			o.ok, o.status = true, "no node ran here"
		}
		c := j.caps[h]
		if c != nil {
			o.out = c.output()
			if o.out.omittedBytes > 0 {
				o.digest = c.digest()
			}
		}
		if r := j.results[h]; r != nil {
			o.ok, o.status = j.classify(r)
			o.exit = r.ExitCode
			if r.Err != nil {
				o.out = o.out.plus(r.Err.Error())
				if o.digest != "" {
					o.digest += "\x00" + r.Err.Error()
				}
			}
			for _, m := range r.Messages {
				o.out = o.out.plus("rexd: " + m)
				if o.digest != "" {
					o.digest += "\x00" + m
				}
			}
		}
		outs = append(outs, o)
	}
	r := render(j.action.Target, j.hosts, outs, note)
	r.JobID = j.id
	r.Running = !j.finishedLocked()
	return r
}

func (j *job) finishedLocked() bool { return j.finished() }

// wait runs a job in the foreground of its call for up to timeout: it
// ends, the call is cancelled (the job is stopped), or time runs out (the
// job moves to the background).
func (ts *Toolset) wait(ctx context.Context, j *job, timeout time.Duration) *Result {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-j.done:
		return j.result("")
	case <-ctx.Done():
		j.cancel()
		<-j.done
		r := j.result(errCancelled.Error() + "; the command was stopped on every host")
		r.IsError = true
		return r
	case <-timer.C:
	}
	id := ts.background(j)
	if j.finished() {
		// It ended as the timer fired: no job to speak of.
		return j.result("")
	}
	j.progress(Event{Kind: EventBackground, Tool: j.action.Tool.Name, JobID: id, Hosts: j.hosts})
	return j.result(fmt.Sprintf("still running after %s; it goes on in the background as job %s: call job_output with job_id %q to wait for it, job_kill to stop it",
		timeout, id, id))
}

// background gives a job an id and keeps it for job_output.
func (ts *Toolset) background(j *job) string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.nextJob++
	id := "j" + strconv.Itoa(ts.nextJob)
	j.mu.Lock()
	j.id = id
	j.mu.Unlock()
	ts.jobs[id] = j
	ts.pruneLocked()
	return id
}

// pruneLocked forgets the oldest ended jobs beyond keepJobs.
func (ts *Toolset) pruneLocked() {
	var ended []*job
	for _, j := range ts.jobs {
		if j.finished() {
			ended = append(ended, j)
		}
	}
	if len(ended) <= keepJobs {
		return
	}
	sort.Slice(ended, func(a, b int) bool { return ended[a].ended.Before(ended[b].ended) })
	for _, j := range ended[:len(ended)-keepJobs] {
		delete(ts.jobs, j.id)
	}
}

func (ts *Toolset) lookupJob(id string) (*job, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	j := ts.jobs[id]
	if j == nil {
		var ids []string
		for k, jj := range ts.jobs {
			if !jj.finished() {
				ids = append(ids, k)
			}
		}
		sort.Strings(ids)
		if len(ids) == 0 {
			return nil, fmt.Errorf("there is no job %q and none is running", id)
		}
		return nil, fmt.Errorf("there is no job %q; running: %s", id, strings.Join(ids, ", "))
	}
	return j, nil
}

// Kill stops a background job, as job_kill does, and waits for it to end.
func (ts *Toolset) Kill(id string) error {
	j, err := ts.lookupJob(id)
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.killed = true
	j.mu.Unlock()
	j.cancel()
	<-j.done
	return nil
}

// Jobs lists the ids of the jobs still running.
func (ts *Toolset) Jobs() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var ids []string
	for id, j := range ts.jobs {
		if !j.finished() {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func (ts *Toolset) jobOutput(ctx context.Context, a *Action) *Result {
	in := a.input.(*JobInput)
	j, err := ts.lookupJob(in.JobID)
	if err != nil {
		return errorResult(a.Target, err)
	}
	wait := ts.lim.defaultWait
	if in.WaitS > 0 {
		wait = min(time.Duration(in.WaitS)*time.Second, ts.lim.maxWait)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-j.done:
	case <-timer.C:
	case <-ctx.Done():
		// The job goes on: only this wait was cancelled.
		r := j.result(fmt.Sprintf("stopped waiting; job %s goes on", j.id))
		r.IsError = true
		return j.routed(r)
	}
	note := ""
	if !j.finished() {
		note = fmt.Sprintf("job %s is still running after another %s", j.id, wait)
	} else if j.wasKilled() {
		note = fmt.Sprintf("job %s was stopped", j.id)
	}
	return j.routed(j.result(note))
}

func (ts *Toolset) jobKill(ctx context.Context, a *Action) *Result {
	in := a.input.(*JobKillInput)
	j, err := ts.lookupJob(in.JobID)
	if err != nil {
		return errorResult(a.Target, err)
	}
	if j.finished() {
		return j.routed(j.result(fmt.Sprintf("job %s had already ended", j.id)))
	}
	j.mu.Lock()
	j.killed = true
	j.mu.Unlock()
	j.cancel()
	select {
	case <-j.done:
	case <-ctx.Done():
		return errorResult(a.Target, errors.New("stopped waiting for the job to end; it is being stopped"))
	}
	return j.routed(j.result(fmt.Sprintf("job %s stopped on every host", j.id)))
}

// routed names where a job ran in a job_output or job_kill result.
func (j *job) routed(r *Result) *Result {
	r.Target, r.Hosts = j.action.Target, j.hosts
	return r
}

func (j *job) wasKilled() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.killed
}

// prepareJob fills in what a consent step shows of job_output / job_kill:
// the job's command and where it runs.
func (ts *Toolset) prepareJob(a *Action, id string) {
	a.Target = ""
	if j, err := ts.lookupJob(id); err == nil {
		a.Target = j.action.Target
		a.Hosts = j.action.Hosts
		a.Command = a.Tool.Name + " " + id + " (" + j.action.Command + ")"
		return
	}
	a.Command = a.Tool.Name + " " + id
	if a.Target == "" {
		a.Target = commands.LocalName
	}
}
