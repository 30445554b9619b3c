package rexd_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// TestCASModeChangeLeavesOtherLinksAlone: a push that only changes a
// file's mode must not chmod an inode that has another name: a hard link
// in the destination to a file outside the roots (a private key, say)
// would have its mode changed through it. The file gets a copy of its own
// with the new mode instead, as the atomic path does (soleLink).
func TestCASModeChangeLeavesOtherLinksAlone(t *testing.T) {
	h := start(t)
	sid := h.open()
	content := []byte("-----BEGIN KEY-----\n")
	outside := filepath.Join(t.TempDir(), "id_key")
	if err := os.WriteFile(outside, content, 0o600); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(h.root, "out")
	os.Mkdir(dest, 0o755)
	if err := os.Link(outside, filepath.Join(dest, "k")); err != nil {
		t.Fatal(err)
	}
	tree, _ := cas.Tree{Entries: []cas.Entry{{Name: "k", Type: cas.EntryFile, Digest: cas.DigestOf(content), Mode: 0o644}}}.Encode()
	td := cas.DigestOf(tree)
	h.ok(protocol.MethodCASPut, protocol.CASPutParams{SessionID: sid, Objects: []protocol.CASObject{{Digest: td.String(), Data: base64.StdEncoding.EncodeToString(tree)}}}, nil)
	var m protocol.CASMaterializeResult
	h.ok(protocol.MethodCASMaterialize, protocol.CASMaterializeParams{SessionID: sid, Tree: td.String(), Path: "out"}, &m)
	if m.Txn != "" || m.Updated != 1 {
		t.Fatalf("materialize: %+v", m)
	}
	if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the file outside the roots: %v, %v; want mode 0600 kept", fi.Mode(), err)
	}
	fi, err := os.Stat(filepath.Join(dest, "k"))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("out/k: %v, %v; want mode 0644", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "k")); string(b) != string(content) {
		t.Fatalf("out/k = %q", b)
	}
}
