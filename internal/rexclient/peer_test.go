package rexclient_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// peer is a scripted rexd on one transport: it reads the client's
// requests and writes what the test tells it to, in the real wire format.
type peer struct {
	dec *protocol.Decoder
	enc *protocol.Encoder
	out *io.PipeWriter // the client's input; closing it ends the transport
	in  *io.PipeReader // the client's output; closing it fails its writes
}

// newPeer returns a peer and the client's side of its transport.
func newPeer() (p *peer, r io.Reader, w io.Writer, closer io.Closer) {
	cr, pw := io.Pipe() // peer -> client
	pr, cw := io.Pipe() // client -> peer
	p = &peer{dec: protocol.NewDecoder(pr, 0), enc: protocol.NewEncoder(pw), out: pw, in: pr}
	return p, cr, cw, closerFunc(func() error { cw.Close(); pw.Close(); return nil })
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// answer reads the next request, which must be method, and answers it
// with result; it reports whether it did.
func (p *peer) answer(t *testing.T, method string, result any) bool {
	t.Helper()
	m := p.request(t, method)
	if m == nil {
		return false
	}
	res, err := protocol.NewResponse(m.ID, result)
	if err != nil {
		t.Errorf("peer: answer %s: %v", method, err)
		return false
	}
	return p.enc.Encode(res) == nil
}

// request reads the next request, which must be method.
func (p *peer) request(t *testing.T, method string) *protocol.Message {
	t.Helper()
	line, err := p.dec.ReadLine()
	if err != nil {
		t.Errorf("peer: read %s: %v", method, err)
		return nil
	}
	m, perr := protocol.ParseMessage(line)
	if perr != nil || m.Method != method {
		t.Errorf("peer: got %s (%v), want %s", line, perr, method)
		return nil
	}
	return m
}

// TestResumeRefusedKeepsRexdsReason: when rexd refuses to resume the
// only session (its grace ran out), the connection ends with rexd's
// reason, a ResumeError, as Resume says: that is what the pool shows for
// the target. Before, the new transport's reader ended the client first
// with a bare "connection to rexd closed".
func TestResumeRefusedKeepsRexdsReason(t *testing.T) {
	p1, r, w, closer := newPeer()
	c := rexclient.NewConn(r, w, closer)
	defer c.Close()
	go p1.answer(t, protocol.MethodSessionOpen, protocol.SessionOpenResult{
		SessionID: "s_1", Protocol: protocol.Version, ResumeGraceMS: 1000, ResumeToken: "tok"})
	if _, err := c.OpenSession(context.Background(), protocol.SessionOpenParams{ClientName: "t", ResumeGraceMS: 1000}); err != nil {
		t.Fatal(err)
	}
	if !c.Resumable() {
		t.Fatal("the session is not resumable")
	}
	p1.out.Close() // the transport drops
	<-c.Dropped()

	p2, r2, w2, closer2 := newPeer()
	go func() {
		m := p2.request(t, protocol.MethodSessionResume)
		if m == nil {
			return
		}
		p2.enc.Encode(protocol.NewErrorResponse(m.ID, protocol.Errorf(protocol.CodeInvalidParams, nil, "the session's grace ran out")))
	}()
	err := c.Resume(context.Background(), r2, w2, closer2)
	var re *rexclient.ResumeError
	if !errors.As(err, &re) {
		t.Fatalf("Resume returned %v, want a ResumeError", err)
	}
	<-c.Done()
	if !errors.As(c.Err(), &re) {
		t.Fatalf("the connection ended with %q, want rexd's reason (a ResumeError)", c.Err())
	}
}

// resumableAnswer is a scripted rexd's answer to method for one
// resumable session, s_1, with nothing running in it.
func resumableAnswer(method string) any {
	switch method {
	case protocol.MethodSessionOpen:
		return protocol.SessionOpenResult{SessionID: "s_1", Protocol: protocol.Version, ResumeGraceMS: 60000, ResumeToken: "tok"}
	case protocol.MethodSessionResume:
		return protocol.SessionResumeResult{SessionID: "s_1"}
	}
	return nil
}
