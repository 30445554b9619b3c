package sshx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/sudo"
	"github.com/rexconsole/rex/internal/version"
)

// Conn is a ready rexd session on a target over SSH.
type Conn struct {
	Name    string // the target's display name
	Client  *rexclient.Client
	Session *rexclient.Session
	SSH     *ssh.Client
	Info    BootstrapInfo

	conn      *countingConn
	closeOnce sync.Once
	closeErr  error

	// For Lane: the Dialer, rexd's extra arguments, and whether rexd
	// runs as another user.
	d      *Dialer
	args   []string
	became bool
	// hostKey is the host key this connection verified (under mu): a
	// lane's own connection must show the very same one.
	hostKey ssh.PublicKey

	// For Resume: the target, and the SSH connection of now (mu).
	target Target
	mu     sync.Mutex
}

// LaneNice is the nice value of a bulk lane's rexd (rexd --nice): a
// transfer yields the CPU to interactive work (a terminal's echo) on a busy
// host. A lane runs no commands of the user's, only transfers.
const LaneNice = "10"

// ErrNoLane is Lane's answer on a connection that cannot start a second
// rexd without asking anyone (one that became another user through sudo:
// rex does not keep the password).
var ErrNoLane = errors.New("no second rexd on this connection")

// Lane starts another rexd for bulk transfers and opens a session on it.
// It runs over an SSH connection of its own to the same host (its own TCP
// stream and its own sshd process), dialled with what this connection
// used: the host key it verified is the only one accepted, keys already
// unlocked are reused, so nothing is asked again. A push there never
// queues ahead of keystrokes, neither in rex's stream to rexd, where a
// message is written whole, nor in the one TCP connection and sshd that
// the channels of a connection share. When a second connection cannot be
// made (the server refuses it), the lane is a second session channel of
// this connection instead.
func (c *Conn) Lane(ctx context.Context) (*rexclient.Client, *rexclient.Session, error) {
	if c.d == nil || c.became {
		return nil, nil, ErrNoLane
	}
	c.mu.Lock()
	sshc, pin := c.SSH, c.hostKey
	c.mu.Unlock()
	if pin != nil {
		// Its own sshd serves only the lane: rexd lowers that one too.
		rc, sess, err := c.ownLane(ctx, pin, append(slices.Clip(c.args), "--nice", LaneNice, "--nice-ssh"))
		// Another key on the second stream is a man in the middle, not a
		// refusal: say so rather than fall back in silence.
		if err == nil || ctx.Err() != nil || errors.Is(err, ErrHostKeyChanged) {
			return rc, sess, err
		}
	}
	rc, sess, _, err := c.d.bootstrap(ctx, sshc, c.Name, launchOpts{args: append(slices.Clip(c.args), "--nice", LaneNice)})
	return rc, sess, err
}

// ownLane dials a connection for a lane, pinned to the host key pin, and
// starts rexd on it; the connection ends with that rexd's client.
func (c *Conn) ownLane(ctx context.Context, pin ssh.PublicKey, args []string) (*rexclient.Client, *rexclient.Session, error) {
	e, err := c.d.resolve(c.target)
	if err != nil {
		return nil, nil, err
	}
	e.pin = pin
	b := newBudget(e.timeout, e.timeoutFrom)
	dl, err := c.d.dial(ctx, e, b, 0)
	if err != nil {
		return nil, nil, err
	}
	bctx, stop := b.context(ctx)
	rc, sess, _, err := c.d.bootstrap(bctx, dl.client, c.Name, launchOpts{args: args})
	stop()
	if err != nil {
		dl.client.Close()
		return nil, nil, err
	}
	go func() {
		<-rc.Done()
		dl.client.Close()
	}()
	return rc, sess, nil
}

// Connect dials t, bootstraps rexd and opens a session.
func (d *Dialer) Connect(ctx context.Context, t Target) (*Conn, error) {
	// Reading the rexd builds' manifests overlaps the handshake.
	go d.loadBuilds()
	dl, err := d.dialTarget(ctx, t)
	if err != nil {
		return nil, err
	}
	// Bootstrapping spends what is left of the connect timeout, except
	// while rexd itself is copied (a transfer, which keepalives bound) and
	// while the operator is asked for a sudo password.
	lo := launchOpts{args: t.RexdArgs, first: t.First}
	if t.Become != "" {
		lo.as = &become{user: t.Become}
	} else {
		// A connection through sudo cannot be resumed without asking for
		// the password again: it keeps REXD v1's rule.
		lo.grace = t.ResumeGrace
	}
	bctx, stop := dl.b.context(ctx)
	rc, sess, info, err := d.bootstrap(bctx, dl.client, dl.e.name, lo)
	timedOut := stop()
	if err != nil {
		switch {
		case ctx.Err() == nil && timedOut && errors.Is(err, rexclient.ErrMayHaveStarted):
			err = newError(dl.e.name, ErrTimeout, err, fmt.Sprintf(
				"connect %s (%s): rexd did not answer within %s (%s), though the login worked and the command went out: it may have started there and was stopped when rex gave up, so check before running it again (allow more with --connect-timeout)",
				dl.e.name, dl.e.addr(), dl.b.timeout, dl.b.from))
		case ctx.Err() == nil && timedOut:
			err = newError(dl.e.name, ErrTimeout, err, fmt.Sprintf(
				"connect %s (%s): rexd was not ready within %s (%s), though the login worked; the host or the network is slow (allow more with --connect-timeout), or the host cannot start a command for rex (log in with ssh and run true to see why)",
				dl.e.name, dl.e.addr(), dl.b.timeout, dl.b.from))
		}
		if lo.as != nil && lo.as.password != nil && errors.Is(err, sudo.ErrWrongPassword) && d.opts.SudoRefused != nil {
			d.opts.SudoRefused(lo.as.password)
		}
		dl.client.Close()
		d.state(dl.e.name, StateFailed, err)
		return nil, err
	}
	d.state(dl.e.name, StateReady, nil)
	return &Conn{Name: dl.e.name, Client: rc, Session: sess, SSH: dl.client, Info: info, conn: dl.conn,
		d: d, args: t.RexdArgs, became: t.Become != "", target: t, hostKey: dl.e.key}, nil
}

// Resume carries a dropped connection on: it dials the target again,
// starts the cached rexd, which relays to the rexd that kept the
// sessions, and resumes them there (rexclient.Client.Resume). An error
// leaves the connection dropped, to try again; a refusal from rexd (the
// grace ran out) ends it.
func (c *Conn) Resume(ctx context.Context) error {
	if !c.Client.Resumable() {
		return fmt.Errorf("resume %s: the connection has no resumable session", c.Name)
	}
	d := c.d
	builds, err := d.loadBuilds()
	if err != nil {
		return err
	}
	dl, err := d.dialTarget(ctx, c.target)
	if err != nil {
		return err
	}
	account := dl.client.User() + "@" + dl.client.RemoteAddr().String() + " " + dl.e.name
	lo := launchOpts{args: c.args, resume: func(r io.Reader, w io.Writer, cl io.Closer) error {
		return c.Client.Resume(ctx, r, w, cl)
	}}
	bctx, stop := dl.b.context(ctx)
	l, err := d.launch(bctx, dl.client, dl.e.name, "run", builds, &lo, d.knownArgs(account, builds)...)
	if err == nil && !l.resumed && l.header.exec == "" && strings.HasPrefix(l.header.dir, "/") {
		// No verified rexd was left in the cache (removed meanwhile), so
		// the script probed instead: copy it again and relay through the
		// fresh copy, rather than fail every attempt until the grace ends.
		l, err = d.relaunchFresh(bctx, dl.client, dl.e.name, builds, l.header, &lo)
	}
	stop()
	if err == nil && !l.resumed {
		err = l.err
		if err == nil {
			err = fmt.Errorf("rexd did not start")
		}
		err = newError(dl.e.name, ErrBootstrap, err, fmt.Sprintf("resume the sessions on %s: %v", dl.e.name, err))
	}
	if err != nil {
		dl.client.Close()
		d.state(dl.e.name, StateFailed, err)
		return err
	}
	d.state(dl.e.name, StateReady, nil)
	c.mu.Lock()
	old := c.SSH
	c.SSH, c.conn, c.hostKey = dl.client, dl.conn, dl.e.key
	c.mu.Unlock()
	old.Close() // the dead one
	return nil
}

// relaunchFresh copies rexd into the cache directory a probe found (h)
// and launches that copy: Resume's way on when the cached rexd is gone.
func (d *Dialer) relaunchFresh(ctx context.Context, client *ssh.Client, name string, builds []build, h header, lo *launchOpts) (*launch, error) {
	b := pickBuild(builds, h.uname)
	if b.SHA256 == "" {
		return nil, d.probeError(name, h, exitUnsupported, "")
	}
	_, _, stamp, err := d.install(ctx, client, name, h.dir, b, h.gzip)
	if err != nil {
		return nil, err
	}
	fresh := path.Join(h.dir, b.entry, "rexd")
	extra := []string{"fresh=" + fresh}
	if stamp != "" {
		extra = append(extra, "fast="+fresh+"="+stamp, "fastsum="+b.SHA256)
	}
	return d.launch(ctx, client, name, "run", builds, lo, extra...)
}

// used reports to OnState how the use of a dialled connection ended.
func (d *Dialer) used(name string, err *error) {
	if *err != nil {
		d.state(name, StateFailed, *err)
		return
	}
	d.state(name, StateReady, nil)
}

// Close ends the session (rexd stops the processes that were not
// detached) and the SSH connection.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		if c.Client.Idle() {
			// Nothing runs on rexd (a one-shot run's command has
			// ended): cutting the connection ends it at once, as the
			// end of its input, and spares the round trip of waiting
			// for it to confirm.
			c.mu.Lock()
			sshc := c.SSH
			c.mu.Unlock()
			sshc.Close()
			c.Client.Close()
			return
		}
		done := make(chan struct{})
		go func() {
			c.Client.Close()
			close(done)
		}()
		// A peer that no longer answers cannot end the session politely:
		// closing the connection ends it for sure.
		select {
		case <-done:
		case <-time.After(closeGrace + time.Second):
		}
		c.mu.Lock()
		sshc := c.SSH
		c.mu.Unlock()
		if err := sshc.Close(); err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "use of closed") {
			c.closeErr = fmt.Errorf("close connection to %s: %w", c.Name, err)
		}
		<-done
	})
	return c.closeErr
}

// Done is closed when the connection has ended (closed, lost, or its
// keepalives went unanswered).
func (c *Conn) Done() <-chan struct{} { return c.Client.Done() }

// BytesSent is what this connection wrote to the network so far.
func (c *Conn) BytesSent() int64 { return c.conn.out.Load() }

// BytesReceived is what this connection read from the network so far.
func (c *Conn) BytesReceived() int64 { return c.conn.in.Load() }

// CheckResult is what `rex device check` reports about a target.
type CheckResult struct {
	Target    string
	Addr      string // host:port dialed
	User      string
	Handshake time.Duration // TCP connect, SSH handshake and authentication
	RTT       time.Duration // one SSH round trip
	Uname     string        // `uname -sm`
	Platform  string        // "linux/amd64"; "" when rex does not know it
	Supported bool          // this rex carries rexd for Platform
	// RexdPath is the cached rexd of this rex version, "" if none;
	// RexdVersion its `--version` line; Current whether it is the very
	// build this rex would upload.
	RexdPath    string
	RexdVersion string
	Current     bool
	// Others are rexd binaries of other versions found in the cache.
	Others []string
}

// Check connects to t and reports reachability, authentication, platform
// and the cached rexd, without uploading anything. Failing to reach or log
// in is the error.
func (d *Dialer) Check(ctx context.Context, t Target) (_ CheckResult, err error) {
	go d.loadBuilds()
	start := time.Now()
	dl, err := d.dialTarget(ctx, t)
	if err != nil {
		name := t.Name
		if name == "" {
			name = t.Host
		}
		return CheckResult{Target: name}, err
	}
	defer d.used(dl.e.name, &err)
	defer dl.client.Close()
	r := CheckResult{Target: dl.e.name, Addr: dl.e.addr(), User: dl.e.user, Handshake: time.Since(start)}
	rtt := time.Now()
	if _, _, err := dl.client.SendRequest("keepalive@openssh.com", true, nil); err != nil {
		return r, newError(r.Target, ErrUnreachable, err, fmt.Sprintf("check %s: the connection broke after login: %v", r.Target, err))
	}
	r.RTT = time.Since(rtt)
	builds, _ := d.loadBuilds() // without builds the check still reports the rest
	out, stderr, status, err := run(ctx, dl.client, bootCommand("check", builds, nil, nil), nil)
	if err != nil || status != 0 {
		if err == nil {
			err = fmt.Errorf("exit status %d", status)
		}
		return r, newError(r.Target, ErrBootstrap, err, fmt.Sprintf("check %s: the remote shell failed: %v%s; check that /bin/sh works for that account", r.Target, err, oneSentence(stderr)))
	}
	h := parseHeader(lines(out))
	r.Uname = h.uname
	if goos, goarch := platformOf(h.uname); goos != "" && goarch != "" {
		r.Platform = goos + "/" + goarch
	}
	b := pickBuild(builds, h.uname)
	r.Supported = b.entry != ""
	r.RexdPath, r.RexdVersion = h.cached, h.version
	if f := strings.Fields(h.version); b.entry != "" && len(f) == 3 && f[0] == "rexd" {
		r.Current = f[1] == version.Version && f[2] == b.SHA256
	}
	for _, f := range h.found {
		if f != h.cached {
			r.Others = append(r.Others, f)
		}
	}
	return r, nil
}

// Clean removes this version's rexd cache directories (every build hash)
// from t and returns what it removed.
func (d *Dialer) Clean(ctx context.Context, t Target) (_ []string, err error) {
	dl, err := d.dialTarget(ctx, t)
	if err != nil {
		return nil, err
	}
	defer d.used(dl.e.name, &err)
	defer dl.client.Close()
	out, stderr, status, err := run(ctx, dl.client, bootCommand("clean", nil, nil, nil), nil)
	if err != nil || status != 0 {
		if err == nil {
			err = fmt.Errorf("exit status %d", status)
		}
		return nil, newError(dl.e.name, ErrBootstrap, err, fmt.Sprintf("clean %s: the remote shell failed: %v%s; check that /bin/sh works for that account", dl.e.name, err, oneSentence(stderr)))
	}
	return parseHeader(lines(out)).removed, nil
}
