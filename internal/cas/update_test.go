package cas

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(fi.Sys().(*syscall.Stat_t).Ino)
}

// Update writes nothing for a destination that already holds the tree,
// links unchanged files, writes changed ones, and never links a file that
// has another name.
func TestUpdateReusesUnchangedFiles(t *testing.T) {
	ctx := context.Background()
	st, _ := Open(t.TempDir())
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "same"), []byte("same\n"), 0o644)
	os.WriteFile(filepath.Join(src, "edit"), []byte("v1\n"), 0o644)
	os.WriteFile(filepath.Join(src, "shared"), []byte("shared\n"), 0o644)
	t1, _, err := st.Ingest(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	root, _ := os.OpenRoot(base)
	defer root.Close()
	if changed, err := st.Update(ctx, root, "dest", t1); err != nil || !changed {
		t.Fatalf("first update: %v %v", changed, err)
	}
	dest := filepath.Join(base, "dest")
	sameIno := inode(t, filepath.Join(dest, "same"))
	// A second name for "shared", elsewhere.
	os.Link(filepath.Join(dest, "shared"), filepath.Join(base, "elsewhere"))
	sharedIno := inode(t, filepath.Join(dest, "shared"))

	time.Sleep(racyWindow + 50*time.Millisecond)
	if changed, err := st.Update(ctx, root, "dest", t1); err != nil || changed {
		t.Fatalf("update to the same tree: changed=%v %v", changed, err)
	}
	if inode(t, filepath.Join(dest, "same")) != sameIno {
		t.Fatal("an update to the same tree rewrote a file")
	}

	os.WriteFile(filepath.Join(src, "edit"), []byte("v2\n"), 0o644)
	t2, _, _ := st.Ingest(ctx, src)
	if changed, err := st.Update(ctx, root, "dest", t2); err != nil || !changed {
		t.Fatalf("update with one change: %v %v", changed, err)
	}
	if inode(t, filepath.Join(dest, "same")) != sameIno {
		t.Error("an unchanged file was copied instead of linked")
	}
	if inode(t, filepath.Join(dest, "shared")) == sharedIno {
		t.Error("a file with a second name elsewhere was linked into the new tree")
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "edit")); string(b) != "v2\n" {
		t.Errorf("edit = %q", b)
	}
	ents, _ := os.ReadDir(base)
	if len(ents) != 2 {
		t.Errorf("leftovers beside the destination: %v", ents)
	}
}
