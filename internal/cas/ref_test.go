package cas

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// snapshots stores n distinct snapshots of one tree.
func snapshots(t *testing.T, s *Store, n int) []Digest {
	t.Helper()
	root := ingestSpec(t, s, fileSpec{"f": "x\n"})
	var out []Digest
	for i := range n {
		d, err := s.PutSnapshot(Snapshot{Root: root, Time: int64(i), Message: fmt.Sprint("snapshot ", i)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func TestUpdateRefIsCompareAndSwap(t *testing.T) {
	s := newStore(t)
	snaps := snapshots(t, s, 3)
	key := RefKey{Target: "build-server", Path: "~/src/app"}
	ctx := t.Context()

	r, err := s.ReadRef(key)
	if err != nil || r.Revision != 0 || !r.Snapshot.IsZero() {
		t.Fatalf("a new ref: %+v, %v", r, err)
	}
	r, err = s.UpdateRef(ctx, key, 0, snaps[0])
	if err != nil || r.Revision != 1 || r.Snapshot != snaps[0] {
		t.Fatalf("create: %+v, %v", r, err)
	}
	// A stale revision loses, and says where the ref is now.
	_, err = s.UpdateRef(ctx, key, 0, snaps[1])
	var ce *RefConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrRefConflict) || ce.Expected != 0 || ce.Actual != 1 {
		t.Fatalf("stale update: %v", err)
	}
	if _, err := s.UpdateRef(ctx, key, 5, snaps[1]); !errors.Is(err, ErrRefConflict) {
		t.Fatalf("future revision: %v", err)
	}
	r, err = s.UpdateRef(ctx, key, 1, snaps[1])
	if err != nil || r.Revision != 2 {
		t.Fatalf("update: %+v, %v", r, err)
	}
	if got, err := s.ReadRef(key); err != nil || got != r {
		t.Fatalf("ReadRef = %+v, %v; want %+v", got, err, r)
	}
	// Refs are per target and path.
	other, _ := s.ReadRef(RefKey{Target: "build-server", Path: "~/src/other"})
	if other.Revision != 0 {
		t.Fatalf("another path's ref: %+v", other)
	}

	// The snapshot must exist, and be a snapshot.
	if _, err := s.UpdateRef(ctx, key, 2, DigestOf([]byte("absent"))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update to a missing snapshot: %v", err)
	}
	tree := ingestSpec(t, s, fileSpec{"g": "y\n"})
	if _, err := s.UpdateRef(ctx, key, 2, tree); err == nil {
		t.Fatal("update to a tree accepted")
	}
	for _, bad := range []RefKey{{Target: "", Path: "/p"}, {Target: "t", Path: ""}, {Target: "t\x00", Path: "/p"}, {Target: "t", Path: "\xff"}, {Target: strings.Repeat("t", 256), Path: "/p"}} {
		if _, err := s.UpdateRef(ctx, bad, 0, snaps[0]); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(s.Root(), "refs", ".tmp-*")); len(entries) != 0 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

func TestReadRefRefusesForeignOrDamagedFiles(t *testing.T) {
	s := newStore(t)
	snaps := snapshots(t, s, 1)
	a, b := RefKey{Target: "a", Path: "/p"}, RefKey{Target: "b", Path: "/p"}
	if _, err := s.UpdateRef(t.Context(), a, 0, snaps[0]); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(s.refFile(a))
	// b's file holding a's ref must not pass as b's.
	os.WriteFile(s.refFile(b), data, 0o600)
	if _, err := s.ReadRef(b); err == nil {
		t.Fatal("a ref file naming another key was accepted")
	}
	os.WriteFile(s.refFile(a), []byte(`{"kind":"ref"}`), 0o600)
	if _, err := s.ReadRef(a); err == nil {
		t.Fatal("a damaged ref file was accepted")
	}
}

func TestConcurrentRefUpdatesExactlyOneWins(t *testing.T) {
	s := newStore(t)
	const n = 24
	snaps := snapshots(t, s, n)
	key := RefKey{Target: "dev", Path: "/srv/app"}
	for round := range int64(4) {
		var wg sync.WaitGroup
		results := make([]error, n)
		for i := range n {
			wg.Go(func() {
				_, results[i] = s.UpdateRef(t.Context(), key, round, snaps[i])
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range results {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: updates %d and %d both won", round, winner, i)
				}
				winner = i
			case !errors.Is(err, ErrRefConflict):
				t.Fatalf("round %d: update %d: %v", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody won", round)
		}
		r, err := s.ReadRef(key)
		if err != nil || r.Revision != round+1 || r.Snapshot != snaps[winner] {
			t.Fatalf("round %d: ref %+v, %v; want revision %d at the winner's snapshot", round, r, err, round+1)
		}
	}
}

func TestConcurrentRefUpdatesAcrossProcessesExactlyOneWins(t *testing.T) {
	s := newStore(t)
	snaps := snapshots(t, s, 1)
	outs := runHelpers(t, 8, "ref", helperArgs{Store: s.Root(), Snap: snaps[0]})
	won := 0
	for i, out := range outs {
		switch out {
		case "won":
			won++
		case "lost":
		default:
			t.Fatalf("helper %d: %q", i, out)
		}
	}
	if won != 1 {
		t.Fatalf("%d processes won, want exactly 1 (%v)", won, outs)
	}
	if r, err := s.ReadRef(RefKey{Target: "dev", Path: "/srv/app"}); err != nil || r.Revision != 1 {
		t.Fatalf("ref after the race: %+v, %v", r, err)
	}
}

func TestHistoryWalksFirstParents(t *testing.T) {
	s := newStore(t)
	root := ingestSpec(t, s, fileSpec{"f": "x\n"})
	put := func(msg string, parents ...Digest) Digest {
		t.Helper()
		d, err := s.PutSnapshot(Snapshot{Root: root, Parents: parents, Time: 1, Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := put("a")
	b := put("b", a)
	side := put("side", a)
	merge := put("merge", b, side) // first parent: b
	c := put("c", merge)

	hist, err := s.History(t.Context(), c, 10)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, h := range hist {
		msgs = append(msgs, h.Snapshot.Message)
	}
	if strings.Join(msgs, ",") != "c,merge,b,a" {
		t.Fatalf("history = %v", msgs)
	}
	if hist[0].Digest != c {
		t.Fatal("history does not start at head")
	}
	if hist, _ := s.History(t.Context(), c, 2); len(hist) != 2 {
		t.Fatalf("limit 2 gave %d entries", len(hist))
	}
	if _, err := s.History(t.Context(), c, 0); err == nil {
		t.Fatal("limit 0 accepted")
	}
	// A snapshot whose parent is absent is refused when stored.
	if _, err := s.PutSnapshot(Snapshot{Root: root, Parents: []Digest{DigestOf([]byte("none"))}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("PutSnapshot with a missing parent: %v", err)
	}
}
