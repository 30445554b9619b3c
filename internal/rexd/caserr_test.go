package rexd

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// File-system failures get codes of their own and one sentence; none is
// internal_error.
func TestCASFileSystemErrors(t *testing.T) {
	tests := []struct {
		err    error
		code   int
		reason string
		says   string
	}{
		{syscall.ENOSPC, protocol.CodeNoSpace, "no_space", "no space left on the file system (/srv/site/f)"},
		{syscall.EDQUOT, protocol.CodeNoSpace, "quota", "the disk quota is used up"},
		{syscall.EROFS, protocol.CodeFileSystem, "read_only", "read-only"},
		{syscall.EBUSY, protocol.CodeFileSystem, "busy", "busy"},
		{syscall.ENAMETOOLONG, protocol.CodeFileSystem, "name_too_long", "too long"},
		{syscall.EIO, protocol.CodeFileSystem, "io", "input/output error"},
		{syscall.EEXIST, protocol.CodeFileSystem, "exists", "made at the same moment"},
		{syscall.EACCES, protocol.CodeUnauthorized, "permission_denied", "use --sudo"},
		{syscall.EXDEV, protocol.CodeFileSystem, "cross_device", "cross file systems"},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			err := fmt.Errorf("update /srv/site: %w", &fs.PathError{Op: "write", Path: "/srv/site/f", Err: tt.err})
			perr := casError("cas.commit", err)
			var data map[string]any
			json.Unmarshal(perr.Data, &data)
			if perr.Code != tt.code || data["reason"] != tt.reason || !strings.Contains(perr.Message, tt.says) || data["path"] != "/srv/site/f" {
				t.Errorf("%v → %d %v %q", tt.err, perr.Code, data, perr.Message)
			}
		})
	}
	// A pull reads: what to do is about reading.
	perr := fileSystemError("cas.ingest /srv/secret", "", &fs.PathError{Op: "open", Path: "/srv/secret", Err: syscall.EACCES})
	if want := "cas.ingest /srv/secret: permission denied (/srv/secret); use --sudo, or a place the login user may read"; perr == nil || perr.Message != want {
		t.Errorf("ingest refused: %v, want %q", perr, want)
	}
	// Refused before writing: the sizes in the sentence.
	perr = casError("cas.materialize", &cas.SpaceError{Path: "/srv/site", Needed: 18e6, Free: 3e6})
	if perr.Code != protocol.CodeNoSpace || perr.Message != "no space left in /srv/site: 18 MB needed, 3 MB free; free some space or choose another place" {
		t.Errorf("space: %d %q", perr.Code, perr.Message)
	}
	perr = casError("cas.materialize", &cas.SpaceError{Path: "/srv/site", Needed: 18e6, Free: 1e6, Limit: true})
	if perr.Code != protocol.CodeResourceLimit || !strings.Contains(perr.Message, "--max-bytes") {
		t.Errorf("limit: %d %q", perr.Code, perr.Message)
	}
}

// TestCASErrorPathsReadAsPlaces: a file-system error under a root names
// an absolute path, and rex's own temporary name (a stage, a temp file)
// as the directory it was made in: "permission denied
// (srv/.rex-stage-14212-5bceec9e34103cd8)" told the operator of a name
// they never chose, relative to a root they never see.
func TestCASErrorPathsReadAsPlaces(t *testing.T) {
	tests := []struct {
		root, path, want string
	}{
		{"/", "srv/.rex-stage-14212-5bceec9e34103cd8", "/srv"},
		{"/home/u", "site/.rex-tmp-77-0a1b", "/home/u/site"},
		{"/home/u", "site/app.conf", "/home/u/site/app.conf"},
		{"/home/u", "site/.rex-stage-x", "/home/u/site/.rex-stage-x"}, // not rex's: no pid
		{"", "/srv/site/f", "/srv/site/f"},
		// A file inside a stage (a push's blob written where space ran out).
		{"/", "tmp/full/.rex-stage-32328-a038a2211138dce1/a.bin", "/tmp/full"},
		{"/home/u", ".rex-stage-32328-a038a2211138dce1/d/a.bin", "/home/u"},
		{"", "/.rex-tmp-77-0a1b", "/"},
	}
	for _, tt := range tests {
		perr := casErrorUnder("cas.materialize", tt.root, fmt.Errorf("update: %w", &fs.PathError{Op: "mkdir", Path: tt.path, Err: syscall.EACCES}))
		var data map[string]any
		json.Unmarshal(perr.Data, &data)
		if data["path"] != tt.want || !strings.Contains(perr.Message, "("+tt.want+")") {
			t.Errorf("%s under %q: %v %q, want the path %s", tt.path, tt.root, data["path"], perr.Message, tt.want)
		}
	}
}
