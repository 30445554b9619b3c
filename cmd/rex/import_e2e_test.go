package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeviceImport: a sample ssh_config, INI and YAML Ansible inventories
// and a hosts file, through the real binary: what is added is shown, names
// taken already refuse the import (nothing saved) unless --force.
func TestDeviceImport(t *testing.T) {
	testdata, _ := filepath.Abs(filepath.Join("..", "..", "devices", "testdata"))
	e := newRexEnv(t, rexBin)
	registry := func() map[string]any {
		var reg map[string]any
		b, err := os.ReadFile(e.registry())
		if err == nil {
			json.Unmarshal(b, &reg)
		}
		return reg
	}

	out, errOut, code := e.run("device", "import", "ansible", filepath.Join(testdata, "inventory.ini"), "--dry-run")
	if code != 0 || !strings.Contains(out, "would add device web01.example.com (deploy@web01.example.com)") || registry() != nil {
		t.Fatalf("--dry-run: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = e.run("device", "import", "ansible", filepath.Join(testdata, "inventory.ini"))
	for _, want := range []string{
		"from the Ansible inventory " + filepath.Join(testdata, "inventory.ini") + " (INI):",
		"  added device bastion.example.com (admin@10.0.0.9:2222) key ~/.ssh/bastion",
		"  added device db-a.example.com (postgres@db-a.example.com:5522)",
		"  added group webservers: bastion.example.com,web[01-03].example.com",
		"imported 7 devices and 3 groups into " + e.registry(),
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("INI import lacks %q: exit %d\n%s%s", want, code, out, errOut)
		}
	}
	out, _, _ = e.run("device", "group", "list")
	if !strings.Contains(out, "prod") || !strings.Contains(out, "db-b.example.com") {
		t.Errorf("groups after the import:\n%s", out)
	}

	// The YAML one names the same hosts: refused, nothing changes.
	before, _ := os.ReadFile(e.registry())
	_, errOut, code = e.run("device", "import", "ansible", filepath.Join(testdata, "inventory.yml"))
	if code != 1 || !strings.Contains(errOut, "are in the registry already; nothing was imported; add --force to replace them") {
		t.Errorf("a clashing import: exit %d %q", code, errOut)
	}
	if after, _ := os.ReadFile(e.registry()); string(after) != string(before) {
		t.Error("a refused import changed devices.json")
	}
	out, errOut, code = e.run("device", "import", "ansible", filepath.Join(testdata, "inventory.yml"), "--force")
	if code != 0 || !strings.Contains(out, "replaced device db-a.example.com (admin@db-a.example.com:5522)") || !strings.Contains(out, "(YAML)") {
		t.Errorf("--force: exit %d\n%s%s", code, out, errOut)
	}

	out, errOut, code = e.run("device", "import", "hosts", filepath.Join(testdata, "hosts"))
	if code != 0 || !strings.Contains(out, "added device web1 (10.0.0.5)") || !strings.Contains(out, "added device db1 (fd00::7)") ||
		!strings.Contains(errOut, "skipped line 1: localhost is a loopback address") {
		t.Errorf("hosts import: exit %d\n%s%s", code, out, errOut)
	}

	// Another ssh_config's values are copied in; names taken refuse it.
	_, errOut, code = e.run("device", "import", "ssh-config", filepath.Join(testdata, "ssh_config"))
	if code != 1 || !strings.Contains(errOut, "device web1, device web2, device db1 are in the registry already") {
		t.Errorf("ssh_config over hosts: exit %d %q", code, errOut)
	}
	out, _, code = e.run("device", "import", "ssh-config", filepath.Join(testdata, "ssh_config"), "--force")
	if code != 0 || !strings.Contains(out, "replaced device db1 (dba@db1.internal) via bastion key ~/.ssh/id_db") {
		t.Errorf("ssh_config --force: exit %d\n%s", code, out)
	}

	for _, args := range [][]string{{"device", "import", "ansibel", "x"}, {"device", "import", "hosts"}, {"device", "import", "ssh-config", "a", "b"}} {
		if _, errOut, code := e.run(args...); code != 2 {
			t.Errorf("rex %s: exit %d %q, want a usage error", strings.Join(args, " "), code, errOut)
		}
	}
}

// TestImportOwnSSHConfigRuns: devices imported from ~/.ssh/config reach
// their alias, so `rex run` on them goes where `ssh ALIAS` would.
func TestImportOwnSSHConfigRuns(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	f.withSSHConfig(t, f.hosts[0].ConfigBlock("edge1", f.key, ""))
	out, errOut, code := f.run("device", "import", "ssh-config")
	if code != 0 || !strings.Contains(out, "added device edge1 (edge1)") {
		t.Fatalf("import: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = f.run("run", "edge1", "--", "sh", "-c", "echo $HOME")
	if code != 0 || out != "edge1: "+f.hosts[0].Home+"\n" {
		t.Errorf("run on the imported alias: exit %d %q %q", code, out, errOut)
	}
}
