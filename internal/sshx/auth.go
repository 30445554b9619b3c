package sshx

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// maxKeyFileSize bounds reading a private key or certificate file.
const maxKeyFileSize = 1 << 20

// passphraseTries is how often a wrong passphrase is asked again.
const passphraseTries = 3

// agentDialTimeout bounds connecting to ssh-agent's socket.
const agentDialTimeout = 2 * time.Second

// keyFile is one identity file, loaded once per Dialer. Its public half is
// known without decrypting (from the OpenSSH key itself or key.pub), so an
// encrypted key's passphrase is asked only when a server would accept it.
type keyFile struct {
	path string

	mu     sync.Mutex
	data   []byte        // the private key file
	pub    ssh.PublicKey // nil when unknown until decrypted
	signer ssh.Signer    // once decrypted
	err    error         // why the key cannot be used
}

// keyFile returns the identity at path, or nil when there is no such file.
func (d *Dialer) keyFile(path string) *keyFile {
	d.keysMu.Lock()
	kf, ok := d.keys[path]
	if !ok {
		kf = loadKeyFile(path)
		d.keys[path] = kf
	}
	d.keysMu.Unlock()
	return kf
}

func loadKeyFile(path string) *keyFile {
	data, err := readSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		// Like OpenSSH, key.pub alone names a key that ssh-agent holds.
		if pub := readPublicKey(path + ".pub"); pub != nil {
			return &keyFile{path: path, pub: pub, err: fmt.Errorf("key %s exists only as %s.pub; load its private half into ssh-agent", path, path)}
		}
		return nil
	}
	kf := &keyFile{path: path, data: data}
	if err != nil {
		kf.err = fmt.Errorf("cannot read key %s: %v", path, unwrapPath(err))
		return kf
	}
	raw, err := ssh.ParseRawPrivateKey(data)
	var missing *ssh.PassphraseMissingError
	switch {
	case err == nil:
		s, err := ssh.NewSignerFromKey(raw)
		if err != nil {
			kf.err = fmt.Errorf("cannot use key %s: %v", path, err)
			return kf
		}
		kf.signer, kf.pub = s, s.PublicKey()
	case errors.As(err, &missing):
		kf.pub = missing.PublicKey
	default:
		if pub, _, _, _, perr := ssh.ParseAuthorizedKey(data); perr == nil {
			// IdentityFile may name a public key whose private half is in the agent.
			kf.pub = pub
			kf.err = fmt.Errorf("%s is a public key; load its private half into ssh-agent", path)
			return kf
		}
		kf.err = fmt.Errorf("cannot parse key %s: %v", path, err)
		return kf
	}
	if kf.pub == nil {
		kf.pub = readPublicKey(path + ".pub")
	}
	return kf
}

func readPublicKey(path string) ssh.PublicKey {
	b, err := readSmall(path)
	if err != nil {
		return nil
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return nil
	}
	return pub
}

// state is the key's public half (nil if unknown yet) and why it cannot
// be used (nil if it can, as far as known).
func (kf *keyFile) state() (ssh.PublicKey, error) {
	kf.mu.Lock()
	defer kf.mu.Unlock()
	return kf.pub, kf.err
}

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxKeyFileSize))
}

// unlock returns the key's signer, asking for its passphrase if needed.
// The handshake deadline is paused while the operator types, and while
// another handshake asks (for this key or another): kf.mu is not held
// meanwhile, so other handshakes still read the key's public half.
func (d *Dialer) unlock(kf *keyFile, e *endpoint, b *budget) (ssh.Signer, error) {
	if s, err := kf.unlocked(); s != nil || err != nil {
		return s, err
	}
	if d.opts.Passphrase == nil || e.batchMode {
		return nil, fmt.Errorf("key %s is encrypted and rex cannot ask for its passphrase here; load it into ssh-agent with ssh-add %s", kf.path, Quote(kf.path))
	}
	b.pause()
	defer b.resume()
	d.promptMu.Lock()
	defer d.promptMu.Unlock()
	// Another handshake may have asked meanwhile.
	if s, err := kf.unlocked(); s != nil || err != nil {
		return s, err
	}
	kf.mu.Lock()
	data, pub := kf.data, kf.pub
	kf.mu.Unlock()
	fail := func(err error) (ssh.Signer, error) {
		kf.mu.Lock()
		kf.err = err
		kf.mu.Unlock()
		return nil, err
	}
	for range passphraseTries {
		pw, err := d.opts.Passphrase(kf.path)
		if err != nil {
			// Not cached: the prompt may work next time.
			return nil, fmt.Errorf("no passphrase for key %s: %v", kf.path, err)
		}
		raw, err := ssh.ParseRawPrivateKeyWithPassphrase(data, pw)
		clear(pw)
		if errors.Is(err, x509.IncorrectPasswordError) {
			continue
		}
		if err != nil {
			return fail(fmt.Errorf("cannot decrypt key %s: %v", kf.path, err))
		}
		s, err := ssh.NewSignerFromKey(raw)
		if err != nil {
			return fail(fmt.Errorf("cannot use key %s: %v", kf.path, err))
		}
		if pub != nil && !bytes.Equal(s.PublicKey().Marshal(), pub.Marshal()) {
			return fail(fmt.Errorf("key %s does not match its public key %s.pub", kf.path, kf.path))
		}
		kf.mu.Lock()
		kf.signer, kf.pub = s, s.PublicKey()
		kf.data = nil
		kf.mu.Unlock()
		return s, nil
	}
	return fail(fmt.Errorf("wrong passphrase for key %s (asked %d times); check it, or load the key into ssh-agent", kf.path, passphraseTries))
}

// unlocked is the key's signer once decrypted, or why it cannot be used.
func (kf *keyFile) unlocked() (ssh.Signer, error) {
	kf.mu.Lock()
	defer kf.mu.Unlock()
	return kf.signer, kf.err
}

// authPlan is what one handshake offers, and what it said it offered.
type authPlan struct {
	signers []ssh.Signer
	offered []string // for the error message
	missing []string // explicit identities that do not exist
	broken  []string // identities that cannot be used, and why
	agent   io.Closer
	signErr error // a key that failed to sign (wrong passphrase...)
	mu      sync.Mutex
}

// Close closes the agent connection: an agent that does not answer a
// signing request then lets the handshake end (handshakeOnce's watch).
func (p *authPlan) Close() error {
	p.close()
	return nil
}

func (p *authPlan) close() {
	if p.agent != nil {
		p.agent.Close()
	}
}

func (p *authPlan) setSignErr(err error) {
	p.mu.Lock()
	if p.signErr == nil {
		p.signErr = err
	}
	p.mu.Unlock()
}

// authPlan lists the keys to offer, as OpenSSH orders them: agent keys
// (only those matching the configured identities when one is configured, so
// a full agent does not exhaust MaxAuthTries), then identity files the agent
// does not hold; a certificate goes before its plain key.
// The agent's answer is waited for only as long as the handshake may
// take (ctx and the budget b): an agent that accepts and never answers (a
// stopped or wedged one) must not hold the connect forever.
func (d *Dialer) authPlan(ctx context.Context, e *endpoint, b *budget) *authPlan {
	p := &authPlan{}
	var idents []*ident
	for _, path := range e.identities {
		kf := d.keyFile(path)
		if kf == nil {
			if e.explicitIdentity {
				p.missing = append(p.missing, path)
			}
			continue
		}
		pub, kerr := kf.state()
		if kerr != nil && pub == nil {
			p.broken = append(p.broken, kerr.Error())
			continue
		}
		id := &ident{kf: kf}
		if c := readCert(path + "-cert.pub"); c != nil {
			id.certs = append(id.certs, c)
		}
		idents = append(idents, id)
	}
	var extraCerts []*ssh.Certificate
	for _, path := range e.certFiles {
		if c := readCert(path); c != nil {
			extraCerts = append(extraCerts, c)
		}
	}
	certsFor := func(pub ssh.PublicKey) []*ssh.Certificate {
		var out []*ssh.Certificate
		for _, id := range idents {
			if k, _ := id.kf.state(); k != nil && sameKey(k, pub) {
				out = append(out, id.certs...)
			}
		}
		for _, c := range extraCerts {
			if sameKey(c.Key, pub) {
				out = append(out, c)
			}
		}
		return out
	}

	filter := e.explicitIdentity || e.identitiesOnly
	inAgent := map[string]bool{}
	if e.agentSocket != "" {
		if conn, err := net.DialTimeout("unix", e.agentSocket, agentDialTimeout); err == nil {
			p.agent = conn
			stop := b.watch(ctx, conn)
			signers, err := agent.NewClient(conn).Signers()
			if stop() {
				err = errors.New("the agent did not answer in time")
			}
			if err == nil {
				for _, s := range signers {
					pub := plainKey(s.PublicKey())
					if filter && !identityHas(idents, pub) {
						continue
					}
					if _, isCert := s.PublicKey().(*ssh.Certificate); !isCert {
						for _, c := range certsFor(pub) {
							if cs, err := ssh.NewCertSigner(c, s); err == nil {
								p.signers = append(p.signers, cs)
								p.offered = append(p.offered, "certificate "+ssh.FingerprintSHA256(pub)+" (agent)")
							}
						}
					}
					p.signers = append(p.signers, s)
					p.offered = append(p.offered, "agent key "+ssh.FingerprintSHA256(pub))
					inAgent[string(pub.Marshal())] = true
				}
			}
		}
	}
	for _, id := range idents {
		pub, _ := id.kf.state()
		if pub != nil && inAgent[string(pub.Marshal())] {
			continue
		}
		for _, c := range id.certs {
			p.signers = append(p.signers, &fileSigner{d: d, kf: id.kf, e: e, b: b, plan: p, cert: c})
			p.offered = append(p.offered, id.kf.path+"-cert.pub")
		}
		for _, c := range extraCerts {
			if pub != nil && sameKey(c.Key, pub) {
				p.signers = append(p.signers, &fileSigner{d: d, kf: id.kf, e: e, b: b, plan: p, cert: c})
				p.offered = append(p.offered, "certificate for "+id.kf.path)
			}
		}
		p.signers = append(p.signers, &fileSigner{d: d, kf: id.kf, e: e, b: b, plan: p})
		p.offered = append(p.offered, id.kf.path)
	}
	return p
}

// ident is an identity file and the certificates found for it.
type ident struct {
	kf    *keyFile
	certs []*ssh.Certificate
}

func identityHas(idents []*ident, pub ssh.PublicKey) bool {
	for _, id := range idents {
		if k, _ := id.kf.state(); k != nil && sameKey(k, pub) {
			return true
		}
	}
	return false
}

func sameKey(a, b ssh.PublicKey) bool { return bytes.Equal(a.Marshal(), b.Marshal()) }

func readCert(path string) *ssh.Certificate {
	b, err := readSmall(path)
	if err != nil {
		return nil
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return nil
	}
	c, _ := pub.(*ssh.Certificate)
	return c
}

// fileSigner offers an identity file's public key (or its certificate) and
// decrypts the private key only when the server has accepted the offer.
type fileSigner struct {
	d    *Dialer
	kf   *keyFile
	e    *endpoint
	b    *budget
	plan *authPlan
	cert *ssh.Certificate
}

func (s *fileSigner) PublicKey() ssh.PublicKey {
	if s.cert != nil {
		return s.cert
	}
	if pub, _ := s.kf.state(); pub != nil {
		return pub
	}
	// An encrypted PEM key without key.pub: its public half needs the
	// passphrase already.
	if signer, err := s.d.unlock(s.kf, s.e, s.b); err == nil {
		return signer.PublicKey()
	}
	return unknownKey{}
}

// Algorithms are the signature algorithms of the underlying key.
func (s *fileSigner) Algorithms() []string {
	pub := plainKey(s.PublicKey())
	if pub.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{pub.Type()}
}

func (s *fileSigner) Sign(rand io.Reader, data []byte) (*ssh.Signature, error) {
	signer, err := s.signer()
	if err != nil {
		return nil, err
	}
	return signer.Sign(rand, data)
}

func (s *fileSigner) SignWithAlgorithm(rand io.Reader, data []byte, algorithm string) (*ssh.Signature, error) {
	signer, err := s.signer()
	if err != nil {
		return nil, err
	}
	as, ok := signer.(ssh.AlgorithmSigner)
	if !ok {
		return nil, fmt.Errorf("key %s cannot sign with %s", s.kf.path, algorithm)
	}
	return as.SignWithAlgorithm(rand, data, algorithm)
}

func (s *fileSigner) signer() (ssh.Signer, error) {
	signer, err := s.d.unlock(s.kf, s.e, s.b)
	if err != nil {
		s.plan.setSignErr(err)
		return nil, err
	}
	return signer, nil
}

// unknownKey stands for a key whose public half could not be read; servers
// refuse it.
type unknownKey struct{}

func (unknownKey) Type() string                        { return "unknown" }
func (unknownKey) Marshal() []byte                     { return []byte("unknown") }
func (unknownKey) Verify([]byte, *ssh.Signature) error { return errors.New("unknown key") }

// describe summarises what was offered, for an auth error.
func (p *authPlan) describe() string {
	var parts []string
	agentKeys := 0
	for _, o := range p.offered {
		if strings.HasPrefix(o, "agent key ") {
			agentKeys++
			continue
		}
		parts = append(parts, o)
	}
	if agentKeys > 0 {
		parts = append([]string{fmt.Sprintf("%d agent key(s)", agentKeys)}, parts...)
	}
	return strings.Join(parts, ", ")
}
