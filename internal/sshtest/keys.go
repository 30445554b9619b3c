package sshtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Key is a key pair on disk in OpenSSH format: Path holds the private key
// (encrypted when Passphrase is set), PubPath the public one.
type Key struct {
	Type       string // "ed25519", "ecdsa" or "rsa"
	Path       string
	PubPath    string
	Public     ssh.PublicKey
	Signer     ssh.Signer
	Passphrase string
	// CertPath is the user certificate written by Certify, if any
	// (Path + "-cert.pub", where OpenSSH looks for it).
	CertPath string
}

// NewKey writes a new unencrypted key pair of type typ into a temporary
// directory.
func NewKey(t testing.TB, typ string) *Key {
	t.Helper()
	k, err := newKey(TempDir(t), "id_"+typ, typ, "")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// NewEncryptedKey writes a new key pair whose private half is encrypted
// with passphrase.
func NewEncryptedKey(t testing.TB, typ, passphrase string) *Key {
	t.Helper()
	k, err := newKey(TempDir(t), "id_"+typ, typ, passphrase)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// KeyIn writes a new key pair at dir/name (for tests that need a key in a
// particular place, such as a fake ~/.ssh/id_ed25519).
func KeyIn(t testing.TB, dir, name, typ, passphrase string) *Key {
	t.Helper()
	k, err := newKey(dir, name, typ, passphrase)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newKey(dir, name, typ, passphrase string) (*Key, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sshtest: %w", err)
	}
	var priv crypto.Signer
	var err error
	switch typ {
	case "ed25519":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case "ecdsa":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "rsa":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		return nil, fmt.Errorf("sshtest: unknown key type %q", typ)
	}
	if err != nil {
		return nil, fmt.Errorf("sshtest: generate %s key: %w", typ, err)
	}
	signer, err := ssh.NewSignerFromSigner(priv)
	if err != nil {
		return nil, fmt.Errorf("sshtest: %w", err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, name)
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, name, []byte(passphrase))
	}
	if err != nil {
		return nil, fmt.Errorf("sshtest: marshal %s key: %w", typ, err)
	}
	k := &Key{
		Type:       typ,
		Path:       filepath.Join(dir, name),
		PubPath:    filepath.Join(dir, name+".pub"),
		Public:     signer.PublicKey(),
		Signer:     signer,
		Passphrase: passphrase,
	}
	if err := os.WriteFile(k.Path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, fmt.Errorf("sshtest: %w", err)
	}
	if err := os.WriteFile(k.PubPath, []byte(k.AuthorizedLine()), 0o644); err != nil {
		return nil, fmt.Errorf("sshtest: %w", err)
	}
	return k, nil
}

// AuthorizedLine is the key's authorized_keys line, newline included.
func (k *Key) AuthorizedLine() string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k.Public))) + " " + filepath.Base(k.Path) + "\n"
}

// Fingerprint is the key's SHA256 fingerprint, as ssh-keygen -l prints it.
func (k *Key) Fingerprint() string { return ssh.FingerprintSHA256(k.Public) }

// Certify signs a user certificate for k with the CA ca, valid for the
// given principals (user names), and writes it to k.Path+"-cert.pub".
func (k *Key) Certify(t testing.TB, ca *Key, principals ...string) {
	t.Helper()
	path, err := ca.sign(k, ssh.UserCert, principals)
	if err != nil {
		t.Fatal(err)
	}
	k.CertPath = path
}

// sign makes a certificate for subject signed by ca and writes it beside
// subject's private key, as OpenSSH names it.
func (ca *Key) sign(subject *Key, certType uint32, principals []string) (string, error) {
	cert := &ssh.Certificate{
		Key:             subject.Public,
		Serial:          1,
		CertType:        certType,
		KeyId:           filepath.Base(subject.Path),
		ValidPrincipals: principals,
		ValidAfter:      uint64(time.Now().Add(-time.Hour).Unix()),
		ValidBefore:     uint64(time.Now().Add(24 * time.Hour).Unix()),
	}
	if certType == ssh.UserCert {
		cert.Permissions.Extensions = map[string]string{"permit-pty": ""}
	}
	signer := ca.Signer
	if ca.Type == "rsa" {
		s, err := ssh.NewSignerWithAlgorithms(ca.Signer.(ssh.AlgorithmSigner), []string{ssh.KeyAlgoRSASHA512})
		if err != nil {
			return "", fmt.Errorf("sshtest: %w", err)
		}
		signer = s
	}
	if err := cert.SignCert(rand.Reader, signer); err != nil {
		return "", fmt.Errorf("sshtest: sign certificate: %w", err)
	}
	path := subject.Path + "-cert.pub"
	if err := os.WriteFile(path, ssh.MarshalAuthorizedKey(cert), 0o644); err != nil {
		return "", fmt.Errorf("sshtest: %w", err)
	}
	return path, nil
}

// hashHost hashes a known_hosts host name as HashKnownHosts does:
// "|1|salt|hmac-sha1(salt, host)".
func hashHost(host string) string {
	salt := make([]byte, sha1.Size)
	rand.Read(salt)
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(host))
	return "|1|" + base64.StdEncoding.EncodeToString(salt) + "|" + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
