package sshx

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"testing"
)

// countingConn hands out a stream intact through reads of any size, counts
// it, reads it through its big buffer while it flows, and holds no buffer
// once everything sent has been read (checked between reads: a read that
// blocks right after one that filled its buffer exactly holds one while
// it waits, see countingConn.Read).
func TestCountingConnReads(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	want := make([]byte, 3<<20)
	rand.Read(want)
	sent := make(chan net.Conn, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			close(sent)
			return
		}
		for b := want; len(b) > 0; b = b[min(len(b), 32<<10):] {
			s.Write(b[:min(len(b), 32<<10)])
		}
		sent <- s
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var pool sync.Pool
	c := &countingConn{Conn: raw, bufs: &pool}
	var got bytes.Buffer
	sizes := []int{4, 4096, 28 << 10, 1, 300 << 10} // as x/crypto/ssh reads, and odd ones
	buffered := false
	for i := 0; got.Len() < len(want); i++ {
		p := make([]byte, min(sizes[i%len(sizes)], len(want)-got.Len()))
		if _, err := io.ReadFull(c, p); err != nil {
			t.Fatalf("after %d bytes: %v", got.Len(), err)
		}
		got.Write(p)
		buffered = buffered || c.big != nil
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("the stream came out different")
	}
	if c.in.Load() != int64(len(want)) {
		t.Errorf("counted %d bytes in, want %d", c.in.Load(), len(want))
	}
	if !buffered {
		t.Error("the stream never went through the big buffer")
	}
	if c.big != nil || len(c.pend) != 0 {
		t.Errorf("everything was read, yet a buffer is held (%d bytes pending)", len(c.pend))
	}
	if s, ok := <-sent; ok {
		s.Close()
	}
	if n, err := c.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Errorf("after the peer closed: %d, %v; want 0, EOF", n, err)
	}
}
