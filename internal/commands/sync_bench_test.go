package commands

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/rexd"
)

// inProcessRexd serves a rexd over pipes in this process, for profiling
// both ends of a push at once.
func inProcessRexd(b *testing.B, root string) *rexclient.Session {
	b.Helper()
	cfg := rexd.DefaultConfig()
	cfg.Roots = []string{root}
	cfg.CASDir = filepath.Join(b.TempDir(), "cas")
	cfg.AuditPath = filepath.Join(b.TempDir(), "audit.log")
	srv, err := rexd.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { srv.Serve(ctx, sr, sw); sw.Close() }()
	c := rexclient.NewConn(cr, cw, closerFunc(func() error { cancel(); cw.Close(); return nil }))
	b.Cleanup(func() { c.Close(); srv.Close() })
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "bench", RequestedCapabilities: []string{protocol.CapCAS}})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// BenchmarkPushFirst: a first push of 2,000 files of 10 kB through an
// in-process rexd: trees, plan, blobs straight into the destination.
func BenchmarkPushFirst(b *testing.B) {
	src := b.TempDir()
	for i := range 2000 {
		p := filepath.Join(src, fmt.Sprintf("d%02d/f%05d.bin", i%100, i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		data := make([]byte, 10000)
		rand.Read(data)
		os.WriteFile(p, data, 0o644)
	}
	st, _ := cas.Open(b.TempDir())
	tree, err := ingestLocal(b.Context(), st, src, cas.IngestOptions{}, nothingSent)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(20_000_000)
	for b.Loop() {
		b.StopTimer()
		root := b.TempDir()
		s := inProcessRexd(b, root)
		b.StartTimer()
		if _, _, err := PushTree(b.Context(), st, s, "bench", tree, "dest", PushOptions{verified: &cas.VerifiedSet{}}); err != nil {
			b.Fatal(err)
		}
	}
}
