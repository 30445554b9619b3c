package cas

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// updateFixture is a store (its clock a second ahead, so what the tests
// write is out of the racy window at once) and a root directory to update
// destinations in.
func updateFixture(t *testing.T) (*Store, *os.Root, string) {
	t.Helper()
	st := newStore(t)
	later(st, time.Second)
	base := t.TempDir()
	root, err := os.OpenRoot(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return st, root, base
}

func doUpdate(t *testing.T, st *Store, root *os.Root, name string, tree Digest, opts UpdateOptions) UpdateResult {
	t.Helper()
	res, err := st.Update(t.Context(), root, name, tree, opts)
	if err != nil {
		t.Fatalf("update %s: %v", name, err)
	}
	return res
}

func assertNoRexFiles(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".rex-") {
			t.Errorf("left behind %s", p)
		}
		return nil
	})
}

// By default an update adds and replaces, keeps what the tree does not
// name, and leaves the directory itself (inode, mode) alone.
func TestUpdateKeepsWhatTheTreeLacks(t *testing.T) {
	st, root, base := updateFixture(t)
	dest := filepath.Join(base, "dst")
	writeSpec(t, dest, fileSpec{"precious": "mine\n", "old.txt": "v1\n", "keep/deep": "deep\n"})
	os.Chmod(dest, 0o710)
	ino := inode(t, dest)

	tree := ingestSpec(t, st, fileSpec{"old.txt": "v2\n", "new/file": "new\n"})
	res := doUpdate(t, st, root, "dst", tree, UpdateOptions{List: true})
	if res.Created || res.Added != 2 || res.Updated != 1 || res.Deleted != 0 {
		t.Errorf("result %+v, want 2 added (new, new/file), 1 updated", res)
	}
	if !slices.Equal(res.UpdatedPaths, []string{"old.txt"}) || !slices.Equal(res.AddedPaths, []string{"new", "new/file"}) {
		t.Errorf("paths: added %v updated %v", res.AddedPaths, res.UpdatedPaths)
	}
	got := readSpec(t, dest)
	want := fileSpec{"precious": "mine\n", "old.txt": "v2\n", "keep/deep": "deep\n", "new/file": "new\n"}
	if len(got) != len(want) {
		t.Errorf("destination %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if inode(t, dest) != ino {
		t.Error("the destination directory was replaced")
	}
	if fi, _ := os.Stat(dest); fi.Mode().Perm() != 0o710 {
		t.Errorf("the destination's mode became %v", fi.Mode().Perm())
	}
	assertNoRexFiles(t, dest)

	// Again: up to date, nothing written.
	oldIno := inode(t, filepath.Join(dest, "old.txt"))
	if res := doUpdate(t, st, root, "dst", tree, UpdateOptions{}); !res.Unchanged() {
		t.Errorf("second update: %+v", res)
	}
	if inode(t, filepath.Join(dest, "old.txt")) != oldIno {
		t.Error("an up-to-date file was rewritten")
	}
}

// A stand-in for ~/.ssh: pushing a directory holding only config keeps
// authorized_keys and known_hosts, and the directory's mode.
func TestUpdateIntoSSHDirectory(t *testing.T) {
	st, root, base := updateFixture(t)
	ssh := filepath.Join(base, ".ssh")
	writeSpec(t, ssh, fileSpec{"authorized_keys": "ssh-ed25519 AAAA op\n", "known_hosts": "h1 ssh-ed25519 BBBB\n"})
	os.Chmod(ssh, 0o700)
	tree := ingestSpec(t, st, fileSpec{"config": "Host *\n"})
	res := doUpdate(t, st, root, ".ssh", tree, UpdateOptions{})
	if res.Added != 1 || res.Deleted != 0 {
		t.Errorf("result %+v", res)
	}
	for name, want := range map[string]string{"authorized_keys": "ssh-ed25519 AAAA op\n", "known_hosts": "h1 ssh-ed25519 BBBB\n", "config": "Host *\n"} {
		if b, err := os.ReadFile(filepath.Join(ssh, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v", name, b, err)
		}
	}
	if fi, _ := os.Stat(ssh); fi.Mode().Perm() != 0o700 {
		t.Errorf(".ssh mode %v", fi.Mode().Perm())
	}
}

// Delete removes what the tree lacks and lists every path, files before
// their directories; DryRun reports the same and changes nothing.
func TestUpdateDeleteAndDryRun(t *testing.T) {
	st, root, base := updateFixture(t)
	dest := filepath.Join(base, "dst")
	writeSpec(t, dest, fileSpec{"keep": "k\n", "extra": "e\n", "gone/a": "a\n", "gone/b/c": "c\n"})
	tree := ingestSpec(t, st, fileSpec{"keep": "k\n", "add": "n\n"})

	dry := doUpdate(t, st, root, "dst", tree, UpdateOptions{Delete: true, DryRun: true, List: true})
	wantDel := []string{"extra", "gone", "gone/a", "gone/b", "gone/b/c"}
	if !slices.Equal(dry.DeletedPaths, wantDel) || dry.Added != 1 || !slices.Equal(dry.AddedPaths, []string{"add"}) {
		t.Errorf("dry run: %+v", dry)
	}
	if got := readSpec(t, dest); len(got) != 4 || got["extra"] != "e\n" {
		t.Fatalf("a dry run changed the destination: %v", got)
	}

	res := doUpdate(t, st, root, "dst", tree, UpdateOptions{Delete: true})
	if !slices.Equal(res.DeletedPaths, wantDel) || res.Deleted != 5 {
		t.Errorf("deleted %v", res.DeletedPaths)
	}
	got := readSpec(t, dest)
	if len(got) != 2 || got["keep"] != "k\n" || got["add"] != "n\n" {
		t.Errorf("after --delete: %v", got)
	}
}

// Modes travel: a 0600 file, a 0750 directory, a setgid directory.
func TestUpdateModes(t *testing.T) {
	st, root, base := updateFixture(t)
	src := t.TempDir()
	writeSpec(t, src, fileSpec{"secret": "s\n", "bin/run": "x:#!/bin/sh\n", "shared/x": "x\n"})
	os.Chmod(filepath.Join(src, "secret"), 0o600)
	os.Chmod(filepath.Join(src, "bin"), 0o750)
	os.Chmod(filepath.Join(src, "shared"), 0o775|fs.ModeSetgid)
	tree, _, err := st.Ingest(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	for _, atomic := range []bool{false, true} {
		name := "in-place"
		if atomic {
			name = "atomic"
		}
		dest := filepath.Join(base, name)
		os.Mkdir(dest, 0o755)
		doUpdate(t, st, root, name, tree, UpdateOptions{Atomic: atomic})
		for p, want := range map[string]fs.FileMode{"secret": 0o600, "bin": 0o750 | fs.ModeDir, "bin/run": 0o755, "shared": 0o775 | fs.ModeDir | fs.ModeSetgid} {
			fi, err := os.Lstat(filepath.Join(dest, p))
			if err != nil || fi.Mode() != want {
				t.Errorf("%s: %s mode %v, want %v (%v)", name, p, fi.Mode(), want, err)
			}
		}
	}
	// A mode change alone is an update.
	os.Chmod(filepath.Join(src, "secret"), 0o640)
	tree2, _, _ := st.Ingest(t.Context(), src)
	res := doUpdate(t, st, root, "in-place", tree2, UpdateOptions{List: true})
	if res.Updated != 1 || !slices.Equal(res.UpdatedPaths, []string{"secret"}) || res.Bytes != 0 {
		t.Errorf("chmod only: %+v", res)
	}
	if fi, _ := os.Stat(filepath.Join(base, "in-place", "secret")); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
}

// Atomic replaces the directory as a whole: extra files go (and are
// listed), unchanged files are linked, not copied, unless they have
// another name.
func TestUpdateAtomic(t *testing.T) {
	st, root, base := updateFixture(t)
	src := t.TempDir()
	writeSpec(t, src, fileSpec{"same": "same\n", "edit": "v1\n", "shared": "shared\n"})
	t1, _, _ := st.Ingest(t.Context(), src)
	doUpdate(t, st, root, "dest", t1, UpdateOptions{Atomic: true})
	dest := filepath.Join(base, "dest")
	os.WriteFile(filepath.Join(dest, "extra"), []byte("x"), 0o644)
	sameIno := inode(t, filepath.Join(dest, "same"))
	os.Link(filepath.Join(dest, "shared"), filepath.Join(base, "elsewhere"))
	sharedIno := inode(t, filepath.Join(dest, "shared"))

	os.WriteFile(filepath.Join(src, "edit"), []byte("v2\n"), 0o644)
	t2, _, _ := st.Ingest(t.Context(), src)
	res := doUpdate(t, st, root, "dest", t2, UpdateOptions{Atomic: true})
	if res.Updated != 1 || !slices.Equal(res.DeletedPaths, []string{"extra"}) {
		t.Errorf("result %+v", res)
	}
	if inode(t, filepath.Join(dest, "same")) != sameIno {
		t.Error("an unchanged file was copied instead of linked")
	}
	if inode(t, filepath.Join(dest, "shared")) == sharedIno {
		t.Error("a file with a second name elsewhere was linked into the new tree")
	}
	if _, err := os.Lstat(filepath.Join(dest, "extra")); err == nil {
		t.Error("an atomic update kept a file the tree lacks")
	}
	assertNoRexFiles(t, base)
	// The root itself cannot be swapped.
	if _, err := st.Update(t.Context(), root, ".", t2, UpdateOptions{Atomic: true}); err == nil {
		t.Error("an atomic update of the root itself succeeded")
	}
}

// Repeated atomic updates never leave a moment without the destination
// (renameat2 RENAME_EXCHANGE), nor do in-place ones lose a file.
func TestUpdateAtomicNeverMissing(t *testing.T) {
	st, root, base := updateFixture(t)
	dest := filepath.Join(base, "site")
	trees := []Digest{
		ingestSpec(t, st, fileSpec{"index.html": "one\n", "a/b": "b1\n"}),
		ingestSpec(t, st, fileSpec{"index.html": "two\n", "a/b": "b2\n", "c": "c\n"}),
	}
	doUpdate(t, st, root, "site", trees[0], UpdateOptions{Atomic: true})
	var stop atomic.Bool
	var missing, polls atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			polls.Add(1)
			if _, err := os.Lstat(filepath.Join(dest, "index.html")); err != nil {
				missing.Add(1)
			}
		}
	})
	for i := range 40 {
		opts := UpdateOptions{Atomic: i%2 == 0}
		doUpdate(t, st, root, "site", trees[i%2], opts)
	}
	stop.Store(true)
	wg.Wait()
	if missing.Load() != 0 {
		t.Fatalf("the destination was missing in %d of %d polls", missing.Load(), polls.Load())
	}
	assertNoRexFiles(t, base)
}

// A file where the destination has a directory is refused in place
// (removing a directory is asked for), and replaces it with Delete.
func TestUpdateTypeConflicts(t *testing.T) {
	st, root, base := updateFixture(t)
	dest := filepath.Join(base, "dst")
	writeSpec(t, dest, fileSpec{"conf/a": "a\n", "link": "plain\n", "was-file": "f\n"})
	tree := ingestSpec(t, st, fileSpec{"conf": "now a file\n", "link": "->conf", "was-file/x": "x\n"})
	_, err := st.Update(t.Context(), root, "dst", tree, UpdateOptions{})
	var tc *TypeConflictError
	if !errors.As(err, &tc) || !slices.Equal(tc.Paths, []string{"conf"}) || !strings.Contains(err.Error(), "--delete") {
		t.Fatalf("update over a directory: %v", err)
	}
	if got := readSpec(t, dest); got["conf/a"] != "a\n" {
		t.Fatalf("a refused update changed the destination: %v", got)
	}
	res := doUpdate(t, st, root, "dst", tree, UpdateOptions{Delete: true})
	if !slices.Equal(res.DeletedPaths, []string{"conf/a"}) {
		t.Errorf("deleted %v", res.DeletedPaths)
	}
	got := readSpec(t, dest)
	if got["conf"] != "now a file\n" || got["link"] != "->conf" || got["was-file/x"] != "x\n" || len(got) != 3 {
		t.Errorf("after the update: %v", got)
	}
}

// Blobs no local source has are Needed; they are received straight into
// the destination, checked against their digest.
func TestUpdateReceivesNeededBlobs(t *testing.T) {
	st, root, base := updateFixture(t)
	sender := newStore(t)
	tree := ingestSpec(t, sender, fileSpec{"a": "alpha\n", "b": "beta\n", "copy-of-a": "alpha\n", "sub/c": "gamma\n"})
	if _, err := Push(t.Context(), sender, LocalRemote{st}, tree); err != nil {
		t.Fatal(err)
	}
	// The receiving store keeps only trees.
	for _, c := range []string{"alpha\n", "beta\n", "gamma\n"} {
		os.Remove(st.objectPath(DigestOf([]byte(c))))
	}
	os.MkdirAll(filepath.Join(base, "dst"), 0o755)
	os.WriteFile(filepath.Join(base, "dst", "has-beta"), []byte("beta\n"), 0o644)
	u, err := st.PrepareUpdate(t.Context(), root, "dst", tree, UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	need := u.Needed()
	if len(need) != 2 || !slices.Contains(need, DigestOf([]byte("alpha\n"))) || !slices.Contains(need, DigestOf([]byte("gamma\n"))) {
		t.Fatalf("needed %v; beta is in the destination already", need)
	}
	// Wrong bytes for a digest are refused and leave nothing.
	w, err := u.Receive(DigestOf([]byte("alpha\n")))
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("ALPHA\n"))
	if err := w.Commit(); !errors.Is(err, ErrMismatch) {
		t.Fatalf("commit of wrong bytes: %v", err)
	}
	if _, err := u.Commit(t.Context()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("commit with blobs missing: %v", err)
	}
	assertNoRexFiles(t, base)

	// A batch with one wrong object writes none of it: Put checks every
	// object before the first is written.
	u, _ = st.PrepareUpdate(t.Context(), root, "dst", tree, UpdateOptions{})
	if err := u.Put([]Object{{DigestOf([]byte("alpha\n")), []byte("alpha\n")}, {DigestOf([]byte("gamma\n")), []byte("GAMMA\n")}}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("put of a batch with wrong bytes: %v", err)
	}
	if m := u.Missing(); len(m) != 2 {
		t.Fatalf("missing after a refused batch: %v", m)
	}
	u.Abort()
	assertNoRexFiles(t, base)

	u, _ = st.PrepareUpdate(t.Context(), root, "dst", tree, UpdateOptions{})
	if err := u.Put([]Object{{DigestOf([]byte("alpha\n")), []byte("alpha\n")}, {DigestOf([]byte("gamma\n")), []byte("gamma\n")}}); err != nil {
		t.Fatal(err)
	}
	res, err := u.Commit(t.Context())
	if err != nil || res.Added != 5 {
		t.Fatalf("commit: %+v %v", res, err)
	}
	got := readSpec(t, filepath.Join(base, "dst"))
	if got["a"] != "alpha\n" || got["copy-of-a"] != "alpha\n" || got["b"] != "beta\n" || got["sub/c"] != "gamma\n" {
		t.Errorf("destination %v", got)
	}
	assertNoRexFiles(t, base)

	// The same tree into another directory: every blob is found on this
	// side, in the first destination.
	u, err = st.PrepareUpdate(t.Context(), root, "other", tree, UpdateOptions{})
	if err != nil || len(u.Needed()) != 0 {
		t.Fatalf("second destination needs %v (%v)", u.Needed(), err)
	}
	if _, err := u.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := readSpec(t, filepath.Join(base, "other")); got["sub/c"] != "gamma\n" || got["a"] != "alpha\n" {
		t.Errorf("second destination %v", got)
	}
}

// An update that would write more than allowed is refused before anything
// is written, with the sizes in one sentence; a tree bomb of large files is
// refused without listing its paths.
func TestUpdateRefusesWhatDoesNotFit(t *testing.T) {
	st, root, base := updateFixture(t)
	tree := ingestSpec(t, st, fileSpec{"a": strings.Repeat("a", 5000), "b": strings.Repeat("b", 5000)})
	_, err := st.Update(t.Context(), root, "dst", tree, UpdateOptions{MaxBytes: 6000})
	var se *SpaceError
	if !errors.As(err, &se) || se.Needed != 10000 || !se.Limit || !strings.Contains(err.Error(), "10 kB") {
		t.Fatalf("update over the limit: %v", err)
	}
	if ents, _ := os.ReadDir(base); len(ents) != 0 {
		t.Fatalf("a refused update wrote %v", ents)
	}

	// 16^5 paths to one 1 MiB blob: 1 TiB from a few kB of trees.
	blob := mustAdd(t, st, strings.Repeat("x", 1<<20))
	fan := func(typ string, d Digest) Digest {
		var entries []map[string]any
		for i := range 16 {
			e := map[string]any{"name": fmt.Sprintf("%c", 'a'+i), "type": typ, "digest": digestJSON(d)}
			if typ == "file" {
				e["exec"] = false
			}
			entries = append(entries, e)
		}
		return putRaw(t, st, rawTree(entries...))
	}
	d := fan("file", blob)
	for range 4 {
		d = fan("dir", d)
	}
	_, err = st.Update(t.Context(), root, "bomb", d, UpdateOptions{})
	if !errors.As(err, &se) || se.Limit || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "TB needed") {
		t.Fatalf("tree bomb: %v", err)
	}
	if ents, _ := os.ReadDir(base); len(ents) != 0 {
		t.Fatalf("a refused update wrote %v", ents)
	}
}

// deadPid is the pid of a process that has ended.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// Leftovers of a killed writer (temporary files in the destination,
// staging and old directories beside it, temporary files of the store)
// are removed by the next update and the next start of the store, and are
// never reported as part of the destination.
func TestUpdateSweepsLeftovers(t *testing.T) {
	st, root, base := updateFixture(t)
	pid := strconv.Itoa(deadPid(t))
	dest := filepath.Join(base, "dst")
	writeSpec(t, dest, fileSpec{"f": "f\n", ".rex-tmp-" + pid + "-0a1b": "half", "sub/.rex-tmp-" + pid + "-ff": "half"})
	os.MkdirAll(filepath.Join(base, ".rex-stage-"+pid+"-abc", "x"), 0o755)
	os.MkdirAll(filepath.Join(base, ".rex-old-"+pid+"-abc", "y"), 0o755)
	live := ".rex-tmp-" + strconv.Itoa(os.Getpid()) + "-beef"
	os.WriteFile(filepath.Join(dest, live), nil, 0o644)
	os.WriteFile(filepath.Join(st.tmp, "obj-"+pid+"-123"), []byte("half"), 0o600)

	tree := ingestSpec(t, st, fileSpec{"f": "f\n"})
	res := doUpdate(t, st, root, "dst", tree, UpdateOptions{Delete: true})
	if res.Deleted != 1 || res.DeletedPaths[0] != "sub" {
		t.Errorf("deleted %v: temporary files must never be listed", res.DeletedPaths)
	}
	os.Remove(filepath.Join(dest, live))
	assertNoRexFiles(t, base)
	if _, err := Open(st.Root()); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(st.tmp); len(ents) != 0 {
		t.Errorf("store temp files left: %v", ents)
	}
}

// A writer killed in the middle of the swap of an atomic update leaves the
// old or the new tree in place, and the next update leaves no .rex-*
// directory and no temporary file of the store.
func TestUpdateKilledDuringSwap(t *testing.T) {
	for _, when := range []string{"before", "after"} {
		t.Run(when, func(t *testing.T) { testKilledDuringSwap(t, when) })
	}
}

func testKilledDuringSwap(t *testing.T, when string) {
	st, _, base := updateFixture(t)
	src := t.TempDir()
	writeSpec(t, src, fileSpec{"index.html": "v1\n", "a/b": "b\n"})
	t1, _, _ := st.Ingest(t.Context(), src)
	writeSpec(t, src, fileSpec{"index.html": "v2\n", "c": "c\n"})
	t2, _, _ := st.Ingest(t.Context(), src)
	root, _ := os.OpenRoot(base)
	defer root.Close()
	doUpdate(t, st, root, "site", t1, UpdateOptions{Atomic: true})

	cmd := helperCmd(t, "killswap", helperArgs{Store: st.Root(), Dir: base, Snap: t2, Data: when})
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the helper was to die by SIGKILL in the swap: %v %s", err, out)
	}
	stages, _ := filepath.Glob(filepath.Join(base, ".rex-stage-*"))
	if len(stages) != 1 {
		t.Fatalf("the killed update should leave its staging directory: %v", stages)
	}
	want := map[string]string{"before": "v1\n", "after": "v2\n"}[when]
	if b, _ := os.ReadFile(filepath.Join(base, "site", "index.html")); string(b) != want {
		t.Fatalf("after the kill the destination holds %q, want %q", b, want)
	}

	st2, err := Open(st.Root())
	if err != nil {
		t.Fatal(err)
	}
	later(st2, time.Second)
	res := doUpdate(t, st2, root, "site", t2, UpdateOptions{Atomic: true})
	if res.Warning != "" {
		t.Errorf("warning %q", res.Warning)
	}
	assertNoRexFiles(t, base)
	if ents, _ := os.ReadDir(st.tmp); len(ents) != 0 {
		t.Errorf("store temp files left: %v", ents)
	}
	if got := readSpec(t, filepath.Join(base, "site")); got["index.html"] != "v2\n" || got["c"] != "c\n" {
		t.Errorf("after the next update: %v", got)
	}
}

// Ownership: Owner gives written files and directories an owner, and
// changes kept files whose owner differs (root only).
func TestUpdateOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root") // CI runs as root
	}
	st, root, base := updateFixture(t)
	dest := filepath.Join(base, "dst")
	writeSpec(t, dest, fileSpec{"kept": "k\n"})
	tree := ingestSpec(t, st, fileSpec{"kept": "k\n", "new/f": "n\n"})
	res := doUpdate(t, st, root, "dst", tree, UpdateOptions{Owner: &Owner{UID: 65534, GID: 65534}})
	if res.Added != 2 || res.Updated != 1 {
		t.Errorf("result %+v", res)
	}
	for _, p := range []string{"kept", "new", "new/f"} {
		fi, _ := os.Lstat(filepath.Join(dest, p))
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65534 {
			t.Errorf("%s owned by %d:%d", p, st.Uid, st.Gid)
		}
	}
}

// As root (rexd through sudo) with no owner asked for, a file that
// replaces another keeps that one's owner and group, in place and
// --atomic, as Ansible's copy does; a new file is root's; an owner asked
// for wins.
func TestUpdateAsRootKeepsReplacedFilesOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root") // CI runs as root
	}
	owner := func(p string) (uint32, uint32, fs.FileMode) {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return st.Uid, st.Gid, fi.Mode()
	}
	for _, tc := range []struct {
		name string
		opts UpdateOptions
		uid  uint32 // of app.ini after the update
	}{
		{"in place", UpdateOptions{}, 33},
		{"atomic", UpdateOptions{Atomic: true}, 33},
		{"owner asked for", UpdateOptions{Owner: &Owner{UID: 65534, GID: 65534}}, 65534},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, root, base := updateFixture(t)
			dest := filepath.Join(base, "www")
			writeSpec(t, dest, fileSpec{"app.ini": "old\n", "bin/tool": "old\n"})
			os.Chown(filepath.Join(dest, "app.ini"), 33, 33)
			os.Chown(filepath.Join(dest, "bin/tool"), 33, 33)
			os.Chmod(filepath.Join(dest, "bin/tool"), 0o755)
			src := t.TempDir()
			writeSpec(t, src, fileSpec{"app.ini": "new\n", "bin/tool": "#!/bin/sh\n", "added.ini": "a\n"})
			os.Chmod(filepath.Join(src, "bin/tool"), 0o755|fs.ModeSetuid)
			tree, _, err := st.Ingest(t.Context(), src)
			if err != nil {
				t.Fatal(err)
			}
			res := doUpdate(t, st, root, "www", tree, tc.opts)
			updated := 2
			if tc.opts.Owner != nil {
				updated = 3 // bin/ changes owner too
			}
			if res.Updated != updated || res.Added != 1 {
				t.Errorf("result %+v", res)
			}
			if uid, gid, _ := owner(filepath.Join(dest, "app.ini")); uid != tc.uid || gid != tc.uid {
				t.Errorf("app.ini, owned by 33:33, is %d:%d after the update", uid, gid)
			}
			// chown clears setuid: the mode the tree says is set after it.
			if uid, _, mode := owner(filepath.Join(dest, "bin/tool")); uid != tc.uid || mode&fs.ModeSetuid == 0 {
				t.Errorf("bin/tool is %d, %v after the update; want %d and setuid", uid, mode, tc.uid)
			}
			want := uint32(0)
			if tc.opts.Owner != nil {
				want = 65534
			}
			if uid, _, _ := owner(filepath.Join(dest, "added.ini")); uid != want {
				t.Errorf("added.ini, new, is owned by %d, want %d", uid, want)
			}
			if b, _ := os.ReadFile(filepath.Join(dest, "app.ini")); string(b) != "new\n" {
				t.Errorf("app.ini holds %q", b)
			}
		})
	}
}

// A pull applies its merge's deletions with Prune: a path goes only while
// it holds what the merge saw, and a directory only when emptied.
func TestUpdatePrune(t *testing.T) {
	st, root, base := updateFixture(t)
	dest := filepath.Join(base, "dst")
	writeSpec(t, dest, fileSpec{"gone": "g\n", "changed": "c2\n", "dir/x": "x\n", "dir2/y": "y\n", "dir2/z": "z\n"})
	tree := ingestSpec(t, st, fileSpec{"dir2/z": "z\n"})
	prune := map[string]Entry{
		"gone":    {Type: EntryFile, Digest: DigestOf([]byte("g\n"))},
		"changed": {Type: EntryFile, Digest: DigestOf([]byte("c1\n"))},
		"dir":     {Type: EntryDir},
		"dir/x":   {Type: EntryFile, Digest: DigestOf([]byte("x\n"))},
		"dir2/y":  {Type: EntryFile, Digest: DigestOf([]byte("y\n"))},
	}
	res := doUpdate(t, st, root, "dst", tree, UpdateOptions{Prune: prune})
	if !slices.Equal(res.DeletedPaths, []string{"dir", "dir/x", "dir2/y", "gone"}) {
		t.Errorf("deleted %v", res.DeletedPaths)
	}
	got := readSpec(t, dest)
	if len(got) != 2 || got["changed"] != "c2\n" || got["dir2/z"] != "z\n" {
		t.Errorf("after prune: %v", got)
	}
}

// Removed lists what a change deletes, directories with all they held.
func TestRemoved(t *testing.T) {
	st := newStore(t)
	from := ingestSpec(t, st, fileSpec{"keep": "k", "gone": "g", "d/x": "x", "d/y": "y", "e/z": "z", "f": "file"})
	to := ingestSpec(t, st, fileSpec{"keep": "k", "d/x": "x2", "f/now-a-dir": "n"})
	got, err := st.Removed(t.Context(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"d/y", "e", "e/z", "gone"}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, want) {
		t.Errorf("removed %v, want %v", keys, want)
	}
}

// BlobsText copies into the store only what a merge may need (text); the
// rest is read from the files themselves, checked, and a file changed
// since is missing rather than wrong.
func TestIngestBlobsText(t *testing.T) {
	st := newStore(t)
	dir := t.TempDir()
	bin := []byte{0, 1, 2, 3, 0xff}
	writeSpec(t, dir, fileSpec{"notes.txt": "text\n"})
	os.WriteFile(filepath.Join(dir, "blob.bin"), bin, 0o644)
	tree, _, err := st.IngestWith(t.Context(), dir, IngestOptions{Blobs: BlobsText})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := st.present(DigestOf([]byte("text\n"))); !ok {
		t.Error("a text file was not copied into the store")
	}
	if ok, _ := st.present(DigestOf(bin)); ok {
		t.Error("a binary file was copied into the store")
	}
	if got, err := st.Read(DigestOf(bin)); err != nil || string(got) != string(bin) {
		t.Fatalf("read from where it is: %q %v", got, err)
	}
	os.WriteFile(filepath.Join(dir, "blob.bin"), []byte{9, 9, 9, 9, 9}, 0o644)
	if _, err := st.Read(DigestOf(bin)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a changed file: %v", err)
	}
	if _, err := st.ReadTree(tree); err != nil {
		t.Fatal(err)
	}
}

// A killed writer that its parent has not reaped yet (a zombie) is dead
// for the sweep: its leftovers go; a running process is alive.
func TestProcessAliveTreatsZombiesAsDead(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Wait()
	if !processAlive(pid) {
		t.Fatalf("a running process (pid %d) counts as dead", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not reaped (no Wait yet): wait, bounded, until /proc shows the zombie.
	deadline := time.Now().Add(30 * time.Second)
	for !zombie(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never became a zombie", pid)
		}
		time.Sleep(5 * time.Millisecond) // polling /proc for the state, bounded
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("kill(pid, 0) on the zombie: %v; the test shows nothing", err)
	}
	if processAlive(pid) {
		t.Errorf("a zombie (pid %d) counts as alive", pid)
	}
}

// An atomic update that changes only a file's mode says so: the file is
// counted as updated, not "unchanged" (the mode is applied either way).
func TestUpdateAtomicModeOnlyIsAnUpdate(t *testing.T) {
	st, root, base := updateFixture(t)
	src := t.TempDir()
	writeSpec(t, src, fileSpec{"run.sh": "#!/bin/sh\n", "same": "same\n"})
	t1, _, _ := st.Ingest(t.Context(), src)
	doUpdate(t, st, root, "dest", t1, UpdateOptions{Atomic: true})
	os.Chmod(filepath.Join(src, "run.sh"), 0o755)
	t2, _, _ := st.Ingest(t.Context(), src)
	for _, dry := range []bool{true, false} {
		res := doUpdate(t, st, root, "dest", t2, UpdateOptions{Atomic: true, DryRun: dry, List: true})
		if res.Unchanged() || res.Updated != 1 || !slices.Equal(res.UpdatedPaths, []string{"run.sh"}) {
			t.Errorf("dry run %v: a mode change under --atomic: %+v", dry, res)
		}
	}
	if fi, _ := os.Stat(filepath.Join(base, "dest", "run.sh")); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
}

// A dry run changes nothing, not even the leftovers of a killed writer
// that a real update sweeps (found by review: the scan of a dry run
// removed them).
func TestUpdateDryRunSweepsNothing(t *testing.T) {
	st, root, base := updateFixture(t)
	dest := filepath.Join(base, "dst")
	writeSpec(t, dest, fileSpec{"a": "a\n"})
	left := filepath.Join(dest, fmt.Sprintf(".rex-tmp-%d-ab", deadPid(t)))
	os.WriteFile(left, []byte("x"), 0o600)
	tree := ingestSpec(t, st, fileSpec{"a": "b\n"})
	doUpdate(t, st, root, "dst", tree, UpdateOptions{DryRun: true})
	if _, err := os.Lstat(left); err != nil {
		t.Errorf("a dry run removed %s: %v", left, err)
	}
	doUpdate(t, st, root, "dst", tree, UpdateOptions{})
	if _, err := os.Lstat(left); err == nil {
		t.Errorf("the update kept %s", left)
	}
}

// An update in place that is abandoned after its blobs were written
// (whole, or half received) leaves the destination as it was: no
// temporary file beside the files it would have replaced. So does a
// commit that the context stops before any file is renamed.
func TestUpdateInPlaceAbortRemovesTemps(t *testing.T) {
	st, root, base := updateFixture(t)
	sender := newStore(t)
	tree := ingestSpec(t, sender, fileSpec{"a": "new a\n", "sub/b": "new b\n", "sub/c": "new c\n"})
	if _, err := Push(t.Context(), sender, LocalRemote{st}, tree); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"new a\n", "new b\n", "new c\n"} {
		os.Remove(st.objectPath(DigestOf([]byte(c)))) // the blobs must come from the sender
	}
	old := fileSpec{"a": "old a\n", "sub/b": "old b\n", "sub/c": "old c\n"}
	writeSpec(t, filepath.Join(base, "dst"), old)
	prepare := func() *Update {
		t.Helper()
		u, err := st.PrepareUpdate(t.Context(), root, "dst", tree, UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if u.stage != "" {
			t.Fatal("the update stages; this test is about an update in place")
		}
		return u
	}
	unchanged := func(when string) {
		t.Helper()
		if got := readSpec(t, filepath.Join(base, "dst")); !maps.Equal(got, old) {
			t.Errorf("%s: destination %v, want it as it was", when, got)
		}
		assertNoRexFiles(t, base)
	}

	u := prepare()
	if err := u.Put([]Object{{DigestOf([]byte("new a\n")), []byte("new a\n")}, {DigestOf([]byte("new b\n")), []byte("new b\n")}}); err != nil {
		t.Fatal(err)
	}
	w, err := u.Receive(DigestOf([]byte("new c\n")))
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("new"))
	u.Abort()
	unchanged("abort after the blobs were written")

	u = prepare()
	if err := u.Put([]Object{{DigestOf([]byte("new a\n")), []byte("new a\n")}, {DigestOf([]byte("new b\n")), []byte("new b\n")}, {DigestOf([]byte("new c\n")), []byte("new c\n")}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := u.Commit(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("commit with its context ended: %v", err)
	}
	unchanged("commit stopped by its context")
}

// On a file system other machines share (an NFS home, a volume of
// several containers), the temporaries of another machine's writers are
// left alone: their pids mean nothing here, and removing them broke that
// machine's push in the middle. This machine's own leftovers (and those
// named before machines were tagged) are removed as before; in the
// store's tmp/, anything older than staleAge goes too.
func TestSweepLeavesOtherMachinesTemps(t *testing.T) {
	st, root, base := updateFixture(t)
	dead := deadPid(t)
	other := "0123abcd"
	if other == st.host {
		other = "4567cdef"
	}
	tree := func(prefix, host string, pid int) string {
		return fmt.Sprintf("%s%d-%s%016x", prefix, pid, host, 42)
	}
	dest := filepath.Join(base, "dst")
	kept := map[string]bool{} // path → whether it must be kept
	for _, tc := range []struct {
		host string
		pid  int
		keep bool
	}{
		{st.host, dead, false},
		{other, dead, true},
		{"", dead, false}, // named before machines were tagged
		{st.host, os.Getpid(), true},
	} {
		f := filepath.Join(dest, tree(".rex-tmp-", tc.host, tc.pid))
		stage := filepath.Join(base, tree(".rex-stage-", tc.host, tc.pid))
		obj := filepath.Join(st.tmp, fmt.Sprintf("obj-%d-%s1234", tc.pid, map[bool]string{true: tc.host + "-", false: ""}[tc.host != ""]))
		writeSpec(t, dest, fileSpec{filepath.Base(f): "half"})
		os.MkdirAll(filepath.Join(stage, "x"), 0o755)
		os.WriteFile(obj, []byte("half"), 0o600)
		kept[f], kept[stage], kept[obj] = tc.keep, tc.keep, tc.keep
	}
	old := filepath.Join(st.tmp, fmt.Sprintf("obj-%d-%s-99", dead, other))
	os.WriteFile(old, []byte("half"), 0o600)
	hourAgo := time.Now().Add(-staleAge - time.Minute)
	os.Chtimes(old, hourAgo, hourAgo)
	kept[old] = false

	doUpdate(t, st, root, "dst", ingestSpec(t, st, fileSpec{"f": "f\n"}), UpdateOptions{})
	if _, err := Open(st.Root()); err != nil {
		t.Fatal(err)
	}
	for p, keep := range kept {
		if _, err := os.Lstat(p); (err == nil) != keep {
			t.Errorf("%s: kept %v, want %v", p, err == nil, keep)
		}
	}
}
