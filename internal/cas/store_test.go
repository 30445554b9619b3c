package cas

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func objectOf(s string) Object {
	return Object{Digest: DigestOf([]byte(s)), Data: []byte(s)}
}

func TestStoreRoundTrip(t *testing.T) {
	s := newStore(t)
	d, err := s.Add([]byte("hello\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d != (Digest{helloHash, 6}) {
		t.Fatalf("digest = %v", d)
	}
	// The sharded layout is part of the contract with other tools.
	if _, err := os.Stat(filepath.Join(s.Root(), "objects", helloHash[:2], helloHash[2:])); err != nil {
		t.Fatalf("object not at its sharded path: %v", err)
	}
	got, err := s.Read(d)
	if err != nil || string(got) != "hello\n" {
		t.Fatalf("Read = %q, %v", got, err)
	}
	missing, err := s.Has(t.Context(), []Digest{d, DigestOf([]byte("other")), d})
	if err != nil || len(missing) != 1 || missing[0] != DigestOf([]byte("other")) {
		t.Fatalf("Has = %v, %v", missing, err)
	}
	// Same name, different size: not the object.
	if missing, _ := s.Has(t.Context(), []Digest{{helloHash, 7}}); len(missing) != 1 {
		t.Fatalf("Has with a wrong size reported the object present")
	}
	if entries, _ := os.ReadDir(filepath.Join(s.Root(), "tmp")); len(entries) != 0 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestPutBatchVerifiesEveryEntryBeforeStoring(t *testing.T) {
	good := []Object{objectOf("one"), objectOf("two"), objectOf("three")}
	tampered := map[string]Object{
		"bytes changed":      {Digest: DigestOf([]byte("four")), Data: []byte("fouR")},
		"size claims more":   {Digest: Digest{DigestOf([]byte("four")).Hash, 5}, Data: []byte("four")},
		"size claims less":   {Digest: Digest{DigestOf([]byte("four")).Hash, 3}, Data: []byte("four")},
		"hash of other data": {Digest: DigestOf([]byte("five")), Data: []byte("four")},
		"uppercase hash":     {Digest: Digest{strings.ToUpper(DigestOf([]byte("four")).Hash), 4}, Data: []byte("four")},
	}
	for name, bad := range tampered {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			// The bad entry comes last: earlier good ones must not land.
			batch := append(append([]Object{}, good...), bad)
			err := s.PutBatch(t.Context(), batch)
			if err == nil {
				t.Fatal("PutBatch accepted a tampered entry")
			}
			if !errors.Is(err, ErrMismatch) && !errors.Is(err, ErrInvalidDigest) {
				t.Fatalf("error %v is neither ErrMismatch nor ErrInvalidDigest", err)
			}
			var ds []Digest
			for _, o := range good {
				ds = append(ds, o.Digest)
			}
			if missing, _ := s.Has(t.Context(), ds); len(missing) != len(good) {
				t.Fatalf("a refused batch stored %d objects", len(good)-len(missing))
			}
		})
	}
	t.Run("all good", func(t *testing.T) {
		s := newStore(t)
		if err := s.PutBatch(t.Context(), good); err != nil {
			t.Fatal(err)
		}
		for _, o := range good {
			if got, err := s.Read(o.Digest); err != nil || !bytes.Equal(got, o.Data) {
				t.Fatalf("Read(%v) = %q, %v", o.Digest, got, err)
			}
		}
	})
}

func TestBatchCaps(t *testing.T) {
	s := newStore(t)
	var many []Object
	var manyDigests []Digest
	for i := range MaxBatchEntries + 1 {
		o := objectOf(fmt.Sprint(i))
		many = append(many, o)
		manyDigests = append(manyDigests, o.Digest)
	}
	big := objectOf(strings.Repeat("x", MaxBatchBytes/2+1))
	big2 := objectOf(strings.Repeat("y", MaxBatchBytes/2+1))
	tests := []struct {
		name string
		err  error
	}{
		{"put too many", s.PutBatch(t.Context(), many)},
		{"put too big", s.PutBatch(t.Context(), []Object{big, big2})},
		{"get too many", func() error { _, err := s.Get(t.Context(), manyDigests); return err }()},
		{"get too big", func() error { _, err := s.Get(t.Context(), []Digest{big.Digest, big2.Digest}); return err }()},
		{"has too many", func() error {
			_, err := s.Has(t.Context(), make([]Digest, MaxHasDigests+1))
			return err
		}()},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, ErrBatchTooLarge) {
			t.Errorf("%s: error %v, want ErrBatchTooLarge", tt.name, tt.err)
		}
	}
	if missing, _ := s.Has(t.Context(), manyDigests[:10]); len(missing) != 10 {
		t.Fatalf("a refused batch stored objects")
	}
}

// tamper rewrites a stored object's file behind the store's back.
func tamper(t *testing.T, s *Store, d Digest, data []byte) {
	t.Helper()
	p := s.objectPath(d)
	os.Chmod(p, 0o600)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTamperedObjectsAreRefusedOnRead(t *testing.T) {
	reads := map[string]func(s *Store, d Digest) error{
		"Read": func(s *Store, d Digest) error { _, err := s.Read(d); return err },
		"Get":  func(s *Store, d Digest) error { _, err := s.Get(t.Context(), []Digest{d}); return err },
		"Open": func(s *Store, d Digest) error {
			r, err := s.Open(d)
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.Copy(io.Discard, r)
			return err
		},
		"ReadChunk": func(s *Store, d Digest) error { _, err := s.ReadChunk(d, 0, MaxChunkSize); return err },
		"ReadTree":  func(s *Store, d Digest) error { _, err := s.ReadTree(d); return err },
	}
	tampers := map[string]func(orig []byte) []byte{
		"same size": func(orig []byte) []byte { b := bytes.Clone(orig); b[0] ^= 1; return b },
		"truncated": func(orig []byte) []byte { return orig[:len(orig)-1] },
		"extended":  func(orig []byte) []byte { return append(bytes.Clone(orig), '!') },
	}
	for rname, read := range reads {
		for tname, change := range tampers {
			t.Run(rname+"/"+tname, func(t *testing.T) {
				t.Parallel()
				s := newStore(t)
				orig, _ := Tree{Entries: []Entry{{Name: "f", Type: EntryFile, Digest: DigestOf([]byte("x"))}}}.Encode()
				d, err := s.Add(orig)
				if err != nil {
					t.Fatal(err)
				}
				tamper(t, s, d, change(orig))
				err = read(s, d)
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s of a tampered object: %v, want ErrCorrupt", rname, err)
				}
				// Moved aside: the next sync sees it missing and repairs it.
				if missing, _ := s.Has(t.Context(), []Digest{d}); len(missing) != 1 {
					t.Fatal("a corrupt object is still reported present")
				}
				if err := s.Put(Object{Digest: d, Data: orig}); err != nil {
					t.Fatal(err)
				}
				if err := read(s, d); err != nil {
					t.Fatalf("after repair: %v", err)
				}
			})
		}
	}
}

func TestGetNeverOmitsMissingObjects(t *testing.T) {
	s := newStore(t)
	a := mustAdd(t, s, "a")
	b := mustAdd(t, s, "b")
	x, y := DigestOf([]byte("x")), DigestOf([]byte("y"))
	objs, err := s.Get(t.Context(), []Digest{a, x, b, y})
	var me *MissingError
	if !errors.As(err, &me) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get = %v, %v; want a MissingError", objs, err)
	}
	if len(me.Digests) != 2 || me.Digests[0] != x || me.Digests[1] != y {
		t.Fatalf("missing = %v, want [x y]", me.Digests)
	}
	objs, err = s.Get(t.Context(), []Digest{b, a})
	if err != nil || len(objs) != 2 || string(objs[0].Data) != "b" || string(objs[1].Data) != "a" {
		t.Fatalf("Get = %v, %v", objs, err)
	}
}

func TestUpload(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1000)
	d := DigestOf(data)

	t.Run("chunks in order", func(t *testing.T) {
		s := newStore(t)
		u, err := s.NewUpload(d)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(data); off += 3000 {
			end := min(off+3000, len(data))
			if err := u.WriteChunk(int64(off), data[off:end]); err != nil {
				t.Fatal(err)
			}
		}
		if err := u.Commit(); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Read(d); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Read after upload: %v", err)
		}
		if err := u.Commit(); err == nil {
			t.Fatal("a second Commit succeeded")
		}
	})
	t.Run("wrong offset", func(t *testing.T) {
		s := newStore(t)
		u, _ := s.NewUpload(d)
		defer u.Abort()
		if err := u.WriteChunk(0, data[:100]); err != nil {
			t.Fatal(err)
		}
		for _, off := range []int64{0, 50, 101} {
			if err := u.WriteChunk(off, data[off:off+10]); err == nil {
				t.Fatalf("chunk at %d accepted, expected offset 100", off)
			}
		}
		if u.Offset() != 100 {
			t.Fatalf("offset = %d", u.Offset())
		}
	})
	t.Run("past the size", func(t *testing.T) {
		s := newStore(t)
		u, _ := s.NewUpload(d)
		defer u.Abort()
		if _, err := u.Write(append(bytes.Clone(data), 'x')); !errors.Is(err, ErrMismatch) {
			t.Fatalf("over-long write: %v", err)
		}
	})
	for name, body := range map[string][]byte{
		"short":    data[:len(data)-1],
		"tampered": append([]byte{'X'}, data[1:]...),
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			u, _ := s.NewUpload(d)
			if _, err := u.Write(body); err != nil {
				t.Fatal(err)
			}
			if err := u.Commit(); !errors.Is(err, ErrMismatch) {
				t.Fatalf("Commit = %v, want ErrMismatch", err)
			}
			if ok, _ := s.Contains(d); ok {
				t.Fatal("a refused upload was stored")
			}
			if entries, _ := os.ReadDir(filepath.Join(s.Root(), "tmp")); len(entries) != 0 {
				t.Fatalf("temporary files left behind: %v", entries)
			}
		})
	}
	t.Run("PutStream refuses a longer stream", func(t *testing.T) {
		s := newStore(t)
		err := s.PutStream(t.Context(), d, bytes.NewReader(append(bytes.Clone(data), 'x')))
		if !errors.Is(err, ErrMismatch) {
			t.Fatalf("PutStream = %v, want ErrMismatch", err)
		}
	})
}

func TestReadChunk(t *testing.T) {
	s := newStore(t)
	data := bytes.Repeat([]byte("abc"), 1000)
	d, _ := s.Add(data)
	var got []byte
	for off := int64(0); off < d.Size; {
		chunk, err := s.ReadChunk(d, off, 1024)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, chunk...)
		off += int64(len(chunk))
	}
	if !bytes.Equal(got, data) {
		t.Fatal("chunks do not reassemble the object")
	}
	for _, bad := range []struct {
		off int64
		n   int
	}{{-1, 10}, {d.Size + 1, 10}, {0, 0}, {0, MaxChunkSize + 1}} {
		if _, err := s.ReadChunk(d, bad.off, bad.n); err == nil {
			t.Errorf("ReadChunk(%d, %d) accepted", bad.off, bad.n)
		}
	}
}

func TestDecodeBase64IsStrict(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"aGVsbG8K", "hello\n", true},
		{"", "", true},
		{"aGk=", "hi", true},
		{"aGk", "", false},        // missing padding
		{"aGl=", "", false},       // non-zero pad bits
		{"aGVs\nbG8K", "", false}, // line break
		{"aGVs\rbG8K", "", false},
		{"aGVs bG8K", "", false},
		{"aGVsbG8K\n", "", false},
		{"aGVs-G8K", "", false}, // URL alphabet
		{"aGVs_G8K", "", false},
		{"aGk==", "", false},
	}
	for _, tt := range tests {
		got, err := DecodeBase64(tt.in)
		if tt.ok != (err == nil) || (tt.ok && string(got) != tt.want) {
			t.Errorf("DecodeBase64(%q) = %q, %v; want %q ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	if s := EncodeBase64([]byte("hi")); s != "aGk=" {
		t.Errorf("EncodeBase64 = %q", s)
	}
}

func TestConcurrentPutsOfOneObject(t *testing.T) {
	s := newStore(t)
	data := bytes.Repeat([]byte("concurrent"), 50000)
	o := Object{Digest: DigestOf(data), Data: data}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			errs <- s.Put(o)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a concurrent Put failed: %v", err)
		}
	}
	if got, err := s.Read(o.Digest); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Read = %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.Root(), "tmp")); len(entries) != 0 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestConcurrentPutsAcrossProcesses(t *testing.T) {
	s := newStore(t)
	data := strings.Repeat("from many processes ", 20000)
	outs := runHelpers(t, 6, "put", helperArgs{Store: s.Root(), Data: "from many processes ", Repeat: 20000})
	for i, out := range outs {
		if out != "ok" {
			t.Fatalf("helper %d: %q", i, out)
		}
	}
	if got, err := s.Read(DigestOf([]byte(data))); err != nil || string(got) != data {
		t.Fatalf("Read = %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.Root(), "tmp")); len(entries) != 0 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

// A Scratch view reads what the store holds and keeps what it is given
// in memory: the store's files are as they were, and the store itself
// does not see the view's objects.
func TestScratchStoresNothingOnDisk(t *testing.T) {
	s := newStore(t)
	old := mustAdd(t, s, "on disk\n")
	v := s.Scratch()
	d, err := v.Add([]byte("in memory\n"))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := v.PutTree(Tree{Entries: []Entry{{Name: "a", Type: EntryFile, Digest: d}, {Name: "b", Type: EntryFile, Digest: old}}})
	if err != nil {
		t.Fatal(err)
	}
	flat, err := v.Flatten(t.Context(), tree)
	if err != nil || len(flat) != 2 {
		t.Fatalf("the view reads its tree as %v, %v", flat, err)
	}
	if b, err := v.Read(old); err != nil || string(b) != "on disk\n" {
		t.Fatalf("the view reads the store's object as %q, %v", b, err)
	}
	for _, x := range []Digest{d, tree} {
		if ok, _ := s.Contains(x); ok {
			t.Errorf("the store holds %s, stored only by the view", x)
		}
	}
	if _, err := v.NewUpload(DigestOf([]byte("large"))); err == nil {
		t.Error("the view took an upload, which would land on disk")
	}
}

// TestReadChunkVerifiesOncePerFile: a ReadChunk at offset 0 verifies the
// whole object before sending any of it, but not again while the file is
// the one it verified, unchanged: a client asking small chunks at offset
// 0 of a large object cost a read of all of it per request. A file
// changed since (its change time moved, even with size and mtime put
// back), or one verified within the racy window, is verified again.
func TestReadChunkVerifiesOncePerFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		clock   time.Duration // the store's clock, from now
		offset  int64
		corrupt bool // the object is changed in place after the first read
		want    int  // whole verifications by 3 reads
	}{
		{"settled", time.Hour, 0, false, 1},
		{"racy", -time.Hour, 0, false, 3},
		{"changed", time.Hour, 0, true, 2},
		{"not at offset 0", time.Hour, 1, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			later(s, tc.clock)
			data := bytes.Repeat([]byte("abc"), 100_000)
			d, err := s.Add(data)
			if err != nil {
				t.Fatal(err)
			}
			verified := 0
			s.verifying = func(Digest) { verified++ }
			for i := range 3 {
				_, err := s.ReadChunk(d, tc.offset, 10)
				if tc.corrupt && i == 1 {
					var ce *CorruptError
					if !errors.As(err, &ce) {
						t.Fatalf("a ReadChunk of the object changed in place: %v, want CorruptError", err)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if tc.corrupt {
					p := s.objectPath(d)
					fi, err := os.Stat(p)
					if err != nil {
						t.Fatal(err)
					}
					// The store's clock is an hour ahead, so the file's
					// change time must move on its own: the file system's
					// clock ticks every few milliseconds.
					k0, _ := keyOf(fi)
					for deadline := time.Now().Add(10 * time.Second); ; {
						os.Chmod(p, 0o600)
						fi, err := os.Stat(p)
						if k, _ := keyOf(fi); err != nil || k.Ctime != k0.Ctime {
							break
						}
						if time.Now().After(deadline) {
							t.Fatal("the file's change time never moved")
						}
					}
					bad := bytes.Clone(data)
					bad[len(bad)-1] ^= 1
					if err := os.WriteFile(p, bad, 0o600); err != nil {
						t.Fatal(err)
					}
					os.Chtimes(p, fi.ModTime(), fi.ModTime())
				}
			}
			if verified != tc.want {
				t.Fatalf("3 ReadChunks at offset %d verified the object %d times, want %d", tc.offset, verified, tc.want)
			}
		})
	}
}
