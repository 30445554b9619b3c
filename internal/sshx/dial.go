package sshx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"

	"github.com/rexconsole/rex/internal/version"
)

// maxHandshakeAttempts bounds retries of a handshake the server dropped
// (the connect timeout bounds them too).
const maxHandshakeAttempts = 20

// Dial connects and authenticates to t, through its ProxyJump hops if any
// (host keys are checked on every hop). The returned client sends
// keepalives and closes itself when the server stops answering them.
func (d *Dialer) Dial(ctx context.Context, t Target) (*ssh.Client, error) {
	c, err := d.dialTarget(ctx, t)
	if err != nil {
		return nil, err
	}
	d.state(c.e.name, StateReady, nil)
	return c.client, nil
}

// dialed is a client and the byte counters of its connection.
type dialed struct {
	client *ssh.Client
	conn   *countingConn
	e      *endpoint
	b      *budget // what is left of the connect timeout
}

// dialTarget dials t. A failure is reported to OnState here; the caller
// reports how a successful dial's use ends (ready or failed).
func (d *Dialer) dialTarget(ctx context.Context, t Target) (*dialed, error) {
	e, err := d.resolve(t)
	if err != nil {
		name := t.Name
		if name == "" {
			name = t.Host
		}
		d.state(name, StateFailed, err)
		return nil, err
	}
	d.state(e.name, StateConnecting, nil)
	b := newBudget(e.timeout, e.timeoutFrom)
	dl, err := d.dial(ctx, e, b, 0)
	if err != nil {
		d.state(e.name, StateFailed, err)
		return nil, err
	}
	dl.b = b
	return dl, nil
}

func (d *Dialer) state(target, state string, err error) {
	if d.opts.OnState != nil {
		d.opts.OnState(target, state, err)
	}
}

func (d *Dialer) dial(ctx context.Context, e *endpoint, b *budget, depth int) (*dialed, error) {
	var via *ssh.Client
	if e.jump != "" {
		if depth >= maxJumps {
			return nil, newError(e.name, ErrConfig, nil, fmt.Sprintf("the ProxyJump chain of %s is longer than %d hops; check ssh_config for a loop", e.name, maxJumps))
		}
		hops, err := parseJump(e.jump)
		if err != nil {
			return nil, newError(e.name, ErrConfig, err, fmt.Sprintf("ProxyJump of %s: %v", e.name, err))
		}
		last := hops[len(hops)-1]
		if len(hops) > 1 {
			last.Jump = joinJump(hops[:len(hops)-1])
		}
		hop, err := d.resolve(last)
		if err != nil {
			return nil, err
		}
		hop.name = fmt.Sprintf("jump host %s for %s", last.Name, e.name)
		if !hop.explicitIdentity && e.keyOverride != "" {
			// A device's key is tried on its jump hosts too, after their own.
			hop.identities = append(hop.identities, e.keyOverride)
		}
		hd, err := d.dial(ctx, hop, b, depth+1)
		if err != nil {
			return nil, err
		}
		via = hd.client
	}
	c, conn, err := d.handshake(ctx, e, b, via)
	if err != nil {
		if via != nil {
			via.Close()
		}
		return nil, err
	}
	if via != nil {
		go func() {
			c.Wait()
			via.Close()
		}()
	}
	go keepalive(c, e.aliveInterval, e.aliveCount)
	return &dialed{client: c, conn: conn, e: e}, nil
}

// handshake makes one SSH connection to e (through via when set) within the
// budget, holding a handshake slot, and retries a handshake the server
// dropped before showing its host key (OpenSSH's MaxStartups).
func (d *Dialer) handshake(ctx context.Context, e *endpoint, b *budget, via *ssh.Client) (*ssh.Client, *countingConn, error) {
	// Waiting for a slot is queueing, not the target being slow: the
	// budget runs only while a slot is held.
	select {
	case d.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, d.ctxError(ctx, e, b)
	}
	b.resume()
	defer func() {
		b.pause()
		<-d.sem
	}()
	for attempt := 1; ; attempt++ {
		c, conn, retry, err := d.handshakeOnce(ctx, e, b, via)
		if err == nil {
			return c, conn, nil
		}
		if !retry || attempt >= maxHandshakeAttempts {
			return nil, nil, err
		}
		// Up to 50ms, 100ms, 200ms... 1s, fully jittered, so a burst
		// spreads out instead of hitting MaxStartups again together.
		ceiling := min(50*time.Millisecond<<min(attempt-1, 5), time.Second)
		pause := time.Duration(rand.Int64N(int64(ceiling)))
		if b.remaining() < pause+50*time.Millisecond {
			return nil, nil, err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, nil, d.ctxError(ctx, e, b)
		}
	}
}

func (d *Dialer) handshakeOnce(ctx context.Context, e *endpoint, b *budget, via *ssh.Client) (_ *ssh.Client, _ *countingConn, retry bool, _ error) {
	addr := e.addr()
	dctx, cancel := context.WithDeadline(ctx, b.deadline())
	var raw net.Conn
	var err error
	if via == nil {
		var nd net.Dialer
		raw, err = nd.DialContext(dctx, "tcp", addr)
	} else {
		raw, err = via.DialContext(dctx, "tcp", addr)
	}
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, false, d.ctxError(ctx, e, b)
		}
		return nil, nil, false, dialError(e, b, err, via != nil)
	}
	conn := &countingConn{Conn: raw, bufs: &d.readBufs}
	hk, algos, err := d.hostKeys(ctx, e)
	if err != nil {
		conn.Close()
		return nil, nil, false, err
	}
	hk.b = b
	plan := d.authPlan(ctx, e, b)
	defer plan.close()
	cfg := &ssh.ClientConfig{
		User: e.user,
		Auth: []ssh.AuthMethod{ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
			return plan.signers, nil
		})},
		HostKeyCallback:   hk.check,
		HostKeyAlgorithms: algos,
		ClientVersion:     "SSH-2.0-rex_" + version.Version,
	}
	// Out of time, both the server and the agent (signing) are let go.
	stop := b.watch(ctx, closers{conn, plan})
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	fired := stop()
	if err == nil && fired {
		sc.Close()
		err = errors.New("deadline")
	}
	if err != nil {
		conn.Close()
		switch {
		case hk.err != nil:
			return nil, nil, false, hk.err
		case ctx.Err() != nil:
			return nil, nil, false, d.ctxError(ctx, e, b)
		case fired:
			return nil, nil, false, timeoutError(e, b)
		case plan.signErr != nil:
			return nil, nil, false, newError(e.name, ErrAuth, plan.signErr, fmt.Sprintf("authenticate as %s to %s (%s): %v", e.user, e.name, addr, plan.signErr))
		case !hk.seen && isDropped(err):
			return nil, nil, true, newError(e.name, ErrUnreachable, err, fmt.Sprintf(
				"connect %s (%s): the server closed the connection before the SSH handshake; it may be overloaded (MaxStartups) or not an SSH server", e.name, addr))
		}
		return nil, nil, false, handshakeError(e, plan, err)
	}
	return ssh.NewClient(sc, chans, reqs), conn, false, nil
}

// closers closes each of its closers.
type closers []io.Closer

func (cs closers) Close() error {
	for _, c := range cs {
		c.Close()
	}
	return nil
}

// isDropped says whether err is a connection the server closed or reset.
func isDropped(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

func dialError(e *endpoint, b *budget, err error, viaJump bool) error {
	addr := e.addr()
	var dnsErr *net.DNSError
	var chErr *ssh.OpenChannelError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return timeoutError(e, b)
	case errors.Is(err, syscall.ECONNREFUSED):
		return newError(e.name, ErrUnreachable, err, fmt.Sprintf("connect %s (%s): connection refused; is sshd running there?", e.name, addr))
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return newError(e.name, ErrUnreachable, err, fmt.Sprintf("connect %s (%s): no route to host; check the address and the network", e.name, addr))
	case errors.As(err, &dnsErr):
		return newError(e.name, ErrUnreachable, err, fmt.Sprintf("connect %s: cannot resolve host name %s; check the name or set HostName", e.name, e.host))
	case viaJump && errors.As(err, &chErr):
		msg := strings.ToLower(chErr.Message)
		if msg == "" {
			msg = chErr.Reason.String()
		}
		hint := "check the address and that the jump host may forward to it (AllowTcpForwarding)"
		if strings.Contains(msg, "refused") {
			hint = "is sshd running there?"
		}
		return newError(e.name, ErrUnreachable, err, fmt.Sprintf("connect %s (%s) through its jump host: %s; %s", e.name, addr, msg, hint))
	}
	return newError(e.name, ErrUnreachable, err, fmt.Sprintf("connect %s (%s): %v", e.name, addr, err))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func timeoutError(e *endpoint, b *budget) error {
	return newError(e.name, ErrTimeout, context.DeadlineExceeded, fmt.Sprintf(
		"connect %s (%s): no answer within %s (%s); check the address, the network and any firewall", e.name, e.addr(), b.timeout, b.from))
}

func (d *Dialer) ctxError(ctx context.Context, e *endpoint, b *budget) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return timeoutError(e, b)
	}
	return newError(e.name, ErrTimeout, ctx.Err(), fmt.Sprintf("connect %s (%s): canceled", e.name, e.addr()))
}

func handshakeError(e *endpoint, plan *authPlan, err error) error {
	msg := err.Error()
	target := fmt.Sprintf("as %s to %s (%s)", e.user, e.name, e.addr())
	switch {
	case strings.Contains(msg, "unable to authenticate") || strings.Contains(msg, "Too many authentication failures"):
		if len(plan.signers) == 0 {
			var why []string
			for _, m := range plan.missing {
				why = append(why, m+" does not exist")
			}
			why = append(why, plan.broken...)
			if len(why) == 0 {
				why = append(why, "no ssh-agent key and none of ~/.ssh/id_ed25519, id_ecdsa, id_rsa")
			}
			return newError(e.name, ErrAuth, err, fmt.Sprintf("authenticate %s: no key to offer (%s); give the device a key (--key) or load one into ssh-agent", target, strings.Join(why, "; ")))
		}
		if strings.Contains(msg, "Too many authentication failures") {
			return newError(e.name, ErrAuth, err, fmt.Sprintf("authenticate %s: the server gave up after too many keys (offered: %s); set IdentityFile and IdentitiesOnly yes for this host so rex offers only the right key", target, plan.describe()))
		}
		return newError(e.name, ErrAuth, err, fmt.Sprintf("authenticate %s: the server accepted none of the keys offered (%s); check the user name and that one of these keys is in its authorized_keys", target, plan.describe()))
	case strings.Contains(msg, "no common algorithm for host key"):
		return newError(e.name, ErrHostKeyChanged, err, fmt.Sprintf("connect %s: the host no longer offers any host key type that known_hosts has for it; if it was reinstalled, run ssh-keygen -R %s and connect again", target, Quote(knownhosts.Normalize(e.hostKeyName()))))
	case strings.Contains(msg, "no common algorithm"):
		return newError(e.name, ErrUnreachable, err, fmt.Sprintf("connect %s: %s; the server's SSH algorithms are too old for rex", target, strings.TrimPrefix(msg, "ssh: handshake failed: ")))
	case isDropped(err):
		return newError(e.name, ErrUnreachable, err, fmt.Sprintf("connect %s: the server closed the connection during the handshake; see its log (sshd) for why", target))
	}
	return newError(e.name, ErrUnreachable, err, fmt.Sprintf("connect %s: %s", target, strings.TrimPrefix(msg, "ssh: ")))
}

// keepalive sends keepalive@openssh.com every interval and closes the
// client when max of them in a row went unanswered (ServerAliveInterval,
// ServerAliveCountMax), so a dead peer cannot hang a connection forever.
func keepalive(c *ssh.Client, interval time.Duration, max int) {
	if interval <= 0 {
		return
	}
	done := make(chan struct{})
	go func() {
		c.Wait()
		close(done)
	}()
	var outstanding atomic.Int32
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if int(outstanding.Load()) >= max {
			c.Close()
			return
		}
		outstanding.Add(1)
		go func() {
			if _, _, err := c.SendRequest("keepalive@openssh.com", true, nil); err == nil {
				outstanding.Store(0)
			}
		}()
	}
}

// budget is the time allowed for a whole handshake (all hops: TCP, SSH,
// authentication). Waiting for a handshake slot or a passphrase does not
// count.
type budget struct {
	timeout time.Duration
	from    string // where timeout came from, for messages

	mu       sync.Mutex
	end      time.Time
	paused   int
	pausedAt time.Time
	changed  chan struct{} // closed when end or paused changes
}

// newBudget returns a budget that has not started: it runs between
// resume and pause.
func newBudget(timeout time.Duration, from string) *budget {
	now := time.Now()
	return &budget{timeout: timeout, from: from, end: now.Add(timeout), paused: 1, pausedAt: now, changed: make(chan struct{})}
}

func (b *budget) deadline() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused > 0 {
		return time.Now().Add(b.end.Sub(b.pausedAt))
	}
	return b.end
}

func (b *budget) remaining() time.Duration { return time.Until(b.deadline()) }

func (b *budget) pause() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused == 0 {
		b.pausedAt = time.Now()
	}
	b.paused++
	b.notifyLocked()
}

func (b *budget) resume() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.paused--
	if b.paused == 0 {
		b.end = b.end.Add(time.Since(b.pausedAt))
	}
	b.notifyLocked()
}

func (b *budget) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// wait blocks until the budget runs out (true) or done or ctx ends (false).
func (b *budget) wait(ctx context.Context, done <-chan struct{}) bool {
	for {
		b.mu.Lock()
		paused, end, changed := b.paused > 0, b.end, b.changed
		b.mu.Unlock()
		var t *time.Timer
		var tc <-chan time.Time
		if !paused {
			left := time.Until(end)
			if left <= 0 {
				return true
			}
			t = time.NewTimer(left)
			tc = t.C
		}
		select {
		case <-tc:
		case <-changed:
		case <-done:
		case <-ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
		select {
		case <-done:
			return false
		case <-ctx.Done():
			return false
		default:
		}
	}
}

// watch closes c when the budget runs out or ctx ends, until the returned
// stop is called; stop reports whether c was closed.
func (b *budget) watch(ctx context.Context, c io.Closer) (stop func() bool) {
	done := make(chan struct{})
	var fired atomic.Bool
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		b.wait(ctx, done)
		select {
		case <-done:
		default: // out of time, or ctx ended
			fired.Store(true)
			c.Close()
		}
	}()
	return func() bool {
		close(done)
		<-finished
		return fired.Load()
	}
}

type budgetKey struct{}

// context returns a context that ends when the budget runs out (it runs
// from now, until paused) or ctx ends, and carries the budget so that
// work inside can pause it (pauseBudget). stop ends it and reports
// whether the budget ran out.
func (b *budget) context(ctx context.Context) (_ context.Context, stop func() bool) {
	b.resume()
	bctx, cancel := context.WithCancel(context.WithValue(ctx, budgetKey{}, b))
	done := make(chan struct{})
	finished := make(chan struct{})
	var fired atomic.Bool
	go func() {
		defer close(finished)
		if b.wait(ctx, done) {
			fired.Store(true)
			cancel()
		}
	}()
	return bctx, func() bool {
		close(done)
		<-finished
		cancel()
		b.pause()
		return fired.Load()
	}
}

// pauseBudget stops the connect budget carried by ctx, if any, until the
// returned func is called: for work that is a transfer, not waiting.
func pauseBudget(ctx context.Context) (resume func()) {
	b, ok := ctx.Value(budgetKey{}).(*budget)
	if !ok {
		return func() {}
	}
	b.pause()
	return b.resume
}

// countingConn counts the bytes a connection carried.
type countingConn struct {
	net.Conn
	in, out atomic.Int64

	// Reads while a stream flows go through a big buffer (see Read).
	bufs      *sync.Pool // of *[]byte of connReadBuffer bytes, the Dialer's
	big       *[]byte    // held only while it has bytes not yet read
	pend      []byte     // those bytes
	streaming bool       // the last read of the socket filled what it was given
	err       error      // what the socket said after bytes still pending
}

// connReadBuffer is how much one read of the socket may take while a
// stream flows. x/crypto/ssh reads through a 4 KiB buffer: every packet of
// a stream cost two or more reads (the length, then the rest), 17,000
// reads and as many wakeups for 256 MiB of output where ssh(1) makes 1,300.
const connReadBuffer = 256 << 10

// Read reads the socket straight into p until a read fills p (more is
// likely waiting); from then on it reads up to connReadBuffer at once into
// a buffer from the Dialer's pool, and hands it out piece by piece. The
// buffer goes back to the pool as soon as it is empty, so an idle
// connection, blocked in a read, holds none, with one exception: when the
// last read before a pause happened to fill its buffer exactly, the next
// one waits holding a buffer until bytes come. x/crypto/ssh reads from one
// goroutine at a time (version exchange, then its reader and key
// exchange, handing over through channels).
func (c *countingConn) Read(p []byte) (int, error) {
	if len(c.pend) > 0 {
		n := copy(p, c.pend)
		c.pend = c.pend[n:]
		if len(c.pend) == 0 {
			c.release()
		}
		return n, nil
	}
	if c.err != nil {
		return 0, c.err
	}
	if !c.streaming || c.bufs == nil || len(p) >= connReadBuffer {
		n, err := c.socketRead(p)
		c.streaming = n == len(p)
		return n, err
	}
	big, _ := c.bufs.Get().(*[]byte)
	if big == nil {
		b := make([]byte, connReadBuffer)
		big = &b
	}
	n, err := c.socketRead(*big)
	c.streaming = n == len(*big)
	c.big, c.pend = big, (*big)[:n]
	k := copy(p, c.pend)
	c.pend = c.pend[k:]
	if len(c.pend) == 0 {
		c.release()
		return k, err
	}
	c.err = err // after the bytes still pending
	return k, nil
}

func (c *countingConn) release() {
	if c.big != nil {
		c.bufs.Put(c.big)
		c.big, c.pend = nil, nil
	}
}

// socketRead reads the socket itself, counting what arrives.
func (c *countingConn) socketRead(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}
