package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/rexd"
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

// --chmod takes rsync's forms: octal, symbolic, D and F prefixes.
func TestParseChmod(t *testing.T) {
	tests := []struct {
		spec      string
		dir, file fs.FileMode // results for a 0755 directory and a 0644 file
		xfile     fs.FileMode // and for a 0755 file
	}{
		{"D755,F644", 0o755, 0o644, 0o644},
		{"640", 0o640, 0o640, 0o640},
		{"u+x", 0o755, 0o744, 0o755},
		{"go-w,o-r", 0o751, 0o640, 0o751},
		{"a=rX", 0o555, 0o444, 0o555},
		{"Fu=rw,go=", 0o700, 0o600, 0o600}, // the prefix holds for its own item only, as in rsync
		{"g+s", 0o2755, 0o2644, 0o2755},
		{"+t", 0o1755, 0o1644, 0o1755},
	}
	for _, tt := range tests {
		fn, err := ParseChmod(tt.spec)
		if err != nil {
			t.Fatalf("%s: %v", tt.spec, err)
		}
		if d, f, x := fn(true, 0o755), fn(false, 0o644), fn(false, 0o755); d != tt.dir || f != tt.file || x != tt.xfile {
			t.Errorf("%s: dir %#o file %#o exec %#o, want %#o %#o %#o", tt.spec, d, f, x, tt.dir, tt.file, tt.xfile)
		}
	}
	for _, bad := range []string{"", "9", "u", "u+q", "D", "x+r", "77777"} {
		if _, err := ParseChmod(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// A --sudo target is a connection of its own in the pool.
func TestWithSudoKeys(t *testing.T) {
	plain := LocalTarget()
	su := WithSudo([]fanout.Target{plain})[0]
	if su.Key == plain.Key || su.Name != plain.Name {
		t.Fatalf("sudo target %+v", su)
	}
	if s, ok := su.Spec.(SudoSpec); !ok || s.User != "root" {
		t.Fatalf("spec %+v", su.Spec)
	}
	if again := WithSudo([]fanout.Target{su})[0]; again.Key != su.Key {
		t.Errorf("sudo twice: %q", again.Key)
	}
}

// A push refuses, naming them, the files a pull left unresolved: a file
// still holding conflict markers and a .theirs copy still present; once
// both are resolved the push goes and the record is gone.
func TestCheckConflictsNamesWhatIsLeft(t *testing.T) {
	st, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "img"), 0o755)
	os.WriteFile(filepath.Join(dir, "a.conf"), []byte("x\n<<<<<<< local\nmine\n=======\ntheirs\n>>>>>>> h1\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "img/logo.png.theirs"), []byte{0x89, 'P', 'N', 'G'}, 0o644)
	if err := saveConflicts(st, conflictRecord{Dir: dir, Markers: []string{"a.conf"}, Theirs: []string{"img/logo.png.theirs"}}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		do   func()
		want []string // in the refusal; none: the push goes
	}{
		{"both open", func() {}, []string{"2 unresolved conflicts", "a.conf (conflict markers)", "img/logo.png.theirs (the remote side, kept by a pull)", "--force"}},
		{"markers resolved", func() { os.WriteFile(filepath.Join(dir, "a.conf"), []byte("x\nmine\n"), 0o644) }, []string{"1 unresolved conflict:", "img/logo.png.theirs"}},
		{"theirs removed", func() { os.Remove(filepath.Join(dir, "img/logo.png.theirs")) }, nil},
	} {
		step.do()
		err := checkConflicts(st, dir)
		if len(step.want) == 0 {
			if err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			continue
		}
		if err == nil {
			t.Fatalf("%s: the push was not refused", step.name)
		}
		for _, w := range step.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", step.name, err, w)
			}
		}
		if step.name == "markers resolved" && strings.Contains(err.Error(), "a.conf") {
			t.Errorf("%s: a resolved file is still named: %v", step.name, err)
		}
	}
	if _, err := os.Stat(conflictFile(st, dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the record outlived the conflicts: %v", err)
	}
}

// A pull applies a remote change of a directory into a file (or a link)
// when the local directory is what was last synced: the directory and all
// it held go, as the merge decided. It used to stop on a type conflict
// whose advice ("pass --delete ... or --atomic") rex pull does not take,
// so the pull could not go through at all. A directory changed here since
// it was read is still never removed.
func TestPullReplacesDirectoryByFile(t *testing.T) {
	st, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ingest := func(dir string) cas.Digest {
		t.Helper()
		d, problems, err := st.Ingest(context.Background(), dir)
		if err != nil || len(problems) > 0 {
			t.Fatal(err, problems)
		}
		return d
	}
	remote := t.TempDir()
	os.MkdirAll(filepath.Join(remote, "x", "sub"), 0o755)
	os.WriteFile(filepath.Join(remote, "x", "sub", "a"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(remote, "keep"), []byte("k\n"), 0o644)
	os.Symlink("keep", filepath.Join(remote, "x", "link"))
	base := ingest(remote)
	os.RemoveAll(filepath.Join(remote, "x"))
	os.WriteFile(filepath.Join(remote, "x"), []byte("now a file\n"), 0o644)
	theirs := ingest(remote)

	local := filepath.Join(t.TempDir(), "site")
	if err := applyLocal(context.Background(), st, local, cas.EmptyTree(), base, PullOptions{}); err != nil {
		t.Fatal(err)
	}
	// A file changed here since the pull read the directory stays, and so
	// does the directory holding it: the pull says why it cannot go on.
	os.WriteFile(filepath.Join(local, "x", "sub", "a"), []byte("mine\n"), 0o644)
	if err := applyLocal(context.Background(), st, local, base, theirs, PullOptions{}); err == nil {
		t.Error("a directory holding a local change was replaced")
	}
	if b, _ := os.ReadFile(filepath.Join(local, "x", "sub", "a")); string(b) != "mine\n" {
		t.Fatalf("the local change is gone: %q", b)
	}
	os.WriteFile(filepath.Join(local, "x", "sub", "a"), []byte("a\n"), 0o644)
	if err := applyLocal(context.Background(), st, local, base, theirs, PullOptions{}); err != nil {
		t.Fatalf("pull of a directory made a file: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(local, "x")); err != nil || string(b) != "now a file\n" {
		t.Errorf("x: %q %v", b, err)
	}
}

// testRexd serves a real rexd, confined to root, over pipes in this
// process, and opens a session with the cas capability (narrowed to
// workspace, when given, as a device's roots narrow it).
func testRexd(t *testing.T, root string, workspace ...string) *rexclient.Session {
	t.Helper()
	s, _ := testRexdStore(t, root, workspace...)
	return s
}

// testRexdStore is testRexd that also returns the directory of rexd's
// object store.
func testRexdStore(t *testing.T, root string, workspace ...string) (*rexclient.Session, string) {
	t.Helper()
	cfg := rexd.DefaultConfig()
	cfg.Roots = []string{root}
	cfg.CASDir = filepath.Join(t.TempDir(), "cas")
	cfg.AuditPath = filepath.Join(t.TempDir(), "audit.log")
	srv, err := rexd.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(ctx, sr, sw); sw.Close(); close(served) }()
	c := rexclient.NewConn(cr, cw, closerFunc(func() error { cancel(); cw.Close(); return nil }))
	t.Cleanup(func() { c.Close(); <-served; srv.Close() })
	s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "test", RequestedCapabilities: []string{protocol.CapCAS}, WorkspaceRoots: workspace})
	if err != nil {
		t.Fatal(err)
	}
	return s, cfg.CASDir
}

// A pull that cannot save the remote side of a conflict (PATH.theirs is
// there already, left by an earlier pull) stops before it writes anything
// here: it used to write the merge first, conflict markers included, and
// then stop without remembering them, so the next push sent the markers.
func TestPullTheirsInTheWayWritesNothing(t *testing.T) {
	f := newSyncFixture(t)
	s, st := f.s, f.st
	var err error
	ctx := context.Background()
	remote, local := f.remote, f.local
	text := "one\ntwo\nthree\n"
	os.MkdirAll(remote, 0o755)
	os.WriteFile(filepath.Join(remote, "a.conf"), []byte(text), 0o644)
	os.WriteFile(filepath.Join(remote, "z.bin"), []byte("\x00base"), 0o644)
	if _, err := PullTree(ctx, st, s, "h1", remote, local); err != nil {
		t.Fatal(err)
	}
	// Both sides change both files; a .theirs of z.bin is still here.
	os.WriteFile(filepath.Join(remote, "a.conf"), []byte("one\nTWO remote\nthree\n"), 0o644)
	os.WriteFile(filepath.Join(remote, "z.bin"), []byte("\x00remote"), 0o644)
	os.WriteFile(filepath.Join(local, "a.conf"), []byte("one\nTWO local\nthree\n"), 0o644)
	os.WriteFile(filepath.Join(local, "z.bin"), []byte("\x00local"), 0o644)
	os.WriteFile(filepath.Join(local, "z.bin.theirs"), []byte("\x00older"), 0o644)
	_, err = PullTree(ctx, st, s, "h1", remote, local)
	if err == nil || !strings.Contains(err.Error(), "z.bin.theirs") {
		t.Fatalf("pull with z.bin.theirs in the way: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(local, "a.conf")); string(b) != "one\nTWO local\nthree\n" {
		t.Errorf("a.conf was written: %q", b)
	}
	// Whatever the pull wrote, a push from here must not send markers.
	if hasMarkers(filepath.Join(local, "a.conf")) && checkConflicts(st, local) == nil {
		t.Error("a.conf holds conflict markers and a push would send them")
	}
}

// A later pull does not forget the conflicts an earlier one left: a pull
// that finds nothing new used to replace the record with its own (none),
// so a push right after sent the earlier pull's conflict markers.
func TestPullKeepsEarlierConflicts(t *testing.T) {
	f := newSyncFixture(t)
	s, st := f.s, f.st
	ctx := context.Background()
	remote, local := f.remote, f.local
	os.MkdirAll(remote, 0o755)
	os.WriteFile(filepath.Join(remote, "a.conf"), []byte("one\ntwo\nthree\n"), 0o644)
	os.WriteFile(filepath.Join(remote, "b.conf"), []byte("b\n"), 0o644)
	if _, err := PullTree(ctx, st, s, "h1", remote, local); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(remote, "a.conf"), []byte("one\nTWO remote\nthree\n"), 0o644)
	os.WriteFile(filepath.Join(local, "a.conf"), []byte("one\nTWO local\nthree\n"), 0o644)
	res, err := PullTree(ctx, st, s, "h1", remote, local)
	if err != nil || len(res.Conflicts) != 1 || !hasMarkers(filepath.Join(local, "a.conf")) {
		t.Fatalf("conflicted pull: %+v %v", res, err)
	}
	for _, step := range []struct {
		name string
		do   func()
	}{
		{"nothing new", func() {}},
		{"a clean change", func() { os.WriteFile(filepath.Join(remote, "b.conf"), []byte("b2\n"), 0o644) }},
	} {
		step.do()
		if res, err := PullTree(ctx, st, s, "h1", remote, local); err != nil || len(res.Conflicts) != 0 {
			t.Fatalf("%s: pull: %+v %v", step.name, res, err)
		}
		if err := checkConflicts(st, local); err == nil || !strings.Contains(err.Error(), "a.conf (conflict markers)") {
			t.Errorf("%s: a push would send a.conf's markers: %v", step.name, err)
		}
	}
}

// --max-bytes (and the free space) bound what a pull writes here before it
// writes anything: the blobs of a remote tree too large were fetched into
// the local store first, filling its disk, and only then refused.
func TestPullMaxBytesBeforeFetching(t *testing.T) {
	f := newSyncFixture(t)
	s, st := f.s, f.st
	var err error
	remote := f.remote
	os.MkdirAll(remote, 0o755)
	big := []byte(strings.Repeat("0123456789abcdef", 1<<12)) // 64 KiB
	os.WriteFile(filepath.Join(remote, "big"), big, 0o644)
	_, err = PullTreeWith(context.Background(), st, s, "h1", remote, f.local, PullOptions{MaxBytes: 1000}, nil)
	if err == nil || !strings.Contains(err.Error(), "--max-bytes") || strings.Count(err.Error(), "fetch") > 1 {
		t.Fatalf("pull over the limit: %v", err)
	}
	if missing, err := st.Has(context.Background(), []cas.Digest{cas.DigestOf(big)}); err != nil || len(missing) != 1 {
		t.Errorf("the refused pull stored its 64 KiB blob here anyway (%v)", err)
	}
	if _, err := os.Stat(f.local); err == nil {
		t.Error("the refused pull created the local directory")
	}
}

// A push refuses a pull's unresolved conflicts whatever names them: the
// conflicted file itself, a directory inside the pulled one, or one that
// holds it. Only a push of the pulled directory itself was checked.
func TestPushRefusesConflictsByAnyPath(t *testing.T) {
	f := newSyncFixture(t)
	s, st := f.s, f.st
	ctx := context.Background()
	remote, local := f.remote, f.local
	os.MkdirAll(filepath.Join(remote, "conf"), 0o755)
	os.WriteFile(filepath.Join(remote, "conf", "a.conf"), []byte("one\ntwo\nthree\n"), 0o644)
	os.WriteFile(filepath.Join(remote, "index.html"), []byte("x\n"), 0o644)
	if _, err := PullTree(ctx, st, s, "h1", remote, local); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(remote, "conf", "a.conf"), []byte("one\nTWO remote\nthree\n"), 0o644)
	os.WriteFile(filepath.Join(local, "conf", "a.conf"), []byte("one\nTWO local\nthree\n"), 0o644)
	if res, err := PullTree(ctx, st, s, "h1", remote, local); err != nil || len(res.Conflicts) != 1 {
		t.Fatalf("conflicted pull: %+v %v", res, err)
	}
	for _, src := range [][]string{
		{local},
		{filepath.Join(local, "conf", "a.conf")},
		{filepath.Join(local, "conf")},
		{f.localRoot},
		{filepath.Join(local, "index.html"), filepath.Join(local, "conf")},
	} {
		_, err := readSources(ctx, st, src, PushOptions{})
		if err == nil || !strings.Contains(err.Error(), "a.conf (conflict markers)") {
			t.Errorf("push %v: %v", src, err)
		}
		if _, err := readSources(ctx, st, src, PushOptions{Force: true}); err != nil {
			t.Errorf("push --force %v: %v", src, err)
		}
	}
	if _, err := readSources(ctx, st, []string{filepath.Join(local, "index.html")}, PushOptions{}); err != nil {
		t.Errorf("a file with no conflict: %v", err)
	}
}

// A pull writes the remote's version of a file only over the version it
// read here: a local edit made after the pull read the directory (before it
// writes) is kept, and the pull says so. It was overwritten with the
// remote's version (found by review).
func TestPullNeverOverwritesAnEditMadeWhileItRan(t *testing.T) {
	st, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	local := filepath.Join(t.TempDir(), "site")
	os.MkdirAll(local, 0o755)
	os.WriteFile(filepath.Join(local, "a.conf"), []byte("v1\n"), 0o644)
	ours, _, err := st.Ingest(ctx, local) // what the pull read here
	if err != nil {
		t.Fatal(err)
	}
	theirsDir := t.TempDir()
	os.WriteFile(filepath.Join(theirsDir, "a.conf"), []byte("v2 remote\n"), 0o644)
	result, _, _ := st.Ingest(ctx, theirsDir) // the merge: the remote's change
	os.WriteFile(filepath.Join(local, "a.conf"), []byte("mine, saved meanwhile\n"), 0o644)
	err = applyLocal(ctx, st, local, ours, result, PullOptions{})
	if b, _ := os.ReadFile(filepath.Join(local, "a.conf")); string(b) != "mine, saved meanwhile\n" {
		t.Fatalf("a local edit made while the pull ran was overwritten: a.conf is %q", b)
	}
	if err == nil || !strings.Contains(err.Error(), "a.conf changed while this ran") {
		t.Errorf("the pull did not say why it stopped: %v", err)
	}
	// Unchanged since read, it is written.
	os.WriteFile(filepath.Join(local, "a.conf"), []byte("v1\n"), 0o644)
	if err := applyLocal(ctx, st, local, ours, result, PullOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(local, "a.conf")); string(b) != "v2 remote\n" {
		t.Errorf("a.conf is %q", b)
	}
}

// A dry run changes nothing, here or on the target, not even the
// temporary files a killed writer left: a pull or push --dry-run removed
// them from the local directory, and every pull from the remote one, which
// a pull only reads (found by review).
func TestDryRunsKeepLeftovers(t *testing.T) {
	f := newSyncFixture(t)
	s, st := f.s, f.st
	ctx := context.Background()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	leftover := fmt.Sprintf(".rex-tmp-%d-ab", dead.Process.Pid)
	remote, local := f.remote, f.local
	for _, dir := range []string{remote, local} {
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, leftover), []byte("x"), 0o600)
	}
	os.WriteFile(filepath.Join(remote, "a"), []byte("a\n"), 0o644)
	kept := func(what string) {
		t.Helper()
		for _, dir := range []string{remote, local} {
			if _, err := os.Lstat(filepath.Join(dir, leftover)); err != nil {
				t.Errorf("%s removed %s from %s", what, leftover, dir)
			}
		}
	}
	if _, err := PullTreeWith(ctx, st, s, "h1", remote, local, PullOptions{DryRun: true}, nil); err != nil {
		t.Fatal(err)
	}
	kept("pull --dry-run")
	if _, err := readSources(ctx, st, []string{local}, PushOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	kept("push --dry-run")
	if _, err := PullTree(ctx, st, s, "h1", remote, local); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(remote, leftover)); err != nil {
		t.Errorf("a pull removed %s from the remote directory", leftover)
	}
}

// A push and a pull name the remote directory alike, so the pull finds
// the push as its base, also when the device's root is reached through a
// symlink (/var/www -> /srv/www): a push that had to send blobs recorded
// its sync under the link's spelling, a pull looked under the resolved
// one, found no base and turned a local edit into an add/add conflict
// (found by review).
func TestPushThenPullThroughSymlinkedRoot(t *testing.T) {
	server := t.TempDir()
	os.Mkdir(filepath.Join(server, "real"), 0o755)
	os.Symlink("real", filepath.Join(server, "www"))
	s := testRexd(t, server, filepath.Join(server, "www"))
	st, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	local := filepath.Join(t.TempDir(), "site")
	os.MkdirAll(local, 0o755)
	os.WriteFile(filepath.Join(local, "index.html"), []byte("v1\n"), 0o644)
	src, err := readSources(ctx, st, []string{local}, PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	remote := filepath.Join(server, "www", "site")
	_, res, err := pushSource(ctx, st, s, "h1", src, remote, PushOptions{verified: &cas.VerifiedSet{}}, func(SyncProgress) {})
	if err != nil || !res.Created {
		t.Fatalf("push: %+v %v", res, err)
	}
	os.WriteFile(filepath.Join(local, "index.html"), []byte("v2 local\n"), 0o644)
	pr, err := PullTree(ctx, st, s, "h1", remote, local)
	if err != nil || len(pr.Conflicts) != 0 || pr.RemotePath != res.Path {
		t.Fatalf("pull after the push: %+v %v (push said %s)", pr, err, res.Path)
	}
	if b, _ := os.ReadFile(filepath.Join(local, "index.html")); string(b) != "v2 local\n" {
		t.Errorf("index.html is %q", b)
	}
}

// A pull into a LOCAL that was removed whole makes a fresh copy, as rsync
// would: it is not a local deletion of everything the last sync brought
// (the pull left LOCAL empty and said "up to date"; found by review, S7).
// Deleting files inside LOCAL is still a local change the pull keeps.
func TestPullIntoRemovedLocalMakesAFreshCopy(t *testing.T) {
	f := newSyncFixture(t)
	s, st := f.s, f.st
	ctx := context.Background()
	remote, local := f.remote, f.local
	os.MkdirAll(filepath.Join(remote, "conf"), 0o755)
	os.WriteFile(filepath.Join(remote, "conf", "a.conf"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(remote, "index.html"), []byte("x\n"), 0o644)
	if _, err := PullTree(ctx, st, s, "h1", remote, local); err != nil {
		t.Fatal(err)
	}
	// A file deleted inside LOCAL stays deleted.
	os.Remove(filepath.Join(local, "index.html"))
	if _, err := PullTree(ctx, st, s, "h1", remote, local); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(local, "index.html")); !os.IsNotExist(err) {
		t.Fatalf("a file deleted here came back: %v", err)
	}
	// LOCAL removed whole: all of it comes back.
	os.RemoveAll(local)
	res, err := PullTree(ctx, st, s, "h1", remote, local)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"conf/a.conf": "a\n", "index.html": "x\n"} {
		if got, _ := os.ReadFile(filepath.Join(local, p)); string(got) != want {
			t.Errorf("%s holds %q after a pull into the removed LOCAL, want %q (result %+v)", p, got, want, res)
		}
	}
}

// A local file that cannot be synced (here a FIFO) stops a push and a
// pull before either changes anything, and the refusal says which:
// a pull used to say "nothing was sent", which it never does.
func TestUnsyncableLocalFileSaysWhatWasLeftAlone(t *testing.T) {
	f := newSyncFixture(t)
	s, st := f.s, f.st
	ctx := context.Background()
	remote, local := f.remote, f.local
	os.MkdirAll(remote, 0o755)
	os.MkdirAll(local, 0o755)
	os.WriteFile(filepath.Join(remote, "a.conf"), []byte("remote\n"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(local, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want, not string
		run             func() error
	}{
		{"push", "nothing was sent", "written", func() error {
			_, err := readSources(ctx, st, []string{local}, PushOptions{})
			return err
		}},
		{"pull", "nothing was written here", "sent", func() error {
			_, err := PullTree(ctx, st, s, "h1", remote, local)
			return err
		}},
	} {
		err := c.run()
		if err == nil || !strings.Contains(err.Error(), "pipe") || !strings.HasSuffix(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
			t.Errorf("%s: %v; want the FIFO named and %q", c.name, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(local, "a.conf")); err == nil {
		t.Error("the refused pull wrote a.conf here")
	}
}

// storeObjects lists the objects the store in dir holds.
func storeObjects(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(dir, "objects")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, strings.TrimPrefix(p, root))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A pull --dry-run changes nothing here, the local store included: it
// fetches the target's trees and the text blobs its merge reads, keeps
// them in memory, and still says which files would merge and which would
// conflict. It used to fetch every blob (a large binary too) into the
// store before it looked at the dry-run flag.
func TestPullDryRunLeavesTheStoreAsItWas(t *testing.T) {
	f := newSyncFixture(t)
	s, st := f.s, f.st
	ctx := context.Background()
	remote, local := f.remote, f.local
	os.MkdirAll(remote, 0o755)
	write := func(dir, name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(remote, "a.conf", "one\ntwo\nthree\nfour\n")
	write(remote, "c.conf", "x\n")
	if _, err := PullTree(ctx, st, s, "h1", remote, local); err != nil {
		t.Fatal(err)
	}
	// The target changes a.conf and c.conf and adds a large binary;
	// here a.conf changes elsewhere (a clean merge), c.conf alike (a
	// conflict).
	write(remote, "a.conf", "one\ntwo\nthree\nFOUR remote\n")
	write(remote, "c.conf", "x remote\n")
	write(remote, "big.bin", "\x00"+strings.Repeat("b", 3<<20))
	write(local, "a.conf", "ONE local\ntwo\nthree\nfour\n")
	write(local, "c.conf", "x local\n")
	// LOCAL as it is now is read into the store by any sync (push
	// --dry-run included): that is its cache, not the dry run's doing.
	if _, err := ingestLocal(ctx, st, local, cas.IngestOptions{}, nothingWritten); err != nil {
		t.Fatal(err)
	}
	before := storeObjects(t, st.Root())

	res, err := PullTreeWith(ctx, st, s, "h1", remote, local, PullOptions{DryRun: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if after := storeObjects(t, st.Root()); !slices.Equal(before, after) {
		t.Errorf("the dry run changed the store: %d objects before, %d after", len(before), len(after))
	}
	if !slices.Equal(res.Merged, []string{"a.conf"}) || !slices.Equal(res.Created, []string{"big.bin"}) ||
		len(res.Conflicts) != 1 || res.Conflicts[0].Path != "c.conf" {
		t.Errorf("dry run: merged %v, created %v, conflicts %v; want a.conf merged, big.bin created, c.conf in conflict", res.Merged, res.Created, res.Conflicts)
	}
	if b, _ := os.ReadFile(filepath.Join(local, "a.conf")); string(b) != "ONE local\ntwo\nthree\nfour\n" {
		t.Errorf("the dry run wrote a.conf: %q", b)
	}
	if _, err := os.Stat(filepath.Join(local, "big.bin")); err == nil {
		t.Error("the dry run wrote big.bin")
	}

	// The pull itself then merges as the dry run said.
	res, err = PullTree(ctx, st, s, "h1", remote, local)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(local, "a.conf")); string(b) != "ONE local\ntwo\nthree\nFOUR remote\n" || len(res.Conflicts) != 1 {
		t.Errorf("the pull after the dry run: a.conf %q, conflicts %v", b, res.Conflicts)
	}
}

// A push --dry-run changes nothing on the target, its object store
// included: the trees the target lacks travel with cas.materialize, which
// plans with them in memory. It used to store them there first. A tree
// set larger than one call may carry still goes to the store, and the
// plan is the same.
func TestPushDryRunLeavesTheTargetStoreAsItWas(t *testing.T) {
	for _, c := range []struct {
		name   string
		dirs   int // new directories in the source, one tree each
		stored bool
	}{
		{"trees in the call", 3, false},
		{"more trees than one call carries", cas.MaxBatchEntries + 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			remoteRoot, src := t.TempDir(), t.TempDir()
			s, casDir := testRexdStore(t, remoteRoot)
			st, err := cas.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			remote := filepath.Join(remoteRoot, "site")
			os.WriteFile(filepath.Join(src, "a.conf"), []byte("a\n"), 0o644)
			push := func(dry bool) PushResult {
				t.Helper()
				tree, err := ingestLocal(ctx, st, src, cas.IngestOptions{}, nothingSent)
				if err != nil {
					t.Fatal(err)
				}
				_, res, err := PushTree(ctx, st, s, "h1", tree, remote, PushOptions{DryRun: dry})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			push(false)
			os.WriteFile(filepath.Join(src, "a.conf"), []byte("a changed\n"), 0o644)
			for i := range c.dirs {
				d := filepath.Join(src, fmt.Sprintf("d%04d", i))
				os.Mkdir(d, 0o755)
				os.WriteFile(filepath.Join(d, "f"), []byte(fmt.Sprintf("%d\n", i)), 0o644)
			}
			before := storeObjects(t, casDir)
			res := push(true)
			after := storeObjects(t, casDir)
			if same := slices.Equal(before, after); same == c.stored {
				t.Errorf("the target's store had %d objects before the dry run, %d after; want them stored: %v", len(before), len(after), c.stored)
			}
			if res.Added != 2*c.dirs || res.Updated != 1 || !slices.Contains(res.UpdatedPaths, "a.conf") {
				t.Errorf("dry run: added %d, updated %d %v; want %d added and a.conf updated", res.Added, res.Updated, res.UpdatedPaths, 2*c.dirs)
			}
			if b, _ := os.ReadFile(filepath.Join(remote, "a.conf")); string(b) != "a\n" {
				t.Errorf("the dry run wrote a.conf: %q", b)
			}
		})
	}
}

// syncFixture is what most sync tests start from: a target (a rexd in
// this process serving remoteRoot), a local store, and the "site"
// directories of both sides (neither made).
type syncFixture struct {
	s                     *rexclient.Session
	st                    *cas.Store
	remoteRoot, localRoot string
	remote, local         string
}

func newSyncFixture(t *testing.T) syncFixture {
	t.Helper()
	f := syncFixture{remoteRoot: t.TempDir(), localRoot: t.TempDir()}
	f.s = testRexd(t, f.remoteRoot)
	var err error
	if f.st, err = cas.Open(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	f.remote, f.local = filepath.Join(f.remoteRoot, "site"), filepath.Join(f.localRoot, "site")
	return f
}

// A sync that finds the tree as last recorded (an unchanged push) leaves
// the sync record as it was: no snapshot object and no ref written per
// target and push. A changed tree records a snapshot on top of it.
func TestUnchangedSyncRecordsNothing(t *testing.T) {
	ctx := context.Background()
	st, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key := refKey("h1", "/srv/site", "/home/op/site")
	one, _ := st.PutTree(cas.Tree{})
	two, _ := st.PutTree(cas.Tree{Entries: []cas.Entry{{Name: "d", Type: cas.EntryDir, Digest: one}}})
	if err := recordSnapshot(ctx, st, key, one, "push"); err != nil {
		t.Fatal(err)
	}
	first, _ := st.ReadRef(key)
	if err := recordSnapshot(ctx, st, key, one, "push"); err != nil {
		t.Fatal(err)
	}
	again, _ := st.ReadRef(key)
	if again != first {
		t.Fatalf("an unchanged sync rewrote the record: %+v, was %+v", again, first)
	}
	if err := recordSnapshot(ctx, st, key, two, "push"); err != nil {
		t.Fatal(err)
	}
	next, _ := st.ReadRef(key)
	sn, err := st.ReadSnapshot(next.Snapshot)
	if err != nil || sn.Root != two || len(sn.Parents) != 1 || sn.Parents[0] != first.Snapshot {
		t.Fatalf("a changed tree recorded %+v (%v); want root %s on top of %s", sn, err, two, first.Snapshot)
	}
}

// TestReportEachSummarizes: a push or pull of several targets that fails
// somewhere ends with rex run's summary on stderr; one target, or all
// well, prints none; the exit status is the contract's.
func TestReportEachSummarizes(t *testing.T) {
	failed := errors.New("write /srv/site: permission denied (/srv)")
	tests := []struct {
		name    string
		results []fanout.EachResult
		want    string
		code    int
	}{
		{"several, some failed", []fanout.EachResult{
			{Target: "h1", Duration: time.Second},
			{Target: "h2", Err: failed, Duration: 2 * time.Second},
			{Target: "h3", Err: errors.New("unreachable: connection refused"), Unreachable: true},
			{Target: "h4", Err: errors.New("cancelled"), Cancelled: true},
		}, "h2! write /srv/site: permission denied (/srv)\nh3! unreachable: connection refused\nh4! cancelled\nrex: 1 ok, 1 failed, 1 unreachable, 1 cancelled in 2s\n", 255},
		{"several, all well", []fanout.EachResult{{Target: "h1"}, {Target: "h2"}}, "", 0},
		{"one, failed", []fanout.EachResult{{Target: "h1", Err: failed}}, "h1! write /srv/site: permission denied (/srv)\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errOut bytes.Buffer
			err := reportEach(IO{Out: io.Discard, Err: &errOut}, tt.results)
			if got := errOut.String(); got != tt.want {
				t.Errorf("stderr:\n%s\nwant:\n%s", got, tt.want)
			}
			code := 0
			var ee *ExitError
			if errors.As(err, &ee) {
				code = ee.Code
			}
			if code != tt.code {
				t.Errorf("exit status %d, want %d", code, tt.code)
			}
		})
	}
}

// TestWriteErrorSaysRexdsSentence: a push the target refuses says so in
// rexd's sentence, without the wire's code and the method's name (rexd
// names the place: an absolute path, its temporary names shown as their
// directory; TestCASErrorPathsReadAsPlaces).
func TestWriteErrorSaysRexdsSentence(t *testing.T) {
	refused := func(code int, data map[string]string, msg string) error {
		return fmt.Errorf("materialize: %w", protocol.Errorf(code, data, "%s", msg))
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"permission denied", refused(protocol.CodeUnauthorized, map[string]string{"path": "/srv", "reason": "permission_denied"},
			"cas.materialize: permission denied (/srv); use --sudo, or a place the login user may write"),
			"write /srv/site: permission denied (/srv); use --sudo, or a place the login user may write"},
		{"read-only", refused(protocol.CodeFileSystem, map[string]string{"path": "/srv/site/f", "reason": "read_only"},
			"cas.commit: the file system is read-only (/srv/site/f)"),
			"write /srv/site: the file system is read-only (/srv/site/f)"},
		{"outside the roots", refused(protocol.CodeForbiddenPath, map[string]string{"path": "/etc", "reason": "outside_roots"}, "outside the allowed roots"),
			"write /srv/site: outside the allowed roots"},
		{"not rexd's", errors.New("connection lost"), "write /srv/site: connection lost"},
		// Space ran out while writing, after the check before had found
		// enough: said once, as the destination's, without the method.
		{"no space while writing", refused(protocol.CodeNoSpace, map[string]string{"path": "/srv", "reason": "no_space"},
			"cas.put_chunk: no space left on the file system (/srv); free some space and try again"),
			"write /srv/site: no space left on the file system (/srv); free some space and try again"},
		{"connection lost", fmt.Errorf("commit: %w", rexclient.ErrClosed),
			"write /srv/site: the connection was lost (rexd or ssh ended there); push again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := writeError("h1", "/srv/site", tc.err).Error(); got != tc.want {
				t.Errorf("writeError:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestSyncErrorsReadAsSentences: a pull's refusal is rexd's sentence
// without the wire's code and method ("unauthorized (-32001): cas.ingest
// /srv/secret: …"), and a connection that ends in the middle of a push or
// pull says so, not the stream it was in; the cause stays wrapped for the
// pool (errors.Is rexclient.ErrClosed).
func TestSyncErrorsReadAsSentences(t *testing.T) {
	stream := fmt.Errorf("stream a53c464b/20971520: %w", rexclient.ErrClosed)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"pull refused", fetchError("read", "/srv/secret", fmt.Errorf("ingest: %w", protocol.Errorf(protocol.CodeUnauthorized,
			map[string]string{"path": "/srv/secret", "reason": "permission_denied"},
			"cas.ingest /srv/secret: permission denied (/srv/secret); use --sudo, or a place the login user may read"))),
			"read /srv/secret: permission denied (/srv/secret); use --sudo, or a place the login user may read"},
		{"pull lost", fetchError("fetch", "/srv/site", fmt.Errorf("fetch: %w", stream)),
			"fetch /srv/site: the connection was lost (rexd or ssh ended there); pull again"},
		{"push lost", sendError("/srv/site", stream),
			"send to /srv/site: the connection was lost (rexd or ssh ended there); push again"},
		{"push failed otherwise", sendError("/srv/site", errors.New("digest mismatch")), "send: digest mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
			if strings.Contains(tc.name, "lost") && !errors.Is(tc.err, rexclient.ErrClosed) {
				t.Error("the lost connection is no longer wrapped")
			}
		})
	}
}
