package tui

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/rexd"
	"github.com/rexconsole/rex/tui/engine"
)

// rexdFleet reaches every target through a rexd served in this process
// over pipes, each rooted in a temporary home of its own: real sessions,
// real cas.* and exec.*, no SSH (the end-to-end tests have that). Targets
// in down refuse; with gate set, connecting waits until it is closed.
type rexdFleet struct {
	t    *testing.T
	down map[string]bool
	gate chan struct{}
	// dialing receives a target's name when its connection begins.
	dialing chan string

	// localRoots are further roots of local's rexd: rex's config and
	// cache, where the tools' user and system spaces live (rex's own
	// local rexd has root /; tools on local run through it).
	localRoots []string

	mu    sync.Mutex
	homes map[string]string
}

func newRexdFleet(t *testing.T, down ...string) *rexdFleet {
	f := &rexdFleet{t: t, down: map[string]bool{}, homes: map[string]string{}, dialing: make(chan string, 64)}
	for _, d := range down {
		f.down[d] = true
	}
	return f
}

// home is the target's allowed root, made on first use.
func (f *rexdFleet) home(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, ok := f.homes[name]; ok {
		return h
	}
	h := filepath.Join(f.t.TempDir(), "home")
	f.homes[name] = h
	return h
}

type closerFunc func() error

func (c closerFunc) Close() error { return c() }

// Connect implements fanout.Connector.
func (f *rexdFleet) Connect(ctx context.Context, t fanout.Target) (*fanout.Conn, error) {
	select {
	case f.dialing <- t.Name:
	default:
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, fmt.Errorf("connect %s: %w", t.Name, ctx.Err())
		}
	}
	if f.down[t.Name] {
		return nil, fmt.Errorf("connect %s: dial tcp 10.0.0.9:22: connect: connection refused; is sshd running there?", t.Name)
	}
	home := f.home(t.Name)
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	roots := []string{home}
	if t.Name == commands.LocalName {
		for _, r := range f.localRoots {
			if err := os.MkdirAll(r, 0o755); err != nil {
				return nil, err
			}
			roots = append(roots, r)
		}
	}
	srv, err := rexd.New(rexd.Config{
		Roots:      roots,
		CASDir:     filepath.Join(filepath.Dir(home), "cas"),
		Limits:     rexd.DefaultLimits(),
		AllowShell: true, // as rexd's own default: tools run bash and sh
	})
	if err != nil {
		return nil, err
	}
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(sctx, toServer, fromServer)
		fromServer.Close()
	}()
	var once sync.Once
	closer := closerFunc(func() error {
		once.Do(func() {
			stop()
			fromClient.Close()
			toServer.Close()
			<-served
			srv.Close()
		})
		return nil
	})
	c := rexclient.NewConn(toClient, fromClient, closer)
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "tui-test"})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("open a session on %s: %w", t.Name, err)
	}
	return &fanout.Conn{Session: s, Closer: c}, nil
}

// withRexdFleet gives a test env connections through an in-process rexd
// fleet, its own object store, and e.dir as the directory rex started in.
func withRexdFleet(e *testEnv, f *rexdFleet) {
	pool := fanout.NewPool(f, fanout.PoolOptions{OnState: func(target, state string, err error) {
		e.m.states.Report(engine.FromPool, target, state, err)
	}})
	e.t.Cleanup(func() {
		for _, tk := range e.m.tasks.List() {
			tk.Stop()
			<-tk.Exited()
		}
		pool.Close()
	})
	e.m.app.Pool = pool
	e.m.app.CASDir = filepath.Join(e.dir, "cache", "rex", "cas")
	e.m.app.CacheDir = filepath.Join(e.dir, "cache", "rex")
	f.localRoots = []string{e.m.opts.ConfigDir, e.m.app.CacheDir}
	e.m.workDir.set(e.dir)
}
