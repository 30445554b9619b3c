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
	// Refused before writing: the sizes in the sentence.
	perr := casError("cas.materialize", &cas.SpaceError{Path: "/srv/site", Needed: 18e6, Free: 3e6})
	if perr.Code != protocol.CodeNoSpace || perr.Message != "no space left in /srv/site: 18 MB needed, 3 MB free; free some space or choose another place" {
		t.Errorf("space: %d %q", perr.Code, perr.Message)
	}
	perr = casError("cas.materialize", &cas.SpaceError{Path: "/srv/site", Needed: 18e6, Free: 1e6, Limit: true})
	if perr.Code != protocol.CodeResourceLimit || !strings.Contains(perr.Message, "--max-bytes") {
		t.Errorf("limit: %d %q", perr.Code, perr.Message)
	}
}
