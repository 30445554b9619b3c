package sshx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// plainHostKeyAlgos are offered for a host known_hosts does not know yet:
// without certificate algorithms, so a host that has a certificate shows
// its plain key, which is what gets recorded.
var plainHostKeyAlgos = []string{
	ssh.KeyAlgoED25519,
	ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256,
}

// loadKnownHosts reads every known_hosts file of e that exists.
func loadKnownHosts(e *endpoint) (*knownhosts.HostKeyDB, error) {
	var files []string
	for _, f := range append(append([]string(nil), e.knownHosts...), e.globalKnownHosts...) {
		if f == "/dev/null" {
			continue
		}
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	db, err := knownhosts.NewDB(files...)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		// Not a line of the file but the file itself (a directory, no
		// permission): advice about lines would send the operator looking
		// for one.
		return nil, newError(e.name, ErrConfig, err, fmt.Sprintf("cannot read the known hosts file %s: %v; make it a file you can read, or point UserKnownHostsFile elsewhere", pe.Path, pe.Err))
	}
	if err != nil {
		return nil, newError(e.name, ErrConfig, err, fmt.Sprintf("cannot read known hosts for %s: %v; fix or remove that line", e.name, err))
	}
	return db, nil
}

// hostKeyChecker checks the host key of one handshake against known_hosts
// and, as the policy says, records an unknown one.
type hostKeyChecker struct {
	d   *Dialer
	e   *endpoint
	db  *knownhosts.HostKeyDB
	ctx context.Context

	b *budget // paused while the operator is asked

	seen bool  // the server got as far as showing its key
	err  error // why the key was refused
}

func (d *Dialer) hostKeys(ctx context.Context, e *endpoint) (*hostKeyChecker, []string, error) {
	db, err := loadKnownHosts(e)
	if err != nil {
		return nil, nil, err
	}
	algos := db.HostKeyAlgorithms(e.hostKeyName())
	if !slices.ContainsFunc(db.HostKeys(e.hostKeyName()), func(k knownhosts.PublicKey) bool { return !k.Cert }) {
		// Known by no plain key (at most through @cert-authority lines): a
		// host without a certificate may show its plain key, to be judged
		// (and, under an authority, refused in words that say so) rather
		// than fail the negotiation; a certificate is still preferred.
		algos = append(algos, plainHostKeyAlgos...)
	}
	return &hostKeyChecker{d: d, e: e, db: db, ctx: ctx}, algos, nil
}

func (h *hostKeyChecker) check(_ string, remote net.Addr, key ssh.PublicKey) error {
	h.seen = true
	if h.e.pin != nil {
		if bytes.Equal(key.Marshal(), h.e.pin.Marshal()) {
			h.e.key = key
			return nil
		}
		h.err = newError(h.e.name, ErrHostKeyChanged, nil, fmt.Sprintf(
			"%s (%s) showed host key %s on a second connection, not the %s it showed a moment ago; rex refuses to connect: check the host and the network",
			h.e.name, knownhosts.Normalize(h.e.hostKeyName()), ssh.FingerprintSHA256(plainKey(key)), ssh.FingerprintSHA256(plainKey(h.e.pin))))
		return h.err
	}
	err := plainVerdict(h.db, h.e.hostKeyName(), key, h.db.HostKeyCallback()(h.e.hostKeyName(), remote, key))
	if err == nil {
		h.e.key = key
		return nil
	}
	h.err = h.judge(remote, key, err)
	if h.err == nil {
		h.e.key = key
	}
	return h.err
}

// plainVerdict leaves @cert-authority lines out of the verdict on a plain
// (not certified) host key: x/crypto's knownhosts weighs them as keys of
// the host itself, so a host they cover that has no certificate looked
// changed, with the authority's key named as the one expected. For
// OpenSSH such a host's plain key is unknown, or checked against the
// host's own lines.
func plainVerdict(db *knownhosts.HostKeyDB, host string, key ssh.PublicKey, err error) error {
	var ke *xknownhosts.KeyError
	if _, isCert := key.(*ssh.Certificate); isCert || !errors.As(err, &ke) || len(ke.Want) == 0 {
		return err
	}
	cas := map[string]bool{}
	for _, k := range db.HostKeys(host) {
		if k.Cert {
			cas[string(k.Marshal())] = true
		}
	}
	var want []xknownhosts.KnownKey
	for _, w := range ke.Want {
		if !cas[string(w.Key.Marshal())] {
			want = append(want, w)
		}
	}
	if len(want) == len(ke.Want) {
		return err
	}
	return &xknownhosts.KeyError{Want: want}
}

// judge turns a known_hosts verdict into rex's policy: a changed or revoked
// key is always refused; an unknown one is recorded unless strict.
func (h *hostKeyChecker) judge(remote net.Addr, key ssh.PublicKey, err error) error {
	e := h.e
	name := knownhosts.Normalize(e.hostKeyName())
	var revoked *xknownhosts.RevokedError
	if errors.As(err, &revoked) {
		return newError(e.name, ErrHostKeyChanged, err, fmt.Sprintf(
			"host key %s of %s (%s) is marked @revoked in %s:%d; the host must get a new key before rex connects",
			ssh.FingerprintSHA256(key), e.name, name, revoked.Revoked.Filename, revoked.Revoked.Line))
	}
	if knownhosts.IsHostKeyChanged(err) {
		return changedKeyError(e, key, err)
	}
	if !knownhosts.IsHostUnknown(err) {
		if _, isCert := key.(*ssh.Certificate); isCert {
			why := strings.TrimPrefix(err.Error(), "ssh: ")
			if strings.HasPrefix(why, "no authorities for hostname") {
				// x/crypto names the address it last tried, which after
				// knownhosts' fallback is port 22 whatever rex reached.
				why = "its signer is not one of them"
			}
			return newError(e.name, ErrHostKeyChanged, err, fmt.Sprintf(
				"%s (%s) shows a host certificate that no @cert-authority line of %s trusts (%s), so rex refuses to connect; check those lines",
				e.name, name, strings.Join(e.knownHosts, ", "), why))
		}
		return newError(e.name, ErrHostKeyChanged, err, fmt.Sprintf(
			"host key of %s (%s) was refused: %v; check %s", e.name, name, err, strings.Join(e.knownHosts, ", ")))
	}
	if _, isCert := key.(*ssh.Certificate); !isCert && slices.ContainsFunc(h.db.HostKeys(e.hostKeyName()), func(k knownhosts.PublicKey) bool { return k.Cert }) {
		// Trusted through an authority only, the host should show a
		// certificate: a plain key in its place is not taken on first
		// use (it may be an impostor without the authority's signature).
		return newError(e.name, ErrHostKeyUnknown, err, fmt.Sprintf(
			"%s (%s) shows no host certificate but a plain host key %s %s, and known_hosts trusts it only through a @cert-authority line, so rex refuses to connect; give the host a certificate from that authority, or if this key is right add this line to %s: %s",
			e.name, name, keyTypeName(key), ssh.FingerprintSHA256(key), e.knownHosts[0], knownhosts.Line([]string{name}, key)))
	}
	unchecked := h.d.uncheckedFiles(e)
	switch {
	case e.strict == "yes" || e.strict == "ask" && h.d.opts.AskHostKey == nil:
		line := knownhosts.Line([]string{name}, plainKey(key))
		why := "StrictHostKeyChecking is yes"
		if e.strict == "ask" {
			why = "StrictHostKeyChecking is ask and there is no terminal to ask on"
		}
		return newError(e.name, ErrHostKeyUnknown, err, fmt.Sprintf(
			"%s (%s) is not in %s and %s; if its host key %s %s is right, add this line to %s: %s",
			e.name, name, e.knownHosts[0], why, keyTypeName(key), ssh.FingerprintSHA256(plainKey(key)), e.knownHosts[0], line))
	case e.strict == "ask":
		ok, aerr := h.ask(remote, key)
		if aerr != nil {
			return newError(e.name, ErrHostKeyUnknown, aerr, fmt.Sprintf("cannot ask whether to trust the host key of %s (%s): %v; add it to %s first", e.name, name, aerr, e.knownHosts[0]))
		}
		if !ok {
			return newError(e.name, ErrHostKeyUnknown, err, fmt.Sprintf("the host key %s of %s (%s) was not accepted; nothing was sent to it", ssh.FingerprintSHA256(plainKey(key)), e.name, name))
		}
	}
	if unchecked {
		return nil // nothing to record it in
	}
	return h.learn(remote, key)
}

// ask puts the question of an unknown host to the operator; the connect
// timeout does not run meanwhile.
func (h *hostKeyChecker) ask(remote net.Addr, key ssh.PublicKey) (bool, error) {
	if h.b != nil {
		h.b.pause()
		defer h.b.resume()
	}
	e := h.e
	return h.d.opts.AskHostKey(h.ctx, HostKeyQuestion{
		Target: e.name, Host: knownhosts.Normalize(e.hostKeyName()), Addr: e.addr(),
		KeyType: keyTypeName(key), Fingerprint: ssh.FingerprintSHA256(plainKey(key)), File: e.knownHosts[0],
	})
}

// uncheckedFiles reports whether e records host keys nowhere
// (UserKnownHostsFile /dev/null), and warns once per file per Dialer.
func (d *Dialer) uncheckedFiles(e *endpoint) bool {
	for _, f := range e.knownHosts {
		if f != os.DevNull {
			return false
		}
	}
	if _, warned := d.unchecked.LoadOrStore(os.DevNull, true); !warned {
		d.notice(e.name, fmt.Sprintf("warning: UserKnownHostsFile is %s for %s, so host keys are neither recorded nor checked and any key is accepted; set a real file to be safe from impostors", os.DevNull, e.name))
	}
	return true
}

func (d *Dialer) notice(target, msg string) {
	if d.opts.Notice != nil {
		d.opts.Notice(target, msg)
	}
}

// keyTypeName is a key's type as OpenSSH prints it: ED25519, ECDSA, RSA.
func keyTypeName(key ssh.PublicKey) string {
	t := plainKey(key).Type()
	switch {
	case strings.Contains(t, "ed25519"):
		return "ED25519"
	case strings.HasPrefix(t, "ecdsa"), strings.Contains(t, "ecdsa"):
		return "ECDSA"
	case strings.Contains(t, "rsa"):
		return "RSA"
	case strings.Contains(t, "dss"):
		return "DSA"
	}
	return strings.ToUpper(strings.TrimPrefix(t, "ssh-"))
}

func changedKeyError(e *endpoint, key ssh.PublicKey, err error) error {
	var ke *xknownhosts.KeyError
	errors.As(err, &ke)
	name := knownhosts.Normalize(e.hostKeyName())
	// Name the line of the same key type when there is one: that is the
	// entry that contradicts the server.
	want := ke.Want
	for _, w := range ke.Want {
		if w.Key.Type() == plainKey(key).Type() {
			want = []xknownhosts.KnownKey{w}
			break
		}
	}
	var known []string
	for _, w := range want {
		known = append(known, ssh.FingerprintSHA256(w.Key))
	}
	where, file := fmt.Sprintf("%s:%d", want[0].Filename, want[0].Line), want[0].Filename
	return newError(e.name, ErrHostKeyChanged, err, fmt.Sprintf(
		"host key of %s (%s) has changed: it offers %s %s but %s has %s, so rex refuses to connect (it may be an impostor); if the host was really reinstalled, run ssh-keygen -R %s -f %s and connect again",
		e.name, name, key.Type(), ssh.FingerprintSHA256(key), where, strings.Join(known, ", "),
		Quote(name), Quote(file)))
}

// plainKey is the key a certificate certifies, or key itself.
func plainKey(key ssh.PublicKey) ssh.PublicKey {
	if c, ok := key.(*ssh.Certificate); ok {
		return c.Key
	}
	return key
}

// knownHostsLockWait bounds waiting for another process's known_hosts lock.
const knownHostsLockWait = 10 * time.Second

// learn appends an unknown host's key to the first user known_hosts file,
// under the Dialer's mutex and a file lock, re-reading the file first so
// concurrent first connections (in this process or others) add one line.
func (h *hostKeyChecker) learn(remote net.Addr, key ssh.PublicKey) error {
	e, d := h.e, h.d
	file := e.knownHosts[0]
	fail := func(err error) error {
		advice := "fix that file's permissions"
		switch {
		case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
			advice = "free space on its file system"
		case errors.Is(err, syscall.EFBIG):
			advice = "raise the file size limit (ulimit -f)"
		}
		return newError(e.name, ErrHostKeyUnknown, err, fmt.Sprintf(
			"cannot record the host key of %s in %s: %v; %s or set StrictHostKeyChecking", e.name, file, unwrapPath(err), advice))
	}
	d.knownHostsMu.Lock()
	defer d.knownHostsMu.Unlock()
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fail(err)
	}
	lk := flock.New(file, flock.SetPermissions(0o600))
	ctx, cancel := context.WithTimeout(h.ctx, knownHostsLockWait)
	defer cancel()
	ok, err := lk.TryLockContext(ctx, 20*time.Millisecond)
	if err != nil || !ok {
		if err == nil {
			err = errors.New("another process holds its lock")
		}
		return fail(err)
	}
	defer lk.Unlock()

	db, err := loadKnownHosts(e)
	if err != nil {
		return err
	}
	switch err := plainVerdict(db, e.hostKeyName(), key, db.HostKeyCallback()(e.hostKeyName(), remote, key)); {
	case err == nil:
		return nil // someone else recorded it meanwhile
	case knownhosts.IsHostKeyChanged(err):
		return changedKeyError(e, key, err)
	case !knownhosts.IsHostUnknown(err):
		return h.judge(remote, key, err)
	}

	name := knownhosts.Normalize(e.hostKeyName())
	if e.hashKnownHosts {
		name = xknownhosts.HashHostname(name)
	}
	line := knownhosts.Line([]string{name}, plainKey(key)) + "\n"
	if e.hashKnownHosts {
		// Line would normalise the hash; write it as is.
		pk := plainKey(key)
		line = name + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk))) + "\n"
	}
	f, err := os.OpenFile(file, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	// A file whose last line has no newline would glue our line to it.
	size := int64(-1)
	if st, err := f.Stat(); err == nil {
		size = st.Size()
		last := make([]byte, 1)
		if size > 0 {
			if _, err := f.ReadAt(last, size-1); err == nil && last[0] != '\n' {
				line = "\n" + line
			}
		}
	}
	if n, err := f.WriteString(line); err != nil {
		// A write that stopped part way (a full disk) would leave a
		// partial line, and a file with a line it cannot parse fails
		// every later load: cut it off again, unless the file has grown
		// by more than what was written here (another writer meanwhile).
		if st, serr := f.Stat(); n > 0 && size >= 0 && serr == nil && st.Size() == size+int64(n) {
			f.Truncate(size)
		}
		return fail(err)
	}
	if err := f.Close(); err != nil && !errors.Is(err, fs.ErrClosed) {
		return fail(err)
	}
	d.notice(e.name, fmt.Sprintf("added %s (%s) %s %s to %s", e.name, e.addr(), keyTypeName(key), ssh.FingerprintSHA256(plainKey(key)), d.tildePath(file)))
	return nil
}

// tildePath writes a path under the home directory as ~/…, as OpenSSH does.
func (d *Dialer) tildePath(p string) string {
	if home, err := d.home(); err == nil && home != "" {
		if rest, ok := strings.CutPrefix(p, home+string(filepath.Separator)); ok {
			return "~/" + rest
		}
	}
	return p
}
