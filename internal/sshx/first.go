package sshx

import (
	"encoding/base64"
	"io"
	"sync"
)

// maxInlineFirst bounds the requests handed to rexd in its environment
// (protocol.FirstEnv), encoded: the boot script's command line holds them
// while it runs, and shows them to other users of the target (as ssh's
// command shows), so only a rexclient.FirstExec that is Public goes so.
const maxInlineFirst = 8 << 10

// lateConn is the transport of a rexclient.Client made before the exec
// that runs rexd: it holds what the client writes until take hands it
// over (for protocol.FirstEnv) or attach gives it the exec's input, and its reads
// wait for attach.
type lateConn struct {
	mu       sync.Mutex
	held     []byte
	w        io.Writer
	r        io.Reader
	c        io.Closer
	closed   bool
	attached chan struct{}
}

func newLateConn() *lateConn { return &lateConn{attached: make(chan struct{})} }

// take returns what was written so far, encoded for protocol.FirstEnv, and drops
// it; when that would pass max, it returns "" and keeps it for attach.
func (l *lateConn) take(max int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if base64.StdEncoding.EncodedLen(len(l.held)) > max {
		return ""
	}
	s := base64.StdEncoding.EncodeToString(l.held)
	l.held = nil
	return s
}

// attach connects the exec: what is held goes to w first. r, w and c
// never change once attached, so reads, writes and closing then happen
// outside the lock: a write waiting for the channel's window must not
// keep the reader from draining rexd's output, nor a close from ending it.
func (l *lateConn) attach(r io.Reader, w io.Writer, c io.Closer) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return c.Close()
	}
	l.r, l.c = r, c
	l.mu.Unlock()
	close(l.attached)
	// What is held goes first; writes meanwhile are held behind it, so
	// the order stays as written.
	for {
		l.mu.Lock()
		held := l.held
		l.held = nil
		if len(held) == 0 {
			l.w = w
			l.mu.Unlock()
			return nil
		}
		l.mu.Unlock()
		if _, err := w.Write(held); err != nil {
			return err
		}
	}
}

func (l *lateConn) Write(p []byte) (int, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, io.ErrClosedPipe
	}
	if l.w == nil {
		l.held = append(l.held, p...)
		l.mu.Unlock()
		return len(p), nil
	}
	w := l.w
	l.mu.Unlock()
	return w.Write(p)
}

func (l *lateConn) Read(p []byte) (int, error) {
	<-l.attached
	l.mu.Lock()
	r := l.r
	l.mu.Unlock()
	if r == nil { // closed before an exec was attached
		return 0, io.EOF
	}
	return r.Read(p)
}

func (l *lateConn) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	c := l.c
	l.mu.Unlock()
	if c != nil {
		return c.Close()
	}
	close(l.attached) // nothing will attach: reads end
	return nil
}
