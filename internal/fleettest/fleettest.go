// Package fleettest gives tests a commands.App over real hosts: `local`
// (a rexd subprocess confined to a temporary directory) and loopback
// OpenSSH servers registered as devices h1..hN in a group "fleet", reached
// through the same in-process SSH, bootstrap and connection pool as rex
// itself. Every rexd writes its audit log in its host's home.
//
// A test binary that uses it calls Main from TestMain, which builds rexd
// once for the run.
package fleettest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/sshtest"
	"github.com/rexconsole/rex/internal/sshx"
)

// rexdDir holds the rexd built by Main, named as payload.Dir wants.
var rexdDir string

// Main builds rexd, runs the tests and removes the build.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "fleettest-rexd")
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
	rexdDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Rexd is the path of the rexd Main built.
func Rexd() string {
	return filepath.Join(rexdDir, "rexd-"+runtime.GOOS+"-"+runtime.GOARCH)
}

// Fleet is an App over local and N sshd hosts.
type Fleet struct {
	App   *commands.App
	Store *devices.Store
	// Hosts are the servers of h1..hN, in order.
	Hosts []*sshtest.Server
	// LocalHome is local's root and working directory.
	LocalHome string
	// Dir is the client side's directory (known_hosts, registry).
	Dir string
	// Proxies, with Options.Proxied, stand between rex and each host, in
	// order: cut one to lose its connection.
	Proxies []*sshtest.Proxy
	// States records the pool's reports, in order ("h1 reconnecting").
	States *StateLog
}

// Options shape a Fleet.
type Options struct {
	// Hosts is the number of sshd hosts; 0 makes none.
	Hosts int
	// Down adds a device "down" (in the group) whose port refuses.
	Down bool
	// Proxied reaches each host through a Proxy of its own.
	Proxied bool
	// ResumeGrace opens resumable sessions (PoolOptions.ResumeGrace).
	ResumeGrace time.Duration
	// RexdArgs are more arguments for every host's rexd.
	RexdArgs []string
}

// New starts the hosts and returns the fleet; everything stops when the
// test ends.
func New(t testing.TB, opts Options) *Fleet {
	t.Helper()
	if rexdDir == "" {
		t.Fatal("fleettest: call fleettest.Main from TestMain")
	}
	dir := sshtest.TempDir(t)
	f := &Fleet{Dir: dir, LocalHome: filepath.Join(dir, "localhome")}
	for _, d := range []string{f.LocalHome, filepath.Join(dir, "config"), filepath.Join(dir, "cache")} {
		os.MkdirAll(d, 0o755)
	}
	key := sshtest.NewKey(t, "ed25519")
	if opts.Hosts > 0 {
		f.Hosts = sshtest.Fleet(t, opts.Hosts, sshtest.Options{Authorized: []*sshtest.Key{key}})
	}
	known := filepath.Join(dir, "known_hosts")
	sshtest.WriteKnownHosts(t, known, false, f.Hosts...)
	devs := map[string]map[string]any{}
	var group []string
	for i, h := range f.Hosts {
		name := "h" + strconv.Itoa(i+1)
		port := h.Port
		if opts.Proxied {
			p := sshtest.NewProxy(t, h.Addr)
			f.Proxies = append(f.Proxies, p)
			_, ps, _ := strings.Cut(p.Addr, ":")
			port, _ = strconv.Atoi(ps)
		}
		devs[name] = map[string]any{"host": h.User + "@" + h.Host, "port": port, "ssh_key": key.Path}
		group = append(group, name)
	}
	if opts.Down {
		addr := sshtest.RefusingAddr(t)
		host, port, _ := strings.Cut(addr, ":")
		p, _ := strconv.Atoi(port)
		devs["down"] = map[string]any{"host": host, "port": p, "ssh_key": key.Path}
		group = append(group, "down")
	}
	if opts.Proxied {
		// The proxies' ports serve the same host keys.
		var lines []string
		for i, h := range f.Hosts {
			for _, l := range h.KnownHostsLines(false) {
				_, key, _ := strings.Cut(l, " ")
				lines = append(lines, sshtest.KnownHostsName(f.Proxies[i].Addr)+" "+key)
			}
		}
		kf, err := os.OpenFile(known, os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		kf.WriteString(strings.Join(lines, "\n") + "\n")
		kf.Close()
	}

	reg := map[string]any{"devices": devs, "groups": map[string][]string{"fleet": group}}
	b, _ := json.MarshalIndent(reg, "", "  ")
	regPath := filepath.Join(dir, "devices.json")
	if err := os.WriteFile(regPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f.Store = devices.NewStore(regPath)

	dialer := sshx.NewDialer(sshx.Options{
		ConfigFile:     "none",
		KnownHostsFile: known,
		HomeDir:        dir,
		AgentSocket:    "none",
		Payload:        payload.Dir(rexdDir),
		RexdArgs:       append(fanout.OperatorLimits(), opts.RexdArgs...),
		ConnectTimeout: 60 * time.Second, // starting rexd is slow on a loaded machine
	})
	// local's rexd starts in LocalHome (its first root); it also reaches
	// rex's config and cache, where the user and system spaces of tools
	// live, as rex's own local rexd (root /) does.
	localArgs := append(fanout.OperatorLimits(), "--root", f.LocalHome,
		"--root", filepath.Join(dir, "config"), "--root", filepath.Join(dir, "cache"), "--audit", f.AuditPath("local"))
	conns := commands.Connectors{
		Local: fanout.LocalConnector(Rexd(), localArgs...),
		SSH:   commands.SSHConnector{Dialer: dialer},
	}
	f.States = &StateLog{}
	f.App = &commands.App{
		Resolve:        commands.Resolver(f.Store, nil),
		ConnectTimeout: 60 * time.Second, // starting rexd is slow on a loaded machine
		ConfigDir:      filepath.Join(dir, "config"),
		CacheDir:       filepath.Join(dir, "cache"),
		StateDir:       filepath.Join(dir, "state"),
		CASDir:         filepath.Join(dir, "cache", "cas"),
	}
	// As commands.Setup wires it: a device's secrets reach its processes.
	f.App.Pool = fanout.NewPool(conns, fanout.PoolOptions{Secrets: f.App.DeviceSecrets, ResumeGrace: opts.ResumeGrace, OnState: f.States.report})
	t.Cleanup(func() { f.App.Pool.Close() })
	return f
}

// Home is the home directory of host "local" or "hN".
func (f *Fleet) Home(host string) string {
	if host == commands.LocalName {
		return f.LocalHome
	}
	i, err := strconv.Atoi(strings.TrimPrefix(host, "h"))
	if err != nil || i < 1 || i > len(f.Hosts) {
		panic("fleettest: no host " + host)
	}
	return f.Hosts[i-1].Home
}

// AuditPath is where the rexd of a host writes its audit log.
func (f *Fleet) AuditPath(host string) string {
	return filepath.Join(f.Home(host), ".local", "state", "rexd", "audit.log")
}

// AuditEntry is the part of an audit line (rexd's or rex's) tests look
// at.
type AuditEntry struct {
	ClientName string         `json:"client_name"`
	Method     string         `json:"method"`
	Event      string         `json:"event"`
	Params     map[string]any `json:"params"`
	Result     any            `json:"result"`
	Error      any            `json:"error"`
}

// Audit reads a host's audit log.
func (f *Fleet) Audit(t testing.TB, host string) []AuditEntry {
	t.Helper()
	return readAudit(t, host, f.AuditPath(host))
}

// RexAudit reads rex's own audit log (App.AuditPath): the calls rex makes
// itself, which no rexd sees.
func (f *Fleet) RexAudit(t testing.TB) []AuditEntry {
	t.Helper()
	return readAudit(t, "rex", f.App.AuditPath())
}

func readAudit(t testing.TB, whose, path string) []AuditEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("audit log of %s: %v", whose, err)
	}
	var out []AuditEntry
	for _, l := range AuditLines(b) {
		var e AuditEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("audit log of %s: bad line %q: %v", whose, l, err)
		}
		out = append(out, e)
	}
	return out
}

// AuditLines splits an audit log into its whole lines. rexd may be
// writing an entry while a test reads the log (an exec's exit is logged
// after its reply is sent), and a reader can see part of that one write:
// a last line without its newline is still being written, not bad.
func AuditLines(b []byte) []string {
	whole := string(b[:bytes.LastIndexByte(b, '\n')+1])
	if whole == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(whole, "\n"), "\n")
}

// WriteFile writes a file under a host's home.
func (f *Fleet) WriteFile(t testing.TB, host, rel, content string) {
	t.Helper()
	p := filepath.Join(f.Home(host), rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ReadFile reads a file under a host's home ("" when it is missing).
func (f *Fleet) ReadFile(t testing.TB, host, rel string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(f.Home(host), rel))
	return string(b)
}

// Context is a test's context, bounded so a hang fails instead of
// stalling the run.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// StateLog records the pool's state reports and wakes whoever waits for
// one.
type StateLog struct {
	mu    sync.Mutex
	cond  *sync.Cond
	lines []string
}

func (l *StateLog) report(target, state string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cond == nil {
		l.cond = sync.NewCond(&l.mu)
	}
	line := target + " " + state
	if err != nil {
		line += ": " + err.Error()
	}
	l.lines = append(l.lines, line)
	l.cond.Broadcast()
}

// Wait waits until a report starting with prefix ("h1 reconnecting")
// comes, after the first skip reports, and returns its index.
func (l *StateLog) Wait(t testing.TB, skip int, prefix string) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cond == nil {
		l.cond = sync.NewCond(&l.mu)
	}
	stop := time.AfterFunc(2*time.Minute, func() { l.mu.Lock(); l.cond.Broadcast(); l.mu.Unlock() })
	defer stop.Stop()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		for i := skip; i < len(l.lines); i++ {
			if strings.HasPrefix(l.lines[i], prefix) {
				return i
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool never reported %q; it reported %q", prefix, l.lines)
		}
		l.cond.Wait()
	}
}

// Lines are the reports so far.
func (l *StateLog) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}
