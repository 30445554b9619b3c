package sshx

import (
	"bytes"
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/sshtest"
)

// Output crosses a real sshd as raw frames: 768 KiB of random bytes
// (under rexd's default output cap; JSON would carry them as base64, a
// third more) arrive byte for byte, and the connection carries little
// more than the output itself.
func TestOutputRawOverSSH(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	c := connect(t, NewDialer(e.opts()), e.target("h1", s))
	if !contains(c.Session.Info.Capabilities, protocol.CapOutputRaw) {
		t.Fatalf("rexd did not announce %s: %q", protocol.CapOutputRaw, c.Session.Info.Capabilities)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The bytes and their digest, from the target itself.
	const size = 768 << 10
	script := `f=$(mktemp) && head -c 786432 /dev/urandom > "$f" && cat "$f" && sha256sum < "$f" >&2 && rm "$f"`
	var out, errOut bytes.Buffer
	before := c.BytesReceived()
	p, err := c.Session.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sh", "-c", script}}, rexclient.ExecOptions{Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	if ex, err := p.Wait(ctx); err != nil || ex.ExitCode == nil || *ex.ExitCode != 0 {
		t.Fatalf("exit %+v %v: %s", ex, err, errOut.String())
	}
	wire := c.BytesReceived() - before
	if out.Len() != size {
		t.Fatalf("got %d bytes, want %d", out.Len(), size)
	}
	sum := sha256.Sum256(out.Bytes())
	if got := errOut.String(); len(got) < 64 || got[:64] != hexString(sum[:]) {
		t.Fatalf("the bytes differ from the target's: sha256sum says %q, received %x", got, sum)
	}
	// base64 alone would be 1,048,576 bytes; the frames' lines and SSH's
	// own framing add a few hundred.
	if limit := int64(size) * 105 / 100; wire > limit {
		t.Fatalf("%d bytes crossed the connection for %d of output (over %d): not raw frames", wire, size, limit)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&0xf])
	}
	return string(out)
}
