package fanout_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rexconsole/rex/internal/fanout"
)

// events records the order of starts and results of a run.
type events struct {
	mu    sync.Mutex
	order []string // "start h1", "end h1"
}

func (e *events) event(ev fanout.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch ev.Kind {
	case fanout.EventStart:
		e.order = append(e.order, "start "+ev.Target)
	case fanout.EventResult:
		e.order = append(e.order, "end "+ev.Target)
	}
}

// peak is the most targets running at once.
func (e *events) peak() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, p := 0, 0
	for _, s := range e.order {
		if strings.HasPrefix(s, "start ") {
			n++
			p = max(p, n)
		} else if n > 0 {
			n--
		}
	}
	return p
}

func (e *events) index(s string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Index(e.order, s)
}

func TestBatchesRunInOrder(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	var ev events
	var batches []fanout.Batch
	names := []string{"a", "b", "c", "d", "e"}
	s := fanout.Run(context.Background(), pool, targets(names...), fanout.Task{Command: "echo $TARGET"},
		fanout.Options{Batch: 2, OnEvent: func(e fanout.Event) {
			if e.Kind == fanout.EventBatch {
				batches = append(batches, *e.Batch)
			}
			ev.event(e)
		}})
	if s.OK != 5 {
		t.Fatalf("summary %+v", s)
	}
	if ev.peak() > 2 {
		t.Errorf("%d ran at once with --batch 2: %v", ev.peak(), ev.order)
	}
	// Every target of a batch ends before the next batch starts.
	for _, pair := range [][2]string{{"end a", "start c"}, {"end b", "start c"}, {"end b", "start d"}, {"end d", "start e"}, {"end c", "start e"}} {
		if ev.index(pair[0]) > ev.index(pair[1]) {
			t.Errorf("%q came after %q: %v", pair[0], pair[1], ev.order)
		}
	}
	if len(batches) != 3 || batches[1].Index != 2 || batches[1].Count != 3 || !slices.Equal(batches[2].Targets, []string{"e"}) {
		t.Errorf("batches %+v", batches)
	}
}

func TestMaxFailSkipsTheRest(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	marks := t.TempDir()
	// b fails; with one at a time, c and d never start.
	task := fanout.Task{Command: `touch ` + marks + `/$TARGET; [ "$TARGET" != b ]`}
	s := fanout.Run(context.Background(), pool, targets("a", "b", "c", "d"), task, fanout.Options{Concurrency: 1, MaxFail: 1})
	if s.OK != 1 || s.Failed != 1 || s.Skipped != 2 || s.ExitStatus() == 0 {
		t.Fatalf("ok %d failed %d skipped %d exit %d", s.OK, s.Failed, s.Skipped, s.ExitStatus())
	}
	for _, r := range s.Results[2:] {
		if !r.Skipped || !strings.Contains(r.Err.Error(), "skipped: 1 target failed (--max-fail 1)") {
			t.Errorf("%s: %+v", r.Target, r)
		}
	}
	for name, want := range map[string]bool{"a": true, "b": true, "c": false, "d": false} {
		if _, err := os.Stat(filepath.Join(marks, name)); (err == nil) != want {
			t.Errorf("%s touched: %v, want %v", name, err == nil, want)
		}
	}
	if f.dials.Load() != 2 {
		t.Errorf("%d targets were reached; skipped ones must not be", f.dials.Load())
	}
}

func TestCanary(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	marks := t.TempDir()
	task := fanout.Task{Command: `touch ` + marks + `/$TARGET; [ "$TARGET" != a ]`}
	s := fanout.Run(context.Background(), pool, targets("a", "b", "c"), task, fanout.Options{Canary: 1})
	if s.Failed != 1 || s.Skipped != 2 {
		t.Fatalf("failed %d skipped %d", s.Failed, s.Skipped)
	}
	if r := s.Results[1]; !strings.Contains(r.Err.Error(), "the canary a did not succeed") {
		t.Errorf("b: %v", r.Err)
	}
	if entries, _ := os.ReadDir(marks); len(entries) != 1 {
		t.Errorf("a failing canary let %d targets run", len(entries))
	}
	// A good canary lets the others run, together.
	var ev events
	s = fanout.Run(context.Background(), pool, targets("b", "c", "d", "e"), fanout.Task{Argv: []string{"true"}}, fanout.Options{Canary: 1, OnEvent: ev.event})
	if s.OK != 4 || ev.index("end b") > ev.index("start c") {
		t.Errorf("ok %d, order %v", s.OK, ev.order)
	}
}

func TestEnvironmentNamesTargetAndGroup(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	c := newCollector()
	ts := []fanout.Target{{Name: "h1", Group: "web"}, {Name: "h2"}}
	fanout.Run(context.Background(), pool, ts, fanout.Task{Command: `echo "$REX_TARGET/${REX_GROUP-unset}/$X"`, Env: map[string]string{"X": "y", "REX_TARGET": "spoof"}},
		fanout.Options{OnEvent: c.event})
	if c.stdout("h1") != "h1/web/y\n" || c.stdout("h2") != "h2//y\n" {
		t.Errorf("env: %q %q", c.stdout("h1"), c.stdout("h2"))
	}
}

// TestCancelledIsNotUnreachable: targets that had not been reached when
// the run was cancelled are cancelled, not unreachable.
func TestCancelledIsNotUnreachable(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	s := fanout.Run(ctx, pool, targets("h1", "blackhole1", "h2", "h3"), fanout.Task{Command: "sleep 60"},
		fanout.Options{Concurrency: 2, OnEvent: func(ev fanout.Event) {
			if ev.Kind == fanout.EventStart {
				once.Do(cancel)
			}
		}})
	if s.Unreachable != 0 || s.Cancelled != 4 || s.ExitStatus() == 255 {
		t.Fatalf("unreachable %d cancelled %d exit %d", s.Unreachable, s.Cancelled, s.ExitStatus())
	}
}

// TestConnectionLostIsUnreachable: a connection that dies while the
// command runs makes the target unreachable (exit 255).
func TestConnectionLostIsUnreachable(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	s := fanout.Run(context.Background(), pool, targets("h1", "h2"), fanout.Task{Command: `[ "$TARGET" = h1 ] && exit 3; kill -9 $PPID; sleep 30`},
		fanout.Options{})
	r := s.Results[1]
	if !r.Unreachable || !strings.Contains(r.Err.Error(), "connection lost") || s.ExitStatus() != 255 {
		t.Fatalf("h2: %+v, exit %d", r, s.ExitStatus())
	}
}

// TestStdinReachesEveryTarget: one reader, every command gets all of it
// and then EOF, also the ones that start late (concurrency 1).
func TestStdinReachesEveryTarget(t *testing.T) {
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{})
	defer pool.Close()
	data := bytes.Repeat([]byte("0123456789abcdef\n"), 40000) // 680 KB: many chunks
	for _, conc := range []int{0, 1} {
		c := newCollector()
		s := fanout.Run(context.Background(), pool, targets("h1", "h2", "h3"), fanout.Task{Command: "wc -c; md5sum"},
			fanout.Options{Concurrency: conc, Stdin: bytes.NewReader(data), OnEvent: c.event})
		if s.OK != 3 {
			t.Fatalf("concurrency %d: %+v", conc, s.Results[0])
		}
		for _, h := range []string{"h1", "h2", "h3"} {
			if got := strings.Fields(c.stdout(h)); len(got) < 1 || got[0] != "680000" {
				t.Errorf("concurrency %d: %s read %q", conc, h, c.stdout(h))
			}
		}
	}
}
