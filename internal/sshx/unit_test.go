package sshx

import (
	"io"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/rexconsole/rex/internal/version"
)

// unquote undoes Quote the way a POSIX shell reads single quotes, for the
// fuzz target (the table test asks a real shell).
func unquote(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case s[i] == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", false
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 2
		case s[i] == '\\' && i+1 < len(s):
			b.WriteByte(s[i+1])
			i += 2
		case strings.IndexByte(" \t\n;&|<>()$`\"*?[]#~!{}", s[i]) >= 0:
			return "", false
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), true
}

func TestQuoteThroughShell(t *testing.T) {
	for _, s := range []string{"", "plain", "two words", "it's", "'", "''", `a"b`, "$HOME", "`id`", "a;b", "*", "-n", "new\nline", "back\\slash", "ünïcode", "[127.0.0.1]:2222"} {
		out, err := exec.Command("/bin/sh", "-c", "printf %s "+Quote(s)).Output()
		if err != nil {
			t.Fatalf("sh with %q: %v", Quote(s), err)
		}
		if string(out) != s {
			t.Errorf("Quote(%q) = %s came back as %q", s, Quote(s), out)
		}
	}
}

func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "a b", "it's", "'\\''", "$(x)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := Quote(s)
		got, ok := unquote(q)
		if !ok || got != s {
			t.Fatalf("Quote(%q) = %q reads back as %q (%v)", s, q, got, ok)
		}
	})
}

// TestScriptsShape: the remote scripts survive any login shell's quoting
// and are valid sh.
func TestScriptsShape(t *testing.T) {
	for name, script := range map[string]string{"boot": bootScript, "sum": sumScript} {
		if strings.ContainsAny(script, "'!\n") {
			t.Errorf("%s script holds a quote, ! or newline", name)
		}
		if out, err := exec.Command("/bin/sh", "-n", "-c", script).CombinedOutput(); err != nil {
			t.Errorf("%s script: sh -n: %v: %s", name, err, out)
		}
	}
	if !validVersion.MatchString(version.Version) {
		t.Errorf("version %q cannot name a remote directory", version.Version)
	}
}

func TestParseHeader(t *testing.T) {
	h := parseHeader([]string{
		"rexd-uname Linux x86_64", "rexd-bad create /x/rexd", "rexd-bad noexec /y rexd",
		"garbage", "rexd-dir /home/u/.cache/rexd", "rexd-sum abc\r", "rexd-found /a/rexd", "rexd-found /b/rexd",
	})
	want := header{uname: "Linux x86_64", bad: []string{"create /x/rexd", "noexec /y rexd"}, badWhy: []string{"", ""}, dir: "/home/u/.cache/rexd", sum: "abc", found: []string{"/a/rexd", "/b/rexd"}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("parseHeader = %+v, want %+v", h, want)
	}
	if got := describeBad(want); got != "/x/rexd cannot be created, /y rexd does not allow executing programs (noexec)" {
		t.Errorf("describeBad = %q", got)
	}
}

// TestHeaderReaderLetsGo: the header reader takes off the lines before
// rexd's first JSON line, passes every byte after them on unchanged,
// however the client reads, and lets its 64 KiB buffer go once it is
// drained (a pooled connection keeps its reader for as long as it lives).
func TestHeaderReaderLetsGo(t *testing.T) {
	body := `{"jsonrpc":"2.0"}` + "\n" + strings.Repeat("0123456789abcdef", 20000)
	for _, tc := range []struct {
		name string
		read func(io.Reader) ([]byte, error)
	}{
		{"big reads", io.ReadAll},
		{"byte by byte", func(r io.Reader) ([]byte, error) { return io.ReadAll(iotest.OneByteReader(r)) }},
		{"half reads", func(r io.Reader) ([]byte, error) { return io.ReadAll(iotest.HalfReader(r)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hr := newHeaderReader(strings.NewReader("Welcome!\nrexd-dir /d\nrexd-sum abc\n" + body))
			got, err := tc.read(hr)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != body {
				t.Fatalf("read %d bytes (starting %.40q), want the %d after the header", len(got), got, len(body))
			}
			if h := hr.header(); h.dir != "/d" || h.sum != "abc" {
				t.Errorf("header = %+v", h)
			}
			if hr.r != nil {
				t.Errorf("the header reader still holds its %d-byte buffer", hr.r.Size())
			}
		})
	}
}

func FuzzParseHeader(f *testing.F) {
	f.Add("rexd-uname Linux x86_64\nrexd-dir /tmp/x\nrexd-bad noexec /y")
	f.Add("rexd-exec /a b/rexd\n{\"jsonrpc\":\"2.0\"}")
	f.Add("\x00rexd-\n\n")
	f.Add("rexd-badwhy first\nrexd-bad create /c\nrexd-badwhy No space left on device\nrexd-root /r/rexd\nrexd-rootfail")
	f.Fuzz(func(t *testing.T, s string) {
		h := parseHeader(strings.Split(s, "\n"))
		_ = describeBad(h)
		_ = spaceDirs(h)
		platformOf(h.uname)
		if len(h.bad) > maxHeaderLines || len(h.found) > maxHeaderLines {
			t.Fatalf("kept %d lines", len(h.bad)+len(h.found))
		}
	})
}

func TestParseTarget(t *testing.T) {
	tests := []struct {
		spec string
		want Target
		bad  bool
	}{
		{spec: "host", want: Target{Host: "host"}},
		{spec: "u@host", want: Target{User: "u", Host: "host"}},
		{spec: "u@host:2222", want: Target{User: "u", Host: "host", Port: 2222}},
		{spec: "me@corp@host", want: Target{User: "me@corp", Host: "host"}},
		{spec: "[::1]:22", want: Target{Host: "::1", Port: 22}},
		{spec: "::1", want: Target{Host: "::1"}},
		{spec: "ssh://u@h:2200", want: Target{User: "u", Host: "h", Port: 2200}},
		{spec: "", bad: true},
		{spec: "@host", bad: true},
		{spec: "host:0", bad: true},
		{spec: "host:99999", bad: true},
		{spec: "host:x", bad: true},
		{spec: "-oProxyCommand=x", bad: true},
		{spec: "a b", bad: true},
		{spec: "h;rm", bad: true},
		{spec: "u$x@h", bad: false, want: Target{User: "u$x", Host: "h"}},
		{spec: "u'x@h", bad: true},
		{spec: "fe80::1%eth0", want: Target{Host: "fe80::1%eth0"}},
		{spec: "[::1", bad: true},
		{spec: "a,b", bad: true},
	}
	for _, tc := range tests {
		got, err := ParseTarget(tc.spec)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseTarget(%q) = %+v, want an error", tc.spec, got)
			}
			continue
		}
		tc.want.Name = tc.spec
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
}

func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"u@h:22", "[::1]:2222", "ssh://h", "a@b@c", "h:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s)
		if err != nil {
			return
		}
		if tg.Host == "" || strings.HasPrefix(tg.Host, "-") || tg.Port < 0 || tg.Port > 65535 {
			t.Fatalf("ParseTarget(%q) = %+v", s, tg)
		}
		if !validHost(tg.Host) || !validUser(tg.User) || strings.ContainsAny(tg.Host+tg.User, " \t\n,;'\"\\`") {
			t.Fatalf("ParseTarget(%q) let through %+v", s, tg)
		}
	})
}

func TestParseJump(t *testing.T) {
	hops, err := parseJump("a, u@b:2200 ,c")
	if err != nil {
		t.Fatal(err)
	}
	if len(hops) != 3 || hops[1].User != "u" || hops[1].Port != 2200 || joinJump(hops) != "a,u@b:2200,c" {
		t.Errorf("parseJump = %+v", hops)
	}
	if _, err := parseJump(strings.Repeat("h,", maxJumps) + "h"); err == nil {
		t.Errorf("a chain of %d hops was accepted", maxJumps+1)
	}
	if _, err := parseJump("a,,b"); err == nil {
		t.Errorf("an empty hop was accepted")
	}
}

func TestParseConfigTime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"10", 10 * time.Second, true},
		{"0", 0, true},
		{"1m30s", 90 * time.Second, true},
		{"1h", time.Hour, true},
		{"2w", 14 * 24 * time.Hour, true},
		{"5S", 5 * time.Second, true},
		{"", 0, false},
		{"-1", 0, false},
		{"s", 0, false},
		{"1x", 0, false},
		{"99999999999", 0, false},
		{"28200000H", 0, false},   // overflowed into a negative time
		{"1000000000w", 0, false}, // over OpenSSH's INT_MAX seconds
		{"596523h14m7s", 2147483647 * time.Second, true},
		{"596523h14m8s", 0, false},
	}
	for _, tc := range tests {
		got, ok := parseConfigTime(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseConfigTime(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseConfigTime(f *testing.F) {
	for _, s := range []string{"10", "1m30s", "3d", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, ok := parseConfigTime(s); ok && d < 0 {
			t.Fatalf("parseConfigTime(%q) = %v", s, d)
		}
	})
}

func TestSplitConfigList(t *testing.T) {
	got := splitConfigList(`"/a b/known" /c  ~/d`)
	if want := []string{"/a b/known", "/c", "~/d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("splitConfigList = %q, want %q", got, want)
	}
}

// TestAddress: Address is where Connect dials, as resolve reads it (User,
// HostName with its tokens, Port, a Match block's settings, the local user
// and 22 as defaults), and it is given even when a key that only dialing
// reads (here web's IdentityFile) is bad.
func TestAddress(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, "config")
	writeFile(t, cfg, `Host web
    HostName %h.example.org
    User deploy
    IdentityFile ~/%z
Match host m
    Port 2222
`)
	d := NewDialer(Options{ConfigFile: cfg, HomeDir: home, LocalUser: "me"})
	for _, tt := range []struct {
		t          Target
		user, host string
		port       int
	}{
		{Target{Host: "web"}, "deploy", "web.example.org", 22},
		{Target{Host: "web", User: "root", Port: 2200}, "root", "web.example.org", 2200},
		{Target{Host: "m"}, "me", "m", 2222},
		{Target{Host: "10.0.0.2"}, "me", "10.0.0.2", 22},
	} {
		user, host, port, err := d.Address(tt.t)
		if err != nil || user != tt.user || host != tt.host || port != tt.port {
			t.Errorf("Address(%+v) = %q %q %d, %v; want %q %q %d", tt.t, user, host, port, err, tt.user, tt.host, tt.port)
		}
	}
	if _, err := d.resolve(Target{Host: "web"}); err == nil {
		t.Error("resolve(web) took the bad IdentityFile")
	}
}

// TestResolve checks precedence without a server: Target over ssh_config
// over defaults, tokens and ~ expanded, first value wins.
func TestResolve(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, "config")
	writeFile(t, cfg, `Host web
    HostName %h.example.org
    User deploy
    Port 2200
    IdentityFile ~/.ssh/web_%r
    IdentitiesOnly yes
    ProxyJump bastion
    UserKnownHostsFile ~/kh1 "/k h2"
    StrictHostKeyChecking no
    ConnectTimeout 7
    ServerAliveInterval 1m
    ServerAliveCountMax 5
    HostKeyAlias webalias
Host *
    User fallback
    Port 2201
    StrictHostKeyChecking yes
`)
	d := NewDialer(Options{ConfigFile: cfg, HomeDir: home, LocalUser: "me", AgentSocket: "none"})
	e, err := d.resolve(Target{Host: "web"})
	if err != nil {
		t.Fatal(err)
	}
	want := &endpoint{
		name: "web", alias: "web", host: "web.example.org", port: 2200, user: "deploy",
		identities: []string{filepath.Join(home, ".ssh/web_deploy")}, explicitIdentity: true, identitiesOnly: true,
		jump: "bastion", knownHosts: []string{filepath.Join(home, "kh1"), "/k h2"},
		globalKnownHosts: []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"},
		strict:           "no", hostKeyAlias: "webalias", timeout: 7 * time.Second, timeoutFrom: "ConnectTimeout in " + cfg,
		aliveInterval: time.Minute, aliveCount: 5,
	}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("resolve(web) =\n%+v\nwant\n%+v", e, want)
	}
	if e.hostKeyName() != "webalias:22" {
		t.Errorf("host key name %q", e.hostKeyName())
	}
	e, err = d.resolve(Target{Name: "w", Host: "web", User: "root", Port: 22, KeyPath: "~/k", Jump: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if e.user != "root" || e.port != 22 || e.jump != "" || e.identities[0] != filepath.Join(home, "k") || e.name != "w" {
		t.Errorf("Target fields did not override: %+v", e)
	}
	e, err = d.resolve(Target{Host: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if e.user != "fallback" || e.port != 2201 || e.strict != "yes" || e.explicitIdentity || len(e.identities) != 3 ||
		e.timeout != DefaultConnectTimeout || e.aliveInterval != DefaultAliveInterval || e.knownHosts[0] != filepath.Join(home, ".ssh", "known_hosts") {
		t.Errorf("defaults: %+v", e)
	}

	for _, bad := range []string{"Port x", "ConnectTimeout soon", "StrictHostKeyChecking maybe", "ProxyCommand nc %h %p", "IdentityFile ~/%z"} {
		writeFile(t, cfg, "Host *\n    "+bad+"\n")
		_, err := NewDialer(Options{ConfigFile: cfg, HomeDir: home}).resolve(Target{Host: "h"})
		if err == nil {
			t.Errorf("%q was accepted", bad)
			continue
		}
		assertOneSentence(t, err, cfg)
	}
	writeFile(t, cfg, "Match exec \"true\"\n    User x\n")
	if _, err := NewDialer(Options{ConfigFile: cfg, HomeDir: home}).resolve(Target{Host: "h"}); err == nil {
		t.Errorf("Match exec was accepted")
	} else {
		assertOneSentence(t, err, cfg)
	}
}
