package sshx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestProxyJump reaches a target through one and two jump hosts, from
// Target.Jump and from ssh_config, checking host keys on every hop.
func TestProxyJump(t *testing.T) {
	e := newEnv(t)
	debug := sshtest.Options{Extra: []string{"LogLevel DEBUG1"}}
	b1, b2 := e.server(debug), e.server(debug)
	s := e.server(sshtest.Options{})
	sshtest.WriteKnownHosts(t, e.knownHosts, false, b1, b2, s)
	strict := e.opts()
	strict.StrictHostKeys = "yes"
	hop := func(b *sshtest.Server) string { return fmt.Sprintf("%s@%s:%d", b.User, b.Host, b.Port) }
	// jumped says whether b forwarded a connection to the target's port.
	jumped := func(b *sshtest.Server) bool {
		for _, l := range b.LogLines("direct") {
			if strings.Contains(l, "port "+strconv.Itoa(s.Port)) {
				return true
			}
		}
		return false
	}

	t.Run("one hop", func(t *testing.T) {
		tg := e.target("h1", s)
		tg.Jump = hop(b1)
		c := connect(t, NewDialer(strict), tg)
		if out, code := runOn(t, c, "echo", "via"); out != "via\n" || code != 0 {
			t.Errorf("echo: %q exit %d", out, code)
		}
		if !jumped(b1) {
			t.Errorf("%s did not forward to the target:\n%s", b1.Addr, b1.Log())
		}
	})
	t.Run("two hops from ssh_config", func(t *testing.T) {
		cfg := sshtest.TempDir(t) + "/config"
		writeFile(t, cfg, b1.ConfigBlock("bastion1", e.key, e.knownHosts)+
			b2.ConfigBlock("bastion2", e.key, e.knownHosts)+
			s.ConfigBlock("inner", e.key, e.knownHosts)+"    ProxyJump bastion1,bastion2\n")
		o := strict
		o.ConfigFile = cfg
		c := connect(t, NewDialer(o), Target{Name: "inner", Host: "inner"})
		if out, code := runOn(t, c, "echo", "deep"); out != "deep\n" || code != 0 {
			t.Errorf("echo: %q exit %d", out, code)
		}
		if !jumped(b2) {
			t.Errorf("the last hop %s did not forward to the target", b2.Addr)
		}
	})
	t.Run("unknown jump host under strict", func(t *testing.T) {
		e2 := newEnv(t)
		e2.key = e.key
		sshtest.WriteKnownHosts(t, e2.knownHosts, false, s) // the target only
		o := e2.opts()
		o.StrictHostKeys = "yes"
		tg := e2.target("h1", s)
		tg.Jump = hop(b1)
		err, _ := dialErr(t, NewDialer(o), tg)
		if !errors.Is(err, ErrHostKeyUnknown) {
			t.Fatalf("error %v, want the jump host's key unknown", err)
		}
		assertOneSentence(t, err, "jump host "+hop(b1)+" for h1", sshtest.KnownHostsName(b1.Addr))
	})
	t.Run("changed target key behind a jump", func(t *testing.T) {
		e2 := newEnv(t)
		e2.key = e.key
		sshtest.WriteKnownHosts(t, e2.knownHosts, false, b1)
		other := e.server(sshtest.Options{})
		// known_hosts claims the target has the other server's keys
		var lines []string
		for _, l := range other.KnownHostsLines(false) {
			lines = append(lines, strings.Replace(l, sshtest.KnownHostsName(other.Addr), sshtest.KnownHostsName(s.Addr), 1))
		}
		writeFile(t, e2.knownHosts, readFile(t, e2.knownHosts)+strings.Join(lines, "\n")+"\n")
		tg := e2.target("h1", s)
		tg.Jump = hop(b1)
		err, _ := dialErr(t, NewDialer(e2.opts()), tg)
		if !errors.Is(err, ErrHostKeyChanged) {
			t.Fatalf("error %v, want the target's key changed", err)
		}
		assertOneSentence(t, err, "h1", sshtest.KnownHostsName(s.Addr))
	})
	t.Run("target refuses behind the jump", func(t *testing.T) {
		tg := e.target("h9", s)
		_, port, _ := net.SplitHostPort(sshtest.RefusingAddr(t))
		tg.Port, _ = strconv.Atoi(port)
		tg.Jump = hop(b1)
		err, _ := dialErr(t, NewDialer(strict), tg)
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("error %v, want unreachable", err)
		}
		assertOneSentence(t, err, "h9", "through its jump host", "refused")
	})
}

// TestUnreachable: a closed port fails at once, a port that accepts and
// never speaks fails when the connect timeout ends; both in one sentence.
func TestUnreachable(t *testing.T) {
	tests := []struct {
		name    string
		addr    string
		want    error
		phrases []string
	}{
		{"refused", sshtest.RefusingAddr(t), ErrUnreachable, []string{"connection refused; is sshd running there?"}},
		{"blackhole", sshtest.Blackhole(t), ErrTimeout, []string{"no answer within 1s (the connect timeout)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			o := e.opts()
			o.ConnectTimeout = time.Second
			host, port, _ := net.SplitHostPort(tc.addr)
			p, _ := strconv.Atoi(port)
			err, took := dialErr(t, NewDialer(o), Target{Name: "h1", Host: host, Port: p, KeyPath: e.key.Path})
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			assertOneSentence(t, err, append(tc.phrases, fmt.Sprintf("connect h1 (%s)", tc.addr))...)
			if took > 3*time.Second {
				t.Errorf("took %v with a 1s connect timeout", took)
			}
		})
	}
}

// TestSSHConfig: HostName, User, Port, IdentityFile, IdentitiesOnly,
// UserKnownHostsFile and StrictHostKeyChecking come from ssh_config, and
// Target fields override them.
func TestSSHConfig(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	sshtest.WriteKnownHosts(t, e.knownHosts, false, s)
	wrongKey := sshtest.NewKey(t, "ed25519")
	refusing := sshtest.RefusingAddr(t)
	_, refusingPort, _ := net.SplitHostPort(refusing)
	dir := sshtest.TempDir(t)
	cfg := dir + "/config"
	writeFile(t, cfg, strings.Join([]string{
		s.ConfigBlock("good", e.key, e.knownHosts),
		"Host wrongport\n    HostName 127.0.0.1\n    Port " + refusingPort + "\n    User " + s.User + "\n    IdentityFile " + e.key.Path + "\n    UserKnownHostsFile " + e.knownHosts + "\n",
		"Host wronguser\n    User nobody-here\n" + strings.SplitN(s.ConfigBlock("wronguser", e.key, e.knownHosts), "\n", 2)[1],
		s.ConfigBlock("wrongkey", wrongKey, e.knownHosts),
		// no UserKnownHostsFile: Options.KnownHostsFile (empty here) applies
		"Host unknownhost\n    HostName 127.0.0.1\n    Port " + strconv.Itoa(s.Port) + "\n    User " + s.User + "\n    IdentityFile " + e.key.Path + "\n    StrictHostKeyChecking yes\n",
		"Host blackholed\n    HostName 127.0.0.1\n    Port " + mustPort(sshtest.Blackhole(t)) + "\n    ConnectTimeout 1\n",
	}, "\n"))
	o := e.opts()
	o.ConfigFile = cfg
	o.KnownHostsFile = dir + "/empty_known_hosts"
	o.ConnectTimeout = 0 // ssh_config's or the default
	d := NewDialer(o)
	tests := []struct {
		name    string
		target  Target
		wantErr error
	}{
		{"all from ssh_config", Target{Host: "good"}, nil},
		{"Port from ssh_config is used", Target{Host: "wrongport"}, ErrUnreachable},
		{"Target.Port overrides", Target{Host: "wrongport", Port: s.Port}, nil},
		{"User from ssh_config is used", Target{Host: "wronguser"}, ErrAuth},
		{"Target.User overrides", Target{Host: "wronguser", User: s.User}, nil},
		{"IdentityFile with IdentitiesOnly is used", Target{Host: "wrongkey"}, ErrAuth},
		{"Target.KeyPath overrides", Target{Host: "wrongkey", KeyPath: e.key.Path}, nil},
		{"StrictHostKeyChecking from ssh_config", Target{Host: "unknownhost"}, ErrHostKeyUnknown},
		{"ConnectTimeout from ssh_config", Target{Host: "blackholed"}, ErrTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.target.Name = tc.target.Host
			if tc.wantErr == nil {
				c := connect(t, d, tc.target)
				if out, code := runOn(t, c, "echo", "ok"); out != "ok\n" || code != 0 {
					t.Errorf("echo: %q exit %d", out, code)
				}
				return
			}
			err, took := dialErr(t, d, tc.target)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			assertOneSentence(t, err, tc.target.Host)
			if tc.wantErr == ErrTimeout && (took < 900*time.Millisecond || took > 4*time.Second) {
				t.Errorf("took %v with ConnectTimeout 1", took)
			}
		})
	}
}

func mustPort(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// TestKeepaliveClosesDeadConnection: with ServerAliveInterval 1 and
// ServerAliveCountMax 2, a live server keeps the connection up and a
// server that stops answering has it closed within a few seconds.
func TestKeepaliveClosesDeadConnection(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	cfg := sshtest.TempDir(t) + "/config"
	writeFile(t, cfg, s.ConfigBlock("h1", e.key, "")+"    ServerAliveInterval 1\n    ServerAliveCountMax 2\n")
	o := e.opts()
	o.ConfigFile = cfg
	c := connect(t, NewDialer(o), Target{Name: "h1", Host: "h1"})
	select {
	case <-c.Done():
		t.Fatal("a healthy connection was closed")
	case <-time.After(3500 * time.Millisecond): // three keepalives answered
	}
	thaw := s.Freeze(t)
	defer thaw()
	start := time.Now()
	select {
	case <-c.Done():
		took := time.Since(start)
		if took < time.Second {
			t.Errorf("closed after %v, before any keepalive could miss", took)
		}
		t.Logf("dead connection closed after %v", took)
	case <-time.After(10 * time.Second):
		t.Fatal("the connection to a frozen server is still open after 10s")
	}
}

// TestHandshakeRetry: a server that drops connections beyond MaxStartups
// (as OpenSSH does to bursts) still lets every handshake of a burst in,
// thanks to the jittered retry.
func TestHandshakeRetry(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{MaxStartups: "1"})
	sshtest.WriteKnownHosts(t, e.knownHosts, false, s)
	d := NewDialer(e.opts())
	const n = 12
	var wg sync.WaitGroup
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.Dial(ctx, e.target(fmt.Sprintf("h%d", i), s))
			if err == nil {
				c.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("handshake %d: %v", i, err)
		}
	}
	if len(s.LogLines("MaxStartups")) == 0 {
		t.Errorf("the server dropped nothing, so the retry was not exercised:\n%s", s.Log())
	}
}

// TestMaxHandshakes: with one handshake slot, a dial waits while another
// holds it (here against a blackhole), and the wait does not eat its own
// connect timeout.
func TestMaxHandshakes(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	o := e.opts()
	o.MaxHandshakes = 1
	o.ConnectTimeout = time.Second
	d := NewDialer(o)
	hole, accepted := sshtest.BlackholeAccepts(t)
	host, port, _ := net.SplitHostPort(hole)
	p, _ := strconv.Atoi(port)
	slow := make(chan error, 1)
	go func() {
		_, err := d.Dial(context.Background(), Target{Name: "hole", Host: host, Port: p, KeyPath: e.key.Path})
		slow <- err
	}()
	<-accepted // the dial is in the blackhole, holding the only slot
	start := time.Now()
	c, err := d.Dial(context.Background(), e.target("h1", s))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("dial after waiting for the slot: %v", err)
	}
	c.Close()
	if took < 500*time.Millisecond {
		t.Errorf("dialled in %v while the only slot was taken", took)
	}
	if err := <-slow; !errors.Is(err, ErrTimeout) {
		t.Errorf("blackhole: %v, want a timeout", err)
	}
}

// TestDialCanceled: canceling the context ends a dial at once.
func TestDialCanceled(t *testing.T) {
	e := newEnv(t)
	hole, accepted := sshtest.BlackholeAccepts(t)
	host, port, _ := net.SplitHostPort(hole)
	p, _ := strconv.Atoi(port)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-accepted; cancel() }() // cancelled while it waits in the blackhole
	start := time.Now()
	_, err := NewDialer(e.opts()).Dial(ctx, Target{Name: "h1", Host: host, Port: p, KeyPath: e.key.Path})
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want canceled", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("cancel took %v to end the dial", took)
	}
	assertOneSentence(t, err, "h1", "canceled")
}
