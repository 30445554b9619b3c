package sshx

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/sshtest"
)

// benchEnv is one sshd, a known_hosts file and an ssh_config for the
// OpenSSH client, given the key exchange and cipher x/crypto/ssh
// negotiates with it (curve25519-sha256, aes128-gcm) so the race is fair.
type benchEnv struct {
	*env
	s      *sshtest.Server
	cfg    string
	sshArg []string
}

func newBenchEnv(b *testing.B) *benchEnv {
	e := newEnv(b)
	s := e.server(sshtest.Options{})
	sshtest.WriteKnownHosts(b, e.knownHosts, false, s)
	cfg := filepath.Join(e.home, "ssh_config")
	writeFile(b, cfg, s.ConfigBlock("h1", e.key, e.knownHosts)+
		"    KexAlgorithms curve25519-sha256\n    Ciphers aes128-gcm@openssh.com\n    ControlMaster no\n    ControlPath none\n")
	return &benchEnv{env: e, s: s, cfg: cfg, sshArg: []string{"-F", cfg}}
}

func (be *benchEnv) dialer() *Dialer {
	o := be.opts()
	o.StrictHostKeys = "yes"
	return NewDialer(o)
}

func execTrue(b *testing.B, c *Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := c.Session.Exec(ctx, protocol.ExecStartParams{Argv: []string{"true"}}, rexclient.ExecOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if ex, err := p.Wait(ctx); err != nil || ex.ExitCode == nil || *ex.ExitCode != 0 {
		b.Fatalf("true: %+v %v", ex, err)
	}
}

// BenchmarkWarmConnectExecTrue: dial, find the cached rexd, open a
// session, run `true`, close: `rex run HOST -- true` on a prepared host.
func BenchmarkWarmConnectExecTrue(b *testing.B) {
	be := newBenchEnv(b)
	d := be.dialer()
	tg := be.target("h1", be.s)
	c, err := d.Connect(context.Background(), tg)
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
	b.ResetTimer()
	for b.Loop() {
		c, err := d.Connect(context.Background(), tg)
		if err != nil {
			b.Fatal(err)
		}
		if !c.Info.Cached {
			b.Fatal("not cached")
		}
		execTrue(b, c)
		c.Close()
	}
}

// BenchmarkOpenSSHTrue: `ssh HOST true` with the OpenSSH client against
// the same sshd.
func BenchmarkOpenSSHTrue(b *testing.B) {
	be := newBenchEnv(b)
	for b.Loop() {
		if out, err := exec.Command("ssh", append(be.sshArg, "h1", "true")...).CombinedOutput(); err != nil {
			b.Fatalf("ssh: %v: %s", err, out)
		}
	}
}

// BenchmarkColdConnectExecTrue: the same with the cache removed first, so
// every iteration uploads rexd.
func BenchmarkColdConnectExecTrue(b *testing.B) {
	be := newBenchEnv(b)
	d := be.dialer()
	tg := be.target("h1", be.s)
	cache := filepath.Join(be.s.Home, ".cache", "rexd")
	var sent int64
	for b.Loop() {
		b.StopTimer()
		if err := os.RemoveAll(cache); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c, err := d.Connect(context.Background(), tg)
		if err != nil {
			b.Fatal(err)
		}
		if !c.Info.Uploaded {
			b.Fatal("not uploaded")
		}
		execTrue(b, c)
		sent = c.BytesSent()
		c.Close()
	}
	b.ReportMetric(float64(sent), "bytes-sent/op")
}

const benchFileSize = 8 << 20

func benchFile(b *testing.B) ([]byte, string) {
	data := make([]byte, benchFileSize)
	rand.Read(data)
	path := filepath.Join(sshtest.TempDir(b), "payload")
	writeFile(b, path, string(data))
	return data, path
}

// BenchmarkUploadSFTP: rex's concurrent SFTP upload of 8 MiB over an open
// connection.
func BenchmarkUploadSFTP(b *testing.B) {
	be := newBenchEnv(b)
	data, _ := benchFile(b)
	c, err := be.dialer().Dial(context.Background(), be.target("h1", be.s))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	fsc, closeFS, err := openSFTP(c)
	if err != nil {
		b.Fatal(err)
	}
	defer closeFS()
	b.SetBytes(benchFileSize)
	i := 0
	for b.Loop() {
		i++
		dst := filepath.Join(be.s.Home, "up"+strconv.Itoa(i))
		if _, err := uploadSFTP(context.Background(), fsc, dst, data); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.Remove(dst)
		b.StartTimer()
	}
}

// BenchmarkDialUploadSFTP: the same including the SSH connection, as scp
// pays it.
func BenchmarkDialUploadSFTP(b *testing.B) {
	be := newBenchEnv(b)
	data, _ := benchFile(b)
	d := be.dialer()
	b.SetBytes(benchFileSize)
	i := 0
	for b.Loop() {
		i++
		c, err := d.Dial(context.Background(), be.target("h1", be.s))
		if err != nil {
			b.Fatal(err)
		}
		fsc, closeFS, err := openSFTP(c)
		if err != nil {
			b.Fatal(err)
		}
		dst := filepath.Join(be.s.Home, "up"+strconv.Itoa(i))
		if _, err := uploadSFTP(context.Background(), fsc, dst, data); err != nil {
			b.Fatal(err)
		}
		closeFS()
		c.Close()
		b.StopTimer()
		os.Remove(dst)
		b.StartTimer()
	}
}

// BenchmarkSCP: OpenSSH's scp (SFTP protocol in OpenSSH 9) of the same
// 8 MiB, connection included.
func BenchmarkSCP(b *testing.B) {
	be := newBenchEnv(b)
	_, src := benchFile(b)
	b.SetBytes(benchFileSize)
	i := 0
	for b.Loop() {
		i++
		dst := filepath.Join(be.s.Home, "scp"+strconv.Itoa(i))
		if out, err := exec.Command("scp", append(be.sshArg, "-q", src, "h1:"+dst)...).CombinedOutput(); err != nil {
			b.Fatalf("scp: %v: %s", err, out)
		}
		b.StopTimer()
		os.Remove(dst)
		b.StartTimer()
	}
}
