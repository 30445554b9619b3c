package rexd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

const streamBytes = 32 << 20

// benchFiles writes a text file (lines of log-like text), a binary file
// (random bytes) and a file of zero bytes (what `cat /dev/zero` streams:
// valid UTF-8 that JSON must escape) of streamBytes each.
func benchFiles(b *testing.B) (text, bin, zeros string) {
	b.Helper()
	dir := b.TempDir()
	var buf bytes.Buffer
	for i := 0; buf.Len() < streamBytes; i++ {
		buf.WriteString("2026-11-22T10:00:00Z host-")
		buf.WriteString(strconv.Itoa(i % 97))
		buf.WriteString(" service[1234]: request handled in 12ms status=200 path=/api/v1/items\n")
	}
	text = filepath.Join(dir, "text")
	os.WriteFile(text, buf.Bytes()[:streamBytes], 0o644)
	raw := make([]byte, streamBytes)
	rand.Read(raw)
	bin = filepath.Join(dir, "bin")
	os.WriteFile(bin, raw, 0o644)
	zeros = filepath.Join(dir, "zeros")
	os.WriteFile(zeros, make([]byte, streamBytes), 0o644)
	return text, bin, zeros
}

func benchSession(b *testing.B) *rexclient.Session {
	b.Helper()
	c, err := rexclient.StartLocal(context.Background(), rexdBin, "--root", os.TempDir(), "--no-audit",
		"--limit", "max_output_bytes=0", "--limit", "hard_timeout_ms=0", "--limit", "default_timeout_ms=0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	s, err := c.OpenSession(context.Background(), protocol.SessionOpenParams{ClientName: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkStream measures stdout streamed through `rexd --stdio` into a Go
// client, beside the same bytes read from a plain pipe (`cat FILE`).
func BenchmarkStream(b *testing.B) {
	text, bin, zeros := benchFiles(b)
	for _, f := range []struct{ name, path string }{{"text", text}, {"binary", bin}, {"zeros", zeros}} {
		b.Run("rexd/"+f.name, func(b *testing.B) {
			s := benchSession(b)
			b.SetBytes(streamBytes)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var n countWriter
				p, err := s.Exec(context.Background(), protocol.ExecStartParams{Argv: []string{"cat", f.path}},
					rexclient.ExecOptions{Stdout: &n})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Wait(context.Background()); err != nil {
					b.Fatal(err)
				}
				if n != streamBytes {
					b.Fatalf("got %d bytes", n)
				}
			}
			b.ReportMetric(float64(s.Client().BytesIn())/float64(int64(b.N)*streamBytes), "wire-bytes/byte")
		})
		b.Run("pipe/"+f.name, func(b *testing.B) {
			b.SetBytes(streamBytes)
			for i := 0; i < b.N; i++ {
				cmd := exec.Command("cat", f.path)
				var n countWriter
				cmd.Stdout = &n
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStreamSmallWrites streams what `fold` writes in 4 KiB pieces
// (the fan-out benchmark's 10 MB per host, here 32 MB) through `rexd
// --stdio` into a Go client, and reports how many bytes an event carries.
func BenchmarkStreamSmallWrites(b *testing.B) {
	const size = 32_000_000
	const out = size + size/100 - 1 // fold's newlines, none after the last line
	s := benchSession(b)
	b.SetBytes(out)
	events := 0
	for i := 0; i < b.N; i++ {
		var n countWriter
		p, err := s.Exec(context.Background(), protocol.ExecStartParams{Shell: true,
			Command: "head -c " + strconv.Itoa(size) + " /dev/zero | tr '\\0' a | fold -w 100"},
			rexclient.ExecOptions{Stdout: &n, OnEvent: func(rexclient.Event) { events++ }})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
		if n != out {
			b.Fatalf("got %d bytes, want %d", n, out)
		}
	}
	b.ReportMetric(float64(int64(b.N)*out)/float64(events-b.N), "bytes/event") // less each exit
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// BenchmarkIdle reports rexd's resident memory with one open session and
// the size of a static stripped build.
func BenchmarkIdle(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "rexd")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "github.com/rexconsole/rex/cmd/rexd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	fi, _ := os.Stat(bin)
	var rssKB float64
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(bin, "--stdio", "--root", dir, "--no-audit")
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		c := rexclient.NewConn(out, in, in)
		if _, err := c.OpenSession(context.Background(), protocol.SessionOpenParams{ClientName: "idle"}); err != nil {
			b.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		status, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
		for _, l := range strings.Split(string(status), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				v, _ := strconv.ParseFloat(f[1], 64)
				rssKB = v
			}
		}
		c.Close()
		cmd.Wait()
	}
	b.ReportMetric(rssKB, "idle-RSS-kB")
	b.ReportMetric(float64(fi.Size())/1024, "binary-kB")
}

// BenchmarkKeystroke measures a keystroke's round trip: one byte written to
// a PTY running `cat` until its echo comes back, through rexd (client →
// rexd → PTY → rexd → client) and on a local PTY.
func BenchmarkKeystroke(b *testing.B) {
	b.Run("rexd", func(b *testing.B) {
		s := benchSession(b)
		echo := make(chan struct{}, 1)
		var mu sync.Mutex
		var seen bytes.Buffer
		t, err := s.OpenPTY(context.Background(), protocol.PTYOpenParams{Argv: []string{"cat"}},
			rexclient.ExecOptions{Stdout: writerFunc(func(p []byte) (int, error) {
				mu.Lock()
				seen.Write(p)
				mu.Unlock()
				select {
				case echo <- struct{}{}:
				default:
				}
				return len(p), nil
			})})
		if err != nil {
			b.Fatal(err)
		}
		defer t.Close(context.Background())
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := t.Write(context.Background(), []byte{'x'}); err != nil {
				b.Fatal(err)
			}
			<-echo
		}
	})
	b.Run("local-pty", func(b *testing.B) {
		cmd := exec.Command("cat")
		f, err := pty.Start(cmd)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait(); f.Close() }()
		buf := make([]byte, 64)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := f.Write([]byte{'x'}); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadAtLeast(f, buf, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
