package fanout_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
)

// lockedBuf is a buffer a terminal's output goes to while the test reads.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSecretsReachEveryProcess: the pool's Secrets are laid over the
// environment of every command Run starts and every terminal OpenPTY
// opens, per target, and their values come back as ***; a target whose
// secrets cannot be had fails with why, and nothing runs there.
func TestSecretsReachEveryProcess(t *testing.T) {
	const value = "tok-Value-8c1e"
	f := newFleet(t)
	pool := fanout.NewPool(f, fanout.PoolOptions{Secrets: func(_ context.Context, t fanout.Target) (map[string]string, error) {
		switch t.Name {
		case "with":
			return map[string]string{"TOKEN": value}, nil
		case "locked":
			return nil, errors.New("device locked needs the secret TOKEN, which is not set")
		}
		return nil, nil
	}})
	defer pool.Close()
	c := newCollector()
	s := fanout.Run(context.Background(), pool, targets("with", "without", "locked"),
		fanout.Task{Command: `echo "v=$TOKEN n=${#TOKEN}"; printf 'e=%s' "$TOKEN" >&2`, Env: map[string]string{"TOKEN": "task's own"}},
		fanout.Options{OnEvent: c.event})
	if got := c.stdout("with"); got != "v=*** n=14\n" {
		t.Errorf("with: stdout %q", got)
	}
	if got := c.errOut["with"].String(); got != "e=***" {
		t.Errorf("with: stderr %q (the end held back for masking must be written)", got)
	}
	if got := c.stdout("without"); got != "v=task's own n=10\n" {
		t.Errorf("without: stdout %q", got)
	}
	r := s.Results[2]
	if r.Err == nil || r.Unreachable || !strings.Contains(r.Err.Error(), "locked: device locked needs the secret TOKEN") || r.ExitCode != nil {
		t.Errorf("locked: %+v", r)
	}
	if kinds := c.order["locked"]; len(kinds) != 1 || kinds[0] != fanout.EventResult {
		t.Errorf("locked: events %v, want its result only", kinds)
	}
	if f.dials.Load() != 2 {
		t.Errorf("%d dials; a target without its secrets should not be dialled", f.dials.Load())
	}

	// A terminal gets them too, and its screen shows ***.
	lease, err := pool.Acquire(context.Background(), fanout.Target{Name: "with"})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	var out lockedBuf
	pty, err := lease.OpenPTY(context.Background(), protocol.PTYOpenParams{Argv: []string{"sh", "-c", `echo "pty=$TOKEN n=${#TOKEN}"`}}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pty.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "pty=*** n=14") || strings.Contains(got, value) {
		t.Errorf("terminal output %q", got)
	}
	lease2, err := pool.Acquire(context.Background(), fanout.Target{Name: "locked"})
	if err == nil {
		defer lease2.Release()
		if _, err := lease2.OpenPTY(context.Background(), protocol.PTYOpenParams{Argv: []string{"true"}}, &out); err == nil || !strings.Contains(err.Error(), "needs the secret TOKEN") {
			t.Errorf("a terminal without its secrets: %v", err)
		}
	}
}

// TestFirstIsPublicOnlyWithoutSecrets: a one-shot run's first command may
// ride in the exec request that starts rexd (a command line, which other
// users of the host can see) only when it holds no secret of the device,
// no environment of the operator's and no input data (input streamed
// later is not in it).
func TestFirstIsPublicOnlyWithoutSecrets(t *testing.T) {
	tests := []struct {
		name    string
		task    fanout.Task
		streams bool // input streamed with exec.input, not in the request
		public  map[string]bool
	}{
		{"plain", fanout.Task{Command: "true"}, false, map[string]bool{"with": false, "without": true}},
		{"operator's env", fanout.Task{Command: "true", Env: map[string]string{"K": "v"}}, false, map[string]bool{"with": false, "without": false}},
		{"input", fanout.Task{Command: "cat", Stdin: []byte("pw\n")}, false, map[string]bool{"with": false, "without": false}},
		{"streamed input", fanout.Task{Command: "cat"}, true, map[string]bool{"with": false, "without": true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t)
			pool := fanout.NewPool(f, fanout.PoolOptions{Secrets: func(_ context.Context, t fanout.Target) (map[string]string, error) {
				if t.Name == "with" {
					return map[string]string{"TOKEN": "tok-1"}, nil
				}
				return nil, nil
			}})
			defer pool.Close()
			opts := fanout.Options{Release: true}
			if tc.streams {
				opts.Stdin = strings.NewReader("pw\n")
			}
			s := fanout.Run(context.Background(), pool, targets("with", "without"), tc.task, opts)
			for _, r := range s.Results {
				if r.Err != nil {
					t.Fatalf("%s: %v", r.Target, r.Err)
				}
			}
			for name, want := range tc.public {
				got, ok := f.public.Load(name)
				if !ok || got != want {
					t.Errorf("%s: first command public %v (had one: %v), want %v", name, got, ok, want)
				}
			}
		})
	}
}

// TestTerminalKnowsItsTarget: a terminal gets REX_TARGET and REX_GROUP
// as every command does (rex attach, the console's /attach), over what
// the request's own environment says; they were missing.
func TestTerminalKnowsItsTarget(t *testing.T) {
	pool := fanout.NewPool(newFleet(t), fanout.PoolOptions{})
	defer pool.Close()
	lease, err := pool.Acquire(context.Background(), fanout.Target{Name: "web1", Group: "web"})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	var out lockedBuf
	pty, err := lease.OpenPTY(context.Background(), protocol.PTYOpenParams{
		Argv: []string{"sh", "-c", `echo "t=$REX_TARGET g=$REX_GROUP x=$X"`},
		Env:  map[string]string{"REX_TARGET": "spoof", "X": "y"},
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pty.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "t=web1 g=web x=y") {
		t.Errorf("terminal output %q, want t=web1 g=web x=y", got)
	}
}
