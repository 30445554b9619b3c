package sshx

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/sudo"
	"github.com/rexconsole/rex/internal/version"
)

// BootstrapInfo says how rexd was made ready on a target.
type BootstrapInfo struct {
	Platform      string        // "linux/amd64", as rexd reports it
	RemotePath    string        // the rexd that runs
	Cached        bool          // it was there already
	Hashed        bool          // the cached rexd was hashed on the target before it ran
	Uploaded      bool          // rex copied it now
	BytesUploaded int64         // file bytes written (0 when cached)
	Method        string        // "stdin+gzip" or "stdin" (one exec), "sftp" or "exec" (no SHA-256 tool there; "exec": no SFTP either) or "sudo" (into another user's cache), when uploaded
	Duration      time.Duration // of the whole bootstrap
}

// build is one rexd build and where it lives on a target.
type build struct {
	payload.Binary
	entry  string   // cache directory name: <version>-<hash12>
	unames []string // `uname -sm` outputs of its platform
}

// validVersion keeps the version safe as a remote directory name.
var validVersion = regexp.MustCompile(`^[0-9A-Za-z._+-]+$`)

// loadBuilds learns every rexd build of the payload once: its hash and
// size, from the manifest `make payload` wrote beside it (the build itself
// is read only by install). Connect starts this while the handshake runs.
func (d *Dialer) loadBuilds() ([]build, error) {
	d.payloadOnce.Do(func() {
		if !validVersion.MatchString(version.Version) {
			d.buildsErr = fmt.Errorf("version %q cannot name a directory", version.Version)
			return
		}
		for _, p := range d.opts.Payload.Platforms() {
			goos, goarch, _ := strings.Cut(p, "/")
			names := unameNames(goos, goarch)
			if len(names) == 0 {
				continue
			}
			bin, err := d.opts.Payload.Rexd(goos, goarch)
			if err != nil {
				d.buildsErr = err
				return
			}
			d.builds = append(d.builds, build{Binary: bin, entry: version.Version + "-" + bin.SHA256[:12], unames: names})
		}
		if len(d.builds) == 0 {
			d.buildsErr = fmt.Errorf("%w: this rex carries no rexd builds; build it with make build", payload.ErrUnsupported)
		}
	})
	return d.builds, d.buildsErr
}

func (d *Dialer) platforms() string {
	ps := d.opts.Payload.Platforms()
	if len(ps) == 0 {
		return "none"
	}
	return strings.Join(ps, ", ")
}

// Bootstrap makes rexd run on the target behind client and opens a
// session: the cached rexd when it is there and its build hash is right,
// else a fresh upload. name labels messages and stderr.
func (d *Dialer) Bootstrap(ctx context.Context, client *ssh.Client, name string) (*rexclient.Client, *rexclient.Session, BootstrapInfo, error) {
	return d.bootstrap(ctx, client, name, launchOpts{})
}

// become is rexd started through sudo as user, with the password to give
// sudo when it asks (nil: sudo -n, which never asks).
type become struct {
	user     string
	password []byte
}

// root says whether sudo makes the superuser, who runs the login user's
// own verified rexd where it is; any other user cannot read the login
// user's cache and gets a copy in a cache of its own.
func (b *become) root() bool { return b.user == "root" || b.user == "#0" }

// launchOpts are what one target adds to how rexd starts.
type launchOpts struct {
	as   *become
	args []string // after the Dialer's RexdArgs
	// grace, when set, opens the session resumable (resume_grace_ms).
	grace time.Duration
	// first, when set, is the first command to run once rexd is up: it
	// is sent with session.open (rexclient.OpenSessionExec), and what
	// became of it is recorded in it.
	first *rexclient.FirstExec
	// resume, when set, takes the started rexd's stdio in place of a new
	// client and session: a dropped connection carries on over it.
	resume func(r io.Reader, w io.Writer, c io.Closer) error
}

func (d *Dialer) bootstrap(ctx context.Context, client *ssh.Client, name string, lo launchOpts) (*rexclient.Client, *rexclient.Session, BootstrapInfo, error) {
	start := time.Now()
	var info BootstrapInfo
	builds, err := d.loadBuilds()
	if err != nil {
		return nil, nil, info, newError(name, ErrBootstrap, err, fmt.Sprintf("bootstrap rexd on %s: %v", name, err))
	}
	fail := func(err error) (*rexclient.Client, *rexclient.Session, BootstrapInfo, error) {
		return nil, nil, info, err
	}

	account := client.User() + "@" + client.RemoteAddr().String() + " " + name
	other := lo.as != nil && !lo.as.root() // rexd runs from that user's own cache
	if other {
		account += " as " + lo.as.user
	}
	l, err := d.launch(ctx, client, name, "run", builds, &lo, d.knownArgs(account, builds)...)
	if err != nil {
		return fail(err)
	}
	d.remember(account, l.header)
	if err := rootDirError(name, l); err != nil {
		return fail(err)
	}
	if l.session != nil {
		if d.hashOK(l, builds) {
			info.Cached, info.Platform, info.RemotePath = true, l.session.Info.Platform, l.header.ran()
			info.Hashed = slices.Contains(l.header.verified, l.header.exec)
			info.Duration = time.Since(start)
			return l.client, l.session, info, nil
		}
		l.client.Close() // a stale or damaged copy: replace it
	}
	h := l.header
	switch {
	case h.uname == "" && other:
		// The same, in that user's own cache: the probe runs through sudo.
		pl, err := d.launch(ctx, client, name, "probe", builds, &lo)
		if err != nil {
			return fail(err)
		}
		h = pl.header
		if err := d.probeError(name, h, pl.status, pl.stderr); err != nil {
			return fail(err)
		}
	case h.uname == "":
		// A cached rexd ran but was stale or damaged (or the shell never
		// got that far): probe afresh and replace it. A fresh copy that
		// fails too is reported below, with its stderr.
		h, err = d.probe(ctx, client, name, builds)
		if err != nil {
			return fail(err)
		}
	default:
		if err := d.probeError(name, h, l.status, l.stderr); err != nil {
			return fail(err)
		}
	}
	b := pickBuild(builds, h.uname)
	if b.SHA256 == "" {
		// The target claimed a directory for a platform rex has no
		// build of (bootScript itself exits 4 then): say which.
		return fail(d.probeError(name, h, exitUnsupported, ""))
	}
	d.state(name, StateBootstrapping, nil)
	l = nil
	canGzip := h.gzip
	if lo.as == nil && h.gzip {
		sl, n, err := d.installStart(ctx, client, name, h.dir, b, &lo)
		if err != nil {
			return fail(err)
		}
		if sl.header.exec != "" {
			l = sl
			info.Uploaded, info.BytesUploaded, info.Method = true, n, "stdin+gzip"
		}
		// Else it ended before starting rexd: install and start apart,
		// which says what went wrong; the plain build straight away when
		// it was the gzipped one that failed there.
		switch sl.status {
		case exitInstallNoGzip, exitInstallUnpack, exitInstallDamaged:
			canGzip = false
		}
	}
	if l == nil {
		var (
			n             int64
			method, stamp string
		)
		if other {
			n, method, err = d.installAs(ctx, client, name, h.dir, b, &lo)
		} else {
			n, method, stamp, err = d.install(ctx, client, name, h.dir, b, canGzip)
		}
		if err != nil {
			return fail(err)
		}
		info.Uploaded, info.BytesUploaded, info.Method = true, n, method

		// The copy was hashed on its way in: run it without hashing again.
		fresh := path.Join(h.dir, b.entry, "rexd")
		extra := []string{"fresh=" + fresh}
		if stamp != "" {
			extra = append(extra, "fast="+fresh+"="+stamp, "fastsum="+b.SHA256)
		}
		l, err = d.launch(ctx, client, name, "run", builds, &lo, extra...)
		if err != nil {
			return fail(err)
		}
	}
	d.remember(account, l.header)
	if err := rootDirError(name, l); err != nil {
		return fail(err)
	}
	if l.session == nil {
		if lo.as != nil {
			return fail(newError(name, ErrBootstrap, l.err, fmt.Sprintf(
				"rexd was copied to %s on %s but did not start through sudo as %s (exit status %d)%s; check what sudo allows %s there", h.dir, name, lo.as.user, l.status, oneSentence(l.stderr), lo.as.user)))
		}
		return fail(newError(name, ErrBootstrap, l.err, fmt.Sprintf(
			"rexd was copied to %s on %s but did not start (exit status %d)%s; check that the directory allows executing programs", h.dir, name, l.status, oneSentence(l.stderr))))
	}
	if !d.hashOK(l, builds) {
		l.client.Close()
		return fail(newError(name, ErrBootstrap, nil, fmt.Sprintf(
			"rexd at %s on %s reports build hash %q, not the one just copied; another rex version may be racing for it, so retry", l.header.exec, name, l.session.Info.BuildHash)))
	}
	info.Platform, info.RemotePath = l.session.Info.Platform, l.header.ran()
	info.Duration = time.Since(start)
	return l.client, l.session, info, nil
}

// rootDirError is the error of a launch through sudo as root that found
// no directory safe for root's own copy of rexd (rootScript), else nil.
func rootDirError(name string, l *launch) error {
	if l.session != nil || !l.header.rootFail {
		return nil
	}
	return newError(name, ErrNoCacheDir, l.err, fmt.Sprintf(
		"no directory on %s is safe for root's own copy of rexd, which --sudo runs: %s; make root's ~/.cache/rexd or /tmp/rexd-0 a directory of root with mode 0700 under parents only root can write", name, describeBad(l.header)))
}

// buildHashes are the hashes of builds, for session.open's build_hashes.
func buildHashes(builds []build) []string {
	out := make([]string, 0, len(builds))
	for _, b := range builds {
		out = append(out, b.SHA256)
	}
	return out
}

// knownArgs are the known= arguments of bootScript for an account, and
// fast= and fastsum= ones for the first of them that is one of builds (in
// its version directory, <version>-<hash12>): the cold start's fast path.
func (d *Dialer) knownArgs(account string, builds []build) []string {
	d.verifiedMu.Lock()
	defer d.verifiedMu.Unlock()
	d.readStampsLocked()
	var out []string
	for p, stamp := range d.verified[account] {
		out = append(out, "known="+p+"="+stamp)
	}
	sort.Strings(out)
	for _, a := range out {
		p, stamp := cutStamp(strings.TrimPrefix(a, "known="))
		if path.Base(p) != "rexd" {
			continue
		}
		entry := path.Base(path.Dir(p))
		if i := slices.IndexFunc(builds, func(b build) bool { return b.entry == entry }); i >= 0 {
			return append(out, "fast="+p+"="+stamp, "fastsum="+builds[i].SHA256)
		}
	}
	return out
}

// cutStamp splits "PATH=STAMP" at its last "=" (a stat has none).
func cutStamp(s string) (path, stamp string) {
	i := strings.LastIndexByte(s, '=')
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i+1:]
}

// remember records the rexd a launch ran with its stat: bootScript runs
// one only once it has checked it (hashed, uploaded now, or known).
func (d *Dialer) remember(account string, h header) {
	if h.exec == "" || h.stamp == "" || len(h.exec) > maxStampPath {
		return
	}
	d.verifiedMu.Lock()
	defer d.verifiedMu.Unlock()
	d.readStampsLocked()
	if d.verified[account][h.exec] == h.stamp {
		return
	}
	if d.verified[account] == nil {
		d.verified[account] = map[string]string{}
	}
	d.verified[account][h.exec] = h.stamp
	trimStamps(d.verified[account], h.exec)
	d.writeStampsLocked(account, h.exec, h.stamp)
}

// maxStampAccounts bounds the stamps file: the accounts seen last are kept.
const maxStampAccounts = 4096

// maxStampsPerAccount bounds the rexds remembered for one account (each
// is a known= argument of every boot script there): what a target reports
// is not trusted, and each rex version adds a directory. maxStampPath
// bounds one path (PATH_MAX).
const (
	maxStampsPerAccount = 32
	maxStampPath        = 4096
)

// trimStamps drops stamps of m other than keep's until it holds at most
// maxStampsPerAccount: one dropped costs a hash on its next use.
func trimStamps(m map[string]string, keep string) {
	for p := range m {
		if len(m) <= maxStampsPerAccount {
			return
		}
		if p != keep {
			delete(m, p)
		}
	}
}

// readStampsLocked loads Options.StampsFile once. A missing or unreadable
// file only means hashing again. d.verifiedMu is held.
func (d *Dialer) readStampsLocked() {
	if d.verified == nil {
		d.verified = map[string]map[string]string{}
	}
	if d.stampsRead || d.opts.StampsFile == "" {
		return
	}
	d.stampsRead = true
	for a, m := range loadStamps(d.opts.StampsFile) {
		trimStamps(m, "")
		d.verified[a] = m
	}
}

func loadStamps(file string) map[string]map[string]string {
	var m map[string]map[string]string
	if b, err := os.ReadFile(file); err == nil {
		json.Unmarshal(b, &m)
	}
	return m
}

// writeStampsLocked adds one stamp to Options.StampsFile, merged with what
// other rex processes wrote meanwhile, atomically (a temporary file renamed
// over it). It is a cache: failing to write it costs a hash next time.
func (d *Dialer) writeStampsLocked(account, path, stamp string) {
	file := d.opts.StampsFile
	if file == "" {
		return
	}
	m := loadStamps(file)
	if m == nil {
		m = map[string]map[string]string{}
	}
	if m[account] == nil {
		m[account] = map[string]string{}
	}
	m[account][path] = stamp
	trimStamps(m[account], path)
	for a := range m {
		if len(m) <= maxStampAccounts {
			break
		}
		if a != account {
			delete(m, a)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	dir := filepath.Dir(file)
	if os.MkdirAll(dir, 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".rexd-stamps-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), file) != nil {
		os.Remove(tmp.Name())
	}
}

// hashOK says whether the running rexd is the build rex carries for the
// platform it reports (a second check: bootScript hashed the file itself
// before running it).
func (d *Dialer) hashOK(l *launch, builds []build) bool {
	for _, b := range builds {
		if b.Platform() == l.session.Info.Platform {
			return l.session.Info.BuildHash == b.SHA256
		}
	}
	return false
}

func pickBuild(builds []build, uname string) build {
	for _, b := range builds {
		for _, n := range b.unames {
			if n == uname {
				return b
			}
		}
	}
	return build{}
}

// probe runs bootScript's probe mode.
func (d *Dialer) probe(ctx context.Context, client *ssh.Client, name string, builds []build) (header, error) {
	out, stderr, status, err := run(ctx, client, bootCommand("probe", builds, nil, nil), nil)
	if err != nil {
		return header{}, newError(name, ErrBootstrap, err, fmt.Sprintf("bootstrap rexd on %s: probe the target: %v", name, err))
	}
	h := parseHeader(lines(out))
	return h, d.probeError(name, h, status, stderr)
}

// probeError reads the verdict of a probe: nil when a directory was found.
func (d *Dialer) probeError(name string, h header, status int, stderr string) error {
	switch {
	case status == exitDir && h.dir != "" && strings.HasPrefix(h.dir, "/"):
		return nil
	case status == exitUnsupported:
		goos, goarch := platformOf(h.uname)
		if goos == "" || goarch == "" {
			return newError(name, ErrUnsupported, nil, fmt.Sprintf(
				"%s runs %q, a platform rex does not support; this rex carries rexd for %s", name, h.uname, d.platforms()))
		}
		return newError(name, ErrUnsupported, nil, fmt.Sprintf(
			"%s is %s/%s (uname %q), but this rex carries rexd only for %s; build rex with that platform included", name, goos, goarch, h.uname, d.platforms()))
	case status == exitNoDir:
		advice := "make one of them writable and executable"
		if full := spaceDirs(h); len(full) > 0 {
			advice = "free space on " + strings.Join(full, " or ") + ", or make another of them writable and executable"
		}
		return newError(name, ErrNoCacheDir, nil, fmt.Sprintf(
			"no usable directory for rexd on %s: %s; %s, or set XDG_CACHE_HOME for that account", name, describeBad(h), advice))
	}
	return newError(name, ErrBootstrap, nil, fmt.Sprintf(
		"bootstrap rexd on %s: the remote shell failed (exit status %d)%s; check that /bin/sh works for that account", name, status, oneSentence(stderr)))
}

// launch is one attempt to start rexd through bootScript.
type launch struct {
	client  *rexclient.Client
	session *rexclient.Session // nil when rexd did not answer session.open
	header  header
	status  int // the script's exit status when rexd did not start
	stderr  string
	err     error
	resumed bool // launchOpts.resume took it
}

// launch starts rexd through bootScript. Through sudo, it first tries
// sudo -n; when sudo wants a password it asks Options.SudoPassword (once:
// lo keeps it for the relaunch after an upload) and starts again with -S.
func (d *Dialer) launch(ctx context.Context, client *ssh.Client, name, mode string, builds []build, lo *launchOpts, extra ...string) (*launch, error) {
	l, err := d.launchOnce(ctx, client, name, mode, builds, lo, extra...)
	if !errors.Is(err, sudo.ErrPasswordRequired) || lo.as.password != nil {
		return l, err
	}
	if d.opts.SudoPassword == nil {
		return nil, newError(name, ErrBecome, err, fmt.Sprintf(
			"sudo on %s wants a password for %s and there is no way to ask for it here; allow NOPASSWD for rexd, or run rex where it can ask", name, lo.as.user))
	}
	resume := pauseBudget(ctx) // a person typing is not a slow host
	pw, perr := d.opts.SudoPassword(name, lo.as.user)
	resume()
	if perr != nil {
		return nil, newError(name, ErrBecome, perr, fmt.Sprintf("sudo on %s wants a password for %s: %v", name, lo.as.user, perr))
	}
	lo.as.password = pw
	return d.launchOnce(ctx, client, name, mode, builds, lo, extra...)
}

func (d *Dialer) launchOnce(ctx context.Context, client *ssh.Client, name, mode string, builds []build, lo *launchOpts, extra ...string) (*launch, error) {
	args := append(slices.Clip(d.opts.RexdArgs), lo.args...)
	cmd := func(first string) string {
		if first != "" {
			extra = append(slices.Clip(extra), "first="+first)
		}
		return bootCommand(mode, builds, args, lo.as, extra...)
	}
	return d.launchCommand(ctx, client, name, cmd, builds, lo, nil)
}

// launchCommand runs cmd(first), a script that ends by starting rexd, and
// opens a session with it. first, when not empty, is the session.open and
// the first command for rexd's environment (protocol.FirstEnv). before, when not
// nil, has the script's input and header lines first (not through sudo);
// when it fails, rexd did not start and the launch says how the script
// ended.
func (d *Dialer) launchCommand(ctx context.Context, client *ssh.Client, name string, cmd func(first string) string, builds []build, lo *launchOpts, before func(hr *headerReader, stdin io.Writer) error) (*launch, error) {
	tail := &tailBuffer{max: 4096}
	stderr := io.Writer(tail)
	if d.opts.Stderr != nil {
		stderr = io.MultiWriter(tail, &prefixWriter{w: d.opts.Stderr, prefix: name + ": "})
	}
	var watch *sudo.Watcher
	if lo.as != nil {
		watch = sudo.NewWatcher()
		stderr = io.MultiWriter(stderr, watch)
	}
	params := d.openParams()
	if lo.grace > 0 {
		params.ResumeGraceMS = lo.grace.Milliseconds()
	}
	// The first command goes out with session.open (pipelined): a rexd of
	// another build opens nothing, so it never runs there, and on a miss
	// the script, which reads no input, ends without it. One that may
	// show on a command line rides in the exec request itself.
	var (
		rc    *rexclient.Client
		late  *lateConn
		po    *rexclient.PendingOpen
		first string
	)
	if f := lo.first; f != nil && !f.Sent && f.Public && watch == nil && before == nil && lo.resume == nil {
		late = newLateConn()
		rc = rexclient.NewConn(late, late, late)
		params.BuildHashes = buildHashes(builds)
		var err error
		if po, err = rc.SendSessionExec(params, f.Params, f.Opts); err != nil {
			rc.Close()
			return nil, newError(name, ErrBootstrap, err, fmt.Sprintf("bootstrap rexd on %s: %v", name, err))
		}
		first = late.take(maxInlineFirst)
	}
	x, err := startExec(client, cmd(first), stderr)
	if err != nil {
		if rc != nil {
			rc.Close()
		}
		return nil, newError(name, ErrBootstrap, err, fmt.Sprintf("bootstrap rexd on %s: start the remote shell: %v", name, err))
	}
	stdout, stdin, closer := io.Reader(x), x.stdin(), x
	hr := newHeaderReader(stdout)
	if late != nil {
		if err := late.attach(hr, stdin, closer); err != nil {
			rc.Close()
			return nil, newError(name, ErrBootstrap, err, fmt.Sprintf("bootstrap rexd on %s: %v", name, err))
		}
	}
	if watch != nil {
		// Nothing goes to rexd before sudo has let it run: sudo -S would
		// take the first line for a password.
		// With a password, sudo takes its time to check it (pam's delay
		// after a wrong one): that is not a slow host.
		resume := func() {}
		if lo.as.password != nil {
			resume = pauseBudget(ctx)
		}
		err := sudo.Wait(ctx, hr.headerLine, watch, stdin, lo.as.password)
		if errors.Is(err, sudo.ErrEnded) {
			select { // all of stderr is read once the session ends
			case <-closer.done:
			case <-time.After(closeGrace):
			}
			err = watch.Failure()
		}
		resume()
		switch {
		case err == nil:
		case x.refused():
			closer.Close()
			return nil, execRefusedError(name)
		case errors.Is(err, sudo.ErrNotStarted) && hr.header().exec == "":
			// The cached rexd was not there: the script probed instead.
			closer.Close()
			l := &launch{status: closer.exitStatus(), stderr: tail.String(), header: hr.header(), err: err}
			return l, nil
		default:
			closer.Close()
			return nil, becomeError(name, lo.as.user, err)
		}
	}
	if before != nil {
		stop := context.AfterFunc(ctx, x.abort)
		err := before(hr, stdin)
		stop()
		if err != nil {
			select { // the script has ended, or is about to
			case <-closer.done:
			case <-time.After(closeGrace):
			}
			status := closer.exitStatus()
			closer.Close()
			if x.refused() {
				return nil, execRefusedError(name)
			}
			if ctx.Err() != nil {
				return nil, newError(name, ErrBootstrap, ctx.Err(), fmt.Sprintf("bootstrap rexd on %s: %v", name, ctx.Err()))
			}
			return &launch{status: status, stderr: tail.String(), header: hr.header(), err: err}, nil
		}
	}
	if lo.resume != nil {
		err := lo.resume(hr, stdin, closer)
		if err != nil {
			closer.Close()
		}
		return &launch{err: err, status: -1, header: hr.header(), resumed: err == nil}, nil
	}
	if rc == nil {
		rc = rexclient.NewConn(hr, stdin, closer)
	}
	// session.open goes out at once, right behind the exec request: on a
	// hit, rexd finds it waiting.
	var s *rexclient.Session
	l := &launch{client: rc, status: -1}
	if f := lo.first; f != nil && !f.Sent && watch == nil {
		if po == nil {
			params.BuildHashes = buildHashes(builds)
			po, err = rc.SendSessionExec(params, f.Params, f.Opts)
		}
		if err == nil {
			var proc *rexclient.Process
			var startErr error
			s, proc, startErr, err = po.Wait(ctx)
			if err == nil {
				f.Sent, f.Proc, f.Err = true, proc, startErr
			}
		}
	} else {
		s, err = rc.OpenSession(ctx, params)
	}
	l.session, l.err = s, err
	if err != nil {
		rc.Close()
		if x.refused() {
			return nil, execRefusedError(name)
		}
		if ctx.Err() != nil {
			cause := ctx.Err()
			if errors.Is(err, rexclient.ErrMayHaveStarted) {
				cause = errors.Join(cause, rexclient.ErrMayHaveStarted)
			}
			return nil, newError(name, ErrBootstrap, cause, fmt.Sprintf("bootstrap rexd on %s: %v", name, ctx.Err()))
		}
		l.client, l.session = nil, nil
		select { // the script has ended, or is about to
		case <-closer.done:
		case <-time.After(closeGrace):
		}
		l.status = closer.exitStatus()
		l.stderr = tail.String()
	}
	l.header = hr.header()
	return l, nil
}

// execRefusedError says that sshd let rex in but would not run its
// command.
func execRefusedError(name string) error {
	return newError(name, ErrBootstrap, errExecRefused, fmt.Sprintf(
		"bootstrap rexd on %s: the login worked but the server refused to run a command; log in with ssh and run true to see why (a ForceCommand, a restricted shell or a process limit)", name))
}

// becomeError says in one sentence why rexd could not start through sudo.
func becomeError(name, user string, err error) error {
	var re *sudo.RefusedError
	switch {
	case errors.Is(err, sudo.ErrPasswordRequired):
		return err // launch asks for the password and tries again
	case errors.Is(err, sudo.ErrWrongPassword):
		return newError(name, ErrBecome, err, fmt.Sprintf("sudo on %s refused the password for %s; nothing was done there, run again with the right password", name, user))
	case errors.As(err, &re):
		return newError(name, ErrBecome, err, fmt.Sprintf("sudo on %s will not run rexd as %s (%s); allow it in sudoers, or drop --sudo", name, user, re.Said))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return newError(name, ErrBecome, err, fmt.Sprintf("start rexd through sudo on %s: %v", name, err))
	}
	return newError(name, ErrBecome, err, fmt.Sprintf("start rexd through sudo on %s as %s: %v", name, user, err))
}

func (d *Dialer) openParams() protocol.SessionOpenParams {
	p := d.opts.Session
	if p.ClientName == "" {
		p.ClientName = "rex"
	}
	if p.ClientVersion == "" {
		p.ClientVersion = version.Version
	}
	// Only rexd of this build is ever opened (build_hashes): it has
	// raw output frames.
	if !slices.Contains(p.RequestedCapabilities, protocol.CapOutputRaw) {
		p.RequestedCapabilities = append(slices.Clip(p.RequestedCapabilities), protocol.CapOutputRaw)
	}
	return p
}

// uploadConcurrency is the number of SFTP writes in flight.
const uploadConcurrency = 64

// install copies b into dir/<entry>/rexd on the target in one exec:
// installScript reads the build on its standard input (compressed when the
// probe found gzip there), checks its SHA-256, makes it executable and
// renames it into place atomically, so a concurrent bootstrap never runs a
// half-written file and every racer leaves a whole one. One channel and
// one shell per host, where SFTP took a subsystem, an unpacking exec and a
// round trip per file operation. A target that cannot unpack the build
// gets it plain; one without a SHA-256 tool gets installCopy, which hashes
// a copy read back.
// stamp, when not empty, is the installed file's stat as bootScript takes
// it, for its fast path.
func (d *Dialer) install(ctx context.Context, client *ssh.Client, name, dir string, b build, canGzip bool) (n int64, method, stamp string, err error) {
	// Copying is a transfer, not waiting for an answer: the connect
	// timeout does not run meanwhile (keepalives catch a dead link).
	defer pauseBudget(ctx)()
	vdir := path.Join(dir, b.entry)
	if canGzip {
		if gz, _ := b.Gzipped(); gz != nil {
			n, stamp, again, err := installStdin(ctx, client, name, vdir, b, gz, true)
			if !again {
				return n, "stdin+gzip", stamp, err
			}
		}
	}
	// Only now is the build read (decompressed, checked against the hash
	// its manifest promised): a target that took it compressed never
	// costs that.
	data, err := b.Bytes()
	if err != nil {
		return 0, "", "", newError(name, ErrBootstrap, err, fmt.Sprintf("cannot copy rexd to %s: %v", name, err))
	}
	n, stamp, again, err := installStdin(ctx, client, name, vdir, b, data, false)
	if !again {
		return n, "stdin", stamp, err
	}
	n, method, err = d.installCopy(ctx, client, name, dir, b)
	return n, method, "", err
}

// installStart installs b (gzipped) in dir/<entry>/rexd and starts it in
// one exec: installScript reads the build's bytes, then, once it has said
// rexd-installed, the session goes to the rexd it runs. A launch whose
// header has no rexd-exec ended before that (no head, no gzip, a failed
// unpacking or write, a damaged copy): the caller installs apart then.
func (d *Dialer) installStart(ctx context.Context, client *ssh.Client, name, dir string, b build, lo *launchOpts) (*launch, int64, error) {
	gz, err := b.Gzipped()
	if gz == nil || err != nil {
		return &launch{status: -1}, 0, nil
	}
	args := []string{"exec", "/bin/sh", "-c", installScript, "rexd-install", path.Join(dir, b.entry), b.SHA256, "gz", strconv.Itoa(len(gz))}
	args = append(append(args, d.opts.RexdArgs...), lo.args...)
	send := func(hr *headerReader, stdin io.Writer) error {
		// Copying is a transfer, not waiting for an answer.
		defer pauseBudget(ctx)()
		written := make(chan error, 1)
		go func() {
			_, err := stdin.Write(gz)
			written <- err
		}()
		for {
			line, err := hr.headerLine()
			if strings.HasPrefix(line, "rexd-installed ") {
				return <-written
			}
			if err != nil {
				return fmt.Errorf("the install ended before rexd started: %w", err)
			}
		}
	}
	l, err := d.launchCommand(ctx, client, name, func(string) string { return command(args...) }, []build{b}, lo, send)
	return l, int64(len(gz)), err
}

// installStdin runs installScript once with data, the build (gzipped when
// gz), on its standard input. again says that this way cannot work there
// and another should be tried: no gzip or a failed unpacking (when gz), no
// SHA-256 tool, or an unpacked copy that is not the build.
func installStdin(ctx context.Context, client *ssh.Client, name, vdir string, b build, data []byte, gz bool) (n int64, stamp string, again bool, err error) {
	final := path.Join(vdir, "rexd")
	failf := func(err error, format string, args ...any) (int64, string, bool, error) {
		return 0, "", false, newError(name, ErrBootstrap, err, fmt.Sprintf(format, args...))
	}
	z := "plain"
	if gz {
		z = "gz"
	}
	out, stderr, status, err := run(ctx, client, command("exec", "/bin/sh", "-c", installScript, "rexd-install", vdir, b.SHA256, z), bytes.NewReader(data))
	if err != nil {
		return failf(err, "copy rexd to %s on %s: %v", final, name, err)
	}
	h := parseHeader(lines(out))
	switch {
	case status == 0 && h.sum == b.SHA256:
		return int64(len(data)), h.installed, false, nil
	case status == exitNoSumTool:
		return 0, "", true, nil
	case gz && (status == exitInstallNoGzip || status == exitInstallUnpack || status == exitInstallDamaged):
		return 0, "", true, nil // the plain build may still get there whole
	case status == exitInstallDir:
		return failf(nil, "cannot copy rexd to %s on %s: %s", vdir, name, describeBad(h))
	case status == exitInstallDamaged:
		return failf(nil, "the rexd copied to %s on %s is damaged (sha256 %.12s…, want %.12s…), so it was not installed; retry, and check the disk there if it happens again", vdir, name, h.sum, b.SHA256)
	case status == exitInstallWrite:
		return failf(nil, "copy rexd to %s on %s: writing it failed%s; check free space there", vdir, name, oneSentence(stderr))
	}
	return failf(nil, "copy rexd to %s on %s: exit status %d%s; check free space and permissions there", final, name, status, oneSentence(stderr))
}

// installCopy copies b into dir/<entry>/rexd on the target for one
// without a SHA-256 tool: over SFTP (or `cat` without it) to a unique
// temporary name beside it, verified by SHA-256 (of a copy read back),
// made executable, then renamed into place atomically.
func (d *Dialer) installCopy(ctx context.Context, client *ssh.Client, name, dir string, b build) (int64, string, error) {
	vdir := path.Join(dir, b.entry)
	final := path.Join(vdir, "rexd")
	tmp := path.Join(vdir, ".rexd.tmp."+randomHex(8))
	failf := func(err error, format string, args ...any) (int64, string, error) {
		return 0, "", newError(name, ErrBootstrap, err, fmt.Sprintf(format, args...))
	}

	// Copying is a transfer, not waiting for an answer: the connect
	// timeout does not run meanwhile (keepalives catch a dead link).
	defer pauseBudget(ctx)()
	fsc, closeFS, err := openSFTP(client)
	method := "sftp"
	upload := func(file string, data []byte) (int64, error) {
		if fsc != nil {
			return uploadSFTP(ctx, fsc, file, data)
		}
		return uploadExec(ctx, client, file, data)
	}
	if err == nil {
		defer closeFS()
	} else {
		method = "exec"
	}
	cleanup := func(files ...string) {
		if fsc != nil {
			for _, f := range files {
				fsc.Remove(f)
			}
		} else {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeGrace)
			defer cancel()
			run(cctx, client, command(append([]string{"rm", "-f", "--"}, files...)...), nil)
		}
	}
	var (
		n   int64
		sum string
	)
	// The build goes compressed when it is stored so (less than half
	// the bytes) and is unpacked there by gzip, then hashed as always;
	// a target without gzip, or where unpacking fails, gets it plain.
	gz, _ := b.Gzipped()
	packed := tmp + ".gz"
	if gz != nil {
		n, err = upload(packed, gz)
		if err == nil {
			sum, err = remoteSum(ctx, client, fsc, tmp, command("exec", "/bin/sh", "-c", unpackScript, "rexd-unpack", packed, tmp))
		}
		if err == nil && sum != b.SHA256 {
			err = fmt.Errorf("the unpacked copy has sha256 %.12s…", sum)
		}
		if err != nil && ctx.Err() == nil {
			cleanup(packed, tmp)
			gz, sum = nil, ""
		} else if err == nil {
			method += "+gzip"
		}
	}
	if gz == nil && ctx.Err() == nil {
		// Only now is the build read (decompressed, checked against the
		// hash its manifest promised): a target that has it, or took it
		// compressed, never costs that.
		data, berr := b.Bytes()
		if berr != nil {
			return failf(berr, "cannot copy rexd to %s: %v", name, berr)
		}
		n, err = upload(tmp, data)
		if err == nil {
			sum, err = remoteSum(ctx, client, fsc, tmp, command("exec", "/bin/sh", "-c", sumScript, "rexd-sum", tmp))
		} else {
			cleanup(tmp)
			return failf(err, "copy rexd to %s on %s: %v; check free space and permissions there", tmp, name, err)
		}
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		cleanup(tmp, packed)
		return failf(err, "verify the rexd copied to %s on %s: %v", tmp, name, err)
	}
	if sum != b.SHA256 {
		cleanup(tmp)
		return failf(nil, "the rexd copied to %s on %s is damaged (sha256 %.12s…, want %.12s…); retry, and check the disk there if it happens again", tmp, name, sum, b.SHA256)
	}
	if fsc != nil {
		err = finishSFTP(fsc, tmp, final)
	} else {
		_, stderr, status, rerr := run(ctx, client, command("chmod", "755", "--", tmp)+" && "+command("mv", "-f", "--", tmp, final), nil)
		err = rerr
		if err == nil && status != 0 {
			err = fmt.Errorf("exit status %d%s", status, oneSentence(stderr))
		}
	}
	if err != nil {
		cleanup(tmp)
		return failf(err, "install rexd as %s on %s: %v", final, name, err)
	}
	return n, method, nil
}

// installAs copies b into dir/<entry>/rexd on the target as the become
// user, through sudo: the login user's SFTP cannot write into that user's
// 0700 cache, so the build goes to installScript's standard input once
// sudo has let it run, and that user's shell checks its SHA-256 before
// renaming it into place.
func (d *Dialer) installAs(ctx context.Context, client *ssh.Client, name, dir string, b build, lo *launchOpts) (int64, string, error) {
	vdir := path.Join(dir, b.entry)
	user := lo.as.user
	failf := func(err error, format string, args ...any) (int64, string, error) {
		return 0, "", newError(name, ErrBootstrap, err, fmt.Sprintf(format, args...))
	}
	data, err := b.Bytes()
	if err != nil {
		return failf(err, "cannot copy rexd to %s: %v", name, err)
	}
	defer pauseBudget(ctx)() // a transfer, like install's

	sess, err := client.NewSession()
	if err != nil {
		return failf(err, "copy rexd to %s as %s: open an SSH session: %v", name, user, err)
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return failf(err, "copy rexd to %s as %s: %v", name, user, err)
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return failf(err, "copy rexd to %s as %s: %v", name, user, err)
	}
	tail := &tailBuffer{max: 4096}
	watch := sudo.NewWatcher()
	sess.Stderr = io.MultiWriter(tail, watch)
	argv := append([]string{"exec", "sudo"}, sudo.Args(user, lo.as.password != nil, "/bin/sh", "-c", installScript, "rexd-install", vdir, b.SHA256)...)
	if err := sess.Start(command(argv...)); err != nil {
		sess.Close()
		return failf(err, "copy rexd to %s as %s: start the remote shell: %v", name, user, err)
	}
	hr := newHeaderReader(stdout)
	closer := newSessionCloser(sess, stdin)
	defer closer.Close()
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	err = sudo.Wait(ctx, hr.headerLine, watch, stdin, lo.as.password)
	if errors.Is(err, sudo.ErrEnded) {
		<-closer.done // all of stderr is read once the session ends
		err = watch.Failure()
	}
	if errors.Is(err, sudo.ErrPasswordRequired) {
		return failf(err, "copy rexd to %s as %s: sudo asked for a password it did not ask for a moment before; run again", name, user)
	}
	if err != nil {
		return 0, "", becomeError(name, user, err)
	}
	if _, err := stdin.Write(data); err != nil {
		return failf(err, "copy rexd to %s in %s as %s: %v; check free space there", name, vdir, user, err)
	}
	stdin.Close()
	io.Copy(io.Discard, hr) // keeps the script's "rexd-" lines
	<-closer.done
	if ctx.Err() != nil {
		return failf(ctx.Err(), "copy rexd to %s as %s: %v", name, user, ctx.Err())
	}
	h := hr.header()
	switch status := closer.exitStatus(); {
	case status == 0 && h.sum == b.SHA256:
		return int64(len(data)), "sudo", nil
	case status == exitInstallDir:
		return failf(nil, "copy rexd to %s as %s: %s", name, user, describeBad(h))
	case status == exitNoSumTool:
		return failf(nil, "copy rexd to %s as %s: the target has neither sha256sum nor shasum, so the copy cannot be checked; install one of them", name, user)
	case status == exitInstallDamaged:
		return failf(nil, "the rexd copied to %s on %s as %s is damaged (sha256 %.12s…, want %.12s…); retry, and check the disk there if it happens again", vdir, name, user, h.sum, b.SHA256)
	default:
		return failf(nil, "copy rexd to %s in %s as %s: exit status %d%s; check free space and permissions there", name, vdir, user, status, oneSentence(tail.String()))
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// openSFTP starts the sftp subsystem; an error means the target has none.
func openSFTP(client *ssh.Client) (*sftp.Client, func(), error) {
	sess, err := client.NewSession()
	if err != nil {
		return nil, nil, err
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return nil, nil, err
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return nil, nil, err
	}
	if err := sess.RequestSubsystem("sftp"); err != nil {
		sess.Close()
		return nil, nil, err
	}
	c, err := sftp.NewClientPipe(stdout, stdin,
		sftp.UseConcurrentWrites(true),
		sftp.MaxConcurrentRequestsPerFile(uploadConcurrency))
	if err != nil {
		sess.Close()
		return nil, nil, err
	}
	return c, func() {
		c.Close()
		sess.Close()
	}, nil
}

func uploadSFTP(ctx context.Context, c *sftp.Client, tmp string, data []byte) (int64, error) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	f, err := c.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return 0, err
	}
	n, err := f.ReadFromWithConcurrency(bytes.NewReader(data), uploadConcurrency)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != int64(len(data)) {
		err = fmt.Errorf("wrote %d of %d bytes", n, len(data))
	}
	if ctx.Err() != nil {
		return n, ctx.Err()
	}
	return n, err
}

// uploadExec writes through `cat` on an exec channel, for targets without
// an SFTP subsystem.
func uploadExec(ctx context.Context, client *ssh.Client, tmp string, data []byte) (int64, error) {
	cmd := command("exec", "/bin/sh", "-c", `umask 077; cat > "$1"`, "rexd-upload", tmp)
	_, stderr, status, err := run(ctx, client, cmd, bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	if status != 0 {
		return 0, fmt.Errorf("cat exited with status %d%s", status, oneSentence(stderr))
	}
	return int64(len(data)), nil
}

// remoteSum is the SHA-256 of a remote file, computed there when a tool
// exists, else read back (over SFTP when there is one).
func remoteSum(ctx context.Context, client *ssh.Client, fsc *sftp.Client, file, cmd string) (string, error) {
	out, stderr, status, err := run(ctx, client, cmd, nil)
	if err != nil {
		return "", err
	}
	switch status {
	case 0:
		if h := parseHeader(lines(out)); len(h.sum) == 64 {
			return h.sum, nil
		}
		return "", fmt.Errorf("the target printed no checksum%s", oneSentence(stderr))
	case exitNoSumTool:
	default:
		return "", fmt.Errorf("checksum exited with status %d%s", status, oneSentence(stderr))
	}
	h := sha256.New()
	if fsc != nil {
		f, err := fsc.Open(file)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if _, err := f.WriteTo(h); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	sess, err := client.NewSession()
	if err != nil {
		return "", err
	}
	defer sess.Close()
	sess.Stdout = h
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	if err := sess.Run(command("cat", "--", file)); err != nil {
		return "", fmt.Errorf("read back %s: %w", file, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// finishSFTP makes tmp executable and moves it over final atomically
// (posix-rename@openssh.com); without that extension, a plain rename that
// fails when final exists, which is then another racer's whole copy.
func finishSFTP(c *sftp.Client, tmp, final string) error {
	if err := c.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	if _, ok := c.HasExtension("posix-rename@openssh.com"); ok {
		if err := c.PosixRename(tmp, final); err != nil {
			return fmt.Errorf("rename: %w", err)
		}
		return nil
	}
	if err := c.Rename(tmp, final); err != nil {
		if _, serr := c.Stat(final); serr == nil {
			c.Remove(tmp)
			return nil
		}
		return fmt.Errorf("rename: %w", err)
	}
	return nil
}

// unameNames are the `uname -sm` outputs of a Go platform.
func unameNames(goos, goarch string) []string {
	var out []string
	for _, o := range osNames(goos) {
		for _, a := range archNames(goarch) {
			out = append(out, o+" "+a)
		}
	}
	return out
}

// platformOf maps `uname -sm` output to GOOS and GOARCH ("" if unknown).
func platformOf(uname string) (goos, goarch string) {
	sys, machine, _ := strings.Cut(strings.TrimSpace(uname), " ")
	for _, g := range []string{"linux", "darwin", "freebsd", "openbsd", "netbsd"} {
		for _, n := range osNames(g) {
			if n == sys {
				goos = g
			}
		}
	}
	for _, g := range []string{"amd64", "arm64", "arm", "386", "riscv64", "ppc64le", "s390x", "loong64"} {
		for _, n := range archNames(g) {
			if n == machine {
				goarch = g
			}
		}
	}
	return goos, goarch
}

func osNames(goos string) []string {
	switch goos {
	case "linux":
		return []string{"Linux"}
	case "darwin":
		return []string{"Darwin"}
	case "freebsd":
		return []string{"FreeBSD"}
	case "openbsd":
		return []string{"OpenBSD"}
	case "netbsd":
		return []string{"NetBSD"}
	}
	return nil
}

func archNames(goarch string) []string {
	switch goarch {
	case "amd64":
		return []string{"x86_64", "amd64"}
	case "arm64":
		return []string{"aarch64", "arm64"}
	case "arm":
		return []string{"armv7l", "armv6l", "armv7"}
	case "386":
		return []string{"i686", "i386", "i586"}
	case "riscv64":
		return []string{"riscv64"}
	case "ppc64le":
		return []string{"ppc64le"}
	case "s390x":
		return []string{"s390x"}
	case "loong64":
		return []string{"loongarch64"}
	}
	return nil
}
