package devices

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Device is one registered machine. Its fields mirror a devices.json entry.
type Device struct {
	// Name is the key of the entry in devices.json.
	Name string
	// Host is "[user@]host" exactly as stored; see UserHost.
	Host string
	// Port is the SSH port; 0 means unset, so ~/.ssh/config or 22 applies.
	Port int
	// SSHKey is the private key path as stored; it may start with "~/",
	// which is expanded when the device is resolved (see Target.KeyPath),
	// so a registry kept in dotfiles works under any home directory.
	SSHKey string
	// Description is free text for people.
	Description string
	// Roots narrow what rexd may touch on the device: absolute paths, or
	// "~/..." in the remote user's home. Empty means the login user's
	// whole file system, as with ssh.
	Roots []string
	// Become starts the device's rexd through sudo, as BecomeUser (root
	// when empty); BecomeUser is also who --sudo becomes.
	Become     bool
	BecomeUser string

	// extra holds every field of the entry rex does not know (e.g.
	// "jump"), verbatim, so that a save never drops what a person wrote.
	extra map[string]json.RawMessage
}

// UserHost splits Host at its last '@', as ssh does.
func (d Device) UserHost() (user, host string) {
	if i := strings.LastIndexByte(d.Host, '@'); i >= 0 {
		return d.Host[:i], d.Host[i+1:]
	}
	return "", d.Host
}

// Addr is the device's address for people: user@host:port, with the parts
// that are set. An invalid entry shows as stored.
func (d Device) Addr() string {
	user, host, port, err := d.Endpoint()
	if err != nil {
		user, host = d.UserHost()
		port = d.Port
	}
	return FormatAddr(user, host, port)
}

// Extra returns a copy of the fields of the entry rex does not interpret.
func (d Device) Extra() map[string]json.RawMessage {
	return maps.Clone(d.extra)
}

// ExtraKeys lists the uninterpreted fields, sorted.
func (d Device) ExtraKeys() []string {
	return sortedKeys(d.extra)
}

// clone returns a copy that shares no maps or slices with d.
func (d Device) clone() Device {
	d.extra = maps.Clone(d.extra)
	d.Roots = slices.Clone(d.Roots)
	return d
}

// Validate checks a device against the rules applied on add: a valid,
// unreserved name, a safe host and user, a port in range, a usable key
// path and a description without control characters. Entries written by
// hand are loaded without this check; see Endpoint.
func (d Device) Validate() error {
	if err := ValidateName(d.Name); err != nil {
		return err
	}
	user, host, port, err := d.Endpoint()
	if err != nil {
		return err
	}
	if a, err := netip.ParseAddr(d.Name); err == nil {
		// Device names win over addresses in TARGETS: a device named
		// 10.0.0.9 must be the machine at 10.0.0.9.
		if h, err := netip.ParseAddr(host); err != nil || h != a {
			return fmt.Errorf("the name %q is an IP address, so rex run %s would reach %s instead; choose a name that is not an address, or give the device the host %s",
				d.Name, d.Name, FormatAddr(user, host, port), d.Name)
		}
	}
	if err := ValidateRoots(d.Roots); err != nil {
		return err
	}
	if d.BecomeUser != "" {
		if err := validateUser(d.BecomeUser); err != nil {
			return fmt.Errorf("become_user: %w", err)
		}
	}
	return validateText("description", d.Description)
}

// ValidateRoots checks a device's roots: each an absolute path on the
// device or one starting with "~/" (the remote user's home), without
// control characters.
func ValidateRoots(roots []string) error {
	for _, r := range roots {
		if err := validateText("root", r); err != nil {
			return err
		}
		if !(strings.HasPrefix(r, "/") || r == "~" || strings.HasPrefix(r, "~/")) {
			return fmt.Errorf("invalid root %q: write an absolute path on the device, or one starting with ~/", r)
		}
	}
	return nil
}

// SudoUser is who the device's rexd runs as under sudo: BecomeUser, or
// root.
func (d Device) SudoUser() string {
	if d.BecomeUser != "" {
		return d.BecomeUser
	}
	return "root"
}

// Endpoint is where to connect: the user and host from Host and the port
// from Port, or from Host when written there ("db.lan:2200"). It checks
// what connecting depends on (host, user, port, key path) and nothing
// else, so a hand-written entry with, say, an odd name still works.
func (d Device) Endpoint() (user, host string, port int, err error) {
	user, host, port, err = ParseHost(d.Host)
	if err != nil {
		return "", "", 0, err
	}
	if d.Port != 0 {
		if err := ValidatePort(d.Port); err != nil {
			return "", "", 0, err
		}
		if port != 0 && port != d.Port {
			return "", "", 0, fmt.Errorf("the host names port %d but the port is %d; keep one of them", port, d.Port)
		}
		port = d.Port
	}
	if err := validateKeyPath(d.SSHKey); err != nil {
		return "", "", 0, err
	}
	return user, host, port, nil
}

// NewDevice builds a device from what an operator types:
// NAME [USER@]HOST[:PORT] with an optional port, key path and description.
// The host is stored as "[user@]host"; a port written in the host moves to
// Port. The key path must be absolute or start with "~/"; it is stored as
// written, see Device.SSHKey.
func NewDevice(name, hostSpec string, port int, keyPath, description string) (Device, error) {
	if err := ValidateName(name); err != nil {
		return Device{}, err
	}
	// Every host form TARGETS accepts: ssh://[user@]host[:port] too.
	if rest, ok := strings.CutPrefix(hostSpec, "ssh://"); ok {
		hostSpec = strings.TrimSuffix(rest, "/")
	}
	user, host, specPort, err := ParseHost(hostSpec)
	if err != nil {
		return Device{}, err
	}
	if port != 0 {
		if err := ValidatePort(port); err != nil {
			return Device{}, err
		}
		if specPort != 0 && specPort != port {
			return Device{}, fmt.Errorf("%q names port %d but --port says %d; give the port once", hostSpec, specPort, port)
		}
	} else {
		port = specPort
	}
	d := Device{Name: name, Host: host, Port: port, SSHKey: keyPath, Description: description}
	if user != "" {
		d.Host = user + "@" + host
	}
	if err := d.Validate(); err != nil {
		return Device{}, err
	}
	return d, nil
}

// Reserved target names, which no device or group may take.
const (
	// All names every registered device.
	All = "all"
	// Local names the operator's own machine, reached without SSH.
	Local = "local"
)

// maxName bounds names and hosts so that a pasted blob is refused early.
const maxName = 255

// ValidateName checks a device or group name: letters, digits, '.', '_' and
// '-', starting with a letter or digit, and not a reserved word.
func ValidateName(name string) error {
	if name == "" {
		return errors.New("the name is empty; use letters, digits, '.', '_' and '-'")
	}
	if len(name) > maxName {
		return fmt.Errorf("the name is %d bytes long; use at most %d", len(name), maxName)
	}
	for i, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i > 0 {
			ok = ok || c == '_' || c == '.' || c == '-'
		}
		if !ok {
			return fmt.Errorf("invalid name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", name)
		}
	}
	switch strings.ToLower(name) {
	case All:
		return fmt.Errorf("%q is reserved (it means every device); choose another name", name)
	case Local:
		return fmt.Errorf("%q is reserved (it means this machine); choose another name", name)
	}
	return nil
}

// ValidatePort checks that p is a TCP port, 1–65535.
func ValidatePort(p int) error {
	if p < 1 || p > 65535 {
		return fmt.Errorf("invalid port %d: use a number from 1 to 65535", p)
	}
	return nil
}

// ParsePort parses a port as typed by an operator: decimal digits only.
func ParsePort(s string) (int, error) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("invalid port %q: use a number from 1 to 65535", s)
	}
	p, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("invalid port %q: use a number from 1 to 65535", s)
	}
	return p, ValidatePort(p)
}

// ParseHost parses "[user@]host[:port]", "[user@][ipv6]:port" and
// "[user@]ipv6". The user is everything before the last '@', as in ssh.
// Port is 0 when none is written. Brackets are removed from IPv6 hosts.
//
// Hosts may hold letters, digits, '.', '-', '_' and, for IPv6, ':' and '%';
// users the same plus '@'. Neither may start with '-' (it would read as an
// ssh option) and neither may hold whitespace, control characters or shell
// metacharacters, which OpenSSH itself refuses since CVE-2023-51385.
func ParseHost(spec string) (user, host string, port int, err error) {
	if strings.TrimSpace(spec) == "" {
		return "", "", 0, errors.New("the host is empty; give a host name or address such as root@10.0.0.5")
	}
	rest := spec
	if i := strings.LastIndexByte(spec, '@'); i >= 0 {
		user, rest = spec[:i], spec[i+1:]
		if err := validateUser(user); err != nil {
			return "", "", 0, err
		}
	}
	switch {
	case strings.HasPrefix(rest, "["):
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return "", "", 0, fmt.Errorf("invalid host %q: '[' has no matching ']'; write IPv6 addresses as [::1]:22", spec)
		}
		host = rest[1:end]
		if a, perr := netip.ParseAddr(host); perr != nil || !a.Is6() {
			return "", "", 0, fmt.Errorf("invalid host %q: brackets are only for IPv6 addresses, as in [::1]:22", spec)
		}
		after := rest[end+1:]
		if after != "" {
			p, ok := strings.CutPrefix(after, ":")
			if !ok {
				return "", "", 0, fmt.Errorf("invalid host %q: only \":PORT\" may follow ']'", spec)
			}
			if port, err = ParsePort(p); err != nil {
				return "", "", 0, err
			}
		}
	case strings.Count(rest, ":") == 1:
		var p string
		host, p, _ = strings.Cut(rest, ":")
		if port, err = ParsePort(p); err != nil {
			return "", "", 0, err
		}
	case strings.Count(rest, ":") > 1:
		if _, perr := netip.ParseAddr(rest); perr != nil {
			return "", "", 0, fmt.Errorf("invalid host %q: it is not an IPv6 address; write a port as host:22 or [::1]:22", spec)
		}
		host = rest
	default:
		host = rest
	}
	if err := validateHostname(host); err != nil {
		return "", "", 0, err
	}
	return user, host, port, nil
}

// FormatAddr writes user@host:port with the parts that are set, bracketing
// an IPv6 host when a port follows it.
func FormatAddr(user, host string, port int) string {
	var b strings.Builder
	if user != "" {
		b.WriteString(user)
		b.WriteByte('@')
	}
	if port != 0 {
		if strings.Contains(host, ":") {
			b.WriteString("[" + host + "]")
		} else {
			b.WriteString(host)
		}
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(port))
	} else {
		b.WriteString(host)
	}
	return b.String()
}

func validateHostname(host string) error {
	if host == "" {
		return errors.New("the host is empty; give a host name or address such as root@10.0.0.5")
	}
	if len(host) > maxName {
		return fmt.Errorf("the host is %d bytes long; use at most %d", len(host), maxName)
	}
	if !utf8.ValidString(host) {
		return fmt.Errorf("invalid host %q: it is not valid UTF-8", host)
	}
	if host[0] == '-' {
		return fmt.Errorf("invalid host %q: a host must not start with '-'", host)
	}
	for _, r := range host {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("invalid host %q: a host must not contain spaces or control characters", host)
		}
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(".-_:%", r)) {
			return fmt.Errorf("invalid host %q: %q cannot appear in a host name; use letters, digits, '.', '-' and '_'", host, r)
		}
	}
	return nil
}

func validateUser(user string) error {
	if user == "" {
		return errors.New("the user before '@' is empty; write user@host or just host")
	}
	if len(user) > maxName {
		return fmt.Errorf("the user is %d bytes long; use at most %d", len(user), maxName)
	}
	if !utf8.ValidString(user) {
		return fmt.Errorf("invalid user %q: it is not valid UTF-8", user)
	}
	if user[0] == '-' {
		return fmt.Errorf("invalid user %q: a user must not start with '-'", user)
	}
	for _, r := range user {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("invalid user %q: a user must not contain spaces or control characters", user)
		}
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(".-_@", r)) {
			return fmt.Errorf("invalid user %q: %q cannot appear in a user name; use letters, digits, '.', '-' and '_'", user, r)
		}
	}
	return nil
}

// validateKeyPath accepts "", an absolute path or one starting with "~/".
func validateKeyPath(p string) error {
	if p == "" {
		return nil
	}
	if err := validateText("key path", p); err != nil {
		return err
	}
	if p == "~" || strings.HasPrefix(p, "~/") || filepath.IsAbs(p) {
		return nil
	}
	if strings.HasPrefix(p, "~") {
		return fmt.Errorf("invalid key path %q: only \"~/\" (your own home) is expanded; write the full path", p)
	}
	return fmt.Errorf("invalid key path %q: write an absolute path or one starting with ~/", p)
}

func validateText(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("the %s is not valid UTF-8; retype it", what)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("the %s contains a control character (%U); remove it", what, r)
		}
	}
	return nil
}

// ExpandKeyPath turns a stored key path into one ssh can open: "~/" becomes
// home. Other paths are returned cleaned.
func ExpandKeyPath(p, home string) (string, error) {
	if p == "" {
		return "", nil
	}
	if err := validateKeyPath(p); err != nil {
		return "", err
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home == "" || !filepath.IsAbs(home) {
			return "", fmt.Errorf("cannot expand %q: the home directory is unknown; set HOME or write the full path", p)
		}
		return filepath.Join(home, p[1:]), nil
	}
	return filepath.Clean(p), nil
}
