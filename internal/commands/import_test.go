package commands

import (
	"os"
	"path/filepath"
	"testing"
)

// TestImportOwnSSHConfigByAnyPath: the operator's own ~/.ssh/config,
// named through a symlink to the home directory (or any other path to the
// same file), is still their own file: each device reaches its Host alias
// so that ssh_config keeps applying, rather than a copy of HostName.
func TestImportOwnSSHConfigByAnyPath(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Host web1\n  HostName 10.0.0.5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	for _, file := range []string{"", filepath.Join(home, ".ssh", "config"), filepath.Join(link, ".ssh", "config")} {
		inv, _, err := loadInventory(ImportSpec{Kind: "ssh-config", File: file})
		if err != nil {
			t.Fatalf("%q: %v", file, err)
		}
		if len(inv.Devices) != 1 || inv.Devices[0].Host != "web1" {
			t.Errorf("import ssh-config %q = %+v; want web1 reaching its alias web1", file, inv.Devices)
		}
	}
}
