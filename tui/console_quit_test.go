package tui

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/server"
)

// stuckWriter is a client's terminal that takes nothing (a suspended rex
// whose socket buffer is full): a write waits until the test ends.
type stuckWriter struct{ release chan struct{} }

func (w stuckWriter) Write(p []byte) (int, error) {
	<-w.release
	return 0, errors.New("closed")
}

// TestConsoleRunEndsWithStuckClients: a console that quits waits
// clientsGone in all for its clients to be told, then stops what runs and
// returns, however many clients read nothing. With two of them, the
// second waited for good (the deadline timer's channel fires once), so
// what ran in the console was never stopped and the server never ended.
func TestConsoleRunEndsWithStuckClients(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config", "rex")
	store := devices.NewStore(filepath.Join(cfg, "devices.json"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := Options{
		Store: store, Resolve: commands.Resolver(store), ConfigDir: cfg,
		StateDir: filepath.Join(dir, "state", "rex"),
		CacheDir: filepath.Join(dir, "cache", "rex"),
		Connector: fanout.ConnectorFunc(func(context.Context, fanout.Target) (*fanout.Conn, error) {
			return nil, errors.New("no targets in this test")
		}),
		States: &ConnStates{}, Prompts: &Prompts{}, Secrets: NewSecretAsker(),
	}
	con, err := NewConsole(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- con.Run() }()

	release := make(chan struct{})
	defer close(release)
	for i := 0; i < 2; i++ {
		r, w := io.Pipe()
		defer w.Close()
		go con.Attach(context.Background(), &server.Terminal{In: r, Out: stuckWriter{release}, Cols: 80, Rows: 24})
	}
	deadline := time.Now().Add(time.Minute)
	for con.Status().Clients != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the clients were not attached: %+v", con.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := con.Stop(true); !ok {
		t.Fatal("a forced stop was refused")
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3*clientsGone + 5*time.Second):
		t.Fatal("the console's Run did not end: it waits for good for the second client that reads nothing")
	}
}
