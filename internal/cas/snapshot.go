package cas

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// MaxMessageLen bounds a snapshot message.
const MaxMessageLen = 64 << 10

// Snapshot records a tree at a point in history.
type Snapshot struct {
	Root    Digest   // the tree
	Parents []Digest // earlier snapshots; the first is the mainline
	Time    int64    // Unix time in nanoseconds (an integer: no floats)
	Message string
}

// NewSnapshot is a convenience for a snapshot taken now.
func NewSnapshot(root Digest, message string, parents ...Digest) Snapshot {
	return Snapshot{Root: root, Parents: parents, Time: time.Now().UnixNano(), Message: message}
}

// Encode returns the snapshot's canonical bytes:
//
//	{"kind":"snapshot","message":S,"parents":[D,...],"root":D,"time_unix_ns":N}
//
// with each D a digest object {"hash":H,"size":N}.
func (sn Snapshot) Encode() ([]byte, error) {
	if err := sn.validate(); err != nil {
		return nil, err
	}
	parents := make([]any, len(sn.Parents))
	for i, p := range sn.Parents {
		parents[i] = digestJSON(p)
	}
	return MarshalCanonical(map[string]any{
		"kind":         "snapshot",
		"message":      sn.Message,
		"parents":      parents,
		"root":         digestJSON(sn.Root),
		"time_unix_ns": sn.Time,
	})
}

func (sn Snapshot) validate() error {
	if err := sn.Root.Validate(); err != nil {
		return fmt.Errorf("snapshot root: %w", err)
	}
	for i, p := range sn.Parents {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("snapshot parent %d: %w", i, err)
		}
	}
	if !utf8.ValidString(sn.Message) || len(sn.Message) > MaxMessageLen {
		return fmt.Errorf("%w: snapshot message must be valid UTF-8 of at most %d bytes", ErrNotCanonical, MaxMessageLen)
	}
	return nil
}

// DecodeSnapshot parses canonical snapshot bytes.
func DecodeSnapshot(data []byte) (Snapshot, error) {
	const what = "snapshot"
	v, err := UnmarshalCanonical(data)
	if err != nil {
		return Snapshot{}, fmt.Errorf("decode snapshot: %w", err)
	}
	f, err := asFields(v, what)
	if err != nil {
		return Snapshot{}, fmt.Errorf("decode snapshot: %w", err)
	}
	if err := f.only(what, "kind", "message", "parents", "root", "time_unix_ns"); err != nil {
		return Snapshot{}, fmt.Errorf("decode snapshot: %w", err)
	}
	if k, err := f.str(what, "kind"); err != nil || k != "snapshot" {
		return Snapshot{}, fmt.Errorf("decode snapshot: %w: kind is not \"snapshot\"", ErrNotCanonical)
	}
	var sn Snapshot
	if sn.Message, err = f.str(what, "message"); err != nil {
		return Snapshot{}, fmt.Errorf("decode snapshot: %w", err)
	}
	if sn.Time, err = f.integer(what, "time_unix_ns"); err != nil {
		return Snapshot{}, fmt.Errorf("decode snapshot: %w", err)
	}
	if sn.Root, err = f.digest(what, "root"); err != nil {
		return Snapshot{}, fmt.Errorf("decode snapshot: %w", err)
	}
	list, err := f.list(what, "parents")
	if err != nil {
		return Snapshot{}, fmt.Errorf("decode snapshot: %w", err)
	}
	for i, p := range list {
		d, err := digestValue(p, fmt.Sprintf("snapshot parent %d", i))
		if err != nil {
			return Snapshot{}, fmt.Errorf("decode snapshot: %w", err)
		}
		sn.Parents = append(sn.Parents, d)
	}
	if err := sn.validate(); err != nil {
		return Snapshot{}, fmt.Errorf("decode snapshot: %w", err)
	}
	return sn, nil
}

// PutSnapshot stores sn after checking that its root tree and parents are
// in the store.
func (s *Store) PutSnapshot(sn Snapshot) (Digest, error) {
	data, err := sn.Encode()
	if err != nil {
		return Digest{}, err
	}
	if _, err := s.ReadTree(sn.Root); err != nil {
		return Digest{}, fmt.Errorf("snapshot root: %w", err)
	}
	for _, p := range sn.Parents {
		if _, err := s.ReadSnapshot(p); err != nil {
			return Digest{}, fmt.Errorf("snapshot parent: %w", err)
		}
	}
	return s.Add(data)
}

// ReadSnapshot reads, verifies and decodes the snapshot d.
func (s *Store) ReadSnapshot(d Digest) (Snapshot, error) {
	data, err := s.Read(d)
	if err != nil {
		return Snapshot{}, err
	}
	sn, err := DecodeSnapshot(data)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", d, err)
	}
	return sn, nil
}

// HistoryEntry is one snapshot of a history walk.
type HistoryEntry struct {
	Digest   Digest
	Snapshot Snapshot
}

// History walks first parents from head, newest first, returning at most
// limit entries (limit must be positive).
func (s *Store) History(ctx context.Context, head Digest, limit int) ([]HistoryEntry, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("history: limit %d; ask for at least one entry", limit)
	}
	var out []HistoryEntry
	for d := head; len(out) < limit; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sn, err := s.ReadSnapshot(d)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		out = append(out, HistoryEntry{Digest: d, Snapshot: sn})
		if len(sn.Parents) == 0 {
			break
		}
		d = sn.Parents[0]
	}
	return out, nil
}
