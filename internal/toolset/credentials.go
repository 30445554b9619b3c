package toolset

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// The read-only file tools run without asking, and what they return goes
// to the model's provider. So they do not read where credentials live, on
// any host: docs/agent.md promises the operator's keys are never sent.
// A command that reads one (bash) asks the operator first.

// credentialDirs hold credentials wherever they lie (a user's home,
// /root, a copied profile): everything below them is refused, except the
// public files credentialDirOK names.
func credentialDirs() []string {
	return []string{".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker"}
}

// credentialFiles are base names (path.Match patterns) of files that hold
// credentials: rex's own device registry and secrets store among them,
// and a process's environment (/proc/PID/environ: on local, root /, the
// operator may read every process of theirs, rex's own with
// REX_SECRETS_PASSPHRASE among them).
func credentialFiles() []string {
	return []string{".netrc", ".pgpass", ".git-credentials", "shadow", "gshadow", "ssh_host_*_key",
		"devices.json", "secrets.age", "environ"}
}

// credentialDirOK says a file directly in a credential directory is public
// material a read may show: an SSH public key, authorized_keys.
func credentialDirOK(dir, base string) bool {
	return dir == ".ssh" && (strings.HasSuffix(base, ".pub") || base == "authorized_keys")
}

// credential says why p, a clean slash path, is not read by the file
// tools, or "" when it may be. The rule is on the path's names, so it
// holds for every host and home; on local, the caller also checks the
// path with its symbolic links resolved.
func credential(p string) string {
	elems := strings.Split(strings.Trim(p, "/"), "/")
	base := elems[len(elems)-1]
	for i, e := range elems {
		for _, d := range credentialDirs() {
			if e != d {
				continue
			}
			if i == len(elems)-2 && credentialDirOK(d, base) {
				return ""
			}
			return d + " holds credentials"
		}
	}
	for _, f := range credentialFiles() {
		if ok, _ := path.Match(f, base); ok {
			return base + " holds credentials"
		}
	}
	return ""
}

// grepExcludes keep grep -r out of the same places. grep matches them on
// base names, and does not follow symbolic links below the path it is
// given (checked with credential beforehand).
func grepExcludes() []string {
	var args []string
	for _, d := range credentialDirs() {
		args = append(args, "--exclude-dir="+d)
	}
	for _, f := range credentialFiles() {
		args = append(args, "--exclude="+f)
	}
	return args
}

// credentialPath checks a path a file tool was given on a host whose
// session starts in cwd. On local, rex's own machine, it also checks the
// path with its symbolic links resolved. The error is the sentence the
// model reads.
func credentialPath(p, cwd string, local bool) error {
	abs := p
	if rest, ok := strings.CutPrefix(abs, "~"); ok && (rest == "" || rest[0] == '/') {
		abs = path.Join(cwd, rest) // the names are what matter, not whose home
	} else if !path.IsAbs(abs) {
		abs = path.Join(cwd, abs)
	}
	abs = path.Clean(abs)
	candidates := []string{abs}
	if local {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			candidates = append(candidates, filepath.ToSlash(real))
		}
	}
	for _, c := range candidates {
		if why := credential(c); why != "" {
			return fmt.Errorf("%s is not read by the file tools: %s, and what they read goes to the model's provider without asking; if it is needed, read it with bash, which asks the operator", p, why)
		}
	}
	return nil
}
