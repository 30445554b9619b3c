// Package sshtest starts real OpenSSH sshd servers on loopback for tests:
// generated host keys, a temporary configuration, a free port, a home
// directory of their own, stopped by pid when the test ends. It also makes
// client keys, known_hosts files, ssh_config snippets, a real ssh-agent, and
// addresses that refuse or never answer.
//
// It is a test helper imported by other packages' tests; every function takes
// the testing.TB it works for and fails that test on error. A missing sshd
// fails the test with "install openssh-server": it never skips.
package sshtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHD is where the OpenSSH server is expected.
const SSHD = "/usr/sbin/sshd"

// Loopback is the address every server listens on.
const Loopback = "127.0.0.1"

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 10 * time.Second

// Options shape one server. The zero value is a server with SFTP, ed25519,
// ecdsa and rsa host keys, on a free port, with a fresh home directory and no
// authorized keys (add them with Authorize or Options.Authorized).
type Options struct {
	// NoSFTP leaves out the sftp subsystem.
	NoSFTP bool
	// Home is the HOME of sessions (sshd SetEnv) and the SFTP start
	// directory; default a new temporary directory, so servers never share
	// a rexd cache.
	Home string
	// Env adds environment variables to every session (sshd SetEnv), for
	// example XDG_CACHE_HOME.
	Env map[string]string
	// Port to listen on; default a free one.
	Port int
	// HostKeyTypes are "ed25519", "ecdsa", "rsa"; default all three.
	HostKeyTypes []string
	// HostCA, when set, signs every host key into a host certificate that
	// sshd presents (for @cert-authority known_hosts lines).
	HostCA *Key
	// UserCA, when set, is trusted to sign user certificates
	// (TrustedUserCAKeys).
	UserCA *Key
	// Authorized are keys allowed to log in.
	Authorized []*Key
	// MaxStartups is sshd's MaxStartups; default "1024" (no early drops).
	MaxStartups string
	// Noexec lists directories (created if missing) over which a noexec
	// tmpfs is mounted in a private mount namespace of this sshd only.
	// It needs root with CAP_SYS_ADMIN (unshare --mount).
	Noexec []string
	// Tmpfs maps directories (created if missing) to the size of a tmpfs
	// mounted over each ("1m"), in the same private mount namespace: a
	// small file system to fill. Root only, like Noexec.
	Tmpfs map[string]string
	// Extra are more sshd_config lines.
	Extra []string
	// User is the login user when not whoever runs the test: an account
	// made with NewUser (root only). Home then belongs to that user.
	User string
}

// Server is one running sshd.
type Server struct {
	Host string // always Loopback
	Port int
	Addr string // "127.0.0.1:port"
	User string // the login user: whoever runs the test
	Home string // HOME of its sessions
	Dir  string // its configuration, keys, pid file and log
	// HostKeys are its public host keys, in the order of HostKeyTypes.
	HostKeys []ssh.PublicKey

	opts    Options
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string

	mu      sync.Mutex
	stopped bool
}

// Start starts an sshd and stops it when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := start(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Fleet starts n independent servers with the same options (each gets its
// own home, port and host keys).
func Fleet(t testing.TB, n int, opts Options) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts
			o.Home = "" // never shared
			servers[i], errs[i] = start(t, o)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return servers
}

func start(t testing.TB, opts Options) (*Server, error) {
	if _, err := os.Stat(SSHD); err != nil {
		return nil, fmt.Errorf("sshtest: %s not found: install openssh-server (apt-get install openssh-server)", SSHD)
	}
	u, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("sshtest: current user: %w", err)
	}
	if os.Geteuid() == 0 {
		// sshd's privilege separation directory; missing in fresh containers.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			return nil, fmt.Errorf("sshtest: create /run/sshd: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "sshtest")
	if err != nil {
		return nil, fmt.Errorf("sshtest: %w", err)
	}
	// Short paths on purpose (not t.TempDir): unix sockets and sshd paths
	// must stay well under 108 bytes.
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{Host: Loopback, User: u.Username, Dir: dir, Home: opts.Home, opts: opts}
	if s.Home == "" {
		s.Home = filepath.Join(dir, "home")
		if err := os.MkdirAll(s.Home, 0o755); err != nil {
			return nil, fmt.Errorf("sshtest: %w", err)
		}
	}
	if opts.User != "" && opts.User != u.Username {
		// sshd reads authorized_keys as the login user, who must reach it.
		other, err := user.Lookup(opts.User)
		if err != nil {
			return nil, fmt.Errorf("sshtest: login user %q: %w", opts.User, err)
		}
		uid, _ := strconv.Atoi(other.Uid)
		gid, _ := strconv.Atoi(other.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sshtest: %w", err)
		}
		if err := filepath.Walk(s.Home, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		}); err != nil {
			return nil, fmt.Errorf("sshtest: give %s to %s: %w", s.Home, opts.User, err)
		}
		s.User = opts.User
	}
	types := opts.HostKeyTypes
	if len(types) == 0 {
		types = []string{"ed25519", "ecdsa", "rsa"}
	}
	var hostKeyLines []string
	for _, typ := range types {
		k, err := newKey(dir, "ssh_host_"+typ+"_key", typ, "")
		if err != nil {
			return nil, err
		}
		s.HostKeys = append(s.HostKeys, k.Public)
		hostKeyLines = append(hostKeyLines, fmt.Sprintf("HostKey %s", quoteConf(k.Path)))
		if opts.HostCA != nil {
			certPath, err := opts.HostCA.sign(k, ssh.HostCert, []string{Loopback, "localhost"})
			if err != nil {
				return nil, err
			}
			hostKeyLines = append(hostKeyLines, fmt.Sprintf("HostCertificate %s", quoteConf(certPath)))
		}
	}
	var auth bytes.Buffer
	for _, k := range opts.Authorized {
		auth.WriteString(k.AuthorizedLine())
	}
	if err := os.WriteFile(s.authorizedKeys(), auth.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("sshtest: %w", err)
	}
	for d := range opts.Tmpfs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("sshtest: %w", err)
		}
	}
	for _, d := range opts.Noexec {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("sshtest: %w", err)
		}
	}
	s.logPath = filepath.Join(dir, "sshd.log")

	// A free port is only free until someone takes it: retry a few times.
	var lastErr error
	for range 5 {
		port := opts.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				return nil, err
			}
		}
		s.Port, s.Addr = port, net.JoinHostPort(Loopback, strconv.Itoa(port))
		if err := s.writeConfig(hostKeyLines); err != nil {
			return nil, err
		}
		lastErr = s.run()
		if lastErr == nil {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("sshtest: log of sshd %s:\n%s", s.Addr, tail(s.Log(), 4000))
				}
				s.Stop()
			})
			return s, nil
		}
		if opts.Port != 0 || !strings.Contains(lastErr.Error(), "Address already in use") {
			break
		}
	}
	return nil, lastErr
}

// TempDir is a short temporary directory removed when the test ends (unix
// socket paths must stay under 108 bytes, which t.TempDir may exceed).
func TempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sshtest")
	if err != nil {
		t.Fatalf("sshtest: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func (s *Server) authorizedKeys() string { return filepath.Join(s.Dir, "authorized_keys") }

func (s *Server) writeConfig(hostKeyLines []string) error {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# sshtest server in %s", s.Dir)
	w("ListenAddress %s", s.Addr)
	for _, l := range hostKeyLines {
		w("%s", l)
	}
	w("PidFile %s", quoteConf(filepath.Join(s.Dir, "sshd.pid")))
	w("AuthorizedKeysFile %s", quoteConf(s.authorizedKeys()))
	w("AllowUsers %s", s.User)
	w("PermitRootLogin prohibit-password")
	w("PubkeyAuthentication yes")
	w("PasswordAuthentication no")
	w("KbdInteractiveAuthentication no")
	w("UsePAM no")
	w("StrictModes no")
	w("UseDNS no")
	w("PrintMotd no")
	w("PrintLastLog no")
	w("X11Forwarding no")
	w("AllowTcpForwarding yes")
	// Generous: a slow client (a -race build decrypting a key) must not
	// be dropped mid-login.
	w("LoginGraceTime 120")
	maxStartups := s.opts.MaxStartups
	if maxStartups == "" {
		maxStartups = "1024"
	}
	w("MaxStartups %s", maxStartups)
	w("MaxSessions 1024")
	if s.opts.UserCA != nil {
		w("TrustedUserCAKeys %s", quoteConf(s.opts.UserCA.PubPath))
	}
	if !s.opts.NoSFTP {
		w("Subsystem sftp internal-sftp -d %s", quoteConf(s.Home))
	}
	env := []string{quoteConf("HOME=" + s.Home)}
	keys := make([]string, 0, len(s.opts.Env))
	for k := range s.opts.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, quoteConf(k+"="+s.opts.Env[k]))
	}
	w("SetEnv %s", strings.Join(env, " "))
	for _, l := range s.opts.Extra {
		w("%s", l)
	}
	cfg := filepath.Join(s.Dir, "sshd_config")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("sshtest: %w", err)
	}
	// OpenSSH >= 9.8 penalises addresses with many failed or dropped
	// connections; every client here is 127.0.0.1, so turn that off where
	// this sshd knows the option.
	b.WriteString("PerSourcePenalties no\n")
	if err := os.WriteFile(cfg+".probe", []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("sshtest: %w", err)
	}
	if exec.Command(SSHD, "-t", "-f", cfg+".probe").Run() == nil {
		if err := os.Rename(cfg+".probe", cfg); err != nil {
			return fmt.Errorf("sshtest: %w", err)
		}
	} else {
		os.Remove(cfg + ".probe")
	}
	if out, err := exec.Command(SSHD, "-t", "-f", cfg).CombinedOutput(); err != nil {
		return fmt.Errorf("sshtest: sshd rejects %s: %s", cfg, strings.TrimSpace(string(out)))
	}
	return nil
}

// mountScript mounts a tmpfs with the options of each of its first $1
// pairs of arguments (directory, options), then execs the rest (sshd), all
// inside unshare's mount namespace.
const mountScript = `n=$1; shift; while [ "$n" -gt 0 ]; do mount -t tmpfs -o "$2" tmpfs "$1" || exit 1; shift 2; n=$((n-1)); done; exec "$@"`

func (s *Server) run() error {
	cfg := filepath.Join(s.Dir, "sshd_config")
	argv := []string{SSHD, "-D", "-e", "-f", cfg}
	if len(s.opts.Noexec) > 0 || len(s.opts.Tmpfs) > 0 {
		var pairs []string
		for _, d := range s.opts.Noexec {
			pairs = append(pairs, d, "noexec,mode=0755")
		}
		dirs := make([]string, 0, len(s.opts.Tmpfs))
		for d := range s.opts.Tmpfs {
			dirs = append(dirs, d)
		}
		sort.Strings(dirs)
		for _, d := range dirs {
			pairs = append(pairs, d, "mode=0777,size="+s.opts.Tmpfs[d])
		}
		pre := []string{"unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", mountScript, "sh", strconv.Itoa(len(pairs) / 2)}
		pre = append(pre, pairs...)
		argv = append(pre, argv...)
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("sshtest: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so Stop can find a connection child that
	// sshd forked too late to be among the descendants Stop saw: until
	// such a child closes its copy of the listening socket (before its
	// setsid), the port still accepts.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sshtest: start sshd: %w", err)
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	go func() {
		cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("sshtest: sshd on %s exited at start: %s", s.Addr, tail(s.Log(), 2000))
		default:
		}
		c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
		if err == nil {
			ours := s.presentsOwnKey(c)
			c.Close()
			if ours {
				return nil
			}
			// Another process holds the port: this sshd fails to bind
			// and exits, which the next round sees.
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("sshtest: sshd on %s did not accept connections within %s: %s", s.Addr, startTimeout, tail(s.Log(), 2000))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// presentsOwnKey reports whether the server on c shows one of s's host
// keys: a port that accepts may belong to another test's sshd.
func (s *Server) presentsOwnKey(c net.Conn) bool {
	c.SetDeadline(time.Now().Add(startTimeout))
	ours := false
	check := func(_ string, _ net.Addr, k ssh.PublicKey) error {
		if cert, ok := k.(*ssh.Certificate); ok {
			k = cert.Key
		}
		for _, h := range s.HostKeys {
			if bytes.Equal(h.Marshal(), k.Marshal()) {
				ours = true
			}
		}
		return errProbed
	}
	ssh.NewClientConn(c, s.Addr, &ssh.ClientConfig{User: "probe", HostKeyCallback: check})
	return ours
}

// Answers reports whether s's own sshd accepts on s.Addr (another
// process may have taken the port since s stopped).
func (s *Server) Answers() bool {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	return s.presentsOwnKey(c)
}

// errProbed ends a readiness probe once the host key was seen.
var errProbed = errors.New("sshtest: host key seen")

// Pid is the listening sshd's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Log is what sshd has logged so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// Stop stops the server and every process it started (connection handlers
// and the sessions below them), by pid. It is safe to call twice.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.cmd == nil {
		return
	}
	s.stopped = true
	pid := s.cmd.Process.Pid
	kids := descendants(pid)
	// A frozen process would not see SIGTERM.
	for _, p := range kids {
		syscall.Kill(p, syscall.SIGCONT)
		syscall.Kill(p, syscall.SIGTERM)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	// A child forked while sshd was being stopped is not in kids and may
	// still hold the listening socket; it is in sshd's process group until
	// it has closed that socket and called setsid, so the group catches it.
	syscall.Kill(-pid, syscall.SIGKILL)
	for range 50 { // bounded: 5 s for the connection handlers to go
		alive := kids[:0]
		for _, p := range kids {
			if processAlive(p) {
				alive = append(alive, p)
			}
		}
		kids = alive
		if len(kids) == 0 && len(groupMembers(pid)) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	kids = append(kids, groupMembers(pid)...)
	for _, p := range kids {
		syscall.Kill(p, syscall.SIGKILL)
	}
}

// Replace stops s and starts a new server on the same port with the same
// options but new host keys: the "host key changed" situation.
func (s *Server) Replace(t testing.TB) *Server {
	t.Helper()
	s.Stop()
	opts := s.opts
	opts.Port = s.Port
	opts.Home = s.Home
	// The authorized keys added since start come along.
	auth, err := os.ReadFile(s.authorizedKeys())
	if err != nil {
		t.Fatal(err)
	}
	opts.Authorized = nil
	n := Start(t, opts)
	if err := os.WriteFile(n.authorizedKeys(), auth, 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// Authorize lets k log in (sshd reads authorized_keys on every login).
func (s *Server) Authorize(t testing.TB, k *Key) {
	t.Helper()
	f, err := os.OpenFile(s.authorizedKeys(), os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(k.AuthorizedLine()); err != nil {
		t.Fatal(err)
	}
}

// KnownHostsLines are known_hosts lines for every host key of s, under
// "[127.0.0.1]:port" (the form OpenSSH uses for a non-default port), hashed
// like HashKnownHosts when hashed is set.
func (s *Server) KnownHostsLines(hashed bool) []string {
	host := KnownHostsName(s.Addr)
	var out []string
	for _, k := range s.HostKeys {
		name := host
		if hashed {
			name = hashHost(host)
		}
		out = append(out, name+" "+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))))
	}
	return out
}

// WriteKnownHosts writes a known_hosts file at path trusting every given
// server.
func WriteKnownHosts(t testing.TB, path string, hashed bool, servers ...*Server) {
	t.Helper()
	var b strings.Builder
	for _, s := range servers {
		for _, l := range s.KnownHostsLines(hashed) {
			b.WriteString(l + "\n")
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// CertAuthorityLine is a known_hosts line trusting ca for every host.
func CertAuthorityLine(ca *Key) string {
	return "@cert-authority * " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ca.Public)))
}

// KnownHostsName is how known_hosts names host:port: the bare host for port
// 22, "[host]:port" otherwise.
func KnownHostsName(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "22" {
		return host
	}
	return "[" + host + "]:" + port
}

// ConfigBlock is an ssh_config "Host alias" block that reaches s as its
// user with key (when not nil) and known_hosts (when not empty), strictly.
func (s *Server) ConfigBlock(alias string, key *Key, knownHosts string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Host %s\n", alias)
	fmt.Fprintf(&b, "    HostName %s\n", s.Host)
	fmt.Fprintf(&b, "    Port %d\n", s.Port)
	fmt.Fprintf(&b, "    User %s\n", s.User)
	if key != nil {
		fmt.Fprintf(&b, "    IdentityFile %s\n", quoteConf(key.Path))
		b.WriteString("    IdentitiesOnly yes\n")
	}
	if knownHosts != "" {
		fmt.Fprintf(&b, "    UserKnownHostsFile %s\n", quoteConf(knownHosts))
		b.WriteString("    GlobalKnownHostsFile /dev/null\n")
		b.WriteString("    StrictHostKeyChecking yes\n")
	}
	b.WriteString("    BatchMode yes\n")
	return b.String()
}

// Descendants are the processes below the listening sshd: one handler per
// connection and the sessions they run.
func (s *Server) Descendants() []int { return descendants(s.cmd.Process.Pid) }

// Freeze stops (SIGSTOP) every connection handler of s, so its clients
// meet a peer that no longer answers, as if the network had gone. The
// returned function resumes them; Stop resumes them too.
func (s *Server) Freeze(t testing.TB) (thaw func()) {
	t.Helper()
	var frozen []int
	for _, p := range s.Descendants() {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); strings.TrimSpace(string(comm)) == "sshd" {
			if syscall.Kill(p, syscall.SIGSTOP) == nil {
				frozen = append(frozen, p)
			}
		}
	}
	if len(frozen) == 0 {
		t.Fatalf("sshtest: no connection of %s to freeze", s.Addr)
	}
	return func() {
		for _, p := range frozen {
			syscall.Kill(p, syscall.SIGCONT)
		}
	}
}

// descendants lists every process below pid, read from /proc.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentOf(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// groupMembers lists the live (not zombie) processes of process group pgid.
func groupMembers(pgid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, ok := statFields(p) // state ppid pgrp ...
		if !ok {
			continue
		}
		if len(f) >= 3 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			out = append(out, p)
		}
	}
	return out
}

// parentOf reads the parent pid from /proc/PID/stat.
func parentOf(pid int) (int, bool) {
	f, ok := statFields(pid)
	if !ok || len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}

func processAlive(pid int) bool {
	f, ok := statFields(pid)
	return ok && len(f) > 0 && f[0] != "Z"
}

// statFields returns the fields of /proc/PID/stat after the command's
// name (which may hold spaces and parentheses): state, ppid, pgrp, ...
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}

// RefusingAddr is a loopback address where nothing listens: connecting is
// refused at once.
func RefusingAddr(t testing.TB) string {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(Loopback, strconv.Itoa(port))
}

// Blackhole is a loopback address that accepts TCP connections and then
// never says a word, until the test ends.
func Blackhole(t testing.TB) string {
	t.Helper()
	addr, _ := BlackholeAccepts(t)
	return addr
}

// BlackholeAccepts is Blackhole, and a channel that gets a value for each
// connection it accepted (so a test waits for a client to be stuck there
// instead of sleeping).
func BlackholeAccepts(t testing.TB) (string, <-chan struct{}) {
	t.Helper()
	accepted := make(chan struct{}, 64)
	ln, err := net.Listen("tcp", net.JoinHostPort(Loopback, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), accepted
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(Loopback, "0"))
	if err != nil {
		return 0, fmt.Errorf("sshtest: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// quoteConf quotes a value for sshd_config/ssh_config.
func quoteConf(s string) string { return `"` + s + `"` }

func tail(s string, n int) string {
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// LogLines returns the lines of the sshd log matching substr, for tests
// that assert what the server saw.
func (s *Server) LogLines(substr string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s.Log()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			out = append(out, sc.Text())
		}
	}
	return out
}
