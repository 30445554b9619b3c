package cas

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The tree cache holds at most its bound of entries, starting over when a
// tree would not fit, and never keeps a tree larger than the bound.
func TestTreeCacheBounds(t *testing.T) {
	d := func(i int) Digest { return DigestOf(fmt.Appendf(nil, "tree %d", i)) }
	tree := func(n int) Tree { return Tree{Entries: make([]Entry, n)} }
	var c treeCache
	c.put(d(0), tree(10))
	c.put(d(1), tree(maxCachedTreeEntries-10))
	if _, ok := c.get(d(0)); !ok || c.held != maxCachedTreeEntries {
		t.Fatalf("holding %d entries; want both trees, %d entries", c.held, maxCachedTreeEntries)
	}
	c.put(d(2), tree(1))
	if _, ok := c.get(d(0)); ok || c.held != 1 {
		t.Fatalf("holding %d entries after a tree that did not fit; want only it", c.held)
	}
	c.put(d(3), tree(maxCachedTreeEntries+1))
	if _, ok := c.get(d(3)); ok || c.held > maxCachedTreeEntries {
		t.Fatalf("a tree over %d entries was kept (holding %d)", maxCachedTreeEntries, c.held)
	}
}

// A second update of a tree plans with the trees decoded by the first,
// and the room check still applies: a destination without room is refused
// before anything is written.
func TestCachedTreesStillCheckRoom(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "f"), make([]byte, 4096), 0o644)
	tree, _, err := st.Ingest(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := os.OpenRoot(t.TempDir())
	defer root.Close()
	if _, err := st.Update(ctx, root, "a", tree, UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.trees.get(tree); !ok {
		t.Fatal("the tree decoded by the first update was not kept")
	}
	_, err = st.Update(ctx, root, "b", tree, UpdateOptions{MaxBytes: 100})
	var se *SpaceError
	if !errors.As(err, &se) || se.Needed != 4096 {
		t.Fatalf("update over the byte limit: %v, want a SpaceError for 4096 bytes", err)
	}
	if _, err := root.Lstat("b"); !os.IsNotExist(err) {
		t.Fatalf("b was created: %v", err)
	}
}

// The stat memo keeps the cache files read or written last, up to its
// bounds, and forgets a file's old entries when it is written again.
func TestStatMemoBounds(t *testing.T) {
	var m statMemo
	entries := func(n int) map[string]statEntry {
		e := make(map[string]statEntry, n)
		for i := range n {
			e[fmt.Sprint(i)] = statEntry{}
		}
		return e
	}
	for i := range maxMemoFiles + 1 {
		m.put(fmt.Sprint("f", i), fileID{ino: uint64(i)}, entries(1))
	}
	if _, ok := m.get("f0", fileID{ino: 0}); ok || len(m.order) != maxMemoFiles {
		t.Fatalf("memo holds %v, want the last %d", m.order, maxMemoFiles)
	}
	if _, ok := m.get("f1", fileID{ino: 2}); ok {
		t.Fatal("entries of another version of a cache file were returned")
	}
	m.put("f1", fileID{ino: 7}, entries(3))
	if e, ok := m.get("f1", fileID{ino: 7}); !ok || len(e) != 3 {
		t.Fatalf("a cache file written again: %v %v", e, ok)
	}
	if _, ok := m.get("f1", fileID{ino: 1}); ok {
		t.Fatal("the old version of a cache file written again is still returned")
	}
	m.put("big", fileID{}, entries(maxMemoEntries+1))
	if _, ok := m.get("big", fileID{}); ok || m.held > maxMemoEntries {
		t.Fatalf("memo holds %d entries, more than %d", m.held, maxMemoEntries)
	}
}

// A cache file another process wrote since this one read it is read
// again: the memo is keyed by the file's identity, not its name.
func TestStatMemoSeesAnotherWriter(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")
	os.WriteFile(file, []byte("one\n"), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(file, old, old)
	storeDir := t.TempDir()
	st1, _ := Open(storeDir)
	st2, _ := Open(storeDir)
	later(st1, time.Second)
	later(st2, time.Second)
	root1, _, err := st1.Ingest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	// The other process plants another present digest for the same stat.
	c := st2.openStatCache(dir)
	e, ok := c.old["a.txt"]
	if !ok {
		t.Fatalf("no cache entry after ingest: %v", c.old)
	}
	other, _ := st2.Add([]byte("two\n"))
	hex.Decode(e.Hash[:], []byte(other.Hash))
	c.fresh = map[string]statEntry{"a.txt": e}
	c.changed = true
	c.save()
	root2, _, err := st1.Ingest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if root2 == root1 {
		t.Fatal("the first store used what it remembered of a cache file rewritten since")
	}
}
