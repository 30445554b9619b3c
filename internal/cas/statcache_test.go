package cas

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The stat cache is consulted: an entry that matches the file's stat wins
// over reading it (shown by planting a different, present digest), and any
// change to the file (even with size and mtime put back) makes it read.
func TestIngestStatCache(t *testing.T) {
	ctx := context.Background()
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")
	os.WriteFile(file, []byte("one\n"), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(file, old, old)
	time.Sleep(racyWindow + 100*time.Millisecond) // let its ctime age out of the racy window

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
	e.Hash = other.Hash
	c.old["a.txt"] = e
	b, _ := json.Marshal(c.old)
	os.WriteFile(c.path, b, 0o600)
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
	if c := st.openStatCache(dir); len(c.old) != 0 {
		t.Fatalf("a file written just now was cached: %v", c.old)
	}
}
