package sshx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestAgentAuth logs in with keys held by a real ssh-agent.
func TestAgentAuth(t *testing.T) {
	// Eight keys in the agent; the server takes the last one and stops
	// after three tries (MaxAuthTries), as a strict server would.
	keys := make([]*sshtest.Key, 8)
	for i := range keys {
		keys[i] = sshtest.NewKey(t, "ed25519")
	}
	agent := sshtest.StartAgent(t, keys...)
	good := keys[len(keys)-1]
	// The identity is named by its public half only: the private key lives
	// in the agent alone.
	if err := os.Remove(good.Path); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		keyPath string
		config  string // ssh_config for every host
		wantErr error
	}{
		{"configured identity picks the agent key", good.Path, "", nil},
		{"IdentitiesOnly picks the default identity from the agent", "", "IdentitiesOnly yes\n", nil},
		{"all agent keys exceed MaxAuthTries", "", "", ErrAuth},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			s := sshtest.Start(t, sshtest.Options{Authorized: []*sshtest.Key{good}, Extra: []string{"MaxAuthTries 3"}})
			o := e.opts()
			o.AgentSocket = agent.Socket
			if tc.config != "" {
				o.ConfigFile = filepath.Join(e.home, "config")
				writeFile(t, o.ConfigFile, tc.config)
				// ~/.ssh/id_ed25519.pub names the key; its private half is in the agent only
				writeFile(t, filepath.Join(e.home, ".ssh", "id_ed25519.pub"), good.AuthorizedLine())
			}
			tg := Target{Name: "h1", Host: s.Host, Port: s.Port, User: s.User, KeyPath: tc.keyPath}
			if tc.wantErr == nil {
				c := connect(t, NewDialer(o), tg)
				if out, code := runOn(t, c, "echo", "agent"); out != "agent\n" || code != 0 {
					t.Errorf("echo: %q exit %d", out, code)
				}
				return
			}
			err, _ := dialErr(t, NewDialer(o), tg)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			assertOneSentence(t, err, "h1", "agent key", "IdentitiesOnly")
		})
	}
}

// TestEncryptedKey: the passphrase callback is asked once, only when the
// server accepts the key, and a wrong passphrase ends in a clear error.
func TestEncryptedKey(t *testing.T) {
	e := newEnv(t)
	key := sshtest.NewEncryptedKey(t, "ed25519", "open sesame")
	s := sshtest.Start(t, sshtest.Options{Authorized: []*sshtest.Key{key}})
	tg := Target{Name: "h1", Host: s.Host, Port: s.Port, User: s.User, KeyPath: key.Path}

	t.Run("right passphrase", func(t *testing.T) {
		var mu sync.Mutex
		var asked []string
		o := e.opts()
		o.Passphrase = func(path string) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, path)
			return []byte("open sesame"), nil
		}
		d := NewDialer(o)
		connect(t, d, tg)
		connect(t, d, tg) // the decrypted key is kept: no second prompt
		if len(asked) != 1 || asked[0] != key.Path {
			t.Errorf("asked for %v, want once for %s", asked, key.Path)
		}
	})
	t.Run("wrong passphrase", func(t *testing.T) {
		calls := 0
		o := e.opts()
		o.Passphrase = func(string) ([]byte, error) {
			calls++
			return []byte("guess"), nil
		}
		err, _ := dialErr(t, NewDialer(o), tg)
		if !errors.Is(err, ErrAuth) {
			t.Fatalf("error %v, want an auth error", err)
		}
		assertOneSentence(t, err, "wrong passphrase", key.Path)
		if calls != passphraseTries {
			t.Errorf("asked %d times, want %d", calls, passphraseTries)
		}
	})
	t.Run("typing does not count against the connect timeout", func(t *testing.T) {
		// The bound also covers starting rexd, slow on a loaded machine
		// the first time (upload, hash): a first connection caches rexd,
		// so that typing takes longer than the bound, not the rest.
		warm := e.opts()
		warm.Passphrase = func(string) ([]byte, error) { return []byte("open sesame"), nil }
		connect(t, NewDialer(warm), tg)
		// Typing outlasts the timeout; what is left of the connection (the
		// handshake's end, rexd's start) must fit in the timeout, which on
		// a machine at load 20-90 took more than 15 s: 40 s leaves room.
		o := e.opts()
		o.ConnectTimeout = 40 * time.Second
		o.Passphrase = func(string) ([]byte, error) {
			time.Sleep(o.ConnectTimeout + time.Second) // the operator types
			return []byte("open sesame"), nil
		}
		// Not connect's 30 s: the caller's own deadline would take in the
		// typing, and a loaded machine's handshake and rexd start could
		// pass it (reported, like the budget, as no answer).
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		start := time.Now()
		c, err := NewDialer(o).Connect(ctx, tg)
		if err != nil {
			t.Fatalf("connect h1 after %v: %v", time.Since(start), err)
		}
		c.Close()
	})
	t.Run("no prompt available", func(t *testing.T) {
		err, _ := dialErr(t, NewDialer(e.opts()), tg)
		if !errors.Is(err, ErrAuth) {
			t.Fatalf("error %v, want an auth error", err)
		}
		assertOneSentence(t, err, "encrypted", "ssh-add")
	})
	t.Run("not offered when refused", func(t *testing.T) {
		other := sshtest.Start(t, sshtest.Options{Authorized: []*sshtest.Key{e.key}})
		calls := 0
		o := e.opts()
		o.Passphrase = func(string) ([]byte, error) {
			calls++
			return []byte("open sesame"), nil
		}
		err, _ := dialErr(t, NewDialer(o), Target{Name: "h2", Host: other.Host, Port: other.Port, User: other.User, KeyPath: key.Path})
		if !errors.Is(err, ErrAuth) {
			t.Fatalf("error %v, want an auth error", err)
		}
		if calls != 0 {
			t.Errorf("the passphrase was asked %d times for a key the server refuses", calls)
		}
		assertOneSentence(t, err, "h2", key.Path, "authorized_keys")
	})
}

// TestDefaultIdentitiesAndCertificates: with nothing configured, the
// default ~/.ssh identities are tried; a certificate beside a key
// (key-cert.pub) logs in where only its CA is trusted.
func TestDefaultIdentitiesAndCertificates(t *testing.T) {
	ca := sshtest.NewKey(t, "ecdsa")
	tests := []struct {
		name string
		typ  string
		cert bool
	}{
		{"default id_ed25519", "ed25519", false},
		{"default id_rsa", "rsa", false},
		{"certificate of id_ecdsa", "ecdsa", true},
		{"certificate of id_rsa", "rsa", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			key := sshtest.KeyIn(t, filepath.Join(e.home, ".ssh"), "id_"+tc.typ, tc.typ, "")
			o := sshtest.Options{}
			if tc.cert {
				o.UserCA = ca // the key itself is not in authorized_keys
			} else {
				o.Authorized = []*sshtest.Key{key}
			}
			s := sshtest.Start(t, o)
			if tc.cert {
				key.Certify(t, ca, s.User)
			}
			c := connect(t, NewDialer(e.opts()), Target{Name: "h1", Host: s.Host, Port: s.Port, User: s.User})
			if out, code := runOn(t, c, "echo", tc.typ); out != tc.typ+"\n" || code != 0 {
				t.Errorf("echo: %q exit %d", out, code)
			}
			if tc.cert && len(s.LogLines(" CA ")) == 0 {
				t.Errorf("logged in without the certificate: %v", s.LogLines("Accepted"))
			}
		})
	}
	t.Run("no key at all", func(t *testing.T) {
		e := newEnv(t)
		s := sshtest.Start(t, sshtest.Options{})
		err, _ := dialErr(t, NewDialer(e.opts()), Target{Name: "h1", Host: s.Host, Port: s.Port, User: s.User})
		if !errors.Is(err, ErrAuth) {
			t.Fatalf("error %v, want an auth error", err)
		}
		assertOneSentence(t, err, "no key to offer", fmt.Sprintf("h1 (%s)", s.Addr))
	})
}
