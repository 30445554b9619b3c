package rexd

import (
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rexconsole/rex/internal/protocol"
)

// What security.allow_commands and security.allow_shell mean, in one place.
//
// With allow_commands set, a program is found with rexd's own PATH (a
// request cannot bring one) and must be, by full path, one of the listed
// programs: a bare name in the list stands for what rexd's PATH finds for
// it, a path for itself. Paths are compared with their directories'
// symlinks resolved (/bin/sh is /usr/bin/sh on a merged /usr), but not the
// file's own: busybox's applets are all links to one file, and allowing
// `ls` must not allow `sh`. The environment variables that make a program
// load or run other code than the one allowed are refused in requests.
//
// With allow_shell false, shell: true, a known shell as the program (by the
// name it is run as and by the name of the file it is) and a terminal on
// the login shell are refused. That is about shells only: a program that
// starts others (env, python, find -exec) can still start one; to limit
// what runs at all, use allow_commands.

// knownShell reports whether name is a shell refused as a program when
// allow_shell is false. busybox and toybox are shells when run under that
// name.
func knownShell(name string) bool {
	switch name {
	case "sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "pdksh", "oksh", "lksh", "ash", "yash", "posh",
		"csh", "tcsh", "fish", "rc", "es", "nu", "elvish", "xonsh", "pwsh", "busybox", "toybox":
		return true
	}
	return false
}

// isShell reports whether path names a known shell: by its own name, or by
// the name of the file its symlinks lead to.
func isShell(path string) bool {
	name := strings.TrimPrefix(filepath.Base(path), "-") // "-bash": a login shell
	if knownShell(name) {
		return true
	}
	if real, err := filepath.EvalSymlinks(path); err == nil && knownShell(filepath.Base(real)) {
		return true
	}
	return false
}

// refusedEnv reports whether a request may not set the variable name when
// allow_commands is set: see protocol.CodeEnv.
func refusedEnv(name string) bool { return protocol.CodeEnv(name) }

// canonDir resolves the symlinks of path's directory, not of the file.
func canonDir(path string) string {
	dir, base := filepath.Split(filepath.Clean(path))
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return filepath.Join(dir, base)
}

// program finds the file argv0 runs, for a process whose working
// directory is cwd and environment env (as childEnv made it: under
// allow_commands its PATH is trustedPath's, worked out once per request).
// notFound is set when there is no such program (a launch failure,
// reported as exit 127); perr when policy refuses it.
func (s *Server) program(argv0, cwd string, env []string) (path string, notFound error, perr *protocol.Error) {
	list := s.cfg.AllowCommands
	pathEnv := envValue(env, "PATH")
	path, err := lookPath(argv0, pathEnv)
	if err == nil && !filepath.IsAbs(path) {
		path = filepath.Join(cwd, path)
	}
	if len(list) > 0 {
		var canon string
		if err == nil {
			canon = canonDir(path)
		}
		if err != nil || !s.allowed(canon, pathEnv) {
			if err != nil && !strings.Contains(argv0, "/") {
				if p, ferr := lookPath(argv0, os.Getenv("PATH")); ferr == nil {
					return "", nil, protocol.Errorf(protocol.CodeUnauthorized, map[string]any{"command": argv0, "path": p, "allowed": list, "reason": "writable_path"},
						"command %q is found only at %s, in a directory of rexd's PATH that clients can write through the allowed roots; list it by a full path outside the roots, or narrow the roots", argv0, p)
				}
			}
			return "", nil, protocol.Errorf(protocol.CodeUnauthorized, map[string]any{"command": argv0, "path": path, "allowed": list},
				"command %q is not in this rexd's allow list (security.allow_commands, matched by full path with rexd's own PATH)", argv0)
		}
		// Run the file that was checked: by the path as sent, a symlinked
		// directory on the way, switched after the check, would lead to
		// another.
		path = canon
	}
	if !s.cfg.AllowShell && (isShell(argv0) || err == nil && isShell(path)) {
		return "", nil, protocol.Errorf(protocol.CodeUnauthorized, map[string]string{"command": argv0, "reason": "shell_disabled"},
			"%s is a shell, and shells are disabled on this rexd (security.allow_shell = false); run the program itself", argv0)
	}
	if err != nil {
		return "", err, nil
	}
	return path, nil, nil
}

// allowed reports whether want (a path with its directories' symlinks
// resolved, canonDir) is one of allow_commands, by full path; bare names
// are looked up in pathEnv (trustedPath's).
func (s *Server) allowed(want, pathEnv string) bool {
	for _, a := range s.cfg.AllowCommands {
		p := a
		if !strings.Contains(a, "/") {
			found, err := lookPath(a, pathEnv)
			if err != nil {
				continue
			}
			p = found
		}
		if filepath.IsAbs(p) && canonDir(p) == want {
			return true
		}
	}
	return false
}

// trustedPath is rexd's PATH as allow_commands uses it: without the
// directories a client could put a program in, those inside the roots
// that rexd's user can write (~/.local/bin, with the home directory as the
// root), and without relative entries (the working directory, which a
// request picks). A bare name found only there is not found.
func (s *Server) trustedPath() string {
	var keep []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(d) {
			continue
		}
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue // not there now; a client may make it, and is then seen
		}
		if s.roots.holds(real) && unix.Access(real, unix.W_OK) == nil {
			continue
		}
		keep = append(keep, d)
	}
	return strings.Join(keep, string(os.PathListSeparator))
}

// childEnv is env as a process gets it: under allow_commands its PATH is
// trustedPath's, so an allowed script's `#!/usr/bin/env python3`, or a
// program an allowed one starts by name, finds nothing a client wrote into
// the roots either; and Python leaves out the user's site-packages
// (PYTHONNOUSERSITE), whose .pth files, in the home directory a client
// can write, every Python program runs at start.
func (s *Server) childEnv(env []string) []string {
	if len(s.cfg.AllowCommands) == 0 {
		return env
	}
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "PYTHONNOUSERSITE=") {
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+s.trustedPath(), "PYTHONNOUSERSITE=1")
}

// checkEnv refuses the variables a request may not set under an allow
// list.
func (s *Server) checkEnv(env map[string]string) *protocol.Error {
	if len(s.cfg.AllowCommands) == 0 {
		return nil
	}
	for k := range env {
		if refusedEnv(k) {
			return protocol.Errorf(protocol.CodeUnauthorized, map[string]string{"name": k, "reason": "env_refused"},
				"environment variable %s may not be set on this rexd: with security.allow_commands, requests cannot change PATH or what the loader and shells load (LD_*, DYLD_*, BASH_ENV, ENV, IFS, …)", k)
		}
	}
	return nil
}
