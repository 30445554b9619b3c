package devices

import (
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// summary is an inventory as "name addr key jump" lines and "group: members".
func summary(inv Inventory) []string {
	var out []string
	for _, d := range inv.Devices {
		l := d.Name + " " + d.Addr()
		if d.SSHKey != "" {
			l += " key=" + d.SSHKey
		}
		if j, ok := d.Extra()["jump"]; ok {
			l += " jump=" + string(j)
		}
		out = append(out, l)
	}
	for _, g := range inv.Groups {
		out = append(out, g.Name+": "+strings.Join(g.Members, ","))
	}
	return out
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestImportAnsibleINI(t *testing.T) {
	inv, err := FromAnsibleINI(readTestdata(t, "inventory.ini"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mail.example.com admin@mail.example.com",
		"web01.example.com deploy@web01.example.com",
		"web02.example.com deploy@web02.example.com",
		"web03.example.com deploy@web03.example.com",
		"bastion.example.com admin@10.0.0.9:2222 key=~/.ssh/bastion",
		"db-a.example.com postgres@db-a.example.com:5522",
		"db-b.example.com postgres@db-b.example.com:5522",
		"webservers: web01.example.com,web02.example.com,web03.example.com,bastion.example.com",
		"dbservers: db-a.example.com,db-b.example.com",
		"prod: web01.example.com,web02.example.com,web03.example.com,bastion.example.com,db-a.example.com,db-b.example.com",
	}
	if got := summary(inv); !slices.Equal(got, want) {
		t.Errorf("INI inventory:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestImportAnsibleYAML(t *testing.T) {
	inv, err := FromAnsibleYAML(readTestdata(t, "inventory.yml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mail.example.com admin@mail.example.com",
		"web01.example.com deploy@web01.example.com",
		"web02.example.com deploy@web02.example.com",
		"bastion.example.com admin@10.0.0.9:2222",
		"db-a.example.com admin@db-a.example.com:5522",
		"webservers: web01.example.com,web02.example.com,bastion.example.com",
		"dbservers: db-a.example.com",
		"prod: web01.example.com,web02.example.com,bastion.example.com,db-a.example.com",
	}
	if got := summary(inv); !slices.Equal(got, want) {
		t.Errorf("YAML inventory:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestImportAnsibleHostPort: Ansible writes a non-standard SSH port after
// the host name, "badwolf.example.com:5309", in both inventory forms; a
// port set as a variable on the same line wins, as in Ansible.
func TestImportAnsibleHostPort(t *testing.T) {
	tests := []struct {
		name string
		read func([]byte) (Inventory, error)
		data string
		want []string
	}{
		{"ini", FromAnsibleINI, "badwolf.example.com:5309\n[web]\nw[1:2].lan:2222 ansible_user=u\nv.lan:2200 ansible_port=2201\n",
			[]string{"badwolf.example.com badwolf.example.com:5309", "w1.lan u@w1.lan:2222", "w2.lan u@w2.lan:2222", "v.lan v.lan:2201", "web: w1.lan,w2.lan,v.lan"}},
		{"yaml", FromAnsibleYAML, "all:\n  hosts:\n    badwolf.example.com:5309:\n    w[1:2].lan:2222:\n      ansible_user: u\n",
			[]string{"badwolf.example.com badwolf.example.com:5309", "w1.lan u@w1.lan:2222", "w2.lan u@w2.lan:2222"}},
	}
	for _, tt := range tests {
		inv, err := tt.read([]byte(tt.data))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got := summary(inv); !slices.Equal(got, tt.want) || len(inv.Skipped) != 0 {
			t.Errorf("%s inventory:\n%s\nskipped %q\nwant:\n%s", tt.name, strings.Join(got, "\n"), inv.Skipped, strings.Join(tt.want, "\n"))
		}
	}
}

func TestImportHostsFile(t *testing.T) {
	inv, err := FromHostsFile(readTestdata(t, "hosts"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"web1 10.0.0.5", "web2 10.0.0.6", "db1 fd00::7"}
	if got := summary(inv); !slices.Equal(got, want) {
		t.Errorf("hosts file: %q, want %q", got, want)
	}
	if len(inv.Skipped) != 4 {
		t.Errorf("skipped %q", inv.Skipped)
	}
	for _, bad := range []string{"10.0.0.5\n", "web1 10.0.0.5\n", "10.0.0.5 -x\n"} {
		if _, err := FromHostsFile([]byte(bad)); err == nil {
			t.Errorf("hosts line %q accepted", bad)
		}
	}
}

func TestImportSSHConfig(t *testing.T) {
	home := t.TempDir()
	cfg, err := ParseSSHConfig(filepath.Join("testdata", "ssh_config"), home)
	if err != nil {
		t.Fatal(err)
	}
	inv, _ := FromSSHConfig(cfg, false)
	want := []string{
		"web1 everyone@10.0.0.web1:2222",
		"web2 everyone@10.0.0.web2:2222",
		`db1 dba@db1.internal key=~/.ssh/id_db jump="bastion"`,
		"bastion everyone@203.0.113.10",
	}
	if got := summary(inv); !slices.Equal(got, want) {
		t.Errorf("ssh_config:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	inv, _ = FromSSHConfig(cfg, true)
	if got := summary(inv); !slices.Equal(got, []string{"web1 web1", "web2 web2", "db1 db1", "bastion bastion"}) {
		t.Errorf("via aliases: %q", got)
	}
}

func TestExpandAnsible(t *testing.T) {
	tests := []struct {
		in   string
		want string
		err  bool
	}{
		{"web[1:3]", "web1 web2 web3", false},
		{"web[01:03].lan", "web01.lan web02.lan web03.lan", false},
		{"n[1:9:4]", "n1 n5 n9", false},
		{"db-[a:c]", "db-a db-b db-c", false},
		{"r[1:2]-[a:b]", "r1-a r1-b r2-a r2-b", false},
		{"x[3:1]", "", true}, {"x[1:3", "", true}, {"x[a:10]", "", true}, {"x[1:100000]", "", true}, {"x[1:2:0]", "", true},
	}
	for _, tt := range tests {
		got, err := expandAnsible(tt.in)
		if (err != nil) != tt.err || strings.Join(got, " ") != tt.want {
			t.Errorf("expandAnsible(%q) = %q, %v", tt.in, got, err)
		}
	}
}

func TestImportIntoRegistry(t *testing.T) {
	r := fixture(t)
	inv, err := FromHostsFile([]byte("10.9.0.1 new1\n10.9.0.2 web1\n"))
	if err != nil {
		t.Fatal(err)
	}
	inv.Groups = []Group{{Name: "web", Members: []string{"new1"}}}
	before, _ := r.Bytes()
	_, err = r.Import(inv, false)
	if err == nil || err.Error() != "device web1, group web are in the registry already; nothing was imported; add --force to replace them" {
		t.Fatalf("a clash: %v", err)
	}
	if after, _ := r.Bytes(); string(after) != string(before) {
		t.Error("a refused import changed the registry")
	}
	replaced, err := r.Import(inv, true)
	if err != nil || !slices.Equal(replaced, []string{"device web1", "group web"}) {
		t.Fatalf("--force: %v %v", replaced, err)
	}
	if d, _ := r.Device("web1"); d.Addr() != "10.9.0.2" || d.SSHKey != "~/.ssh/web" && d.SSHKey != "" {
		t.Errorf("web1 after --force: %+v", d)
	}
	if g, _ := r.Group("web"); !slices.Equal(g.Members, []string{"new1"}) {
		t.Errorf("group web after --force: %v", g.Members)
	}
	// A name that is a group here and a device there cannot be forced.
	inv = Inventory{Devices: []Device{mustDevice(t, "prod", "10.1.1.1")}}
	if _, err := r.Import(inv, true); err == nil || !strings.Contains(err.Error(), "is a group in the registry and a device in the inventory") {
		t.Errorf("device over a group: %v", err)
	}
}

func FuzzAnsibleINI(f *testing.F) {
	f.Add(readTestdataF(f, "inventory.ini"))
	f.Add([]byte("[a:children]\nb\n[b]\nh[1:3] x=\"y z\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := FromAnsibleINI(data)
		if err != nil {
			return
		}
		checkInventory(t, inv)
	})
}

func FuzzAnsibleYAML(f *testing.F) {
	f.Add(readTestdataF(f, "inventory.yml"))
	f.Add([]byte("all:\n  children:\n    a:\n      children:\n        a:\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := FromAnsibleYAML(data)
		if err != nil {
			return
		}
		checkInventory(t, inv)
	})
}

func FuzzHostsFile(f *testing.F) {
	f.Add(readTestdataF(f, "hosts"))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := FromHostsFile(data)
		if err != nil {
			return
		}
		checkInventory(t, inv)
	})
}

func readTestdataF(f *testing.F, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// checkInventory: every device would pass the registry's own checks, and
// groups name only those devices.
func checkInventory(t *testing.T, inv Inventory) {
	names := map[string]bool{}
	for _, d := range inv.Devices {
		if err := d.Validate(); err != nil {
			t.Fatalf("device %q does not validate: %v", d.Name, err)
		}
		names[d.Name] = true
	}
	for _, g := range inv.Groups {
		if ValidateName(g.Name) != nil || len(g.Members) == 0 {
			t.Fatalf("group %q", g.Name)
		}
		for _, m := range g.Members {
			if !names[m] {
				t.Fatalf("group %s names %q, not an imported device", g.Name, m)
			}
		}
	}
	r := New()
	if _, err := r.Import(inv, false); err != nil && !strings.Contains(err.Error(), "both a") && !strings.Contains(err.Error(), "differ only in case") {
		t.Fatalf("import into an empty registry: %v", err)
	}
}

// TestImportSSHConfigIdentityFileTokens: IdentityFile's % tokens are
// filled in as OpenSSH fills them (%h is the HostName there, %n the alias;
// %d the home, kept as ~/ so that the registry stays portable), and a
// token rex cannot fill skips the host, saying which.
func TestImportSSHConfigIdentityFileTokens(t *testing.T) {
	home := t.TempDir()
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "config")
	conf := `Host tok
    HostName %h.lan
    User deploy
    Port 2200
    IdentityFile %d/.ssh/id_%r_%h_%p_%n_%u%%
Host plain
    IdentityFile %d/.ssh/id_%r@%h
Host abs
    IdentityFile /keys/%h/%p
Host hash
    IdentityFile ~/.ssh/%C
Host trailing
    IdentityFile ~/.ssh/id_%
`
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseSSHConfig(file, home)
	if err != nil {
		t.Fatal(err)
	}
	inv, _ := FromSSHConfig(cfg, false)
	want := []string{
		"tok deploy@tok.lan:2200 key=~/.ssh/id_deploy_tok.lan_2200_tok_" + me.Username + "%",
		"plain plain key=~/.ssh/id_" + me.Username + "@plain",
		"abs abs key=/keys/abs/22",
	}
	if got := summary(inv); !slices.Equal(got, want) {
		t.Errorf("ssh_config:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantSkipped := []string{
		`Host hash: IdentityFile "~/.ssh/%C" uses %C, which rex cannot fill in; write the path without it`,
		`Host trailing: IdentityFile "~/.ssh/id_%" ends in a lone %; write %% for a % sign`,
	}
	if !slices.Equal(inv.Skipped, wantSkipped) {
		t.Errorf("skipped:\n%s\nwant:\n%s", strings.Join(inv.Skipped, "\n"), strings.Join(wantSkipped, "\n"))
	}
}

// TestImportNamesTheRegistryWouldRefuse: an inventory whose names differ
// only in case fails before anything is added, with a sentence naming
// both (the fuzzer found "0[A:a]", a range from 0A to 0a); a group named
// like an IP address is skipped, saying why, as any bad group is.
func TestImportNamesTheRegistryWouldRefuse(t *testing.T) {
	inv, err := FromAnsibleINI([]byte("web1 ansible_host=10.0.0.1\nWeb1 ansible_host=10.0.0.2\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := New()
	if _, err := r.Import(inv, false); err == nil || !strings.Contains(err.Error(), "web1 and Web1 are both in the inventory and differ only in case") {
		t.Errorf("import of web1 and Web1: %v", err)
	}
	if len(r.Devices()) != 0 {
		t.Errorf("a failed import added %v", r.Devices())
	}

	inv, err = FromAnsibleINI([]byte("[10.0.0.9]\nweb1 ansible_host=10.0.0.1\n[web]\nweb1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Groups) != 1 || inv.Groups[0].Name != "web" || len(inv.Skipped) != 1 || !strings.Contains(inv.Skipped[0], "group 10.0.0.9: the name \"10.0.0.9\" is an IP address") {
		t.Errorf("groups %+v, skipped %q", inv.Groups, inv.Skipped)
	}
	if _, err := New().Import(inv, false); err != nil {
		t.Errorf("import: %v", err)
	}
}
