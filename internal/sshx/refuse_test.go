package sshx

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// TestExecRefusedIsHeardAtOnce: a server that lets rex log in but refuses
// its exec request (ForceCommand gone wrong, a process limit) is reported
// as that, from its answer, not as a silent host at the connect timeout.
// OpenSSH refuses an exec only when it cannot run it, which a test cannot
// provoke reliably, so this server is x/crypto/ssh's.
func TestExecRefusedIsHeardAtOnce(t *testing.T) {
	e := newEnv(t)
	addr, execs := refusingServer(t, e.key.Public)
	host, port, _ := net.SplitHostPort(addr)
	o := e.opts()
	o.ConnectTimeout = 5 * time.Minute // were the answer ignored, dialErr's 30 s would end first
	p, _ := strconv.Atoi(port)
	tg := Target{Name: "h1", Host: host, Port: p, User: "rex", KeyPath: e.key.Path}
	err, took := dialErr(t, NewDialer(o), tg)
	assertOneSentence(t, err, "h1", "refused to run a command", "run true")
	if !errors.Is(err, ErrBootstrap) || !errors.Is(err, errExecRefused) {
		t.Errorf("error %v is not ErrBootstrap/errExecRefused", err)
	}
	if errors.Is(err, ErrTimeout) {
		t.Errorf("reported as a timeout after %v", took)
	}
	if n := len(execs); n == 0 {
		t.Error("the server saw no exec request")
	}
}

// refusingServer serves SSH on loopback: it lets key in and answers every
// exec request with a failure. It returns its address and a channel that
// gets the commands it refused.
func refusingServer(t *testing.T, key ssh.PublicKey) (string, chan string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == string(key.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	cfg.AddHostKey(hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	execs := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveRefusing(c, cfg, execs)
		}
	}()
	return ln.Addr().String(), execs
}

func serveRefusing(c net.Conn, cfg *ssh.ServerConfig, execs chan string) {
	defer c.Close()
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			return
		}
		go func() {
			defer ch.Close()
			for r := range creqs {
				if r.Type == "exec" {
					var p struct{ Command string }
					ssh.Unmarshal(r.Payload, &p)
					select {
					case execs <- strings.SplitN(p.Command, "\n", 2)[0]:
					default:
					}
				}
				if r.WantReply {
					r.Reply(false, nil)
				}
			}
		}()
	}
}
