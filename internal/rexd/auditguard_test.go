package rexd_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// TestAuditLogOutOfClientsReach: rexd's audit log lives in the home
// directory by default, inside the default roots, so a client limited by
// allow_commands could otherwise erase its own tracks with a file method.
// No fs.write (however it names the file) and no cas.materialize (writing
// over it, deleting it, swapping its directory) may change or remove it;
// each is refused with forbidden_path, and the log keeps every entry.
func TestAuditLogOutOfClientsReach(t *testing.T) {
	root := t.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	dir := filepath.Join(root, ".local", "state", "rexd")
	audit := filepath.Join(dir, "audit.log")
	h := startEnv(t, []string{"HOME=" + root, "XDG_CACHE_HOME=" + t.TempDir()}, "--root", root, "--audit", audit)
	sid := h.open()
	if err := os.Link(audit, filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".local/state/rexd/audit.log", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(audit)
	if err != nil || !strings.Contains(string(before), "session.open") {
		t.Fatalf("the audit log before: %q, %v", before, err)
	}

	no := false
	content := base64.StdEncoding.EncodeToString([]byte("{}\n"))
	for _, c := range []struct {
		name string
		p    protocol.FSWriteParams
	}{
		{"replace", protocol.FSWriteParams{Path: audit}},
		{"replace by a relative path", protocol.FSWriteParams{Path: "~/.local/state/rexd/audit.log"}},
		{"append", protocol.FSWriteParams{Path: audit, Mode: protocol.WriteAppend}},
		{"in place", protocol.FSWriteParams{Path: audit, Atomic: &no}},
		{"through a symlink", protocol.FSWriteParams{Path: filepath.Join(root, "link")}},
		{"append to a hard link", protocol.FSWriteParams{Path: filepath.Join(root, "alias"), Mode: protocol.WriteAppend}},
	} {
		c.p.SessionID, c.p.Content, c.p.Encoding = sid, content, protocol.EncodingBase64
		e := h.with(t).fails(protocol.MethodFSWrite, c.p, protocol.CodeForbiddenPath)
		if !strings.Contains(e.Message, "audit log") {
			t.Errorf("%s: refused as %q, which does not say it is the audit log", c.name, e.Message)
		}
	}

	// A tree whose audit.log differs, and one without it.
	other := []byte("not the audit log\n")
	od := cas.DigestOf(other)
	put := func(data []byte) cas.Digest {
		d := cas.DigestOf(data)
		h.ok(protocol.MethodCASPut, protocol.CASPutParams{SessionID: sid, Objects: []protocol.CASObject{{Digest: d.String(), Data: base64.StdEncoding.EncodeToString(data)}}}, nil)
		return d
	}
	put(other)
	enc := func(tr cas.Tree) []byte {
		b, err := tr.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	over := put(enc(cas.Tree{Entries: []cas.Entry{{Name: "audit.log", Type: cas.EntryFile, Digest: od}}}))
	beside := put(enc(cas.Tree{Entries: []cas.Entry{{Name: "other", Type: cas.EntryFile, Digest: od}}}))
	for _, c := range []struct {
		name string
		p    protocol.CASMaterializeParams
	}{
		{"write over it", protocol.CASMaterializeParams{Tree: over.String(), Path: dir}},
		{"write over it, dry run", protocol.CASMaterializeParams{Tree: over.String(), Path: dir, DryRun: true}},
		{"delete it", protocol.CASMaterializeParams{Tree: beside.String(), Path: dir, Delete: true}},
		{"delete its directory", protocol.CASMaterializeParams{Tree: beside.String(), Path: filepath.Join(root, ".local"), Delete: true}},
		{"swap its directory", protocol.CASMaterializeParams{Tree: beside.String(), Path: dir, Atomic: true}},
		{"swap a directory above it", protocol.CASMaterializeParams{Tree: beside.String(), Path: filepath.Join(root, ".local"), Atomic: true}},
	} {
		c.p.SessionID = sid
		e := h.with(t).fails(protocol.MethodCASMaterialize, c.p, protocol.CodeForbiddenPath)
		if !strings.Contains(e.Message, "audit log") {
			t.Errorf("%s: refused as %q, which does not say it is the audit log", c.name, e.Message)
		}
	}

	// What stays allowed: reading it, and a push beside it that leaves it alone.
	h.ok(protocol.MethodFSRead, protocol.FSReadParams{SessionID: sid, Path: audit}, nil)
	h.ok(protocol.MethodCASMaterialize, protocol.CASMaterializeParams{SessionID: sid, Tree: beside.String(), Path: dir}, nil)

	h.stdin.Close()
	<-h.exited
	after, err := os.ReadFile(audit)
	if err != nil || !strings.HasPrefix(string(after), string(before)) || strings.Contains(string(after), "not the audit log") {
		t.Fatalf("the audit log changed under the client: before %d bytes, after %q (%v)", len(before), after, err)
	}
}
