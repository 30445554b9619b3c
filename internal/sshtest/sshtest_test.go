package sshtest_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestServerWithOpenSSHClient logs in to a test server with the real ssh
// client, strictly checking the host key, and sees the per-server HOME.
func TestServerWithOpenSSHClient(t *testing.T) {
	key := sshtest.NewKey(t, "ed25519")
	tests := []struct {
		name   string
		opts   sshtest.Options
		hashed bool
	}{
		{"plain", sshtest.Options{Env: map[string]string{"REX_TEST": "yes"}}, false},
		{"hashed known_hosts, no sftp", sshtest.Options{NoSFTP: true, Env: map[string]string{"REX_TEST": "yes"}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Authorized = []*sshtest.Key{key}
			s := sshtest.Start(t, tc.opts)
			dir := sshtest.TempDir(t)
			kh := filepath.Join(dir, "known_hosts")
			sshtest.WriteKnownHosts(t, kh, tc.hashed, s)
			cfg := filepath.Join(dir, "config")
			if err := os.WriteFile(cfg, []byte(s.ConfigBlock("box", key, kh)), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("ssh", "-F", cfg, "box", `echo "$HOME $REX_TEST"`).CombinedOutput()
			if err != nil {
				t.Fatalf("ssh: %v: %s\n%s", err, out, s.Log())
			}
			if got, want := strings.TrimSpace(string(out)), s.Home+" yes"; got != want {
				t.Fatalf("remote said %q, want %q", got, want)
			}
		})
	}
}

// TestStopAndAddresses: Stop ends the server and its connection handlers;
// a refusing address refuses; a blackhole accepts and stays silent; a
// replaced server keeps the port with new host keys.
func TestStopAndAddresses(t *testing.T) {
	key := sshtest.NewKey(t, "ed25519")
	s := sshtest.Start(t, sshtest.Options{Authorized: []*sshtest.Key{key}, HostKeyTypes: []string{"ed25519"}})
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The banner comes from this connection's handler, so it is alive when
	// the read returns. Polling for "any descendant" instead could catch the
	// exiting handler of Start's readiness probe and then find none.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
		t.Fatalf("no banner from %s: %v", s.Addr, err)
	}
	kids := s.Descendants()
	if len(kids) == 0 {
		t.Fatal("no connection handler appeared")
	}
	r := s.Replace(t)
	if r.Port != s.Port || r.HostKeys[0].Type() != s.HostKeys[0].Type() || string(r.HostKeys[0].Marshal()) == string(s.HostKeys[0].Marshal()) {
		t.Errorf("replacement on port %d with key %v, want port %d and a new key", r.Port, r.HostKeys[0].Type(), s.Port)
	}
	for _, p := range kids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err == nil {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); !strings.Contains(string(b), ") Z ") {
				t.Errorf("connection handler %d survived Stop", p)
			}
		}
	}
	r.Stop()
	if r.Answers() {
		t.Errorf("%s still answers with its host key after Stop", r.Addr)
	}

	if c, err := net.DialTimeout("tcp", sshtest.RefusingAddr(t), time.Second); err == nil {
		c.Close()
		t.Error("the refusing address accepted")
	}
	bh, err := net.DialTimeout("tcp", sshtest.Blackhole(t), time.Second)
	if err != nil {
		t.Fatalf("blackhole: %v", err)
	}
	defer bh.Close()
	bh.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := bh.Read(make([]byte, 1)); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the blackhole said something: %d bytes, %v", n, err)
	}
}

// TestAgent: StartAgent serves its keys on its socket.
func TestAgent(t *testing.T) {
	k1, k2 := sshtest.NewKey(t, "ed25519"), sshtest.NewKey(t, "ecdsa")
	a := sshtest.StartAgent(t, k1, k2)
	cmd := exec.Command("ssh-add", "-L")
	cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK="+a.Socket)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ssh-add -L: %v", err)
	}
	for _, k := range []*sshtest.Key{k1, k2} {
		if !strings.Contains(string(out), strings.Fields(k.AuthorizedLine())[1]) {
			t.Errorf("the agent does not hold %s", k.Path)
		}
	}
}

// TestFleet: each server of a fleet has its own port, home and host keys,
// and speaks SSH.
func TestFleet(t *testing.T) {
	fleet := sshtest.Fleet(t, 3, sshtest.Options{HostKeyTypes: []string{"ed25519"}})
	seen := map[string]bool{}
	for _, s := range fleet {
		for _, v := range []string{s.Addr, s.Home, string(s.HostKeys[0].Marshal())} {
			if seen[v] {
				t.Errorf("two servers share %q", v)
			}
			seen[v] = true
		}
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		banner := make([]byte, 8)
		_, err = io.ReadFull(c, banner)
		c.Close()
		if err != nil || string(banner) != "SSH-2.0-" {
			t.Errorf("%s says %q, %v", s.Addr, banner, err)
		}
	}
}
