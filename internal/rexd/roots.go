package rexd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rexconsole/rex/internal/protocol"
)

// allowedRoot is one directory a session may touch. Access goes through an
// os.Root, so neither ".." nor a symlink can lead outside it, whatever the
// path string looks like.
type allowedRoot struct {
	// path is the root with symlinks resolved; alias is the spelling it was
	// configured with, when different (e.g. /home/u vs /usr/home/u).
	path  string
	alias string
	dir   *os.Root
}

// rootSet is the ordered list of roots of a server or a session.
type rootSet []*allowedRoot

// openRoots resolves and opens the configured roots.
func openRoots(paths []string) (rootSet, error) {
	var rs rootSet
	for _, p := range paths {
		p = expandHome(p)
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("allowed root %q must be an absolute path", p)
		}
		// "/" is allowed: rex passes it for a device that names no roots,
		// so the operator reaches what the login user can, as with ssh.
		clean := filepath.Clean(p)
		resolved, err := filepath.EvalSymlinks(clean)
		if err != nil {
			return nil, fmt.Errorf("allowed root %s: %w", clean, err)
		}
		d, err := os.OpenRoot(resolved)
		if err != nil {
			return nil, fmt.Errorf("allowed root %s: %w", clean, err)
		}
		r := &allowedRoot{path: resolved, dir: d}
		if clean != resolved {
			r.alias = clean
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// holds reports whether the absolute path p (its symlinks resolved) lies
// in one of the roots.
func (rs rootSet) holds(p string) bool {
	for _, r := range rs {
		if r.path == "/" || p == r.path || strings.HasPrefix(p, r.path+"/") {
			return true
		}
	}
	return false
}

func (rs rootSet) close() {
	for _, r := range rs {
		r.dir.Close()
	}
}

// paths lists the roots as reported to clients.
func (rs rootSet) paths() []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.path)
	}
	return out
}

// home is where a session starts: the user's home directory when it lies
// inside the roots (so relative paths start there, as over ssh), else the
// first root.
func (rs rootSet) home() string {
	if h, err := os.UserHomeDir(); err == nil {
		if r, perr := rs.resolve(h, "/"); perr == nil {
			return r.abs
		}
	}
	return rs[0].path
}

// expandHome turns "~" and "~/x" into the user's home directory.
func expandHome(p string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return filepath.Join(home, p[1:])
}

// within reports whether p (clean, absolute) is base or below it, and the
// relative path from base.
func within(base, p string) (string, bool) {
	rel, err := filepath.Rel(base, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// resolved is a path checked against the roots: the root it lies in, the
// path relative to that root, and the absolute path shown to clients.
type resolved struct {
	root *allowedRoot
	rel  string
	abs  string
}

// resolve places a client path inside the roots. Relative paths are taken
// from cwd; "~" means the home directory. The check here is lexical; the
// os.Root used for the actual access refuses symlinks that lead outside.
func (rs rootSet) resolve(p, cwd string) (resolved, *protocol.Error) {
	if p == "" {
		return resolved{}, protocol.Errorf(protocol.CodeInvalidParams, nil, "path is empty")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return resolved{}, protocol.Errorf(protocol.CodeInvalidParams, nil, "path contains a NUL byte")
	}
	p = expandHome(p)
	if !filepath.IsAbs(p) {
		p = filepath.Join(cwd, p)
	}
	p = filepath.Clean(p)
	var best resolved
	bestLen := -1
	for _, r := range rs {
		for _, base := range []string{r.path, r.alias} {
			if base == "" {
				continue
			}
			if rel, ok := within(base, p); ok && len(base) > bestLen {
				best = resolved{root: r, rel: rel, abs: filepath.Join(r.path, rel)}
				bestLen = len(base)
			}
		}
	}
	if bestLen < 0 {
		return resolved{}, rs.forbidden(p, "outside the allowed roots")
	}
	return best, nil
}

func (rs rootSet) forbidden(p, reason string) *protocol.Error {
	return protocol.Errorf(protocol.CodeForbiddenPath,
		protocol.ForbiddenPathData{Path: p, AllowedRoots: rs.paths(), Reason: reason},
		"Path is outside allowed roots: %s (%s)", p, reason)
}

// isEscape reports whether err is os.Root refusing a path that leads
// outside the root (through ".." after a symlink, or an absolute or
// escaping symlink). The os package does not export the sentinel.
func isEscape(err error) bool {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// fsError turns an error of a file operation on rp into a protocol error.
func (rs rootSet) fsError(op string, rp resolved, err error) *protocol.Error {
	switch {
	case isEscape(err):
		return rs.forbidden(rp.abs, "a symbolic link leads outside the allowed roots")
	case errors.Is(err, fs.ErrNotExist):
		return protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"path": rp.abs, "reason": "not_found"},
			"%s %s: no such file or directory", op, rp.abs)
	case errors.Is(err, fs.ErrPermission):
		return protocol.Errorf(protocol.CodeUnauthorized, map[string]string{"path": rp.abs, "reason": "permission_denied"},
			"%s %s: permission denied", op, rp.abs)
	default:
		return protocol.Errorf(protocol.CodeInternalError, map[string]string{"path": rp.abs},
			"%s %s: %v", op, rp.abs, err)
	}
}

// narrow opens session roots that must each lie inside the server's roots.
func (rs rootSet) narrow(paths []string) (rootSet, *protocol.Error) {
	var out rootSet
	for _, p := range paths {
		rp, perr := rs.resolve(p, "/")
		if perr != nil {
			out.close()
			return nil, perr
		}
		d, err := openSubRoot(rp.root.dir, relOrDot(rp.rel))
		if err != nil {
			out.close()
			return nil, rs.fsError("open workspace root", rp, err)
		}
		// The physical path, for lexical checks of later requests.
		real, err := filepath.EvalSymlinks(rp.abs)
		if err != nil {
			d.Close()
			out.close()
			return nil, rs.fsError("open workspace root", rp, err)
		}
		if _, ok := rs.resolve(real, "/"); ok != nil {
			d.Close()
			out.close()
			return nil, rs.forbidden(p, "a symbolic link leads outside the allowed roots")
		}
		r := &allowedRoot{path: real, dir: d}
		if rp.abs != real {
			r.alias = rp.abs
		}
		out = append(out, r)
	}
	return out, nil
}

func relOrDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// followLink resolves rp's last component while it is a symbolic link, to
// the path it names (within the roots), so that a replace writes the file
// a link points to rather than replacing the link. A path that is not a
// link, or does not exist, is returned as it is.
func (rs rootSet) followLink(rp resolved) (resolved, *protocol.Error) {
	for range 40 {
		if rp.rel == "." || rp.rel == "" {
			return rp, nil
		}
		fi, err := rp.root.dir.Lstat(rp.rel)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return rp, nil
		}
		target, err := rp.root.dir.Readlink(rp.rel)
		if err != nil {
			return resolved{}, rs.fsError("write", rp, err)
		}
		if !filepath.IsAbs(target) {
			// From the directory the link is in, as the kernel takes it:
			// with a symlink on the way there, ".." in the target leads
			// elsewhere than the path as sent says. (The result is placed
			// in the roots and opened through them like any path.)
			dir := filepath.Dir(rp.abs)
			if real, err := filepath.EvalSymlinks(dir); err == nil {
				dir = real
			}
			target = filepath.Join(dir, target)
		}
		next, perr := rs.resolve(target, "/")
		if perr != nil {
			return resolved{}, rs.forbidden(rp.abs, "a symbolic link leads outside the allowed roots")
		}
		rp = next
	}
	return resolved{}, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"path": rp.abs},
		"write %s: too many levels of symbolic links", rp.abs)
}
