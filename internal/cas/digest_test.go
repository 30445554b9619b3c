package cas

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const helloHash = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03" // sha256("hello\n")

func TestParseDigest(t *testing.T) {
	tests := []struct {
		in   string
		want Digest
		ok   bool
	}{
		{helloHash + "/6", Digest{helloHash, 6}, true},
		{helloHash + "/0", Digest{helloHash, 0}, true},
		{helloHash, Digest{}, false},
		{helloHash + "/", Digest{}, false},
		{helloHash + "/06", Digest{}, false},
		{helloHash + "/+6", Digest{}, false},
		{helloHash + "/-1", Digest{}, false},
		{helloHash + "/6 ", Digest{}, false},
		{helloHash + "/1099511627777", Digest{}, false}, // MaxObjectSize+1
		{helloHash + "/99999999999999999999", Digest{}, false},
		{strings.ToUpper(helloHash) + "/6", Digest{}, false},
		{helloHash[:63] + "/6", Digest{}, false},
		{helloHash + "0/6", Digest{}, false},
		{helloHash[:63] + "g/6", Digest{}, false},
		{strings.Repeat("../", 21) + "a/6", Digest{}, false},
		{"/6", Digest{}, false},
		{"", Digest{}, false},
	}
	for _, tt := range tests {
		got, err := ParseDigest(tt.in)
		if tt.ok != (err == nil) || got != tt.want {
			t.Errorf("ParseDigest(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidDigest) {
			t.Errorf("ParseDigest(%q) error %v is not ErrInvalidDigest", tt.in, err)
		}
	}
}

func FuzzParseDigest(f *testing.F) {
	f.Add(helloHash + "/6")
	f.Add(strings.ToUpper(helloHash) + "/6")
	f.Add("../../etc/passwd/1")
	f.Add(helloHash + "/007")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDigest(s)
		if err != nil {
			return
		}
		if d.String() != s {
			t.Fatalf("ParseDigest(%q) = %v, which prints differently", s, d)
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("ParseDigest(%q) accepted an invalid digest: %v", s, err)
		}
	})
}

// badDigests are refused everywhere; the "../" one is 64 characters long so
// only the character check stops it.
var badDigests = map[string]Digest{
	"uppercase":      {strings.ToUpper(helloHash), 6},
	"short":          {helloHash[:10], 6},
	"long":           {helloHash + "00", 6},
	"dot-dot-slash":  {strings.Repeat("../", 21) + "a", 6},
	"dot-dot-prefix": {"../" + helloHash[3:], 6},
	"empty":          {"", 0},
	"negative size":  {helloHash, -1},
	"huge size":      {helloHash, MaxObjectSize + 1},
}

// TestEveryOperationRefusesBadDigests runs each operation that takes a
// digest with each malformed one and checks it is refused, and that
// nothing outside the store was touched.
func TestEveryOperationRefusesBadDigests(t *testing.T) {
	s := newStore(t)
	good := ingestSpec(t, s, fileSpec{"a": "hello\n"})
	// A file the "../" digests would reach if joined onto the store path.
	canary := filepath.Join(filepath.Dir(s.Root()), "canary")
	if err := os.WriteFile(canary, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	remote := LocalRemote{Store: newStore(t)}
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()

	ops := map[string]func(d Digest) error{
		"Validate": func(d Digest) error { return d.Validate() },
		"Has":      func(d Digest) error { _, err := s.Has(ctx, []Digest{good, d}); return err },
		"Contains": func(d Digest) error { _, err := s.Contains(d); return err },
		"Put":      func(d Digest) error { return s.Put(Object{Digest: d, Data: []byte("hello\n")}) },
		"PutBatch": func(d Digest) error {
			return s.PutBatch(ctx, []Object{{Digest: d, Data: []byte("hello\n")}})
		},
		"Get":       func(d Digest) error { _, err := s.Get(ctx, []Digest{d}); return err },
		"Read":      func(d Digest) error { _, err := s.Read(d); return err },
		"Open":      func(d Digest) error { _, err := s.Open(d); return err },
		"ReadChunk": func(d Digest) error { _, err := s.ReadChunk(d, 0, 10); return err },
		"NewUpload": func(d Digest) error { _, err := s.NewUpload(d); return err },
		"PutStream": func(d Digest) error { return s.PutStream(ctx, d, strings.NewReader("hello\n")) },
		"ReadTree":  func(d Digest) error { _, err := s.ReadTree(d); return err },
		"PutTree": func(d Digest) error {
			_, err := s.PutTree(Tree{Entries: []Entry{{Name: "x", Type: EntryFile, Digest: d}}})
			return err
		},
		"ReadSnap":   func(d Digest) error { _, err := s.ReadSnapshot(d); return err },
		"PutSnap":    func(d Digest) error { _, err := s.PutSnapshot(Snapshot{Root: d}); return err },
		"SnapParent": func(d Digest) error { _, err := s.PutSnapshot(Snapshot{Root: good, Parents: []Digest{d}}); return err },
		"History":    func(d Digest) error { _, err := s.History(ctx, d, 5); return err },
		"UpdateRef": func(d Digest) error {
			_, err := s.UpdateRef(ctx, RefKey{Target: "dev", Path: "/p"}, 0, d)
			return err
		},
		"Materialize": func(d Digest) error { return s.MaterializeIn(ctx, root, "out", d) },
		"MergeBase":   func(d Digest) error { _, err := s.MergeTrees(ctx, d, good, good, MergeOptions{}); return err },
		"MergeOurs":   func(d Digest) error { _, err := s.MergeTrees(ctx, good, d, good, MergeOptions{}); return err },
		"Push":        func(d Digest) error { _, err := Push(ctx, s, remote, d); return err },
		"Fetch":       func(d Digest) error { _, err := Fetch(ctx, s, remote, d); return err },
		"RemoteHas":   func(d Digest) error { _, err := remote.Has(ctx, []Digest{d}); return err },
		"RemoteGetStream": func(d Digest) error {
			return remote.GetStream(ctx, d, &bytes.Buffer{})
		},
	}
	for opName, op := range ops {
		for name, d := range badDigests {
			t.Run(opName+"/"+name, func(t *testing.T) {
				if err := op(d); err == nil {
					t.Fatalf("%s accepted digest %+v", opName, d)
				} else if !errors.Is(err, ErrInvalidDigest) && !errors.Is(err, ErrInvalidTree) {
					t.Fatalf("%s: error %v is neither ErrInvalidDigest nor ErrInvalidTree", opName, err)
				}
			})
		}
	}
	if data, err := os.ReadFile(canary); err != nil || string(data) != "keep" {
		t.Fatalf("canary outside the store changed: %q, %v", data, err)
	}
	if r, err := s.ReadRef(RefKey{Target: "dev", Path: "/p"}); err != nil || r.Revision != 0 {
		t.Fatalf("ref written by a refused update: %+v, %v", r, err)
	}
}
