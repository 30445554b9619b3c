package sshx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kevinburke/ssh_config"

	"golang.org/x/crypto/ssh"
)

// sshConfig is one parsed ssh_config file (or none).
type sshConfig struct {
	path string
	cfg  *ssh_config.Config // nil: no file
}

// maxConfigSize bounds the ssh_config read; real files are a few KiB.
const maxConfigSize = 4 << 20

func (d *Dialer) config() (*sshConfig, error) {
	d.cfgOnce.Do(func() {
		path := d.opts.ConfigFile
		if path == "none" {
			d.cfg = &sshConfig{}
			return
		}
		if path == "" {
			home, err := d.home()
			if err != nil {
				d.cfgErr = err
				return
			}
			path = filepath.Join(home, ".ssh", "config")
		}
		d.cfg, d.cfgErr = loadConfig(path)
	})
	return d.cfg, d.cfgErr
}

func loadConfig(path string) (*sshConfig, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &sshConfig{path: path}, nil
	}
	if err != nil {
		return nil, newError("", ErrConfig, err, fmt.Sprintf("cannot read %s: %v; fix its permissions or point rex at another ssh_config", path, unwrapPath(err)))
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxConfigSize)); err != nil {
		return nil, newError("", ErrConfig, err, fmt.Sprintf("cannot read %s: %v; fix its permissions or point rex at another ssh_config", path, err))
	}
	cfg, err := ssh_config.Decode(&buf)
	if err != nil {
		return nil, newError("", ErrConfig, err, fmt.Sprintf("cannot parse %s: %v; fix that line (rex reads ssh_config like OpenSSH, without Match exec)", path, err))
	}
	return &sshConfig{path: path, cfg: cfg}, nil
}

func (c *sshConfig) get(alias, key string) string {
	if c == nil || c.cfg == nil {
		return ""
	}
	v, err := c.cfg.Get(alias, key)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(v)
}

func (c *sshConfig) getAll(alias, key string) []string {
	if c == nil || c.cfg == nil {
		return nil
	}
	vs, err := c.cfg.GetAll(alias, key)
	if err != nil {
		return nil
	}
	return vs
}

// endpoint is a Target with every setting resolved.
type endpoint struct {
	// pin, when set, is the only host key accepted, without known_hosts
	// or a question (a bulk lane's second connection to a host this
	// Dialer has just verified); key is the host key the handshake accepted.
	pin, key ssh.PublicKey

	name  string // for messages
	alias string // what ssh_config matched
	host  string // what we connect to
	port  int
	user  string

	identities       []string // key files, expanded, in order
	explicitIdentity bool     // from Target.KeyPath or IdentityFile
	keyOverride      string   // Target.KeyPath, expanded
	identitiesOnly   bool
	certFiles        []string
	agentSocket      string // "" = no agent
	batchMode        bool

	jump string // ProxyJump, "" = direct

	knownHosts       []string // user files; new hosts go to the first
	globalKnownHosts []string
	strict           string // "yes", "ask", "accept-new" or "no"
	hashKnownHosts   bool
	hostKeyAlias     string

	timeout       time.Duration
	timeoutFrom   string // where timeout came from, for messages
	aliveInterval time.Duration
	aliveCount    int
}

// addr is host:port to connect to.
func (e *endpoint) addr() string { return net.JoinHostPort(e.host, strconv.Itoa(e.port)) }

// hostKeyName is the host:port known_hosts names this endpoint by.
func (e *endpoint) hostKeyName() string {
	if e.hostKeyAlias != "" {
		return net.JoinHostPort(e.hostKeyAlias, "22") // an alias is recorded bare
	}
	return e.addr()
}

func (d *Dialer) home() (string, error) {
	if d.opts.HomeDir != "" {
		return d.opts.HomeDir, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", newError("", ErrConfig, err, "cannot find your home directory (HOME is unset); set HOME")
	}
	return h, nil
}

func (d *Dialer) localUser() string {
	if d.opts.LocalUser != "" {
		return d.opts.LocalUser
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

// badValue is the error for a key of ssh_config whose value for e's host
// is not what it must be.
func (c *sshConfig) badValue(e *endpoint, key, val, want string) error {
	return newError(e.name, ErrConfig, nil, fmt.Sprintf("%s in %s for host %s is %q, which is not %s; fix that line", key, c.path, e.alias, val, want))
}

// Address is where Connect dials t, as ssh_config makes it: the login
// user (t's, else ssh_config's User, else the local user), the host name
// (ssh_config's HostName for t.Host, else t.Host) and the port (t's, else
// ssh_config's Port, else 22). It reads no key and no known_hosts file, so
// that target lists can compare machines as they will be dialed.
func (d *Dialer) Address(t Target) (user, host string, port int, err error) {
	e, _, _, err := d.address(t)
	if err != nil {
		return "", "", 0, err
	}
	return e.user, e.host, e.port, nil
}

// address begins resolve: the endpoint's user, port and host name, which
// tokens in later keys may use; with the config and home it read them by.
func (d *Dialer) address(t Target) (*endpoint, *sshConfig, string, error) {
	cfg, err := d.config()
	if err != nil {
		return nil, nil, "", err
	}
	home, err := d.home()
	if err != nil {
		return nil, nil, "", err
	}
	name := t.Name
	if name == "" {
		name = t.Host
	}
	if t.Host == "" {
		return nil, nil, "", newError(name, ErrConfig, nil, fmt.Sprintf("target %q has no host; give it one (user@host)", name))
	}
	alias := t.Host
	e := &endpoint{name: name, alias: alias}
	cfgErr := func(key, val, want string) error { return cfg.badValue(e, key, val, want) }

	e.user = t.User
	if e.user == "" {
		e.user = cfg.get(alias, "User")
	}
	if e.user == "" {
		e.user = d.localUser()
	}
	e.port = t.Port
	if e.port == 0 {
		if v := cfg.get(alias, "Port"); v != "" {
			p, err := strconv.Atoi(v)
			if err != nil || p < 1 || p > 65535 {
				return nil, nil, "", cfgErr("Port", v, "a port number")
			}
			e.port = p
		}
	}
	if e.port == 0 {
		e.port = 22
	}
	e.host = alias
	if v := cfg.get(alias, "HostName"); v != "" {
		tok := tokens{home: home, alias: alias, host: alias, port: e.port, ruser: e.user, luser: d.localUser()}
		h, err := tok.expand(v)
		if err != nil {
			return nil, nil, "", cfgErr("HostName", v, "a valid host name")
		}
		e.host = h
	}
	if !validHost(e.host) {
		return nil, nil, "", newError(name, ErrConfig, nil, fmt.Sprintf("host name %q of %s is not valid; use letters, digits, '.', '-', '_' or an IP address", e.host, name))
	}
	if !validUser(e.user) {
		return nil, nil, "", newError(name, ErrConfig, nil, fmt.Sprintf("user name %q for %s is not valid; use letters, digits and . _ - + @ $", e.user, name))
	}
	return e, cfg, home, nil
}

// resolve fills a Target from ssh_config and defaults, as OpenSSH does:
// the first value found for a key wins, Target fields win over all.
func (d *Dialer) resolve(t Target) (*endpoint, error) {
	e, cfg, home, err := d.address(t)
	if err != nil {
		return nil, err
	}
	alias := e.alias
	cfgErr := func(key, val, want string) error { return cfg.badValue(e, key, val, want) }
	tok := tokens{home: home, alias: alias, host: e.host, port: e.port, ruser: e.user, luser: d.localUser()}

	// Identities: the Target's key alone, else ssh_config's, else defaults.
	switch {
	case t.KeyPath != "":
		e.keyOverride = expandTilde(t.KeyPath, home)
		e.identities = []string{e.keyOverride}
		e.explicitIdentity = true
	default:
		for _, v := range cfg.getAll(alias, "IdentityFile") {
			if strings.EqualFold(v, "none") {
				continue
			}
			p, err := tok.expand(expandTilde(v, home))
			if err != nil {
				return nil, cfgErr("IdentityFile", v, "a valid path")
			}
			e.identities = append(e.identities, p)
		}
		e.explicitIdentity = len(e.identities) > 0
		if !e.explicitIdentity {
			for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
				e.identities = append(e.identities, filepath.Join(home, ".ssh", n))
			}
		}
	}
	if v := cfg.get(alias, "IdentitiesOnly"); v != "" {
		b, ok := yesNo(v)
		if !ok {
			return nil, cfgErr("IdentitiesOnly", v, "yes or no")
		}
		e.identitiesOnly = b
	}
	for _, v := range cfg.getAll(alias, "CertificateFile") {
		p, err := tok.expand(expandTilde(v, home))
		if err != nil {
			return nil, cfgErr("CertificateFile", v, "a valid path")
		}
		e.certFiles = append(e.certFiles, p)
	}
	if v := cfg.get(alias, "BatchMode"); v != "" {
		b, ok := yesNo(v)
		if !ok {
			return nil, cfgErr("BatchMode", v, "yes or no")
		}
		e.batchMode = b
	}
	switch sock := d.opts.AgentSocket; {
	case sock == "none":
	case sock != "":
		e.agentSocket = sock
	default:
		v := cfg.get(alias, "IdentityAgent")
		switch {
		case v == "" || v == "SSH_AUTH_SOCK":
			e.agentSocket = os.Getenv("SSH_AUTH_SOCK")
		case strings.EqualFold(v, "none"):
		case strings.HasPrefix(v, "$"):
			e.agentSocket = os.Getenv(v[1:])
		default:
			p, err := tok.expand(expandTilde(v, home))
			if err != nil {
				return nil, cfgErr("IdentityAgent", v, "a valid path")
			}
			e.agentSocket = p
		}
	}

	// Jump hosts.
	switch {
	case t.Jump == "none":
	case t.Jump != "":
		e.jump = t.Jump
	default:
		if v := cfg.get(alias, "ProxyJump"); v != "" && !strings.EqualFold(v, "none") {
			e.jump = v
		} else if pc := cfg.get(alias, "ProxyCommand"); pc != "" && !strings.EqualFold(pc, "none") {
			return nil, newError(e.name, ErrConfig, nil, fmt.Sprintf("%s sets ProxyCommand for host %s, which rex does not run; use ProxyJump instead", cfg.path, alias))
		}
	}

	// Host keys.
	if v := cfg.get(alias, "UserKnownHostsFile"); v != "" {
		for _, f := range splitConfigList(v) {
			if strings.EqualFold(f, "none") {
				continue
			}
			p, err := tok.expand(expandTilde(f, home))
			if err != nil {
				return nil, cfgErr("UserKnownHostsFile", v, "a list of paths")
			}
			e.knownHosts = append(e.knownHosts, p)
		}
	} else if d.opts.KnownHostsFile != "" {
		e.knownHosts = []string{expandTilde(d.opts.KnownHostsFile, home)}
	} else {
		e.knownHosts = []string{filepath.Join(home, ".ssh", "known_hosts"), filepath.Join(home, ".ssh", "known_hosts2")}
	}
	if len(e.knownHosts) == 0 { // UserKnownHostsFile none: nothing is recorded
		e.knownHosts = []string{os.DevNull}
	}
	if v := cfg.get(alias, "GlobalKnownHostsFile"); v != "" {
		for _, f := range splitConfigList(v) {
			if !strings.EqualFold(f, "none") {
				e.globalKnownHosts = append(e.globalKnownHosts, expandTilde(f, home))
			}
		}
	} else {
		e.globalKnownHosts = []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"}
	}
	e.strict = "accept-new"
	strict, fromConfig := d.opts.StrictHostKeys, false
	if strict == "" {
		strict, fromConfig = cfg.get(alias, "StrictHostKeyChecking"), true
	}
	if strict != "" {
		switch strings.ToLower(strict) {
		case "yes":
			e.strict = "yes"
		case "ask":
			e.strict = "ask"
		case "accept-new":
			e.strict = "accept-new"
		case "no", "off":
			e.strict = "no"
		default:
			if !fromConfig {
				return nil, newError(e.name, ErrConfig, nil, fmt.Sprintf("strict host key checking %q is not yes, ask, accept-new or no; use one of those", strict))
			}
			return nil, cfgErr("StrictHostKeyChecking", strict, "yes, ask, accept-new or no")
		}
	}
	if v := cfg.get(alias, "HashKnownHosts"); v != "" {
		b, ok := yesNo(v)
		if !ok {
			return nil, cfgErr("HashKnownHosts", v, "yes or no")
		}
		e.hashKnownHosts = b
	}
	if v := cfg.get(alias, "HostKeyAlias"); v != "" {
		// It becomes the host field of a known_hosts line: a comma, a
		// space or a pattern character there would name other hosts, or
		// none, or break the file.
		if !validHost(v) {
			return nil, cfgErr("HostKeyAlias", v, "one host name (letters, digits, '.', '-', '_')")
		}
		e.hostKeyAlias = v
	}

	// Time.
	e.timeout, e.timeoutFrom = t.ConnectTimeout, "--connect-timeout"
	if e.timeout == 0 {
		e.timeout, e.timeoutFrom = d.opts.ConnectTimeout, "the connect timeout"
	}
	if e.timeout == 0 {
		if v := cfg.get(alias, "ConnectTimeout"); v != "" {
			dur, ok := parseConfigTime(v)
			if !ok || dur <= 0 {
				return nil, cfgErr("ConnectTimeout", v, "a time (seconds)")
			}
			e.timeout, e.timeoutFrom = dur, "ConnectTimeout in "+cfg.path
		}
	}
	if e.timeout == 0 {
		e.timeout, e.timeoutFrom = DefaultConnectTimeout, "the default; set --connect-timeout or ConnectTimeout in ssh_config"
	}
	e.aliveInterval = DefaultAliveInterval
	if v := cfg.get(alias, "ServerAliveInterval"); v != "" {
		dur, ok := parseConfigTime(v)
		if !ok || dur < 0 {
			return nil, cfgErr("ServerAliveInterval", v, "a time (seconds)")
		}
		e.aliveInterval = dur
	}
	e.aliveCount = DefaultAliveCountMax
	if v := cfg.get(alias, "ServerAliveCountMax"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, cfgErr("ServerAliveCountMax", v, "a positive number")
		}
		e.aliveCount = n
	}
	return e, nil
}

// tokens expands the % tokens of ssh_config values that rex honours.
type tokens struct {
	home, alias, host, ruser, luser string
	port                            int
}

func (t tokens) expand(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		i++
		if i == len(s) {
			return "", fmt.Errorf("%q ends in a lone %%", s)
		}
		switch s[i] {
		case '%':
			b.WriteByte('%')
		case 'd':
			b.WriteString(t.home)
		case 'h':
			b.WriteString(t.host)
		case 'n':
			b.WriteString(t.alias)
		case 'p':
			b.WriteString(strconv.Itoa(t.port))
		case 'r':
			b.WriteString(t.ruser)
		case 'u':
			b.WriteString(t.luser)
		case 'i':
			b.WriteString(strconv.Itoa(os.Getuid()))
		default:
			return "", fmt.Errorf("%q uses the token %%%c, which rex does not know", s, s[i])
		}
	}
	return b.String(), nil
}

func expandTilde(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}

func yesNo(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "yes", "true":
		return true, true
	case "no", "false":
		return false, true
	}
	return false, false
}

// parseConfigTime reads an OpenSSH time: seconds, or a sequence such as
// "1m30s" with units s, m, h, d, w.
func parseConfigTime(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 || n > 1<<30 {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	var total time.Duration
	num := -1
	for _, c := range strings.ToLower(v) {
		if c >= '0' && c <= '9' {
			if num < 0 {
				num = 0
			}
			num = num*10 + int(c-'0')
			if num > 1<<30 {
				return 0, false
			}
			continue
		}
		if num < 0 {
			return 0, false
		}
		var unit time.Duration
		switch c {
		case 's':
			unit = time.Second
		case 'm':
			unit = time.Minute
		case 'h':
			unit = time.Hour
		case 'd':
			unit = 24 * time.Hour
		case 'w':
			unit = 7 * 24 * time.Hour
		default:
			return 0, false
		}
		if time.Duration(num) > (maxConfigTime-total)/unit {
			return 0, false // 2^30 weeks overflowed into a negative time
		}
		total += time.Duration(num) * unit
		num = -1
	}
	if num >= 0 {
		if time.Duration(num) > (maxConfigTime-total)/time.Second {
			return 0, false
		}
		total += time.Duration(num) * time.Second
	}
	return total, true
}

// maxConfigTime is the longest time ssh_config may give: OpenSSH's
// convtime refuses more than INT_MAX seconds.
const maxConfigTime = math.MaxInt32 * time.Second

// splitConfigList splits a space-separated ssh_config list whose items may
// be double-quoted.
func splitConfigList(v string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, c := range v {
		switch {
		case c == '"':
			inQuote = !inQuote
			have = true
		case (c == ' ' || c == '\t') && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(c)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// unwrapPath drops the path from an *fs.PathError, which the message
// already names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
