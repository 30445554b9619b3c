package rexclient_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

// TestAckDoesNotStopTheReader: the acknowledgement a resumable session
// owes rexd after enough output is written off the reader, so a
// transport whose writing half has stalled (a push's frame waiting for
// the SSH window, a dead link) does not stop the output of every
// process on the connection, and the answers rexd needs to go on
// reading. Before, the reader wrote the ack itself and stood still.
func TestAckDoesNotStopTheReader(t *testing.T) {
	p, r, w, closer := newPeer()
	v := newInValve(w.(io.WriteCloser))
	c := rexclient.NewConn(r, v, closerFunc(func() error { v.set(false); return closer.Close() }))
	defer c.Close()
	go func() {
		_ = p.answer(t, protocol.MethodSessionOpen, protocol.SessionOpenResult{
			SessionID: "s_1", Protocol: protocol.Version, ResumeGraceMS: 60000, ResumeToken: "tok"}) &&
			p.answer(t, protocol.MethodPTYOpen, protocol.PTYOpenResult{PTYID: "t_1", ProcessID: "p_1"})
	}()
	ctx := context.Background()
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "t", ResumeGraceMS: 60000})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got bytes.Buffer
	if _, err := s.OpenPTY(ctx, protocol.PTYOpenParams{}, rexclient.ExecOptions{Stdout: writerTo(func(b []byte) {
		mu.Lock()
		got.Write(b)
		mu.Unlock()
	})}); err != nil {
		t.Fatal(err)
	}

	v.set(true) // nothing the client writes gets through from now on
	chunk := strings.Repeat("x", 64<<10)
	const n = 16 // 1 MiB: several acknowledgements' worth
	go func() {
		for i := range n {
			m, _ := protocol.NewNotification(protocol.EventPTYOutput, protocol.OutputEvent{
				SessionID: "s_1", ProcessID: "p_1", PTYID: "t_1", Seq: uint64(i + 1), SessionSeq: uint64(i + 1),
				Data: chunk, Encoding: protocol.EncodingUTF8})
			if p.enc.Encode(m) != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		have := got.Len()
		mu.Unlock()
		if have == n*len(chunk) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d bytes of output arrived while the transport's writing half stood still", have, n*len(chunk))
		}
		time.Sleep(5 * time.Millisecond)
	}

	// The transport moves again: the acknowledgements go out, and the
	// session is closed at the end.
	v.set(false)
	go func() {
		for {
			line, err := p.dec.ReadLine()
			if err != nil {
				return
			}
			if m, perr := protocol.ParseMessage(line); perr == nil && m.Method == protocol.MethodSessionClose {
				res, _ := protocol.NewResponse(m.ID, struct{}{})
				p.enc.Encode(res)
			}
		}
	}()
}

type writerTo func([]byte)

func (f writerTo) Write(b []byte) (int, error) { f(b); return len(b), nil }
