package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"

	"github.com/rexconsole/rex/internal/usock"
)

// PprofEnv names the variable that turns on the server's profiling
// endpoint (REX_SERVER_PPROF=1): net/http/pprof on the socket PprofName in
// the server's private directory. It is off unless set; it is for
// measuring the server (docs/benchmarks.md), not for operators. A socket,
// not a TCP port: the profiles show the server's memory, secrets included,
// and a loopback port is open to every user of the machine, while the
// socket sits in a 0700 directory and each connection's peer uid is checked.
const PprofEnv = "REX_SERVER_PPROF"

// PprofName is the profiling socket in the server's directory.
const PprofName = "pprof.sock"

// ServePprof serves net/http/pprof on PprofName when REX_SERVER_PPROF is
// 1. The stop function closes the listener and removes the socket.
func ServePprof() (func(), error) {
	switch v := os.Getenv(PprofEnv); v {
	case "", "0":
		return func() {}, nil
	case "1":
	default:
		return nil, fmt.Errorf("%s=%q: set it to 1 (the profiles are served on %s in the server's directory, for this user only)", PprofEnv, v, PprofName)
	}
	d, err := OpenDir()
	if err != nil {
		return nil, err
	}
	d.Remove(PprofName) // one left by a server that died
	ln, err := d.Listen(PprofName)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("%s: %w", PprofEnv, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux}
	go srv.Serve(sameUserListener{ln})
	return func() {
		srv.Close()
		d.Remove(PprofName)
		d.Close()
	}, nil
}

// sameUserListener accepts only connections from this user's processes.
type sameUserListener struct{ *net.UnixListener }

func (l sameUserListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		if err := usock.SameUser(c); err != nil {
			fmt.Fprintf(os.Stderr, "rex server: refused a profiling connection: %v\n", err)
			c.Close()
			continue
		}
		return c, nil
	}
}

// PprofClient is an HTTP client that reaches the profiling socket of the
// server whose directory is dir (DirPath() for this process's
// environment); any host name in the URL will do:
// http://rex/debug/pprof/heap.
func PprofClient(dir string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d, err := usock.OpenPrivate(dir)
			if err != nil {
				return nil, err
			}
			defer d.Close()
			c, err := d.Dial(ctx, PprofName)
			if err != nil {
				if errors.Is(err, usock.ErrOtherUser) {
					return nil, err
				}
				return nil, fmt.Errorf("reach the rex server's profiles (is it running with %s=1?): %w", PprofEnv, err)
			}
			return c, nil
		},
	}}
}
