package devices

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSSHConfig(t *testing.T) {
	home := t.TempDir()
	ssh := filepath.Join(home, ".ssh")
	os.MkdirAll(filepath.Join(ssh, "conf.d"), 0o700)
	os.WriteFile(filepath.Join(ssh, "config"), []byte(`# global
User everyone
Include conf.d/*.conf

Host web1 web2
    HostName 10.0.0.%h
    Port 2222
Host db1
    HostName=db1.internal
    User "db admin"
    IdentityFile ~/.ssh/id_db
Host *.lan !bad.lan
    User lanuser
Host *
    User fallback
    ProxyJump none
Match host foo
    User never
`), 0o600)
	os.WriteFile(filepath.Join(ssh, "conf.d", "a.conf"), []byte("Host bastion\n  HostName bastion.example.com\n  Port 22\n"), 0o600)

	c, err := ParseSSHConfig(filepath.Join(ssh, "config"), home)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Aliases(), []string{"bastion", "web1", "web2", "db1"}; !slices.Equal(got, want) {
		t.Errorf("Aliases = %v, want %v", got, want)
	}
	tests := []struct{ alias, key, want string }{
		{"web1", "HostName", "10.0.0.%h"},
		{"web1", "port", "2222"},
		{"web1", "User", "everyone"}, // the first value wins, and the global one is first
		{"db1", "hostname", "db1.internal"},
		{"db1", "IdentityFile", "~/.ssh/id_db"},
		{"bastion", "HostName", "bastion.example.com"},
		{"x.lan", "ProxyJump", "none"},
		{"foo", "HostName", ""},
		{"WEB1", "Port", "2222"},
	}
	for _, tt := range tests {
		if got := c.Get(tt.alias, tt.key); got != tt.want {
			t.Errorf("Get(%s, %s) = %q, want %q", tt.alias, tt.key, got, tt.want)
		}
	}
	// A missing file is an empty config; a missing include is nothing.
	c, err = ParseSSHConfig(filepath.Join(home, "nope"), home)
	if err != nil || len(c.Aliases()) != 0 {
		t.Errorf("missing file: %v %v", c, err)
	}
	// An Include loop ends in an error, not a hang.
	os.WriteFile(filepath.Join(ssh, "loop"), []byte("Include loop\n"), 0o600)
	if _, err := ParseSSHConfig(filepath.Join(ssh, "loop"), home); err == nil {
		t.Error("an Include loop was accepted")
	}
}

func TestWildMatch(t *testing.T) {
	tests := []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*c", "abbbc", true}, {"a?c", "abc", true},
		{"a?c", "ac", false}, {"*.lan", "x.lan", true}, {"*.lan", "x.lan.com", false},
		{"Web1", "web1", true}, {"**a", "ba", true},
	}
	for _, tt := range tests {
		if got := wildMatch(tt.p, tt.s); got != tt.want {
			t.Errorf("wildMatch(%q, %q) = %v", tt.p, tt.s, got)
		}
	}
	if !hostMatches([]string{"*.lan", "!bad.lan"}, "ok.lan") || hostMatches([]string{"*.lan", "!bad.lan"}, "bad.lan") {
		t.Error("negated patterns")
	}
}

func FuzzSSHConfigLine(f *testing.F) {
	for _, s := range []string{"Host a b", `User "a b"`, "Key=val", "  # c", "Host=x # y", `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		key, args := splitSSHLine(line)
		if key == "" && len(args) > 0 {
			t.Fatalf("args without a key: %q", line)
		}
	})
}

func TestSplitSSHLine(t *testing.T) {
	// ssh_config(5): "Configuration options may be separated by whitespace
	// or optional whitespace and exactly one '='".
	tests := []struct {
		line string
		key  string
		args []string
	}{
		{"HostName db1.lan", "HostName", []string{"db1.lan"}},
		{"HostName=db1.lan", "HostName", []string{"db1.lan"}},
		{"HostName = db1.lan", "HostName", []string{"db1.lan"}},
		{"HostName =db1.lan", "HostName", []string{"db1.lan"}},
		{"HostName= db1.lan", "HostName", []string{"db1.lan"}},
		{"Host = web1 web2", "Host", []string{"web1", "web2"}},
		{"\tPort\t=\t2222", "Port", []string{"2222"}},
		{"SetEnv = A=b", "SetEnv", []string{"A=b"}},
		{`User = "db admin"`, "User", []string{"db admin"}},
	}
	for _, tt := range tests {
		key, args := splitSSHLine(tt.line)
		if key != tt.key || !slices.Equal(args, tt.args) {
			t.Errorf("splitSSHLine(%q) = %q %q, want %q %q", tt.line, key, args, tt.key, tt.args)
		}
	}
}

// TestSSHConfigIncludeInsideHost: an Include sits in the Host block it is
// written in, as in OpenSSH's readconf.c: the included file's settings
// apply only where that block does (its own Host blocks too), and the
// lines after the Include still belong to that block, whatever Host lines
// the included file has.
func TestSSHConfigIncludeInsideHost(t *testing.T) {
	home := t.TempDir()
	ssh := filepath.Join(home, ".ssh")
	os.MkdirAll(ssh, 0o700)
	os.WriteFile(filepath.Join(ssh, "config"), []byte("Include top.conf\nUser bob\nHost web1\n  Include extra.conf\n  HostName 10.0.0.1\n  Port 2200\n"), 0o600)
	os.WriteFile(filepath.Join(ssh, "top.conf"), []byte("Host gw\n  HostName gw.lan\n"), 0o600)
	os.WriteFile(filepath.Join(ssh, "extra.conf"), []byte("IdentityFile ~/.ssh/web\nHost other\n  HostName other.lan\n"), 0o600)
	c, err := ParseSSHConfig(filepath.Join(ssh, "config"), home)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ alias, key, want string }{
		{"web1", "IdentityFile", "~/.ssh/web"},
		{"web1", "HostName", "10.0.0.1"},
		{"web1", "Port", "2200"},
		{"web1", "User", "bob"}, // after a top-level Include: every host
		{"gw", "HostName", "gw.lan"},
		{"gw", "User", "bob"},
		{"gw", "Port", ""},
		{"other", "HostName", ""}, // its block sits inside Host web1
		{"other", "Port", ""},
	}
	for _, tt := range tests {
		if got := c.Get(tt.alias, tt.key); got != tt.want {
			t.Errorf("Get(%s, %s) = %q, want %q", tt.alias, tt.key, got, tt.want)
		}
	}
	if got, want := c.Aliases(), []string{"gw", "web1"}; !slices.Equal(got, want) {
		t.Errorf("Aliases = %v, want %v", got, want)
	}
}

// FuzzSSHConfig reads whole files (Includes of other files in the same
// home among them): no panic, no hang, and every alias it lists answers Get.
func FuzzSSHConfig(f *testing.F) {
	for _, s := range []string{
		"Host a b\n  HostName x\n  Port 2222\n",
		"User u\nHost web*\n  Include inc\nHost db\n  Port 1\n",
		"Include config config config\n",
		"Match host x\n  User y\nHost *\n  IdentityFile ~/.ssh/k\n",
	} {
		f.Add(s, "Host inc\n  HostName i\n")
	}
	f.Fuzz(func(t *testing.T, config, inc string) {
		if strings.ContainsAny(config+inc, "/~") {
			t.Skip() // an Include outside the test's home
		}
		home := t.TempDir()
		dir := filepath.Join(home, ".ssh")
		os.Mkdir(dir, 0o700)
		os.WriteFile(filepath.Join(dir, "config"), []byte(config), 0o600)
		os.WriteFile(filepath.Join(dir, "inc"), []byte(inc), 0o600)
		c, err := ParseSSHConfig(filepath.Join(dir, "config"), home)
		if err != nil {
			return
		}
		for _, a := range c.Aliases() {
			c.Get(a, "hostname")
		}
		c.Get("other", "port")
	})
}

// Files that include the next one thrice, 15 deep, are refused after a
// bounded number of reads: depth alone allows 3^15 of them.
func TestSSHConfigIncludeFanOutIsBounded(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".ssh")
	os.Mkdir(dir, 0o700)
	for i := range 15 {
		next := fmt.Sprintf("f%d", i+1)
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), []byte("Include "+next+" "+next+" "+next+"\n"), 0o600)
	}
	os.WriteFile(filepath.Join(dir, "f15"), []byte("Host h\n"), 0o600)
	_, err := ParseSSHConfig(filepath.Join(dir, "f0"), home)
	if err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Fatalf("ParseSSHConfig of files including the next thrice: %v; want a bounded refusal", err)
	}
}
