package server

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

// PprofEnv names the variable that turns on the server's profiling
// endpoint: a loopback address (REX_SERVER_PPROF=127.0.0.1:6061) where
// net/http/pprof answers. It is off unless set; it is for measuring the
// server (docs/benchmarks.md), not for operators.
const PprofEnv = "REX_SERVER_PPROF"

// ServePprof serves net/http/pprof on the loopback address that
// REX_SERVER_PPROF names, when it is set. It refuses an address that is
// not loopback: the profiles show the server's memory, secrets included.
func ServePprof() (func(), error) {
	addr := os.Getenv(PprofEnv)
	if addr == "" {
		return func() {}, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", PprofEnv, addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%s=%q: only a loopback address is allowed", PprofEnv, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PprofEnv, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}
