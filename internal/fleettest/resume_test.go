package fleettest_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/fleettest"
)

// numbered prints line-1..line-n, one every tenth of a second, and each
// also into the file lines.log in its home (what the host did, seen from
// the host).
func numbered(n int) fanout.Task {
	return fanout.Task{Command: fmt.Sprintf(`i=0; while [ $i -lt %d ]; do i=$((i+1)); echo line-$i; echo line-$i >> lines.log; sleep 0.1; done`, n)}
}

// output collects each target's stdout.
type output struct {
	mu   sync.Mutex
	cond *sync.Cond
	out  map[string]*strings.Builder
}

func newOutput() *output {
	o := &output{out: map[string]*strings.Builder{}}
	o.cond = sync.NewCond(&o.mu)
	return o
}

func (o *output) event(ev fanout.Event) {
	if ev.Kind != fanout.EventStdout {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.out[ev.Target]
	if b == nil {
		b = &strings.Builder{}
		o.out[ev.Target] = b
	}
	b.Write(ev.Data)
	o.cond.Broadcast()
}

func (o *output) waitFor(t *testing.T, target, s string) {
	t.Helper()
	stop := time.AfterFunc(time.Minute, func() { o.mu.Lock(); o.cond.Broadcast(); o.mu.Unlock() })
	defer stop.Stop()
	deadline := time.Now().Add(time.Minute)
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.out[target] == nil || !strings.Contains(o.out[target].String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never printed %q", target, s)
		}
		o.cond.Wait()
	}
}

func (o *output) of(target string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.out[target] == nil {
		return ""
	}
	return o.out[target].String()
}

// waitFile waits until a host's file holds s (written by the remote
// process while rex cannot see it).
func waitFile(t *testing.T, f *fleettest.Fleet, host, rel, s string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(f.ReadFile(t, host, rel), s) {
		if time.Now().After(deadline) {
			t.Fatalf("%s:%s never held %q", host, rel, s)
		}
		time.Sleep(20 * time.Millisecond) // polling a file another process writes
	}
}

func checkNumbered(t *testing.T, host, out string, n int) {
	t.Helper()
	got := strings.Fields(out)
	if len(got) != n {
		t.Fatalf("%s: %d lines, want %d:\n%s", host, len(got), n, out)
	}
	for i, l := range got {
		if want := fmt.Sprintf("line-%d", i+1); l != want {
			t.Fatalf("%s: line %d is %q, want %q", host, i+1, l, want)
		}
	}
}

// TestPoolResumesAfterACut: a task streams on two hosts; h1's network is
// cut (its proxy closes the connection and turns every new one away)
// while its command keeps printing; once the network is back the pool
// reconnects and resumes, and every line comes exactly once, in order.
func TestPoolResumesAfterACut(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 2, Proxied: true, ResumeGrace: time.Minute})
	ctx := fleettest.Context(t)
	targets, err := f.App.Resolve("fleet")
	if err != nil {
		t.Fatal(err)
	}
	o := newOutput()
	done := make(chan *fanout.Summary, 1)
	go func() { done <- fanout.Run(ctx, f.App.Pool, targets, numbered(60), fanout.Options{OnEvent: o.event}) }()
	o.waitFor(t, "h1", "line-10\n")

	reports := len(f.States.Lines())
	attempts := f.Proxies[0].Accepted()
	f.Proxies[0].Cut()
	f.States.Wait(t, reports, "h1 reconnecting")
	// A reconnection is turned away, and the command runs on meanwhile.
	f.Proxies[0].WaitAccepted(attempts + 1)
	waitFile(t, f, "h1", "lines.log", "line-40\n")
	if strings.Contains(o.of("h1"), "line-40") {
		t.Fatal("output arrived through a cut network")
	}
	f.Proxies[0].Restore()
	f.States.Wait(t, reports, "h1 ready")

	var s *fanout.Summary
	select {
	case s = <-done:
	case <-ctx.Done():
		t.Fatal("the task never ended")
	}
	for _, r := range s.Results {
		if r.Err != nil || r.ExitCode == nil || *r.ExitCode != 0 {
			t.Fatalf("%s: %+v", r.Target, r)
		}
	}
	checkNumbered(t, "h1", o.of("h1"), 60)
	checkNumbered(t, "h2", o.of("h2"), 60)
	// The remote process never stopped: it wrote every line itself.
	checkNumbered(t, "h1", f.ReadFile(t, "h1", "lines.log"), 60)
}

// TestPoolResumeGraceRunsOut: the same cut outlasts rexd's grace (1.5 s
// here): rexd stops the command, the audit log says why, and the task
// ends on that host with the same sentence, while the other host's
// finishes.
func TestPoolResumeGraceRunsOut(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 2, Proxied: true, ResumeGrace: time.Minute,
		RexdArgs: []string{"--limit", "resume_grace_ms=1500"}})
	ctx := fleettest.Context(t)
	targets, err := f.App.Resolve("fleet")
	if err != nil {
		t.Fatal(err)
	}
	o := newOutput()
	done := make(chan *fanout.Summary, 1)
	go func() { done <- fanout.Run(ctx, f.App.Pool, targets, numbered(100), fanout.Options{OnEvent: o.event}) }()
	o.waitFor(t, "h1", "line-5\n")
	f.Proxies[0].Cut()
	// rexd on h1 ends the session once the grace has run out.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(auditText(f, "h1"), `"event":"session.expired"`) {
		if time.Now().After(deadline) {
			t.Fatalf("h1's audit log never said the session expired:\n%s", auditText(f, "h1"))
		}
		time.Sleep(50 * time.Millisecond) // polling a file another process writes
	}
	f.Proxies[0].Restore()
	var s *fanout.Summary
	select {
	case s = <-done:
	case <-ctx.Done():
		t.Fatal("the task never ended")
	}
	for _, r := range s.Results {
		switch r.Target {
		case "h1":
			if r.Err == nil || !strings.Contains(r.Err.Error(), "not resumed within the resume grace of 1.5s") {
				t.Fatalf("h1 ended with %+v, want the grace's sentence", r)
			}
		case "h2":
			if r.Err != nil || *r.ExitCode != 0 {
				t.Fatalf("h2: %+v", r)
			}
		}
	}
	audit := auditText(f, "h1")
	if !strings.Contains(audit, "resume grace of 1.5s, so rexd stopped 1 process") {
		t.Fatalf("h1's audit log:\n%s", audit)
	}
	// It did stop: the file stopped growing well before line 100.
	if strings.Contains(f.ReadFile(t, "h1", "lines.log"), "line-100") {
		t.Fatal("the command ran to its end on h1")
	}
}

func auditText(f *fleettest.Fleet, host string) string {
	b, _ := os.ReadFile(f.AuditPath(host))
	return string(b)
}
