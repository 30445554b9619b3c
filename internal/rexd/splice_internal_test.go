//go:build linux

package rexd

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// A splicer delivers the held bytes whatever the connection is: spliced to
// a pipe, copied to a file opened for appending (splice refuses those with
// EINVAL, as it may a terminal) and to a writer that is no file at all;
// what is dropped is gone from the pipe.
func TestSplicerDelivers(t *testing.T) {
	appendFile := func(t *testing.T) (io.Writer, func() []byte) {
		name := t.TempDir() + "/out"
		f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f, func() []byte {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	pipe := func(t *testing.T) (io.Writer, func() []byte) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(r); got <- b }()
		t.Cleanup(func() { r.Close(); w.Close() })
		return w, func() []byte { w.Close(); return <-got }
	}
	buffer := func(t *testing.T) (io.Writer, func() []byte) {
		var b bytes.Buffer
		return &b, b.Bytes
	}
	for _, c := range []struct {
		name string
		dst  func(t *testing.T) (io.Writer, func() []byte)
	}{{"pipe", pipe}, {"append-only file", appendFile}, {"no file", buffer}} {
		t.Run(c.name, func(t *testing.T) {
			src, cmd, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			sp := newSplicer(src)
			if sp == nil {
				t.Fatal("no splicer for a command's pipe")
			}
			defer sp.close()
			dst, written := c.dst(t)
			var want []byte
			for round := range 3 {
				chunk := bytes.Repeat([]byte{byte('a' + round)}, 50_000+round)
				if _, err := cmd.Write(chunk); err != nil {
					t.Fatal(err)
				}
				n, err := sp.fill()
				if err != nil || n != len(chunk) {
					t.Fatalf("fill: %d, %v; the pipe held %d", n, err, len(chunk))
				}
				if err := sp.send(dst, n-10); err != nil {
					t.Fatal(err)
				}
				if err := sp.drop(); err != nil || sp.held != 0 {
					t.Fatalf("drop: %v, %d bytes still held", err, sp.held)
				}
				want = append(want, chunk[:n-10]...)
			}
			cmd.Close()
			if n, err := sp.fill(); n != 0 || err != io.EOF {
				t.Fatalf("fill at the end: %d, %v; want 0, EOF", n, err)
			}
			if got := written(); !bytes.Equal(got, want) {
				t.Fatalf("%d bytes arrived, want %d", len(got), len(want))
			}
		})
	}
}
