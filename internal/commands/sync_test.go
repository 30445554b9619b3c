package commands

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
)

// A hostile target cannot make a pull write a symlink that leads out of
// the local directory through the .theirs copy of a conflict: its target
// is checked as materialize checks a tree's.
func TestWriteTheirsRefusesEscapingLinks(t *testing.T) {
	st, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	for _, target := range []string{"/etc/passwd", "../../outside", "../../../../etc"} {
		c := cas.Conflict{Path: "sub/link", Kind: cas.ConflictSymlink, Theirs: &cas.Entry{Type: cas.EntrySymlink, Target: target}}
		if _, err := writeTheirs(context.Background(), st, dir, c); err == nil || !errors.Is(err, cas.ErrInvalidTree) {
			t.Errorf("link to %q: %v", target, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "sub/link.theirs")); err == nil {
			t.Fatalf("a link to %q was written", target)
		}
	}
	// One that stays inside is written.
	c := cas.Conflict{Path: "sub/link", Kind: cas.ConflictSymlink, Theirs: &cas.Entry{Type: cas.EntrySymlink, Target: "../sub/x"}}
	if side, err := writeTheirs(context.Background(), st, dir, c); err != nil || side != "sub/link.theirs" {
		t.Fatalf("a link inside: %q %v", side, err)
	}
	if l, _ := os.Readlink(filepath.Join(dir, "sub/link.theirs")); l != "../sub/x" {
		t.Errorf("link %q", l)
	}
	// An existing .theirs is never overwritten.
	if _, err := writeTheirs(context.Background(), st, dir, c); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second .theirs: %v", err)
	}
}

// A hostile target's tree bomb (a few kB of trees naming a terabyte) is
// refused before a pull writes anything.
func TestPullRefusesTreeBomb(t *testing.T) {
	st, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	blob, _ := st.Add([]byte(strings.Repeat("x", 1<<20)))
	var files cas.Tree
	for i := range 16 {
		files.Entries = append(files.Entries, cas.Entry{Name: string(rune('a' + i)), Type: cas.EntryFile, Digest: blob})
	}
	d, err := st.PutTree(files)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		var dirs cas.Tree
		for i := range 16 {
			dirs.Entries = append(dirs.Entries, cas.Entry{Name: string(rune('a' + i)), Type: cas.EntryDir, Digest: d})
		}
		if d, err = st.PutTree(dirs); err != nil {
			t.Fatal(err)
		}
	}
	local := filepath.Join(t.TempDir(), "site")
	err = applyLocal(context.Background(), st, local, cas.EmptyTree(), d, PullOptions{})
	var se *cas.SpaceError
	if !errors.As(err, &se) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "TB needed") {
		t.Fatalf("tree bomb: %v", err)
	}
	if _, err := os.Stat(local); err == nil {
		t.Fatal("the pull wrote something")
	}
}
