package tui

import (
	"context"
	"errors"
	"fmt"
	"github.com/rexconsole/rex/tui/engine"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
)

// scriptedSync stands in for commands.PushTargets and PullFrom in view
// tests: it reports fixed progress through the console's own callbacks,
// stops at a point the test sees, and ends with fixed outcomes, so the
// views are the same at every run (the real thing runs in TestPushPanes
// and the end-to-end test).
type scriptedSync struct {
	reached chan struct{} // closed when the script waits mid-way
	release chan struct{} // closed by the test to let it finish
}

func newScriptedSync() *scriptedSync {
	return &scriptedSync{reached: make(chan struct{}), release: make(chan struct{})}
}

func moving(done, total int, bytes, totalBytes int64) commands.SyncProgress {
	return commands.SyncProgress{Phase: commands.SyncMoving, Progress: cas.Progress{
		Stats:        cas.Stats{Queries: 4, Blobs: done, Bytes: bytes},
		TotalObjects: total, TotalBytes: totalBytes,
	}}
}

// push: web1 is sending, web2 asking, web3 connecting; then web1 is done,
// web2 was up to date, web3 refuses the path.
func (s *scriptedSync) push(ctx context.Context, app *commands.App, req commands.PushRequest, targets []fanout.Target, opts commands.SyncOptions) ([]commands.PushOutcome, error) {
	for _, t := range targets {
		opts.Progress(t.Name, commands.SyncProgress{Phase: commands.SyncReading})
	}
	opts.Progress("web1", moving(12, 40, 1300<<10, 3500<<10))
	opts.Progress("web2", commands.SyncProgress{Phase: commands.SyncAsking, Progress: cas.Progress{Walking: true, Stats: cas.Stats{Queries: 2}}})
	opts.Progress("web3", commands.SyncProgress{Phase: commands.SyncConnecting})
	close(s.reached)
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	outcomes := []commands.PushOutcome{
		{Target: "web1", Stats: commands.PushStats{Stats: cas.Stats{Queries: 4, Blobs: 38, Trees: 2, Bytes: 3500 << 10}, WireOut: 4700 << 10, WireIn: 2100},
			Result: commands.PushResult{Path: "/home/deploy/srv/site", Added: 3, Updated: 35}},
		{Target: "web2", Stats: commands.PushStats{Stats: cas.Stats{Queries: 1, QueriedDigests: 1}, WireOut: 310, WireIn: 190},
			Result: commands.PushResult{Path: "/home/deploy/srv/site", Unchanged: true}},
		{Target: "web3", Err: errors.New("write srv/site: forbidden_path (-32002): Path is outside allowed roots: /srv/site (outside the allowed roots)")},
	}
	opts.Progress("web1", commands.SyncProgress{Phase: commands.SyncWriting, Progress: moving(40, 40, 3500<<10, 3500<<10).Progress})
	opts.Progress("web2", commands.SyncProgress{Phase: commands.SyncWriting, Progress: cas.Progress{Stats: cas.Stats{Queries: 1}}})
	opts.Progress("web3", commands.SyncProgress{Phase: commands.SyncAsking, Progress: cas.Progress{Walking: true}})
	for _, o := range outcomes {
		opts.Pushed(o)
	}
	return outcomes, nil
}

// pull: a change on web1 merges cleanly with a local one, two more
// conflict.
func (s *scriptedSync) pull(ctx context.Context, app *commands.App, targets []fanout.Target, req commands.PullRequest, opts commands.SyncOptions) []commands.PullOutcome {
	var out []commands.PullOutcome
	for _, t := range targets {
		opts.Progress(t.Name, commands.SyncProgress{Phase: commands.SyncReading})
		p := moving(3, 3, 2048, 2048)
		p.Phase = commands.SyncMerging
		opts.Progress(t.Name, p)
		res := commands.PullResult{Target: t.Name, RemotePath: "/home/deploy/srv/site", LocalDir: req.Local,
			Updated: []string{"index.html"}, Merged: []string{"app.css"},
			Conflicts: []commands.PullConflict{
				{Conflict: cas.Conflict{Path: "notes.txt", Kind: "content", Markers: true}, Note: " (conflict markers in the file)"},
				{Conflict: cas.Conflict{Path: "logo.png", Kind: "content"}, Note: " (theirs saved as logo.png.theirs)"},
			}}
		e := fanout.EachResult{Target: t.Name}
		opts.Pulled(res, e)
		out = append(out, commands.PullOutcome{Result: res, Each: e})
	}
	return out
}

// scriptedEnv is the test fleet with the scripted sync in place of the
// real one.
func scriptedEnv(t *testing.T) (*testEnv, *scriptedSync) {
	e := newEnv(t, 120, 40, true)
	s := newScriptedSync()
	e.m.push, e.m.pull = s.push, s.pull
	pool := fanout.NewPool(fanout.ConnectorFunc(func(ctx context.Context, t fanout.Target) (*fanout.Conn, error) {
		return nil, fmt.Errorf("connect %s: the scripted sync never connects", t.Name)
	}), fanout.PoolOptions{})
	t.Cleanup(func() { pool.Close() })
	e.m.app.Pool = pool
	return e, s
}

// TestSyncGolden: a push pane mid-progress and done, a pull with
// conflicts.
func TestSyncGolden(t *testing.T) {
	t.Run("push-progress", func(t *testing.T) {
		e, s := scriptedEnv(t)
		e.setState("web3", engine.Connecting, nil)
		e.typeText("/push ./site srv/site web")
		e.press("enter")
		<-s.reached
		e.clock.Advance(1700 * time.Millisecond)
		e.m.Update(frameMsg{})
		golden.RequireEqual(t, checkScreen(t, e, 120, 40))
		close(s.release)
	})
	t.Run("push-done", func(t *testing.T) {
		e, s := scriptedEnv(t)
		e.typeText("/push ./site srv/site web")
		e.press("enter")
		<-s.reached
		e.clock.Advance(2300 * time.Millisecond)
		close(s.release)
		e.settle()
		golden.RequireEqual(t, checkScreen(t, e, 120, 40))
	})
	t.Run("pull-conflict", func(t *testing.T) {
		e, _ := scriptedEnv(t)
		e.submit("/pull srv/site ./site web1")
		golden.RequireEqual(t, checkScreen(t, e, 120, 40))
	})
}
