package cas

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// HashLen is the length of a hash: SHA-256 in lowercase hexadecimal.
const HashLen = 64

// MaxObjectSize bounds the size a digest may claim (1 TiB), so a forged
// digest cannot make a receiver reserve or wait for absurd amounts of data.
const MaxObjectSize int64 = 1 << 40

// ErrInvalidDigest is returned (wrapped) for any malformed digest or hash.
var ErrInvalidDigest = errors.New("invalid digest")

// Digest names an object: the SHA-256 of its bytes and their number.
// The zero Digest is not valid.
type Digest struct {
	Hash string // 64 lowercase hexadecimal characters
	Size int64  // 0 <= Size <= MaxObjectSize
}

// DigestOf returns the digest of data.
func DigestOf(data []byte) Digest {
	sum := sha256.Sum256(data)
	return Digest{Hash: hex.EncodeToString(sum[:]), Size: int64(len(data))}
}

// String renders d as "HASH/SIZE", the form ParseDigest reads.
func (d Digest) String() string {
	return d.Hash + "/" + strconv.FormatInt(d.Size, 10)
}

// IsZero reports whether d is the zero Digest.
func (d Digest) IsZero() bool { return d == Digest{} }

// Validate reports whether d is well formed: a valid hash and a size in
// range.
func (d Digest) Validate() error {
	if err := ValidateHash(d.Hash); err != nil {
		return err
	}
	if d.Size < 0 || d.Size > MaxObjectSize {
		return fmt.Errorf("%w: size %d of %s is out of range; sizes run from 0 to %d bytes", ErrInvalidDigest, d.Size, abbrev(d.Hash), MaxObjectSize)
	}
	return nil
}

// ValidateHash accepts exactly 64 lowercase hexadecimal characters.
func ValidateHash(h string) error {
	if len(h) != HashLen {
		return fmt.Errorf("%w: hash %q is %d characters long; a hash is %d lowercase hexadecimal characters", ErrInvalidDigest, clip(h), len(h), HashLen)
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w: hash %q has %q at position %d; a hash is %d lowercase hexadecimal characters", ErrInvalidDigest, clip(h), c, i, HashLen)
		}
	}
	return nil
}

// ParseDigest reads "HASH/SIZE" (as written by Digest.String). The size is
// plain decimal: no sign, no leading zeros.
func ParseDigest(s string) (Digest, error) {
	h, sz, ok := strings.Cut(s, "/")
	if !ok {
		return Digest{}, fmt.Errorf("%w: %q has no size; write a digest as HASH/SIZE", ErrInvalidDigest, clip(s))
	}
	if err := ValidateHash(h); err != nil {
		return Digest{}, err
	}
	n, err := parseSize(sz)
	if err != nil {
		return Digest{}, fmt.Errorf("%w: size %q in %q: %v", ErrInvalidDigest, clip(sz), abbrev(h), err)
	}
	d := Digest{Hash: h, Size: n}
	if err := d.Validate(); err != nil {
		return Digest{}, err
	}
	return d, nil
}

func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty size; write it in decimal")
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, errors.New("leading zero; write the size in plain decimal")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not a decimal number; write the size in plain decimal")
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("too large")
	}
	return n, nil
}

// validateAll checks every digest and reports the first bad one with its
// index, so a batch is refused before anything is done.
func validateAll(ds []Digest) error {
	for i, d := range ds {
		if err := d.Validate(); err != nil {
			return fmt.Errorf("digest %d: %w", i, err)
		}
	}
	return nil
}

// clip shortens untrusted text quoted in an error message.
func clip(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// abbrev shortens a (valid) hash for messages.
func abbrev(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
