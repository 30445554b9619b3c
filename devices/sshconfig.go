package devices

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SSHConfig is what rex reads of an ssh_config file for TARGETS and
// `rex device import ssh-config`: its Host blocks, Include directives
// followed, in file order. (Dialing reads ssh_config on its own, in sshx.)
type SSHConfig struct {
	blocks []sshBlock
	files  int    // files read, Includes counted
	home   string // the local home, for IdentityFile's %d
}

type sshBlock struct {
	patterns []string // nil for a Match block, which rex never applies here
	match    bool
	// outer are the Host patterns of the blocks the Include that read this
	// block sits in, outermost first: the block applies only where every
	// one of them does, as in OpenSSH.
	outer [][]string
	kv    [][2]string
}

// maxSSHConfigDepth bounds nested Includes, as OpenSSH does;
// maxSSHConfigFiles bounds the files read in all, which depth alone does
// not: a file that includes itself twice is read 2^16 times.
const (
	maxSSHConfigDepth = 16
	maxSSHConfigFiles = 256
)

// ParseSSHConfig reads the ssh_config at path. A relative Include is
// looked up in home/.ssh, as OpenSSH does for a user's file. A missing
// file is an empty config.
func ParseSSHConfig(path, home string) (*SSHConfig, error) {
	c := &SSHConfig{home: home}
	if err := c.read(path, home, 0, true, nil, false); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *SSHConfig) read(path, home string, depth int, top bool, outer [][]string, inMatch bool) error {
	if depth > maxSSHConfigDepth {
		return fmt.Errorf("%s: Include nests deeper than %d files; check for a loop", path, maxSSHConfigDepth)
	}
	if c.files++; c.files > maxSSHConfigFiles {
		return fmt.Errorf("%s: Includes read more than %d files; check for a file included more than once", path, maxSSHConfigFiles)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if top && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("read %s: %w", path, unwrapPathError(err))
	}
	// Settings before the first Host line apply to every host.
	if top {
		c.blocks = append(c.blocks, sshBlock{patterns: []string{"*"}})
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		key, args := splitSSHLine(sc.Text())
		if key == "" {
			continue
		}
		switch strings.ToLower(key) {
		case "host":
			c.blocks = append(c.blocks, sshBlock{patterns: args, outer: outer, match: inMatch})
		case "match":
			c.blocks = append(c.blocks, sshBlock{match: true, outer: outer})
		case "include":
			// The included files sit in the current block: their Host
			// blocks apply only where it does, and the lines after the
			// Include belong to it again (OpenSSH restores its state).
			cur := c.blocks[len(c.blocks)-1]
			inner := append(slices.Clip(cur.outer), cur.patterns)
			for _, pat := range args {
				p := expandTildeHome(pat, home)
				if !filepath.IsAbs(p) {
					p = filepath.Join(home, ".ssh", p)
				}
				files, err := filepath.Glob(p)
				if err != nil {
					return fmt.Errorf("%s:%d: Include %s: %v", path, n, pat, err)
				}
				for _, f := range files {
					n := len(c.blocks)
					if err := c.read(f, home, depth+1, false, inner, cur.match); err != nil {
						return err
					}
					if len(c.blocks) > n {
						c.blocks = append(c.blocks, sshBlock{patterns: cur.patterns, outer: cur.outer, match: cur.match})
					}
				}
			}
		default:
			if len(c.blocks) == 0 {
				c.blocks = append(c.blocks, sshBlock{patterns: []string{"*"}})
			}
			b := &c.blocks[len(c.blocks)-1]
			b.kv = append(b.kv, [2]string{strings.ToLower(key), strings.Join(args, " ")})
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// splitSSHLine splits "Key value..." or "Key=value"; quotes group words.
func splitSSHLine(line string) (string, []string) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return "", nil
	}
	var words []string
	var cur strings.Builder
	inQuote, have, sawEq := false, false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		// One '=' may stand between the keyword and its value, with or
		// without spaces around it ("Port = 22"), as in OpenSSH.
		eq := ch == '=' && !sawEq && (len(words) == 0 || len(words) == 1 && !have)
		switch {
		case ch == '"':
			inQuote, have = !inQuote, true
		case !inQuote && (ch == ' ' || ch == '\t' || eq):
			if eq {
				sawEq = true
			}
			if have {
				words = append(words, cur.String())
				cur.Reset()
				have = false
			}
		case !inQuote && ch == '#' && !have:
			i = len(line)
		default:
			cur.WriteByte(ch)
			have = true
		}
	}
	if have {
		words = append(words, cur.String())
	}
	if len(words) == 0 || words[0] == "" {
		// An empty keyword ("" x) names no setting; the line says nothing.
		return "", nil
	}
	return words[0], words[1:]
}

func expandTildeHome(p, home string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
		return filepath.Join(home, rest)
	}
	return p
}

// Aliases lists the explicit Host names (no wildcard, no negation), in the
// order they first appear.
func (c *SSHConfig) Aliases() []string {
	var out []string
	seen := map[string]bool{}
	for _, b := range c.blocks {
		for _, p := range b.patterns {
			if strings.ContainsAny(p, "*?!") || seen[p] || b.match || !outerMatches(b.outer, p) {
				continue
			}
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// Get returns key's value for alias as OpenSSH reads it: from the first
// Host block that matches and sets it. Match blocks are not applied.
func (c *SSHConfig) Get(alias, key string) string {
	key = strings.ToLower(key)
	for _, b := range c.blocks {
		if b.match || !hostMatches(b.patterns, alias) || !outerMatches(b.outer, alias) {
			continue
		}
		for _, kv := range b.kv {
			if kv[0] == key {
				return kv[1]
			}
		}
	}
	return ""
}

// outerMatches reports whether every enclosing block of an Include applies
// to host.
func outerMatches(outer [][]string, host string) bool {
	for _, patterns := range outer {
		if patterns == nil || !hostMatches(patterns, host) {
			return false
		}
	}
	return true
}

// hostMatches applies a Host line's patterns: some pattern matches and no
// negated one does.
func hostMatches(patterns []string, host string) bool {
	ok := false
	for _, p := range patterns {
		if neg, isNeg := strings.CutPrefix(p, "!"); isNeg {
			if wildMatch(neg, host) {
				return false
			}
			continue
		}
		if wildMatch(p, host) {
			ok = true
		}
	}
	return ok
}

// wildMatch matches ssh_config's * and ? wildcards, case-insensitively as
// OpenSSH matches host names.
func wildMatch(pattern, s string) bool {
	pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for pattern != "" && pattern[0] == '*' {
				pattern = pattern[1:]
			}
			if pattern == "" {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if wildMatch(pattern, s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
		default:
			if s == "" || s[0] != pattern[0] {
				return false
			}
		}
		pattern, s = pattern[1:], s[1:]
	}
	return s == ""
}
