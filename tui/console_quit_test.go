package tui

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

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
	con, ran := runConsole(t, t.TempDir(), fanout.ConnectorFunc(noTargets), nil)

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
