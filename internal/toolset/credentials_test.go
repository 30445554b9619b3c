package toolset

import "testing"

func TestCredential(t *testing.T) {
	for _, c := range []struct {
		path string
		hold bool
	}{
		{"/home/u/.ssh/id_ed25519", true},
		{"/home/u/.ssh/known_hosts", true},
		{"/home/u/.ssh", true},
		{"/root/.ssh/config", true},
		{"/home/u/.ssh/id_ed25519.pub", false},
		{"/home/u/.ssh/authorized_keys", false},
		{"/home/u/.ssh/keys/x.pub", true}, // public names only directly in .ssh
		{"/home/u/.gnupg/private-keys-v1.d/k.key", true},
		{"/home/u/.aws/credentials", true},
		{"/home/u/.kube/config", true},
		{"/home/u/.docker/config.json", true},
		{"/home/u/.netrc", true},
		{"/home/u/.config/rex/devices.json", true},
		{"/home/u/.config/rex/secrets.age", true},
		{"/etc/shadow", true},
		{"/etc/ssh/ssh_host_ed25519_key", true},
		{"/etc/ssh/ssh_host_ed25519_key.pub", false},
		{"/etc/ssh/sshd_config", false},
		{"/home/u/.config/rex/config.toml", false},
		{"/home/u/notes/ssh.txt", false},
		{"/var/log/syslog", false},
		{"/", false},
	} {
		if got := credential(c.path) != ""; got != c.hold {
			t.Errorf("credential(%q) = %v, want %v", c.path, got, c.hold)
		}
	}
}

func TestCredentialPathResolvesTheName(t *testing.T) {
	for _, c := range []struct {
		path, cwd string
		hold      bool
	}{
		{"~/.ssh/id_rsa", "/home/u", true},
		{"id_rsa", "/home/u/.ssh", true},
		{"../.ssh/id_rsa", "/home/u/src", true},
		{".ssh/../notes.txt", "/home/u", false},
		{"~notes", "/home/u", false}, // another spelling, not a home
	} {
		if got := credentialPath(c.path, c.cwd, false) != nil; got != c.hold {
			t.Errorf("credentialPath(%q, %q) refused = %v, want %v", c.path, c.cwd, got, c.hold)
		}
	}
}
