package sshx

import (
	"sync"
	"testing"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestCloseWhileWriting: Close (which sends EOF) while another goroutine
// writes to the command's input, as a pool closing a connection while a
// request is being sent. x/crypto/ssh's channel reads its sent-EOF flag in
// Write without a lock against CloseWrite, so remoteExec serialises the
// two; under -race this test caught them racing (CI, fanout's pool Close
// against a Kill being sent).
func TestCloseWhileWriting(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	c := connect(t, NewDialer(e.opts()), e.target("h1", s))
	for range 5 {
		x, err := startExec(c.SSH, "cat >/dev/null", discardWriter{})
		if err != nil {
			t.Fatal(err)
		}
		wrote := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				select {
				case <-wrote:
				default:
					close(wrote) // an early error: Close anyway
				}
			}()
			for i := range 100_000 { // bounded; ends at the first error
				if _, err := x.Write([]byte("input line\n")); err != nil {
					return // the input was closed: expected once Close ran
				}
				if i == 10 {
					close(wrote)
				}
			}
			t.Error("100,000 writes went through a closed input")
		}()
		<-wrote
		x.Close()
		wg.Wait()
	}
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
