package devices

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// fixture is a registry with devices and groups of every kind Resolve meets.
func fixture(t testing.TB) *Registry {
	t.Helper()
	r, err := Parse([]byte(`{
  "devices": {
    "web1": {"host": "root@10.0.0.1", "port": 2222, "ssh_key": "~/.ssh/web"},
    "web2": {"host": "root@10.0.0.2"},
    "web-a": {"host": "web-a.lan"},
    "db1": {"host": "db1.lan:2200", "ssh_key": "/etc/rex/db"},
    "rack01": {"host": "r1"}, "rack02": {"host": "r2"}, "rack03": {"host": "r3"},
    "broken": {"host": "-oProxyCommand=x"}
  },
  "groups": {
    "web": ["web2", "web1"],
    "prod": ["db1", "web1"],
    "empty": [],
    "dangling": ["web1", "ghost"]
  }
}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 16; i++ {
		d := mustDevice(t, fmt.Sprintf("node%d", i), fmt.Sprintf("10.1.0.%d", i))
		if _, err := r.Add(d, false); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func names(ts []Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t.Kind) + ":" + t.Name
	}
	return out
}

func TestResolve(t *testing.T) {
	t.Setenv("HOME", "/home/op")
	r := fixture(t)
	tests := []struct {
		in   string
		want []string
	}{
		{"web1", []string{"device:web1"}},
		{"web", []string{"device:web2", "device:web1"}},
		{"web1,web,web2", []string{"device:web1", "device:web2"}},
		{" web1 , ,db1, ", []string{"device:web1", "device:db1"}},
		{"local", []string{"local:local"}},
		{"local,web1,local", []string{"local:local", "device:web1"}},
		{"prod,web", []string{"device:db1", "device:web1", "device:web2"}},
		{"web*", []string{"device:web-a", "device:web1", "device:web2"}},
		{"web?", []string{"device:web1", "device:web2"}},
		{"web[ab12]", []string{"device:web1", "device:web2"}},
		{"node[1-3]", []string{"device:node1", "device:node2", "device:node3"}},
		{"node[3-1,2]", nil}, // backwards: error
		{"node[1,3,5-7]", []string{"device:node1", "device:node3", "device:node5", "device:node6", "device:node7"}},
		{"rack[01-03]", []string{"device:rack01", "device:rack02", "device:rack03"}},
		{"rack0[1-2],web1", []string{"device:rack01", "device:rack02", "device:web1"}},
		{"node1[0-2]*", []string{"device:node10", "device:node11", "device:node12"}},
		{"root@10.0.0.9", []string{"adhoc:root@10.0.0.9"}},
		{"10.0.0.9:2022", []string{"adhoc:10.0.0.9:2022"}},
		{"host.example.com", []string{"adhoc:host.example.com"}},
		{"user@[::1]:2200", []string{"adhoc:user@[::1]:2200"}},
		{"[fe80::1%eth0]:22", []string{"adhoc:[fe80::1%eth0]:22"}},
		{"::1", []string{"adhoc:::1"}},
		{"ssh://myhost", []string{"adhoc:myhost"}},
		{"ssh://admin@myhost:2200,myhost.lan", []string{"adhoc:admin@myhost:2200", "adhoc:myhost.lan"}},
		{"root@node[1-2]", []string{"adhoc:root@node1", "adhoc:root@node2"}},
		// The error for an unregistered range says "or ssh://node[1-3]".
		{"ssh://node[1-2]", []string{"adhoc:node1", "adhoc:node2"}},
		{"ssh://admin@n[1-2].lan:2200", []string{"adhoc:admin@n1.lan:2200", "adhoc:admin@n2.lan:2200"}},
		{"ssh://[::1]:2200", []string{"adhoc:[::1]:2200"}},
		{"h[8-10].lan", []string{"adhoc:h8.lan", "adhoc:h9.lan", "adhoc:h10.lan"}},
		{"r[1-2]-n[1-2].lan", []string{"adhoc:r1-n1.lan", "adhoc:r1-n2.lan", "adhoc:r2-n1.lan", "adhoc:r2-n2.lan"}},
		// One machine, once: the first written (port 22 is an unset port's).
		{"root@10.0.0.9,root@10.0.0.9:22,root@10.0.0.9", []string{"adhoc:root@10.0.0.9"}},
	}
	for _, tt := range tests {
		got, err := r.Resolve(tt.in)
		if tt.want == nil {
			if err == nil {
				t.Errorf("Resolve(%q) = %v, want an error", tt.in, names(got))
			}
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%q): %v", tt.in, err)
			continue
		}
		if !slices.Equal(names(got), tt.want) {
			t.Errorf("Resolve(%q) = %v, want %v", tt.in, names(got), tt.want)
		}
	}
}

func TestResolveAll(t *testing.T) {
	r := fixture(t)
	if _, err := r.Remove("broken"); err != nil {
		t.Fatal(err)
	}
	got, err := r.Resolve("all,local")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, d := range r.Devices() {
		want = append(want, "device:"+d.Name)
	}
	want = append(want, "local:local")
	if !slices.Equal(names(got), want) {
		t.Errorf("Resolve(all,local) = %v, want %v", names(got), want)
	}
	if _, err := New().Resolve("all"); err == nil || !strings.Contains(err.Error(), "none is registered") {
		t.Errorf("Resolve(all) on an empty registry = %v", err)
	}
	got, err = New().Resolve("local")
	if err != nil || len(got) != 1 || got[0].Addr() != "local" {
		t.Errorf("Resolve(local) on an empty registry = %v, %v", got, err)
	}
}

func TestResolveTargetFields(t *testing.T) {
	t.Setenv("HOME", "/home/op")
	r := fixture(t)
	got, err := r.Resolve("web1,db1,web2,alice@host.lan:2200")
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{
		{Name: "web1", Kind: KindDevice, User: "root", Host: "10.0.0.1", Port: 2222, KeyPath: "/home/op/.ssh/web"},
		{Name: "db1", Kind: KindDevice, Host: "db1.lan", Port: 2200, KeyPath: "/etc/rex/db"},
		{Name: "web2", Kind: KindDevice, User: "root", Host: "10.0.0.2"},
		{Name: "alice@host.lan:2200", Kind: KindAdhoc, User: "alice", Host: "host.lan", Port: 2200},
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name || g.Kind != w.Kind || g.User != w.User || g.Host != w.Host || g.Port != w.Port || g.KeyPath != w.KeyPath {
			t.Errorf("target %d = %+v, want %+v", i, g, w)
		}
		if (g.Kind == KindDevice) != (g.Device != nil) {
			t.Errorf("target %d: Device = %v for kind %s", i, g.Device, g.Kind)
		}
	}
	if got[0].Device.SSHKey != "~/.ssh/web" || got[0].Addr() != "root@10.0.0.1:2222" {
		t.Errorf("web1: device %+v addr %q", got[0].Device, got[0].Addr())
	}
}

func TestResolveErrors(t *testing.T) {
	r := fixture(t)
	tests := []struct {
		in          string
		want        string
		suggestions []string
	}{
		{"", "no targets given", nil},
		{" , ", "no targets given", nil},
		{"wbe1", `no device or group is named "wbe1"; did you mean web1?`, []string{"web1"}},
		{"web3", "did you mean web, web1 or web2?", []string{"web", "web1", "web2"}},
		{"prdo", "did you mean prod?", []string{"prod"}},
		{"lcoal", "did you mean local?", []string{"local"}},
		{"web1,xyzzy", "ssh://xyzzy", nil},
		{"db*x", `no device matches "db*x"`, nil},
		{"empty", `group "empty" has no devices`, nil},
		{"dangling", `group "dangling" lists "ghost", which is not a device`, nil},
		{"broken", `device "broken" cannot be used: invalid host "-oProxyCommand=x"`, nil},
		{"node[15-18]", "node[15-18] expands to names that are not devices or groups (node[17-18])", nil},
		{"n[1-100]", "(n[1-100])", nil},
		{"node[3-1]", "runs backwards; write [1-3]", nil},
		{"node[1-3", "no matching ']'", nil},
		{"node]1-3[", "no matching ']'", nil},
		{"node[1-99999]", "more than 10000", nil},
		{"n[1-200]x[1-200].lan", "more than 10000", nil},
		{"root@-x", "must not start with '-'", nil},
		{"host.lan:99999", "1 to 65535", nil},
		{"ssh://", "host is empty", nil},
		{"a b.lan", "spaces", nil},
		{"web[", "no matching ']'", nil},
		{"web[]", "not a valid pattern", nil},
	}
	for _, tt := range tests {
		got, err := r.Resolve(tt.in)
		if err == nil {
			t.Errorf("Resolve(%q) = %v, want an error containing %q", tt.in, names(got), tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Resolve(%q) = %q, want it to contain %q", tt.in, err, tt.want)
		}
		if tt.suggestions != nil {
			var ue *UnknownError
			if !errors.As(err, &ue) || !slices.Equal(ue.Suggestions, tt.suggestions) {
				t.Errorf("Resolve(%q) suggestions = %v, want %v", tt.in, ue, tt.suggestions)
			}
		}
	}
}

func TestResolveExclusions(t *testing.T) {
	t.Setenv("HOME", "/home/op")
	r := fixture(t)
	opts := ResolveOptions{
		Aliases: func() []string { return []string{"bastion", "gw"} },
		ReadFile: func(name string) ([]byte, error) {
			switch name {
			case "hosts":
				return []byte("# the web tier\nweb1\n\n  web2   # old\nnew-box\nroot@10.9.0.1:2222\n"), nil
			case "/home/op/drain":
				return []byte("node2\nnode[4-5]\n"), nil
			case "nested":
				return []byte("^hosts\n"), nil
			case "bad":
				return []byte("web1\n!web2\n"), nil
			case "typo":
				return []byte("node2\nnoed4\n"), nil
			case "drain-new":
				return []byte("new-box\n"), nil
			}
			return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
		},
	}
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{in: "web,!web1", want: []string{"device:web2"}},
		{in: "!web1,web", want: []string{"device:web2"}},
		{in: "node[1-6],!node[2-4]", want: []string{"device:node1", "device:node5", "device:node6"}},
		{in: "node*,rack0?,db1,web*,!node*,!rack0?,!web", want: []string{"device:db1", "device:web-a"}},
		{in: "prod,web,!prod", want: []string{"device:web2"}},
		{in: "web1,root@10.0.0.9,!root@10.0.0.9", want: []string{"device:web1"}},
		// Leaving out one name of a machine leaves out its other names
		// (what folding would run once), not just what was written.
		{in: "web1,web2,root@10.0.0.2,!web2", want: []string{"device:web1"}},
		{in: "web1,10.0.0.9,!10.0.0.*", want: []string{"device:web1"}},
		{in: "web,!nomatch*", want: []string{"device:web2", "device:web1"}},
		// A drain group that is empty right now leaves nothing out.
		{in: "web,!empty", want: []string{"device:web2", "device:web1"}},
		{in: "web,!dangling", err: `group "dangling" lists "ghost"`},
		{in: "node[1-6],!^~/drain", want: []string{"device:node1", "device:node3", "device:node6"}},
		{in: "^hosts", want: []string{"device:web1", "device:web2", "adhoc:new-box", "adhoc:root@10.9.0.1:2222"}},
		{in: "^hosts,!new-box", want: []string{"device:web1", "device:web2", "adhoc:root@10.9.0.1:2222"}},
		// A typo in an exclusion file fails as one on the command line
		// does, rather than leaving node4 in; a bare word that names a
		// chosen host (from a ^FILE) still leaves it out.
		{in: "node[1-6],!^typo", err: `typo:2: no device or group is named "noed4"`},
		{in: "^hosts,!^drain-new", want: []string{"device:web1", "device:web2", "adhoc:root@10.9.0.1:2222"}},
		{in: "bastion,web1", want: []string{"adhoc:bastion", "device:web1"}},
		{in: "web,!web1,!web2", err: "leave out every one of the 2 targets"},
		{in: "!web1", err: "only leave machines out"},
		{in: "web,!wbe1", err: `!wbe1: no device or group is named "wbe1"; did you mean web1?`},
		{in: "web,!", err: `"!" names nothing`},
		{in: "web,![", err: "no matching ']'"},
		{in: "^missing", err: "read the host list ^missing: file does not exist"},
		{in: "^", err: `"^" names no file`},
		{in: "^nested", err: "cannot name another (^) host file"},
		{in: "^bad", err: "bad:2: a host file lists hosts"},
		{in: "bastoin", err: "did you mean bastion?"},
	}
	for _, tt := range tests {
		got, err := r.ResolveWith(tt.in, opts)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Resolve(%q) = %v, %v; want an error containing %q", tt.in, names(got), err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(names(got), tt.want) {
			t.Errorf("Resolve(%q) = %v, %v; want %v", tt.in, names(got), err, tt.want)
		}
	}
	// Without aliases a bare name stays unknown.
	if _, err := r.Resolve("bastion"); err == nil {
		t.Error("Resolve(bastion) without ssh_config aliases succeeded")
	}
}

func TestResolveGroupOfTarget(t *testing.T) {
	r := fixture(t)
	r.Remove("broken")
	got, err := r.Resolve("web1,prod,all")
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string]string{}
	for _, tg := range got {
		groups[tg.Name] = tg.Group
	}
	if groups["web1"] != "" || groups["db1"] != "prod" || groups["node1"] != "all" {
		t.Errorf("groups = %v; want web1 alone, db1 through prod, node1 through all", groups)
	}
}

func TestResolveKeyNeedsHome(t *testing.T) {
	t.Setenv("HOME", "")
	r := fixture(t)
	if _, err := r.Resolve("web1"); err == nil || !strings.Contains(err.Error(), "home directory is unknown") {
		t.Errorf("Resolve with ~ key and no HOME = %v", err)
	}
	if _, err := r.Resolve("web2"); err != nil {
		t.Errorf("a device without a key must not need HOME: %v", err)
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"web1", "web1", 0}, {"wbe1", "web1", 1},
		{"web1", "web12", 1}, {"kitten", "sitting", 3}, {"ca", "abc", 3},
	}
	for _, tt := range tests {
		if got := EditDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"web1", "all,local", "node[1-3]", "n[01-10,12]", "web*", "root@[::1]:22", "ssh://h", "a,,b", "x[", "[", "]", "@", ":", "r[1-2]-n[1-2].lan", "wbe1"} {
		f.Add(s)
	}
	r := fixture(f)
	opts := ResolveOptions{
		Aliases: func() []string { return []string{"jump", "bastion"} },
		// ^FILE reads this, never the file system.
		ReadFile: func(string) ([]byte, error) { return []byte("web1\nhost.lan # comment\nbare\n"), nil },
	}
	f.Add("^hosts,!web1")
	f.Add("all,!web*,!^x,jump")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := r.ResolveWith(in, opts)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if len(got) == 0 || len(got) > MaxTargets {
			t.Fatalf("Resolve(%q) returned %d targets", in, len(got))
		}
		seen := map[string]bool{}
		for _, tg := range got {
			key := string(tg.Kind) + ":" + tg.Name
			if seen[key] {
				t.Fatalf("Resolve(%q) returned %s twice", in, key)
			}
			seen[key] = true
			switch tg.Kind {
			case KindDevice:
				if _, ok := r.Device(tg.Name); !ok || tg.Device == nil {
					t.Fatalf("Resolve(%q) returned unknown device %q", in, tg.Name)
				}
			case KindAdhoc:
				// An ad-hoc target always passes host validation again.
				if _, _, _, err := ParseHost(tg.Name); err != nil {
					t.Fatalf("Resolve(%q) returned ad-hoc %q that does not parse: %v", in, tg.Name, err)
				}
				if strings.HasPrefix(tg.Host, "-") || strings.HasPrefix(tg.User, "-") {
					t.Fatalf("Resolve(%q) returned an option-like target %+v", in, tg)
				}
			case KindLocal:
			default:
				t.Fatalf("unknown kind %q", tg.Kind)
			}
		}
	})
}

func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"root@10.0.0.5", "host:22", "[::1]:22", "u@fe80::1%eth0", "-x", "a@b@c", "h:", "[", "[::1]x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		user, host, port, err := ParseHost(spec)
		if err != nil {
			return
		}
		if host == "" || host[0] == '-' || user != "" && user[0] == '-' || port < 0 || port > 65535 {
			t.Fatalf("ParseHost(%q) accepted %q %q %d", spec, user, host, port)
		}
		// Formatting and parsing again is the identity.
		u2, h2, p2, err := ParseHost(FormatAddr(user, host, port))
		if err != nil || u2 != user || h2 != host || p2 != port {
			t.Fatalf("round trip of %q: %q %q %d, %v", spec, u2, h2, p2, err)
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(designExample))
	f.Add([]byte(`{"devices":{"a":{"host":"h","x":[1,{"y":null}]}},"groups":{"g":["a"]},"v":1}`))
	f.Add([]byte(`{"devices": {"a": {"port": "22"}}}`))
	f.Add([]byte("{\n\"devices\": {\n}"))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Line < 1 || fe.Column < 1 {
				t.Fatalf("Parse error without a position: %v", err)
			}
			return
		}
		out, err := r.Bytes()
		if err != nil {
			t.Fatalf("Bytes: %v", err)
		}
		r2, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parse of our own output: %v\n%s", err, out)
		}
		out2, err := r2.Bytes()
		if err != nil || string(out2) != string(out) {
			t.Fatalf("encoding not stable:\n%s\n---\n%s", out, out2)
		}
	})
}

func BenchmarkResolve(b *testing.B) {
	r := fixture(b)
	for b.Loop() {
		if _, err := r.Resolve("web,prod,node[1-16],web*,root@10.0.0.9:22,local"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestExcludeByAddress: an operator used to pdsh and clush leaves a
// machine out by its address. The fixture's web2 is root@10.0.0.2 (port
// unset: 22). An exclusion by its address leaves it out whatever name
// chose it; one that gives another user or port is another machine.
func TestExcludeByAddress(t *testing.T) {
	r := fixture(t)
	for _, tt := range []struct {
		in  string
		out bool
	}{
		{"web,!10.0.0.2", true},
		{"web,!root@10.0.0.2", true},
		{"web,!ssh://10.0.0.2", true},
		{"web,!10.0.0.2:22", true},
		{"web,!admin@10.0.0.2", false},
		{"web,!10.0.0.2:2222", false},
	} {
		got, err := r.Resolve(tt.in)
		if err != nil {
			t.Errorf("Resolve(%q): %v", tt.in, err)
			continue
		}
		if in := slices.Contains(names(got), "device:web2"); in == tt.out {
			t.Errorf("Resolve(%q) = %v: web2 (root@10.0.0.2) left out: %v, want %v", tt.in, names(got), !in, tt.out)
		}
	}
}

// TestExcludeLeavesTheMachineOut: an exclusion leaves out a machine under
// every name it was chosen by. An address (!ADDRESS) leaves out whatever
// would connect there, even when the address is itself a chosen target's
// name; a name (!NAME, a glob, a group) leaves out the other names that
// reach the same machine as the same login; a second registered device at
// that address stays, as in folding. Ports compare as rex dials them: a
// target without one has ssh_config's (opts.Port), else 22. The fixture's
// web2 is root@10.0.0.2, web1 root@10.0.0.1:2222; twin is a second device
// at root@10.0.0.2, and cfg2222 a host whose ssh_config Port is 2222.
func TestExcludeLeavesTheMachineOut(t *testing.T) {
	r := fixture(t)
	if _, err := r.Add(Device{Name: "twin", Host: "root@10.0.0.2"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(Device{Name: "cfgdev", Host: "root@cfg2222"}, false); err != nil {
		t.Fatal(err)
	}
	opts := ResolveOptions{
		Port: func(host string) int {
			if host == "cfg2222" {
				return 2222
			}
			return 0
		},
		ReadFile: func(name string) ([]byte, error) {
			if name == "hosts" {
				return []byte("10.0.0.2\n"), nil
			}
			return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
		},
	}
	for _, tt := range []struct {
		in   string
		want []string
	}{
		// By address, written as a chosen target's name too.
		{"web1,web2,root@10.0.0.2,!root@10.0.0.2", []string{"device:web1"}},
		{"web1,web2,10.0.0.2,!10.0.0.2", []string{"device:web1"}},
		{"web1,web2,^hosts,!10.0.0.2", []string{"device:web1"}},
		{"web1,web2,root@10.0.0.2:22,!root@10.0.0.2:22", []string{"device:web1"}},
		{"web1,twin,web2,!10.0.0.2", []string{"device:web1"}},
		// Another user or port at that address is another target.
		{"web2,admin@10.0.0.2,!admin@10.0.0.2", []string{"device:web2"}},
		{"web2,root@10.0.0.2:2222,!root@10.0.0.2:2222", []string{"device:web2"}},
		// By name: its other names at the same login go too...
		{"web1,web2,root@10.0.0.2,!web2", []string{"device:web1"}},
		{"web1,root@10.0.0.2:22,web,!web", nil},
		{"web1,web2,root@10.0.0.2,!web?", nil},
		{"root@10.0.0.1:2222,web2,!web1", []string{"device:web2"}},
		// ...but not another login, nor a second registered device.
		{"web1,web2,10.0.0.2,!web2", []string{"device:web1", "adhoc:10.0.0.2"}},
		{"web1,web2,twin,!web2", []string{"device:web1", "device:twin"}},
		{"web1,twin,root@10.0.0.2,!web2", []string{"device:web1", "device:twin"}},
		// ssh_config's Port is the port compared.
		{"web1,cfgdev,!root@cfg2222:2222", []string{"device:web1"}},
		{"web1,ssh://cfg2222,!cfg2222:2222", []string{"device:web1"}},
		{"web1,cfgdev,!root@cfg2222:22", []string{"device:web1", "device:cfgdev"}},
		{"web1,cfgdev,root@cfg2222:2222,!cfgdev", []string{"device:web1"}},
		{"web1,cfgdev,root@cfg2222:22,!cfgdev", []string{"device:web1", "adhoc:root@cfg2222:22"}},
	} {
		got, err := r.ResolveWith(tt.in, opts)
		if len(tt.want) == 0 {
			if err == nil || !strings.Contains(err.Error(), "leave out every one") {
				t.Errorf("ResolveWith(%q) = %v, %v; want every target left out", tt.in, names(got), err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ResolveWith(%q): %v", tt.in, err)
			continue
		}
		if !slices.Equal(names(got), tt.want) {
			t.Errorf("ResolveWith(%q) = %v, want %v", tt.in, names(got), tt.want)
		}
	}
}

// TestFoldComparesSSHConfigPort: a target without a port is dialed on the
// port ssh_config gives its host, so it is folded only with a target at
// that port, not with one at 22.
func TestFoldComparesSSHConfigPort(t *testing.T) {
	r := fixture(t)
	opts := ResolveOptions{Port: func(host string) int {
		if strings.EqualFold(host, "cfg2222") {
			return 2222
		}
		return 0
	}}
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"root@cfg2222,root@cfg2222:22", []string{"adhoc:root@cfg2222", "adhoc:root@cfg2222:22"}},
		{"root@cfg2222,root@cfg2222:2222", []string{"adhoc:root@cfg2222"}},
		{"root@CFG2222:2222,root@cfg2222", []string{"adhoc:root@CFG2222:2222"}},
		{"root@other,root@other:22", []string{"adhoc:root@other"}},
	} {
		got, err := r.ResolveWith(tt.in, opts)
		if err != nil {
			t.Errorf("ResolveWith(%q): %v", tt.in, err)
			continue
		}
		if !slices.Equal(names(got), tt.want) {
			t.Errorf("ResolveWith(%q) = %v, want %v", tt.in, names(got), tt.want)
		}
	}
}

// TestFoldComparesSSHConfigAddress: targets compare as rex dials them:
// an ssh_config alias's HostName and User (opts.HostName, opts.User; the
// local user when ssh_config gives none) and Port. So an alias folds into
// a device at the machine and login it reaches, an address excludes the
// aliases that reach it, and another login stays apart. In this ssh_config
// www is root@10.0.0.2 (web2's login), deploy is deploy@10.0.0.2, gw is
// root@10.0.0.1:2222 (web1's login), and the local user is me.
func TestFoldComparesSSHConfigAddress(t *testing.T) {
	r := fixture(t)
	type addr struct {
		user, host string
		port       int
	}
	cfg := map[string]addr{
		"www":    {"root", "10.0.0.2", 0},
		"deploy": {"deploy", "10.0.0.2", 0},
		"gw":     {"root", "10.0.0.1", 2222},
	}
	opts := ResolveOptions{
		Aliases:  func() []string { return []string{"www", "deploy", "gw"} },
		HostName: func(host string) string { return cfg[host].host },
		Port:     func(host string) int { return cfg[host].port },
		User: func(host string) string {
			if a, ok := cfg[host]; ok {
				return a.user
			}
			return "me"
		},
	}
	for _, tt := range []struct {
		in     string
		want   []string
		folded []string // into the first target
	}{
		// Folding.
		{"web2,www", []string{"device:web2"}, []string{"www"}},
		{"www,web2", []string{"adhoc:www"}, []string{"web2"}},
		{"web1,gw", []string{"device:web1"}, []string{"gw"}},
		{"web2,deploy", []string{"device:web2", "adhoc:deploy"}, nil},
		{"web2,deploy@10.0.0.2,deploy", []string{"device:web2", "adhoc:deploy@10.0.0.2"}, nil},
		{"10.0.0.9,me@10.0.0.9", []string{"adhoc:10.0.0.9"}, []string{"me@10.0.0.9"}},
		{"10.0.0.9,root@10.0.0.9", []string{"adhoc:10.0.0.9", "adhoc:root@10.0.0.9"}, nil},
		// Exclusions by address reach the aliases there.
		{"www,web1,!10.0.0.2", []string{"device:web1"}, nil},
		{"www,web1,!root@10.0.0.2", []string{"device:web1"}, nil},
		{"www,web1,!deploy@10.0.0.2", []string{"adhoc:www", "device:web1"}, nil},
		{"deploy,web1,!deploy@10.0.0.2:22", []string{"device:web1"}, nil},
		{"gw,web2,!10.0.0.1:2222", []string{"device:web2"}, nil},
		{"gw,web2,!10.0.0.1:22", []string{"adhoc:gw", "device:web2"}, nil},
		// By name: the same login under another name goes too, another stays.
		{"www,web1,web2,!web2", []string{"device:web1"}, nil},
		{"deploy,web1,web2,!web2", []string{"adhoc:deploy", "device:web1"}, nil},
		{"web2,web1,!www", []string{"device:web1"}, nil},
	} {
		got, err := r.ResolveWith(tt.in, opts)
		if err != nil {
			t.Errorf("ResolveWith(%q): %v", tt.in, err)
			continue
		}
		if !slices.Equal(names(got), tt.want) || !slices.Equal(got[0].Folded, tt.folded) {
			t.Errorf("ResolveWith(%q) = %v, %v folded into the first; want %v, %v", tt.in, names(got), got[0].Folded, tt.want, tt.folded)
		}
	}
}

// An exclusion pattern written with ssh:// would match no name (names
// carry no scheme) and keep every machine in: it is refused.
func TestExcludeGlobWithSchemeIsRefused(t *testing.T) {
	r := fixture(t)
	_, err := r.Resolve("web,!ssh://web*")
	if err == nil || !strings.Contains(err.Error(), "write !web*") {
		t.Fatalf("Resolve(web,!ssh://web*): %v; want a refusal naming !web*", err)
	}
}

// TestResolveUnknownHintIsUsable: the error for an unknown bare word says
// how to write it as a host that is not registered, ssh://NAME, only when
// that would work; ssh://-x would fail in turn ("must not start with '-'").
func TestResolveUnknownHintIsUsable(t *testing.T) {
	r := fixture(t)
	tests := []struct {
		in   string
		hint bool
	}{
		{"xyzzy", true},
		{"my_host", true},
		{"-x", false},
		{"]", false},
		{"x]", false},
	}
	for _, tt := range tests {
		_, err := r.Resolve(tt.in)
		if err == nil {
			t.Errorf("Resolve(%q) succeeded", tt.in)
			continue
		}
		if got := strings.Contains(err.Error(), "ssh://"+tt.in); got != tt.hint {
			t.Errorf("Resolve(%q) = %q; want the ssh://%s hint: %v", tt.in, err, tt.in, tt.hint)
		}
	}
}

// TestResolveFoldsSameMachine: targets that reach one machine as one user
// (the same user, host and port, an unset port being 22) run once, as the
// first written, which says what was folded into it, as pdsh and clush
// keep one of each host. A different user, port, jump host or sudo user is
// another target, and so is a second registered device (Ansible runs two
// inventory hosts with one address twice).
func TestResolveFoldsSameMachine(t *testing.T) {
	t.Setenv("HOME", "/home/op")
	r := fixture(t)
	if _, err := r.Add(Device{Name: "web2-root", Host: "root@10.0.0.2", Become: true}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(Device{Name: "web2-twin", Host: "root@10.0.0.2", Port: 22}, false); err != nil {
		t.Fatal(err)
	}
	jump := Device{Name: "web2-jump", Host: "root@10.0.0.2"}
	jump.SetExtra("jump", []byte(`"bastion"`))
	if _, err := r.Add(jump, false); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in     string
		want   []string
		folded map[string][]string
		notes  []string
	}{
		{in: "web1,root@10.0.0.1:2222", want: []string{"device:web1"},
			folded: map[string][]string{"web1": {"root@10.0.0.1:2222"}},
			notes:  []string{"root@10.0.0.1:2222 reaches the same machine as web1 (root@10.0.0.1:2222); it runs there once, as web1"}},
		{in: "root@10.0.0.1:2222,web1", want: []string{"adhoc:root@10.0.0.1:2222"},
			folded: map[string][]string{"root@10.0.0.1:2222": {"web1"}},
			notes:  []string{"web1 reaches the same machine as root@10.0.0.1:2222; it runs there once, as root@10.0.0.1:2222"}},
		{in: "web2,ROOT@10.0.0.2,root@10.0.0.2:22,web2-twin,ssh://root@10.0.0.2", want: []string{"device:web2", "adhoc:ROOT@10.0.0.2", "device:web2-twin"},
			folded: map[string][]string{"web2": {"root@10.0.0.2:22", "root@10.0.0.2"}},
			notes:  []string{"root@10.0.0.2:22 and root@10.0.0.2 reach the same machine as web2 (root@10.0.0.2); it runs there once, as web2"}},
		{in: "root@10.0.0.2,web2,web2-twin", want: []string{"adhoc:root@10.0.0.2"},
			folded: map[string][]string{"root@10.0.0.2": {"web2", "web2-twin"}},
			notes:  []string{"web2 and web2-twin reach the same machine as root@10.0.0.2; it runs there once, as root@10.0.0.2"}},
		{in: "web2,WEB2.lan,web2.LAN", want: []string{"device:web2", "adhoc:WEB2.lan"},
			folded: map[string][]string{"WEB2.lan": {"web2.LAN"}},
			notes:  []string{"web2.LAN reaches the same machine as WEB2.lan; it runs there once, as WEB2.lan"}},
		// Another user, port, jump host or sudo user is another target;
		// two registered devices are two targets (as Ansible's hosts).
		{in: "web2,10.0.0.2,root@10.0.0.2:2222,web2-root,web2-jump", want: []string{"device:web2", "adhoc:10.0.0.2", "adhoc:root@10.0.0.2:2222", "device:web2-root", "device:web2-jump"}},
		{in: "web2-jump,root@10.0.0.2", want: []string{"device:web2-jump", "adhoc:root@10.0.0.2"}},
		{in: "web2,web2-twin", want: []string{"device:web2", "device:web2-twin"}},
		{in: "local,local", want: []string{"local:local"}},
	}
	for _, tt := range tests {
		got, err := r.Resolve(tt.in)
		if err != nil || !slices.Equal(names(got), tt.want) {
			t.Errorf("Resolve(%q) = %v, %v; want %v", tt.in, names(got), err, tt.want)
			continue
		}
		folded := map[string][]string{}
		for _, tg := range got {
			if tg.Folded != nil {
				folded[tg.Name] = tg.Folded
			}
		}
		if fmt.Sprint(folded) != fmt.Sprint(map[string][]string(tt.folded)) && !(len(folded) == 0 && len(tt.folded) == 0) {
			t.Errorf("Resolve(%q) folded %v, want %v", tt.in, folded, tt.folded)
		}
		if notes := FoldNotes(got); !slices.Equal(notes, tt.notes) {
			t.Errorf("FoldNotes(%q) = %q, want %q", tt.in, notes, tt.notes)
		}
	}
}
