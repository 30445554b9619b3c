package sshx

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/sshtest"
)

// rexdDir holds a rexd built for this machine, named as payload.Dir wants.
var rexdDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sshx-rexd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := filepath.Join(dir, "rexd-"+runtime.GOOS+"-"+runtime.GOARCH)
	cmd := exec.Command("go", "build", "-o", out, "github.com/rexconsole/rex/cmd/rexd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build rexd: %v\n%s", err, b)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// The manifest `make payload` writes: the Dialer learns the build's
	// hash from it, as it does from the builds rex embeds.
	if err := writeManifest(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	rexdDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// writeManifest writes build's manifest, build.sum, as `make payload` does.
func writeManifest(build string) error {
	data, err := os.ReadFile(build)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	return os.WriteFile(build+".sum", fmt.Appendf(nil, "%x %d\n", sum, len(data)), 0o644)
}

// rexdBinary is the local build and its SHA-256.
func rexdBinary(t testing.TB) (data []byte, sum string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(rexdDir, "rexd-"+runtime.GOOS+"-"+runtime.GOARCH))
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(data)
	return data, hex.EncodeToString(s[:])
}

// env is a client side made only of temporary files: its own home, key,
// known_hosts and no agent, never the real ~/.ssh.
type env struct {
	t          testing.TB
	home       string
	key        *sshtest.Key
	knownHosts string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	home := sshtest.TempDir(t)
	return &env{t: t, home: home, key: sshtest.NewKey(t, "ed25519"), knownHosts: filepath.Join(home, "known_hosts")}
}

// opts are Options confined to the env.
func (e *env) opts() Options {
	return Options{
		ConfigFile:     "none",
		KnownHostsFile: e.knownHosts,
		HomeDir:        e.home,
		AgentSocket:    "none",
		Payload:        payload.Dir(rexdDir),
		// Generous: it bounds starting rexd, which takes many seconds
		// on a loaded machine (and under -race).
		ConnectTimeout: 60 * time.Second,
	}
}

// server starts an sshd that lets the env's key in.
func (e *env) server(o sshtest.Options) *sshtest.Server {
	e.t.Helper()
	o.Authorized = append(o.Authorized, e.key)
	return sshtest.Start(e.t, o)
}

func (e *env) target(name string, s *sshtest.Server) Target {
	return Target{Name: name, Host: s.Host, Port: s.Port, User: s.User, KeyPath: e.key.Path}
}

// connect connects and closes the connection when the test ends.
func connect(t testing.TB, d *Dialer, tg Target) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := d.Connect(ctx, tg)
	if err != nil {
		t.Fatalf("connect %s: %v", tg.Name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// runOn runs argv through rexd and returns its stdout and exit code.
func runOn(t testing.TB, c *Conn, argv ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out strings.Builder
	p, err := c.Session.Exec(ctx, protocol.ExecStartParams{Argv: argv}, rexclient.ExecOptions{Stdout: &out})
	if err != nil {
		t.Fatalf("exec %v on %s: %v", argv, c.Name, err)
	}
	ex, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("wait %v on %s: %v", argv, c.Name, err)
	}
	if ex.ExitCode == nil {
		t.Fatalf("%v on %s: no exit code (signal %v)", argv, c.Name, ex.Signal)
	}
	return out.String(), *ex.ExitCode
}

// dialErr dials and wants an error; it returns the error and how long the
// attempt took.
func dialErr(t testing.TB, d *Dialer, tg Target) (error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	c, err := d.Connect(ctx, tg)
	if err == nil {
		c.Close()
		t.Fatalf("connect %s succeeded, want an error", tg.Name)
	}
	return err, time.Since(start)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// assertOneSentence checks the shape of an operator-facing error.
func assertOneSentence(t testing.TB, err error, wants ...string) {
	t.Helper()
	msg := err.Error()
	t.Logf("message: %s", msg)
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans lines: %q", msg)
	}
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not contain %q", msg, w)
		}
	}
}
