package rexclient_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
)

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCASOverRexd(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // rexd's store
	c, s, root := local(t)
	ctx := context.Background()
	if !s.HasCAS() {
		t.Fatal("rexd does not announce cas")
	}
	local, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	big := make([]byte, 3<<20) // streamed: larger than a batch's inline size
	rand.Read(big)
	writeTree(t, src, map[string]string{"a.txt": "alpha\n", "sub/b.txt": "beta\n", "big.bin": string(big)})
	os.Chmod(filepath.Join(src, "a.txt"), 0o755)
	tree, problems, err := local.Ingest(ctx, src)
	if err != nil || len(problems) != 0 {
		t.Fatalf("ingest: %v %v", err, problems)
	}
	remote := s.CAS()
	st, err := cas.Push(ctx, local, remote, tree)
	if err != nil {
		t.Fatal(err)
	}
	if st.Blobs != 3 || st.Streams != 1 {
		t.Errorf("first push stats %+v", st)
	}
	res, err := remote.Materialize(ctx, tree, "deploy/app", protocol.CASMaterializeParams{})
	if err != nil || res.Txn != "" || !res.Created {
		t.Fatalf("materialize: %+v %v", res, err)
	}
	dest := res.Path
	if dest != filepath.Join(root, "deploy/app") {
		t.Errorf("materialized at %s", dest)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "sub/b.txt")); string(b) != "beta\n" {
		t.Errorf("sub/b.txt = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "big.bin")); !bytes.Equal(b, big) {
		t.Error("big.bin differs")
	}
	if fi, _ := os.Stat(filepath.Join(dest, "a.txt")); fi.Mode()&0o100 == 0 {
		t.Error("the executable bit was lost")
	}
	// An unchanged re-push asks one question and sends nothing.
	before := c.BytesOut()
	st, err = cas.Push(ctx, local, remote, tree)
	if err != nil || st.Blobs != 0 || st.Trees != 0 || st.Queries != 1 {
		t.Fatalf("re-push %+v %v", st, err)
	}
	if sent := c.BytesOut() - before; sent > 400 {
		t.Errorf("an unchanged re-push sent %d bytes", sent)
	}
	// Ingest on the far side and fetch back into a fresh store.
	rtree, path, probs, err := remote.Ingest(ctx, "deploy/app")
	if err != nil || len(probs) != 0 || rtree != tree || path != dest {
		t.Fatalf("remote ingest: %v %v %v %s", rtree, probs, err, path)
	}
	other, _ := cas.Open(t.TempDir())
	if _, err := cas.Fetch(ctx, other, remote, rtree); err != nil {
		t.Fatal(err)
	}
	if err := other.Materialize(ctx, rtree, filepath.Join(t.TempDir(), "copy")); err != nil {
		t.Fatal(err)
	}
}

func TestCASPutRefusesTamperedObjects(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	_, s, _ := local(t)
	ctx := context.Background()
	good := []byte("good object")
	bad := []byte("claimed content")
	gd, bd := cas.DigestOf(good), cas.DigestOf(bad)
	err := s.CAS().Put(ctx, []cas.Object{{Digest: gd, Data: good}, {Digest: bd, Data: []byte("other content!!")}})
	if protocol.ErrorCode(err) != protocol.CodeInvalidParams || !strings.Contains(err.Error(), "nothing was stored") {
		t.Fatalf("tampered put: %v", err)
	}
	missing, err := s.CAS().Has(ctx, []cas.Digest{gd, bd})
	if err != nil || len(missing) != 2 {
		t.Fatalf("after a refused batch the good object must not be stored either: missing %v %v", missing, err)
	}
	// Invalid digests are refused everywhere.
	for _, bad := range []string{"../../etc/passwd/1", strings.Repeat("A", 64) + "/1", "abc/1"} {
		err := s.Client().Call(ctx, protocol.MethodCASHas, protocol.CASDigests{SessionID: s.ID, Digests: []string{bad}}, nil)
		if protocol.ErrorCode(err) != protocol.CodeInvalidParams {
			t.Errorf("cas.has %q: %v", bad, err)
		}
	}
	// Materializing outside the roots is refused.
	tree := cas.DigestOf([]byte("x"))
	if _, err := s.CAS().Materialize(ctx, tree, "/etc/rex-test", protocol.CASMaterializeParams{}); protocol.ErrorCode(err) != protocol.CodeForbiddenPath {
		t.Errorf("materialize outside: %v", err)
	}
}

// TestCASUpdateTxn: only the trees go to the store; the target asks for
// the blobs it cannot find on its side, receives them straight into the
// destination, and commits. The same tree to another directory needs no
// blob at all.
func TestCASUpdateTxn(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	_, s, root := local(t)
	ctx := context.Background()
	local, _ := cas.Open(t.TempDir())
	src := t.TempDir()
	big := make([]byte, 3<<20)
	rand.Read(big)
	writeTree(t, src, map[string]string{"a.txt": "alpha\n", "copy.txt": "alpha\n", "sub/big.bin": string(big)})
	tree, _, err := local.Ingest(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	remote := s.CAS()
	st, err := cas.PushTrees(ctx, local, remote, tree, cas.SyncOptions{})
	if err != nil || st.Blobs != 0 || st.Trees != 2 {
		t.Fatalf("push trees: %+v %v", st, err)
	}
	res, err := remote.Materialize(ctx, tree, "one", protocol.CASMaterializeParams{})
	if err != nil || res.Txn == "" || res.NeededTotal != 2 || len(res.Needed) != 2 {
		t.Fatalf("materialize: %+v %v", res, err)
	}
	need, err := rexclient.ParseDigests(res.Needed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cas.SendBlobs(ctx, local, remote.ForTxn(res.Txn), need, cas.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	if left, total, err := remote.Needed(ctx, res.Txn); err != nil || total != 0 || len(left) != 0 {
		t.Fatalf("still needed: %v %d %v", left, total, err)
	}
	done, err := remote.Commit(ctx, res.Txn)
	if err != nil || !done.Created || done.Added != 4 {
		t.Fatalf("commit: %+v %v", done, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "one/sub/big.bin")); !bytes.Equal(b, big) {
		t.Error("big.bin differs")
	}
	// The blobs were written into the destination only, never the store.
	if missing, _ := remote.Has(ctx, []cas.Digest{cas.DigestOf(big)}); len(missing) != 1 {
		t.Error("the target stored a blob in its store as well as the destination")
	}
	// Another directory: every blob is found on the target.
	res, err = remote.Materialize(ctx, tree, "two", protocol.CASMaterializeParams{})
	if err != nil || res.Txn != "" || res.Added != 4 {
		t.Fatalf("second destination: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "two/copy.txt")); string(b) != "alpha\n" {
		t.Errorf("copy.txt = %q", b)
	}
	// An abandoned update leaves nothing behind.
	writeTree(t, src, map[string]string{"new.txt": "new\n"})
	tree2, _, _ := local.Ingest(ctx, src)
	cas.PushTrees(ctx, local, remote, tree2, cas.SyncOptions{})
	res, err = remote.Materialize(ctx, tree2, "one", protocol.CASMaterializeParams{})
	if err != nil || res.Txn == "" {
		t.Fatalf("third: %+v %v", res, err)
	}
	if err := remote.Abort(ctx, res.Txn); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "one"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".rex-") || e.Name() == "new.txt" {
			t.Errorf("an aborted update left %s", e.Name())
		}
	}
}

// TestCASPutSendsRawBytes: to a rexd that announces cas.raw, blobs cross
// the wire as they are (a line of digests, then the bytes), not as base64,
// and arrive whole.
func TestCASPutSendsRawBytes(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	_, s, _ := local(t)
	ctx := context.Background()
	if !slices.Contains(s.Info.Capabilities, protocol.CapCASRaw) {
		t.Fatalf("rexd does not announce %s: %v", protocol.CapCASRaw, s.Info.Capabilities)
	}
	var objs []cas.Object
	var total int
	for i := range 4 {
		b := make([]byte, 256<<10+i)
		rand.Read(b)
		objs = append(objs, cas.Object{Digest: cas.DigestOf(b), Data: b})
		total += len(b)
	}
	before := s.Client().BytesOut()
	if err := s.CAS().Put(ctx, objs); err != nil {
		t.Fatal(err)
	}
	if sent := s.Client().BytesOut() - before; sent < int64(total) || sent > int64(total)+2048 {
		t.Errorf("%d bytes of objects took %d bytes on the wire; raw frames add only a line", total, sent)
	}
	ds := make([]cas.Digest, len(objs))
	for i, o := range objs {
		ds[i] = o.Digest
	}
	got, err := s.CAS().Get(ctx, ds)
	if err != nil || len(got) != len(objs) {
		t.Fatalf("get: %d objects, %v", len(got), err)
	}
	for i := range got {
		if !bytes.Equal(got[i].Data, objs[i].Data) {
			t.Errorf("object %d came back different", i)
		}
	}
}
