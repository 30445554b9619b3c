//go:build linux

package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// countingReader counts the reads of r in flight.
type countingReader struct {
	r        io.Reader
	inFlight atomic.Int32
	started  chan struct{} // a value per read begun
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	c.started <- struct{}{}
	return c.r.Read(p)
}

// socketPair is a connected pair of Unix stream sockets.
func socketPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// TestAttachLeavesNoReader: when Attach returns, however the attachment
// ended, no read of the terminal is left in flight. One left behind
// (a cancelreader closed under it) waited on the terminal for good and
// took the next bytes it sent: after a killed server, the reply to the
// colour query of rex's error message, which then waited forever
// (TestServerKilledE2E hung now and then).
func TestAttachLeavesNoReader(t *testing.T) {
	for _, end := range []string{"detached", "server killed"} {
		t.Run(end, func(t *testing.T) {
			ours, theirs := socketPair(t)
			c := &Client{conn: ours, enc: protocol.NewEncoder(ours), dec: protocol.NewDecoder(ours, 1<<20)}
			inR, inW := io.Pipe()
			in := &countingReader{r: inR, started: make(chan struct{}, 16)}
			stopped := make(chan struct{})
			w := Window{
				In:     in,
				StopIn: func() { close(stopped); inR.CloseWithError(errors.New("cancelled")) },
				Out:    io.Discard,
				Size:   func() (int, int) { return 80, 24 },
			}
			done := make(chan error, 1)
			go func() {
				_, err := c.Attach(context.Background(), w)
				done <- err
			}()
			// The server's side: answer the attachment, take one key,
			// then end as the case says while the next read waits.
			srv := bufio.NewReader(theirs)
			if _, err := srv.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			theirs.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"))
			<-in.started
			inW.Write([]byte("k"))
			if line, err := srv.ReadString('\n'); err != nil || len(line) == 0 {
				t.Fatalf("the key: %q %v", line, err)
			}
			<-in.started // the read that is in flight when it ends
			switch end {
			case "detached":
				theirs.Write([]byte(`{"jsonrpc":"2.0","method":"` + MethodDetached + `","params":{"reason":"bye"}}` + "\n"))
			case "server killed":
				theirs.Close()
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("Attach did not return")
			}
			if (end == "detached") != (err == nil) {
				t.Fatalf("Attach: %v", err)
			}
			select {
			case <-stopped:
			default:
				t.Fatal("Attach returned without stopping the reader")
			}
			if n := in.inFlight.Load(); n != 0 {
				t.Fatalf("Attach returned with %d read(s) of the terminal in flight", n)
			}
		})
	}
}
