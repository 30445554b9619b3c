package devices

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// designExample is the hand-written devices.json of DESIGN.md, verbatim.
const designExample = `{
  "devices": {
    "build-server": {"host": "user@build.local", "port": 22, "ssh_key": "~/.ssh/build_key",
                      "description": "ARM build server"}
  },
  "groups": {"handhelds": ["steam-deck", "legion-go", "ally-x"]}
}
`

func TestParseDesignExample(t *testing.T) {
	r, err := Parse([]byte(designExample))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	d, ok := r.Device("build-server")
	if !ok {
		t.Fatal("build-server not loaded")
	}
	want := Device{Name: "build-server", Host: "user@build.local", Port: 22, SSHKey: "~/.ssh/build_key", Description: "ARM build server"}
	if d.Name != want.Name || d.Host != want.Host || d.Port != want.Port || d.SSHKey != want.SSHKey || d.Description != want.Description {
		t.Errorf("device = %+v, want %+v", d, want)
	}
	if user, host := d.UserHost(); user != "user" || host != "build.local" {
		t.Errorf("UserHost = %q, %q", user, host)
	}
	g, ok := r.Group("handhelds")
	if !ok || !slices.Equal(g.Members, []string{"steam-deck", "legion-go", "ally-x"}) {
		t.Errorf("group handhelds = %v, %v", g, ok)
	}
	// The CLIO shape without "port" loads too.
	if _, err := Parse([]byte(`{"devices":{"a":{"host":"a.lan"}},"groups":{}}`)); err != nil {
		t.Errorf("Parse without port: %v", err)
	}
}

func TestUnknownFieldsRoundTrip(t *testing.T) {
	in := `{
  "version": 3,
  "meta": {"owner": "ops", "tags": ["a", {"deep": [1, 2.5, null, true]}]},
  "devices": {
    "web1": {"host": "root@10.0.0.5", "roots": ["/srv", "/var/www"], "jump": {"via": "bastion", "port": 2222}, "weird key": null},
    "db1": {"host": "db.lan", "description": "<primary> & \"replica\""}
  },
  "groups": {"web": ["web1"]},
  "z-last": "kept"
}`
	r, err := Parse([]byte(in))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	// Change something, as a save would.
	d, err := NewDevice("web2", "root@10.0.0.6", 0, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(d, false); err != nil {
		t.Fatal(err)
	}
	out, err := r.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("saved file does not parse: %v\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(in), &want); err != nil {
		t.Fatal(err)
	}
	want["devices"].(map[string]any)["web2"] = map[string]any{"host": "root@10.0.0.6"}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Errorf("round trip lost data:\n got %s\nwant %s", g, w)
	}
	if !bytes.Contains(out, []byte(`"<primary> & \"replica\""`)) {
		t.Errorf("description was HTML-escaped or changed:\n%s", out)
	}
	// Saving twice gives the same bytes.
	r2, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	out2, err := r2.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, out2) {
		t.Errorf("encoding is not stable:\n%s\n---\n%s", out, out2)
	}
	if got := r2.devices["web1"].ExtraKeys(); !slices.Equal(got, []string{"jump", "weird key"}) {
		t.Errorf("ExtraKeys = %v", got)
	}
	if got := r2.devices["web1"].Roots; len(got) == 0 {
		t.Errorf("roots = %v", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseEmptyAndNull(t *testing.T) {
	for _, in := range []string{"", "  \n", "{}", `{"devices": null, "groups": null}`, `{"groups": {"g": null}}`, `{"devices": {"a": {"host": null, "port": null}}}`} {
		r, err := Parse([]byte(in))
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if _, err := r.Bytes(); err != nil {
			t.Errorf("Bytes after Parse(%q): %v", in, err)
		}
	}
}

// TestParseByteOrderMark: an editor that saves UTF-8 with a byte-order
// mark (Windows Notepad did) leaves an invisible U+FEFF first; the file
// still loads, and an error after it counts columns as the editor shows
// them.
func TestParseByteOrderMark(t *testing.T) {
	r, err := Parse([]byte("\ufeff{\"devices\": {\"a\": {\"host\": \"h\"}}}"))
	if err != nil {
		t.Fatalf("Parse with a BOM: %v", err)
	}
	if _, ok := r.Device("a"); !ok {
		t.Error("device a not loaded")
	}
	_, err = Parse([]byte("\ufeff{\"devices\": [1]}"))
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Line != 1 || fe.Column != 13 {
		t.Errorf("error after a BOM = %v; want it at 1:13", err)
	}
}

func TestParseMalformedPosition(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		line, col int
		msg       string
	}{
		{"missing comma", "{\n  \"devices\": {}\n  \"groups\": {}\n}", 3, 3, "invalid character"},
		{"trailing comma", "{\"devices\": {\"a\": {\"host\": \"x\"},}}", 1, 33, "invalid character"},
		{"truncated", "{\"devices\": {\n", 2, 1, "unexpected end"},
		{"top-level array", "[1, 2]", 1, 1, "must be a JSON object"},
		{"trailing garbage", "{}\n}", 2, 1, "after top-level value"},
		{"devices is a list", "{\"devices\": [\"a\"]}", 1, 13, `"devices" must be an object`},
		{"device is a string", "{\"devices\": {\n  \"a\": \"host\"}}", 2, 8, `device "a" must be an object`},
		{"port is a string", "{\"devices\": {\"a\": {\n\t\"host\": \"h\",\n\t\"port\": \"22\"}}}", 3, 10, `"port" of device "a" must be a whole number`},
		{"port is fractional", "{\"devices\": {\"a\": {\"port\": 22.5}}}", 1, 28, `"port" of device "a"`},
		{"host is a number", "{\"devices\": {\"a\": {\"host\": 5}}}", 1, 28, `"host" of device "a" must be a string`},
		{"group is an object", "{\"groups\": {\"g\": {\"a\": 1}}}", 1, 18, `group "g" must be a list`},
		{"group holds a number", "{\"groups\": {\"g\": [\"a\", 1]}}", 1, 18, `group "g" must be a list`},
		{"duplicate device", "{\"devices\": {\n \"a\": {},\n \"a\": {}}}", 3, 2, `"a" appears twice`},
		{"duplicate top key", "{\"groups\": {}, \"groups\": {}}", 1, 16, `"groups" appears twice`},
		{"column counts characters", "{\"devices\": {\"é\": 1}}", 1, 19, `device "é" must be an object`},
		{"invalid utf-8", "{\"devices\": {\"a\": {\"description\": \"caf\xe9\"}}}", 1, 39, "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse error = %v, want a *FormatError", err)
			}
			if fe.Line != tt.line || fe.Column != tt.col || !strings.Contains(fe.Msg, tt.msg) {
				t.Errorf("got %d:%d %q, want %d:%d containing %q", fe.Line, fe.Column, fe.Msg, tt.line, tt.col, tt.msg)
			}
			if !strings.Contains(err.Error(), "fix the file by hand") {
				t.Errorf("message does not say what to do: %v", err)
			}
		})
	}
}

func TestNewDeviceValid(t *testing.T) {
	tests := []struct {
		name, spec string
		port       int
		key        string
		wantHost   string
		wantPort   int
		wantAddr   string
	}{
		{"web1", "root@10.0.0.5", 2222, "~/.ssh/id", "root@10.0.0.5", 2222, "root@10.0.0.5:2222"},
		{"web.2", "web2.example.com", 0, "", "web2.example.com", 0, "web2.example.com"},
		{"p", "admin@host:2200", 0, "/etc/key", "admin@host", 2200, "admin@host:2200"},
		{"p2", "admin@host:2200", 2200, "", "admin@host", 2200, "admin@host:2200"},
		{"v6", "root@[::1]:2222", 0, "", "root@::1", 2222, "root@[::1]:2222"},
		{"v6bare", "fe80::1%eth0", 0, "", "fe80::1%eth0", 0, "fe80::1%eth0"},
		{"A_b-c.9", "alice@corp@host", 0, "", "alice@corp@host", 0, "alice@corp@host"},
		{"idn", "bücher.example", 0, "", "bücher.example", 0, "bücher.example"},
		{"url", "ssh://h1", 0, "", "h1", 0, "h1"},
		{"url2", "ssh://admin@h1.lan:2222/", 0, "", "admin@h1.lan", 2222, "admin@h1.lan:2222"},
		{"url6", "ssh://root@[::1]:2200", 0, "", "root@::1", 2200, "root@[::1]:2200"},
		// A name that is an address names the machine at that address.
		{"10.0.0.9", "root@10.0.0.9:2222", 0, "", "root@10.0.0.9", 2222, "root@10.0.0.9:2222"},
	}
	for _, tt := range tests {
		d, err := NewDevice(tt.name, tt.spec, tt.port, tt.key, "desc")
		if err != nil {
			t.Errorf("NewDevice(%q, %q, %d): %v", tt.name, tt.spec, tt.port, err)
			continue
		}
		if d.Host != tt.wantHost || d.Port != tt.wantPort || d.Addr() != tt.wantAddr || d.SSHKey != tt.key {
			t.Errorf("NewDevice(%q, %q, %d) = host %q port %d addr %q key %q; want %q %d %q", tt.name, tt.spec, tt.port, d.Host, d.Port, d.Addr(), d.SSHKey, tt.wantHost, tt.wantPort, tt.wantAddr)
		}
	}
}

func TestNewDeviceRejects(t *testing.T) {
	tests := []struct {
		name, spec string
		port       int
		key, desc  string
		want       string
	}{
		{"", "h", 0, "", "", "name is empty"},
		{"-web", "h", 0, "", "", "starting with a letter or digit"},
		{"_web", "h", 0, "", "", "starting with a letter or digit"},
		{"web 1", "h", 0, "", "", "invalid name"},
		{"web/1", "h", 0, "", "", "invalid name"},
		{"wéb", "h", 0, "", "", "invalid name"},
		{"all", "h", 0, "", "", "reserved"},
		{"ALL", "h", 0, "", "", "reserved"},
		{"local", "h", 0, "", "", "reserved"},
		{strings.Repeat("a", 256), "h", 0, "", "", "at most 255"},
		{"w", "", 0, "", "", "host is empty"},
		{"w", "  ", 0, "", "", "host is empty"},
		{"w", "-oProxyCommand=touch /tmp/x", 0, "", "", "must not start with '-'"},
		{"w", "root@-oProxyCommand=x", 0, "", "", "must not start with '-'"},
		{"w", "-root@host", 0, "", "", "must not start with '-'"},
		{"w", "host name", 0, "", "", "spaces or control"},
		{"w", "host\tname", 0, "", "", "spaces or control"},
		{"w", "host\x00", 0, "", "", "spaces or control"},
		{"w", "host\x7f", 0, "", "", "spaces or control"},
		{"w", "ro ot@host", 0, "", "", "spaces or control"},
		{"w", "host;reboot", 0, "", "", "cannot appear in a host"},
		{"w", "$(id)@host", 0, "", "", "cannot appear in a user"},
		{"w", "host`id`", 0, "", "", "cannot appear in a host"},
		{"w", "a/b", 0, "", "", "cannot appear in a host"},
		{"w", "@host", 0, "", "", "user before '@' is empty"},
		{"w", "root@", 0, "", "", "host is empty"},
		{"w", "[::1", 0, "", "", "no matching ']'"},
		{"w", "[web1]:22", 0, "", "", "only for IPv6"},
		{"w", "[::1]22", 0, "", "", "only \":PORT\""},
		{"w", "1:2:3", 0, "", "", "not an IPv6 address"},
		{"w", "host:0", 0, "", "", "1 to 65535"},
		{"w", "host:65536", 0, "", "", "1 to 65535"},
		{"w", "host:+22", 0, "", "", "1 to 65535"},
		{"w", "host:", 0, "", "", "1 to 65535"},
		{"w", "host:ssh", 0, "", "", "1 to 65535"},
		{"w", "host", -1, "", "", "1 to 65535"},
		{"w", "host", 65536, "", "", "1 to 65535"},
		{"w", "host:22", 23, "", "", "give the port once"},
		{"w", "host", 0, "keys/id", "", "absolute path or one starting with ~/"},
		{"w", "host", 0, "~bob/.ssh/id", "", "only \"~/\""},
		{"w", "host", 0, "/k\n", "", "control character"},
		{"w", "host", 0, "", "two\nlines", "control character"},
		// `rex run 10.0.0.9` must not reach some other machine.
		{"10.0.0.9", "root@10.0.0.5", 0, "", "", `the name "10.0.0.9" is an IP address, so rex run 10.0.0.9 would reach root@10.0.0.5 instead; choose a name that is not an address, or give the device the host 10.0.0.9`},
		{"10.0.0.9", "db.lan", 0, "", "", "is an IP address"},
	}
	for _, tt := range tests {
		_, err := NewDevice(tt.name, tt.spec, tt.port, tt.key, tt.desc)
		if err == nil {
			t.Errorf("NewDevice(%q, %q, %d, %q, %q) succeeded, want error containing %q", tt.name, tt.spec, tt.port, tt.key, tt.desc, tt.want)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewDevice(%q, %q, %d, %q, %q) = %q, want it to contain %q", tt.name, tt.spec, tt.port, tt.key, tt.desc, err, tt.want)
		}
	}
}

func TestExpandKeyPath(t *testing.T) {
	tests := []struct{ in, home, want, err string }{
		{"", "/home/u", "", ""},
		{"~/.ssh/id", "/home/u", "/home/u/.ssh/id", ""},
		{"~", "/home/u", "/home/u", ""},
		{"/etc/../etc/key", "/home/u", "/etc/key", ""},
		{"~/.ssh/id", "", "", "home directory is unknown"},
		{"~root/id", "/home/u", "", "only \"~/\""},
	}
	for _, tt := range tests {
		got, err := ExpandKeyPath(tt.in, tt.home)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ExpandKeyPath(%q, %q) error = %v, want %q", tt.in, tt.home, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ExpandKeyPath(%q, %q) = %q, %v; want %q", tt.in, tt.home, got, err, tt.want)
		}
	}
}

func mustDevice(t testing.TB, name, spec string) Device {
	t.Helper()
	d, err := NewDevice(name, spec, 0, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestAddExisting(t *testing.T) {
	r, err := Parse([]byte(`{"devices": {"web1": {"host": "old.lan", "roots": ["/srv"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add(mustDevice(t, "web1", "new.lan"), false); err == nil || !strings.Contains(err.Error(), "already exists (old.lan); add --force") {
		t.Fatalf("Add existing without force = %v", err)
	}
	if d, _ := r.Device("web1"); d.Host != "old.lan" {
		t.Fatalf("failed add changed the device: %+v", d)
	}
	replaced, err := r.Add(mustDevice(t, "web1", "new.lan"), true)
	if err != nil || !replaced {
		t.Fatalf("Add --force = %v, %v", replaced, err)
	}
	d, _ := r.Device("web1")
	if d.Host != "new.lan" || !slices.Equal(d.Roots, []string{"/srv"}) {
		t.Errorf("after --force: host %q roots %v", d.Host, d.Roots)
	}
	replaced, err = r.Add(mustDevice(t, "web2", "h"), false)
	if err != nil || replaced {
		t.Errorf("Add new = %v, %v", replaced, err)
	}
}

func TestRemoveDropsFromGroups(t *testing.T) {
	r, err := Parse([]byte(`{"devices": {"web1": {"host": "a"}, "web2": {"host": "b"}},
		"groups": {"web": ["web1", "web2"], "prod": ["web1"], "db": ["web2"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	groups, err := r.Remove("web1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(groups, []string{"prod", "web"}) {
		t.Errorf("removed from %v, want [prod web]", groups)
	}
	if g, _ := r.Group("web"); !slices.Equal(g.Members, []string{"web2"}) {
		t.Errorf("web = %v", g.Members)
	}
	if g, ok := r.Group("prod"); !ok || len(g.Members) != 0 {
		t.Errorf("prod = %v, %v; the empty group must stay", g.Members, ok)
	}
	if _, err := r.Remove("web1"); err == nil {
		t.Error("removing a missing device succeeded")
	}
	var ue *UnknownError
	if _, err := r.Remove("wbe2"); !errors.As(err, &ue) || !slices.Equal(ue.Suggestions, []string{"web2"}) {
		t.Errorf("Remove(wbe2) = %v, want a suggestion of web2", err)
	}
}

func TestGroupEditing(t *testing.T) {
	r := New()
	for _, n := range []string{"web1", "web2", "db1"} {
		if _, err := r.Add(mustDevice(t, n, n+".lan"), false); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		do   func() error
		want string // error substring, "" for success
	}{
		{"create", func() error { return r.CreateGroup("web") }, ""},
		{"create again", func() error { return r.CreateGroup("web") }, "already exists"},
		{"create bad name", func() error { return r.CreateGroup("we b") }, "invalid name"},
		{"create reserved", func() error { return r.CreateGroup("all") }, "reserved"},
		{"create named like an address", func() error { return r.CreateGroup("10.0.0.9") }, `the name "10.0.0.9" is an IP address, so rex run 10.0.0.9 would reach this group's devices instead of that address; choose a name that is not an address`},
		{"create clashing with a device", func() error { return r.CreateGroup("db1") }, "already a device name"},
		{"device clashing with a group", func() error { _, err := r.Add(mustDevice(t, "web", "h"), true); return err }, "already a group name"},
		// Names that differ only in case would read as one machine (ssh
		// matches hosts regardless of case): the second is refused.
		{"device differing in case from a device", func() error { _, err := r.Add(mustDevice(t, "Web1", "h"), false); return err }, `the device "web1" exists and differs from "Web1" only in case`},
		{"device differing in case from a group", func() error { _, err := r.Add(mustDevice(t, "WEB", "h"), true); return err }, `the group "web" exists and differs from "WEB" only in case`},
		{"group differing in case from a device", func() error { return r.CreateGroup("DB1") }, `the device "db1" exists and differs from "DB1" only in case`},
		{"group differing in case from a group", func() error { return r.CreateGroup("Web") }, `the group "web" exists and differs from "Web" only in case`},
		{"add members", func() error {
			added, already, err := r.AddToGroup("web", "web2", "web1", "web2")
			if err == nil && (!slices.Equal(added, []string{"web2", "web1"}) || already != nil) {
				t.Errorf("added %v already %v", added, already)
			}
			return err
		}, ""},
		{"add again", func() error {
			added, already, err := r.AddToGroup("web", "web1", "db1")
			if err == nil && (!slices.Equal(added, []string{"db1"}) || !slices.Equal(already, []string{"web1"})) {
				t.Errorf("added %v already %v", added, already)
			}
			return err
		}, ""},
		{"add unknown device", func() error { _, _, err := r.AddToGroup("web", "db2"); return err }, `did you mean db1?`},
		{"add to unknown group", func() error { _, _, err := r.AddToGroup("wbe", "db1"); return err }, `no group is named "wbe"; did you mean web?`},
		{"add nothing", func() error { _, _, err := r.AddToGroup("web"); return err }, "no devices given"},
		{"remove non-member", func() error { return r.RemoveFromGroup("web", "db1", "ghost") }, `"ghost" is not in group "web"`},
		{"remove member", func() error { return r.RemoveFromGroup("web", "db1") }, ""},
		{"delete unknown", func() error { _, err := r.DeleteGroup("nope"); return err }, "no group is named"},
	}
	for _, s := range steps {
		err := s.do()
		switch {
		case s.want == "" && err != nil:
			t.Errorf("%s: %v", s.name, err)
		case s.want != "" && (err == nil || !strings.Contains(err.Error(), s.want)):
			t.Errorf("%s: error %v, want it to contain %q", s.name, err, s.want)
		}
	}
	// The failed "remove non-member" step changed nothing; the last remove did.
	if g, _ := r.Group("web"); !slices.Equal(g.Members, []string{"web2", "web1"}) {
		t.Errorf("web = %v, want [web2 web1]", g.Members)
	}
	members, err := r.DeleteGroup("web")
	if err != nil || len(members) != 2 {
		t.Errorf("DeleteGroup = %v, %v", members, err)
	}
	if len(r.Devices()) != 3 {
		t.Errorf("deleting a group removed devices: %v", r.Devices())
	}
}

func BenchmarkParse(b *testing.B) {
	r := New()
	for i := range 500 {
		d, err := NewDevice("node"+itoa(i), "root@10.0."+itoa(i/250)+"."+itoa(i%250), 22, "~/.ssh/id", "a node")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Add(d, false); err != nil {
			b.Fatal(err)
		}
	}
	data, err := r.Bytes()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// roots, become and become_user are fields of their own: parsed, checked,
// written back.
func TestDeviceRootsAndBecome(t *testing.T) {
	r, err := Parse([]byte(`{"devices": {"db": {"host": "db.lan", "roots": ["/srv", "~/app"], "become": true, "become_user": "postgres"}, "web": {"host": "w"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	d := r.devices["db"]
	if !slices.Equal(d.Roots, []string{"/srv", "~/app"}) || !d.Become || d.SudoUser() != "postgres" || len(d.ExtraKeys()) != 0 {
		t.Fatalf("device %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if w := r.devices["web"]; w.Roots != nil || w.Become || w.SudoUser() != "root" {
		t.Errorf("defaults %+v", w)
	}
	out, _ := r.Bytes()
	if !bytes.Contains(out, []byte(`"roots": [`)) || !bytes.Contains(out, []byte(`"become": true`)) || !bytes.Contains(out, []byte(`"become_user": "postgres"`)) {
		t.Errorf("saved:\n%s", out)
	}
	for in, want := range map[string]string{
		`{"devices": {"a": {"host": "h", "roots": "/srv"}}}`:  "a list of paths",
		`{"devices": {"a": {"host": "h", "become": "yes"}}}`:  "true or false",
		`{"devices": {"a": {"host": "h", "become_user": 0}}}`: "a string",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v, want %q", in, err, want)
		}
	}
	for _, bad := range []Device{
		{Name: "a", Host: "h", Roots: []string{"srv"}},
		{Name: "a", Host: "h", Roots: []string{"~other/x"}},
		{Name: "a", Host: "h", BecomeUser: "-x"},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
