package fanout_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

var rexdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fanout-test")
	if err != nil {
		panic(err)
	}
	rexdBin = filepath.Join(dir, "rexd")
	if out, err := exec.Command("go", "build", "-o", rexdBin, "github.com/rexconsole/rex/cmd/rexd").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build rexd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fleet is a connector whose targets are local rexd processes, each with
// its own HOME (so `echo $HOME` tells them apart), plus targets that fail
// in chosen ways.
type fleet struct {
	t     *testing.T
	base  string
	dials atomic.Int64
	mu    sync.Mutex
	procs map[string]*exec.Cmd
	// public records, per target, Target.First's Public when it had one.
	public sync.Map
}

func newFleet(t *testing.T) *fleet {
	return &fleet{t: t, base: t.TempDir(), procs: map[string]*exec.Cmd{}}
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

func (f *fleet) Connect(ctx context.Context, t fanout.Target) (*fanout.Conn, error) {
	f.dials.Add(1)
	if t.First != nil {
		f.public.Store(t.Name, t.First.Public)
	}
	return f.connect(ctx, t)
}

func (f *fleet) connect(ctx context.Context, t fanout.Target) (*fanout.Conn, error) {
	switch {
	case strings.HasPrefix(t.Name, "refused"):
		return nil, fmt.Errorf("connect %s (127.0.0.1:1): connection refused; is sshd running there?", t.Name)
	case strings.HasPrefix(t.Name, "blackhole"):
		// A connector bounds reaching a target by t.ConnectTimeout.
		if t.ConnectTimeout == 0 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(t.ConnectTimeout):
			return nil, fmt.Errorf("connect %s: no answer within %s", t.Name, t.ConnectTimeout)
		}
	}
	home := filepath.Join(f.base, t.Name)
	os.MkdirAll(home, 0o755)
	cmd := exec.Command(rexdBin, "--stdio", "--root", home, "--no-audit", "--limit", "max_output_bytes=0", "--limit", "default_timeout_ms=0")
	cmd.Env = append(os.Environ(), "HOME="+home, "TARGET="+t.Name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.procs[t.Name] = cmd
	f.mu.Unlock()
	c := rexclient.NewConn(out, in, closerFunc(func() error { in.Close(); return cmd.Wait() }))
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "fanout-test"})
	if err != nil {
		c.Close()
		return nil, err
	}
	return &fanout.Conn{Session: s, Closer: c}, nil
}

func targets(names ...string) []fanout.Target {
	var ts []fanout.Target
	for _, n := range names {
		ts = append(ts, fanout.Target{Name: n})
	}
	return ts
}

// collector gathers events per target.
type collector struct {
	mu      sync.Mutex
	out     map[string]*bytes.Buffer
	errOut  map[string]*bytes.Buffer
	results map[string]*fanout.Result
	order   map[string][]fanout.EventKind
}

func newCollector() *collector {
	return &collector{out: map[string]*bytes.Buffer{}, errOut: map[string]*bytes.Buffer{},
		results: map[string]*fanout.Result{}, order: map[string][]fanout.EventKind{}}
}

func (c *collector) event(ev fanout.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := func(m map[string]*bytes.Buffer) *bytes.Buffer {
		if m[ev.Target] == nil {
			m[ev.Target] = &bytes.Buffer{}
		}
		return m[ev.Target]
	}
	c.order[ev.Target] = append(c.order[ev.Target], ev.Kind)
	switch ev.Kind {
	case fanout.EventStdout:
		buf(c.out).Write(ev.Data)
	case fanout.EventStderr:
		buf(c.errOut).Write(ev.Data)
	case fanout.EventResult:
		c.results[ev.Target] = ev.Result
	}
}

func (c *collector) stdout(t string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out[t] == nil {
		return ""
	}
	return c.out[t].String()
}

func TestRunEveryTargetStreamsItsOwnOutput(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	c := newCollector()
	names := []string{"h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8"}
	s := fanout.Run(context.Background(), pool, targets(names...),
		fanout.Task{Command: `echo "$TARGET"; echo err-$TARGET >&2; seq 1000 | tail -1`},
		fanout.Options{OnEvent: c.event})
	if s.OK != 8 || s.ExitStatus() != 0 || len(s.Results) != 8 {
		t.Fatalf("summary %+v", s)
	}
	for i, n := range names {
		if got := c.stdout(n); got != n+"\n1000\n" {
			t.Errorf("%s stdout %q", n, got)
		}
		if got := c.errOut[n].String(); got != "err-"+n+"\n" {
			t.Errorf("%s stderr %q", n, got)
		}
		if s.Results[i].Target != n {
			t.Errorf("results out of target order: %d is %s", i, s.Results[i].Target)
		}
		kinds := c.order[n]
		if kinds[0] != fanout.EventStart || kinds[len(kinds)-1] != fanout.EventResult {
			t.Errorf("%s events %v: start first, result last", n, kinds)
		}
	}
}

func TestFailureIsolation(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	c := newCollector()
	start := time.Now()
	s := fanout.Run(context.Background(), pool, targets("h1", "refused1", "blackhole1", "h2", "exit3"),
		fanout.Task{Command: `if [ "$TARGET" = exit3 ]; then exit 3; fi; echo ok`},
		fanout.Options{OnEvent: c.event, ConnectTimeout: 700 * time.Millisecond})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("run took %s with a 700ms connect timeout", took)
	}
	if s.OK != 2 || s.Failed != 1 || s.Unreachable != 2 {
		t.Fatalf("ok %d failed %d unreachable %d", s.OK, s.Failed, s.Unreachable)
	}
	if s.ExitStatus() != 255 {
		t.Errorf("exit status %d, want 255 when a target is unreachable", s.ExitStatus())
	}
	if c.stdout("h1") != "ok\n" || c.stdout("h2") != "ok\n" {
		t.Errorf("healthy hosts: %q %q", c.stdout("h1"), c.stdout("h2"))
	}
	if r := c.results["refused1"]; !r.Unreachable || !strings.Contains(r.Err.Error(), "connection refused") {
		t.Errorf("refused: %+v", r)
	}
	if r := c.results["blackhole1"]; !r.Unreachable || !strings.Contains(r.Err.Error(), "no answer within 700ms") {
		t.Errorf("blackhole: %v", r.Err)
	}
	if r := c.results["exit3"]; *r.ExitCode != 3 || r.Unreachable {
		t.Errorf("exit3: %+v", r)
	}
}

func TestExitStatus(t *testing.T) {
	code := func(n int) *int { return &n }
	tests := []struct {
		results []*fanout.Result
		want    int
	}{
		{[]*fanout.Result{{ExitCode: code(0)}, {ExitCode: code(0)}}, 0},
		{[]*fanout.Result{{ExitCode: code(0)}, {ExitCode: code(2)}, {ExitCode: code(7)}}, 7},
		{[]*fanout.Result{{ExitCode: code(0)}, {Signal: "KILL"}}, 1},
		{[]*fanout.Result{{ExitCode: code(9)}, {Unreachable: true, Err: errors.New("x")}}, 255},
	}
	for i, tt := range tests {
		s := &fanout.Summary{Results: tt.results}
		for _, r := range tt.results {
			if r.Unreachable {
				s.Unreachable++
			}
		}
		if got := s.ExitStatus(); got != tt.want {
			t.Errorf("%d: exit status %d, want %d", i, got, tt.want)
		}
	}
}

// Cancelling a run stops every remote process.
func TestCancelStopsRemoteProcesses(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	pidFile := filepath.Join(t.TempDir(), "pids")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *fanout.Summary)
	go func() {
		done <- fanout.Run(ctx, pool, targets("h1", "h2", "h3"),
			fanout.Task{Command: "sleep 60 & echo $! >> " + pidFile + "; echo $$ >> " + pidFile + "; wait"}, fanout.Options{})
	}()
	waitLines(t, pidFile, 6)
	cancel()
	var s *fanout.Summary
	select {
	case s = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	for _, r := range s.Results {
		if r.OK() {
			t.Errorf("%s reported ok after cancel", r.Target)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		alive := alivePids(t, pidFile)
		if len(alive) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, p := range alive {
				syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("remote processes still running after cancel: %v", alive)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPoolReusesAndRedials(t *testing.T) {
	f := newFleet(t)
	var states []string
	var mu sync.Mutex
	lost := make(chan struct{}, 1)
	pool := fanout.NewPool(f, fanout.PoolOptions{OnState: func(target, state string, err error) {
		mu.Lock()
		states = append(states, target+":"+state)
		mu.Unlock()
		if target == "h1" && state == fanout.StateError {
			select {
			case lost <- struct{}{}:
			default:
			}
		}
	}})
	defer pool.Close()
	ts := targets("h1", "h2")
	for i := 0; i < 3; i++ {
		if s := fanout.Run(context.Background(), pool, ts, fanout.Task{Argv: []string{"true"}}, fanout.Options{}); s.OK != 2 {
			t.Fatalf("run %d: %+v", i, s)
		}
	}
	if n := f.dials.Load(); n != 2 {
		t.Fatalf("3 runs on 2 targets dialled %d times, want 2", n)
	}
	// Kill h1's rexd: the next run dials it again.
	lease, err := pool.Acquire(context.Background(), fanout.Target{Name: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	gone := lease.Session().Client().Done()
	lease.Release()
	f.mu.Lock()
	f.procs["h1"].Process.Kill()
	f.mu.Unlock()
	<-gone // the client has seen its connection end
	// The pool's watcher reports the loss on its own goroutine; a run that
	// started first would replace the entry and the report would (rightly)
	// be dropped as stale.
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatal("the pool never reported h1's lost connection")
	}
	if s := fanout.Run(context.Background(), pool, ts, fanout.Task{Argv: []string{"true"}}, fanout.Options{}); s.OK != 2 {
		t.Fatalf("after a dead connection: %+v", s.Results[0].Err)
	}
	if n := f.dials.Load(); n != 3 {
		t.Fatalf("dials after one connection died: %d, want 3", n)
	}
	mu.Lock()
	defer mu.Unlock()
	joined := strings.Join(states, " ")
	for _, want := range []string{"h1:connecting", "h1:ready", "h1:error"} {
		if !strings.Contains(joined, want) {
			t.Errorf("states %q lack %q", joined, want)
		}
	}
}

// TestConcurrencyBound: with a bound of 2, exactly 2 targets run at once:
// each command blocks on a FIFO until the test lets one finish, and the
// test lets one go only when 2 are running.
func TestConcurrencyBound(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	fifo := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Held open for writing (and reading, so opening never blocks) for the
	// whole run: the commands never see EOF, only the lines sent.
	gate, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close()
	var mu sync.Mutex
	running, peak := 0, 0
	changed := make(chan int, 64)
	names := []string{"a", "b", "c", "d", "e", "f"}
	done := make(chan *fanout.Summary)
	go func() {
		done <- fanout.Run(context.Background(), pool, targets(names...), fanout.Task{Command: "read x < " + fifo},
			fanout.Options{Concurrency: 2, OnEvent: func(ev fanout.Event) {
				mu.Lock()
				switch ev.Kind {
				case fanout.EventStart:
					running++
					peak = max(peak, running)
				case fanout.EventResult:
					running--
				}
				n := running
				mu.Unlock()
				if ev.Kind == fanout.EventStart {
					changed <- n
				}
			}})
	}()
	release := func() {
		if _, err := gate.WriteString("\n"); err != nil {
			t.Fatal(err)
		}
	}
	released := 0
	for starts := 0; starts < len(names); starts++ {
		select {
		case n := <-changed:
			if n == 2 { // both slots taken: let one command finish
				release()
				released++
			}
		case <-time.After(time.Minute):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("after %d starts no other began (peak %d, running %d)", starts, peak, running)
		}
	}
	for ; released < len(names); released++ {
		release()
	}
	s := <-done
	if s.OK != len(names) {
		t.Fatalf("summary %+v", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak != 2 {
		t.Fatalf("peak concurrency %d with a bound of 2, want exactly 2", peak)
	}
}

func waitLines(t *testing.T, file string, n int) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if b, err := os.ReadFile(file); err == nil && len(strings.Fields(string(b))) >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never got %d lines", file, n)
}

func alivePids(t *testing.T, file string) []int {
	b, _ := os.ReadFile(file)
	var out []int
	for _, f := range strings.Fields(string(b)) {
		p, _ := strconv.Atoi(f)
		if p > 0 && syscall.Kill(p, 0) == nil {
			if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); err == nil {
				s := string(st)
				if i := strings.LastIndexByte(s, ')'); i > 0 && len(s) > i+2 && s[i+2] == 'Z' {
					continue
				}
			}
			out = append(out, p)
		}
	}
	return out
}
