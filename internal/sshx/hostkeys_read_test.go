package sshx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKnownHostsUnreadable: a known_hosts file that cannot be read is
// said as such, with advice for the file; a bad line names its line.
func TestKnownHostsUnreadable(t *testing.T) {
	dir := t.TempDir()
	isDir := filepath.Join(dir, "known_hosts_dir")
	os.Mkdir(isDir, 0o700)
	badLine := filepath.Join(dir, "known_hosts_bad")
	os.WriteFile(badLine, []byte("h1 ssh-ed25519 not-base64!\n"), 0o600)
	for _, tc := range []struct {
		file      string
		want, not []string
	}{
		{isDir, []string{"cannot read the known hosts file " + isDir, "is a directory", "UserKnownHostsFile"}, []string{"line"}},
		{badLine, []string{"known_hosts_bad:1", "fix or remove that line"}, nil},
	} {
		_, err := loadKnownHosts(&endpoint{name: "h1", knownHosts: []string{tc.file}})
		if err == nil {
			t.Errorf("%s: no error", tc.file)
			continue
		}
		msg := err.Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", tc.file, msg, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(msg, n) {
				t.Errorf("%s: %q says %q", tc.file, msg, n)
			}
		}
	}
}
