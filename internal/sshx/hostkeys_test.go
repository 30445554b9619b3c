package sshx

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestHostKeyChanged: a server that comes back on the same address with
// another key is refused under every policy, with one sentence naming the
// host, both fingerprints and the known_hosts line to fix; nothing runs
// and known_hosts is left alone.
func TestHostKeyChanged(t *testing.T) {
	for _, policy := range []string{"accept-new", "no", "yes"} {
		t.Run(policy, func(t *testing.T) {
			e := newEnv(t)
			s := e.server(sshtest.Options{})
			sshtest.WriteKnownHosts(t, e.knownHosts, false, s)
			before := readFile(t, e.knownHosts)
			s2 := s.Replace(t)
			o := e.opts()
			o.StrictHostKeys = policy
			err, _ := dialErr(t, NewDialer(o), e.target("h1", s2))
			if !errors.Is(err, ErrHostKeyChanged) {
				t.Fatalf("error %v, want a changed host key", err)
			}
			name := sshtest.KnownHostsName(s2.Addr)
			assertOneSentence(t, err, "h1", name,
				ssh.FingerprintSHA256(s2.HostKeys[0]), ssh.FingerprintSHA256(s.HostKeys[0]),
				e.knownHosts+":1", fmt.Sprintf("ssh-keygen -R '%s'", name))
			if got := readFile(t, e.knownHosts); got != before {
				t.Errorf("known_hosts changed:\n%s\nwas:\n%s", got, before)
			}
			if l := s2.LogLines("Accepted publickey"); len(l) != 0 {
				t.Errorf("the impostor got a login: %v", l)
			}
		})
	}
}

// TestUnknownHost: accept-new (the default) records an unknown host as
// [host]:port and connects; yes refuses it and writes nothing.
func TestUnknownHost(t *testing.T) {
	t.Run("accept-new", func(t *testing.T) {
		e := newEnv(t)
		s := e.server(sshtest.Options{})
		d := NewDialer(e.opts())
		connect(t, d, e.target("h1", s))
		kh := readFile(t, e.knownHosts)
		lines := strings.Split(strings.TrimSpace(kh), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], sshtest.KnownHostsName(s.Addr)+" ") {
			t.Fatalf("known_hosts is %q, want one line for %s", kh, sshtest.KnownHostsName(s.Addr))
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(strings.SplitN(lines[0], " ", 2)[1]))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, k := range s.HostKeys {
			found = found || string(k.Marshal()) == string(pub.Marshal())
		}
		if !found {
			t.Errorf("recorded key %s is none of the server's", ssh.FingerprintSHA256(pub))
		}
		// Now known: a strict dialer gets in, a changed key would not.
		o := e.opts()
		o.StrictHostKeys = "yes"
		connect(t, NewDialer(o), e.target("h1", s))
		if got := readFile(t, e.knownHosts); got != kh {
			t.Errorf("a known host was recorded again: %q", got)
		}
	})
	t.Run("yes", func(t *testing.T) {
		e := newEnv(t)
		s := e.server(sshtest.Options{})
		o := e.opts()
		o.StrictHostKeys = "yes"
		err, _ := dialErr(t, NewDialer(o), e.target("h1", s))
		if !errors.Is(err, ErrHostKeyUnknown) {
			t.Fatalf("error %v, want an unknown host", err)
		}
		assertOneSentence(t, err, "h1", sshtest.KnownHostsName(s.Addr), "StrictHostKeyChecking is yes", "SHA256:")
		if _, err := os.Stat(e.knownHosts); !os.IsNotExist(err) {
			t.Errorf("known_hosts was written under strict checking")
		}
	})
}

// TestKnownHostsForms: hashed entries and @cert-authority lines are
// honoured under strict checking, and algorithm negotiation follows what
// known_hosts holds (a server with ed25519, ecdsa and rsa keys, known by
// its rsa key only, is still accepted).
func TestKnownHostsForms(t *testing.T) {
	ca := sshtest.NewKey(t, "ed25519")
	tests := []struct {
		name  string
		opts  sshtest.Options
		lines func(s *sshtest.Server) []string
	}{
		{"hashed", sshtest.Options{}, func(s *sshtest.Server) []string { return s.KnownHostsLines(true) }},
		{"rsa only", sshtest.Options{}, func(s *sshtest.Server) []string {
			var out []string
			for _, l := range s.KnownHostsLines(false) {
				if strings.Contains(l, " ssh-rsa ") {
					out = append(out, l)
				}
			}
			return out
		}},
		{"cert-authority", sshtest.Options{HostCA: ca}, func(s *sshtest.Server) []string {
			return []string{sshtest.CertAuthorityLine(ca)}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.server(tc.opts)
			writeFile(t, e.knownHosts, strings.Join(tc.lines(s), "\n")+"\n")
			o := e.opts()
			o.StrictHostKeys = "yes"
			c := connect(t, NewDialer(o), e.target("h1", s))
			if out, code := runOn(t, c, "echo", "in"); out != "in\n" || code != 0 {
				t.Errorf("echo: %q exit %d", out, code)
			}
		})
	}
	// A host certificate from an unknown authority is refused.
	t.Run("wrong authority", func(t *testing.T) {
		e := newEnv(t)
		s := e.server(sshtest.Options{HostCA: ca})
		writeFile(t, e.knownHosts, sshtest.CertAuthorityLine(sshtest.NewKey(t, "ed25519"))+"\n")
		o := e.opts()
		o.StrictHostKeys = "yes"
		err, _ := dialErr(t, NewDialer(o), e.target("h1", s))
		if !errors.Is(err, ErrHostKeyChanged) && !errors.Is(err, ErrHostKeyUnknown) {
			t.Fatalf("error %v, want a refused host key", err)
		}
		assertOneSentence(t, err, "h1")
	})
}
