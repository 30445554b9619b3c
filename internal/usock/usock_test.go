package usock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenPrivate: a missing directory is made 0700; our own with a
// looser mode is tightened; a symlink, a file and another user's
// directory are refused, each with a sentence that says what to do.
func TestOpenPrivate(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "a", "rex")
	d, err := OpenPrivate(fresh)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if fi, err := os.Lstat(fresh); err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
		t.Fatalf("made %v %v", fi.Mode(), err)
	}

	loose := filepath.Join(base, "loose")
	os.Mkdir(loose, 0o755)
	os.Chmod(loose, 0o755)
	d, err = OpenPrivate(loose)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if fi, _ := os.Lstat(loose); fi.Mode().Perm() != 0o700 {
		t.Fatalf("a loose directory of ours kept mode %v", fi.Mode())
	}

	link := filepath.Join(base, "link")
	os.Symlink(fresh, link)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	theirs := filepath.Join(base, "theirs")
	os.Mkdir(theirs, 0o700)
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatalf("chown (the test needs root, as CI runs): %v", err)
	}
	for _, c := range []struct{ dir, says string }{
		{link, "is a symlink"},
		{file, "is not a directory"},
		{theirs, "belongs to uid 65534"},
	} {
		_, err := OpenPrivate(c.dir)
		if !errors.Is(err, ErrUnsafe) || !contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrUnsafe saying %q", c.dir, err, c.says)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestListenDial: a socket is made 0600 in the directory, reached through
// the directory's handle whatever the directory's path length, and the
// peer on both ends is this user.
func TestListenDial(t *testing.T) {
	// A path longer than a socket address may hold (108 bytes).
	long := filepath.Join(t.TempDir(), "a-directory-name-long-enough-to-push-the-socket-path-past-the-limit", "and-then-some-more-of-it")
	d, err := OpenPrivate(long)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ln, err := d.Listen("s.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if fi, err := os.Lstat(filepath.Join(long, "s.sock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v %v", fi.Mode(), err)
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.AcceptUnix()
		if err == nil {
			err = SameUser(c)
			c.Close()
		}
		accepted <- err
	}()
	c, err := d.Dial(context.Background(), "s.sock")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("s.sock"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Dial(context.Background(), "s.sock"); !IsMissing(err) {
		t.Fatalf("dial a removed socket: %v", err)
	}
}

// TestWriteFileNew: a file is written when missing and never replaced.
func TestWriteFileNew(t *testing.T) {
	d, err := OpenPrivate(filepath.Join(t.TempDir(), "d"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.WriteFileNew("n", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFileNew("n", []byte("second")); !errors.Is(err, os.ErrExist) {
		t.Fatalf("write over a file: %v, want ErrExist", err)
	}
	if b, _ := d.ReadFile("n"); string(b) != "first" {
		t.Fatalf("the file holds %q", b)
	}
	if ents, _ := os.ReadDir(d.Path()); len(ents) != 1 {
		t.Fatalf("left %d files, want 1", len(ents))
	}
}
