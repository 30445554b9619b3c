package cas

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// later moves the store's clock forward, as if d had passed: what was
// written now is then out of the racy window.
func later(s *Store, d time.Duration) {
	s.now = func() time.Time { return time.Now().Add(d) }
}

// The stat cache is consulted: an entry that matches the file's stat wins
// over reading it (shown by planting a different, present digest), and any
// change to the file (even with size and mtime put back) makes it read.
func TestIngestStatCache(t *testing.T) {
	ctx := context.Background()
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	later(st, time.Second)
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")
	os.WriteFile(file, []byte("one\n"), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(file, old, old)

	root1, _, err := st.Ingest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	c := st.openStatCache(dir)
	e, ok := c.old["a.txt"]
	if !ok {
		t.Fatalf("no cache entry after ingest: %v", c.old)
	}
	// Plant another present digest for the same stat: it must be used.
	other, _ := st.Add([]byte("two\n"))
	hex.Decode(e.Hash[:], []byte(other.Hash))
	c.fresh = map[string]statEntry{"a.txt": e}
	c.changed = true
	c.save()
	root2, _, err := st.Ingest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if root2 == root1 {
		t.Fatal("a matching cache entry was not used")
	}

	// Change the content, put size and mtime back: ctime still differs.
	os.WriteFile(file, []byte("ONE\n"), 0o644)
	os.Chtimes(file, old, old)
	root3, _, err := st.Ingest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	tree, _ := st.ReadTree(root3)
	ent, _ := tree.Lookup("a.txt")
	if ent.Digest != DigestOf([]byte("ONE\n")) {
		t.Fatalf("a changed file was not read again: %v", ent.Digest)
	}
}

func TestStatCacheSkipsRacyEntries(t *testing.T) {
	st, _ := Open(t.TempDir())
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "new"), []byte("fresh"), 0o644)
	if _, _, err := st.Ingest(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	c := st.openStatCache(dir)
	if e := c.old["new"]; len(c.old) != 1 || !e.Racy {
		t.Fatalf("a file written just now was cached as trusted: %v", c.old)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "new")); true {
		if _, ok := c.lookup("new", fi); ok {
			t.Fatal("a racy entry vouched for a file")
		}
	}
	later(st, time.Second)
	if _, _, err := st.Ingest(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if c := st.openStatCache(dir); len(c.old) != 1 || c.old["new"].Racy {
		t.Fatalf("a file out of the racy window was not cached: %v", c.old)
	}
}

// A damaged cache file is an empty cache, never an error or a wrong digest.
func TestStatCacheDamaged(t *testing.T) {
	st, _ := Open(t.TempDir())
	later(st, time.Second)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("content"), 0o644)
	if _, _, err := st.Ingest(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	c := st.openStatCache(dir)
	data, err := os.ReadFile(c.path)
	if err != nil || len(c.old) != 1 {
		t.Fatalf("cache: %v %v", c.old, err)
	}
	for _, cut := range []int{0, 5, len(statCacheMagic) + 3, len(data) - 1} {
		os.WriteFile(c.path, data[:cut], 0o600)
		if got := st.openStatCache(dir); len(got.old) != 0 {
			t.Errorf("a cache cut at %d bytes loaded %d entries", cut, len(got.old))
		}
	}
	os.WriteFile(c.path, append(data, 'x'), 0o600)
	if got := st.openStatCache(dir); len(got.old) != 0 {
		t.Error("a cache with trailing bytes loaded")
	}
}
