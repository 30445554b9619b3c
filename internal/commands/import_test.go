package commands

import (
	"os"
	"path/filepath"
	"strings"
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

// TestImportForceSaysDroppedMembers: --force gives a group the
// inventory's members, and says which of its old members that leaves out
// (they stay registered), in a dry run too; a group whose old members
// are all kept says nothing more.
func TestImportForceSaysDroppedMembers(t *testing.T) {
	store := tempStore(t)
	for _, n := range []string{"web1", "web2", "web3"} {
		mustRun(t, store, "add", n, n+".lan")
	}
	mustRun(t, store, "group", "create", "web")
	mustRun(t, store, "group", "add", "web", "web1,web2,web3")
	mustRun(t, store, "group", "create", "db")
	mustRun(t, store, "group", "add", "db", "web1")
	inv := filepath.Join(t.TempDir(), "inventory.ini")
	if err := os.WriteFile(inv, []byte("[web]\nweb2 ansible_host=web2.lan\nnew1 ansible_host=10.0.0.9\n[db]\nweb1 ansible_host=web1.lan\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"import", "ansible", inv, "--force", "--dry-run"}, "  would replace group web: new1,web2 (would drop web[1,3])\n  would replace group db: web1\n"},
		{[]string{"import", "ansible", inv, "--force"}, "  replaced group web: new1,web2 (dropped web[1,3])\n  replaced group db: web1\n"},
	}
	for _, tt := range tests {
		out := mustRun(t, store, tt.args...)
		if !strings.Contains(out, tt.want) {
			t.Errorf("rex device %s:\n%s\nwant it to contain\n%s", strings.Join(tt.args, " "), out, tt.want)
		}
	}
}
