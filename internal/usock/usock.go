// Package usock keeps Unix sockets in private directories: a directory
// made 0700 and checked (not a symlink, this user's, mode 0700) before any
// use, sockets bound and dialled through a handle on that very directory,
// and the uid of the process at the other end of a connection. rexd keeps
// resumable sessions' sockets this way, and rex its per-user server's.
package usock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Dir is an open private directory. Names in it are reached through the
// open handle (/proc/self/fd/N/NAME), so a directory swapped in after the
// check is never used, and a socket's path is short whatever the
// directory's.
type Dir struct {
	f    *os.File
	path string
}

// ErrUnsafe is wrapped by the error of a directory that fails the checks.
var ErrUnsafe = errors.New("unsafe directory")

// OpenPrivate creates dir when missing (its missing parents too, 0700) and
// checks it without following a symlink: it must be a directory owned by
// this user with mode 0700. Our own directory with a looser mode is
// tightened; anything else is refused with one sentence that says why.
func OpenPrivate(dir string) (*Dir, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("socket directory %s is not an absolute path", dir)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Dir(dir), err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create socket directory %s: %w", dir, err)
	}
	if err := check(dir); err != nil {
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open socket directory %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	// The handle is what is used from now on: check it once more, so a
	// directory swapped in between the lstat and the open is refused.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("check socket directory %s: %w", dir, err)
	}
	if err := judge(dir, &st, true); err != nil {
		f.Close()
		return nil, err
	}
	return &Dir{f: f, path: dir}, nil
}

// check lstats dir and judges it; our own directory with a looser mode
// is tightened first.
func check(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("check socket directory %s: %w", dir, err)
	}
	if err := judge(dir, &st, false); err != nil {
		return err
	}
	if st.Mode&0o777 == 0o700 {
		return nil
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("%w: %s has mode %#o and cannot be made 0700: %v", ErrUnsafe, dir, st.Mode&0o777, err)
	}
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("check socket directory %s: %w", dir, err)
	}
	return judge(dir, &st, true)
}

func judge(dir string, st *unix.Stat_t, strict bool) error {
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("%w: %s is a symlink; remove it, rex makes the directory itself", ErrUnsafe, dir)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%w: %s is not a directory; remove it, rex makes the directory itself", ErrUnsafe, dir)
	case st.Uid != uint32(os.Getuid()):
		return fmt.Errorf("%w: %s belongs to uid %d, not to you (uid %d); another user may be trying to catch your sessions: remove it", ErrUnsafe, dir, st.Uid, os.Getuid())
	case st.Mode&0o777 != 0o700 && strict:
		return fmt.Errorf("%w: %s has mode %#o; it must be 0700", ErrUnsafe, dir, st.Mode&0o777)
	}
	return nil
}

// Path is the directory's path as given.
func (d *Dir) Path() string { return d.path }

// name is how NAME in the directory is reached: through the open handle
// where /proc is mounted, else by its path.
func (d *Dir) name(name string) string {
	if _, err := os.Stat("/proc/self/fd"); err == nil {
		return "/proc/self/fd/" + strconv.Itoa(int(d.f.Fd())) + "/" + name
	}
	return filepath.Join(d.path, name)
}

// Listen binds a socket NAME in the directory, made 0600. The listener does
// not remove the socket when closed: Remove does, by name.
func (d *Dir) Listen(name string) (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: d.name(name), Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", filepath.Join(d.path, name), err)
	}
	ln.SetUnlinkOnClose(false)
	if err := unix.Fchmodat(int(d.f.Fd()), name, 0o600, 0); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		ln.Close()
		d.Remove(name)
		return nil, fmt.Errorf("listen on %s: %w", filepath.Join(d.path, name), err)
	}
	return ln, nil
}

// Dial connects to the socket NAME in the directory and checks that the
// process listening on it runs as this user.
func (d *Dir) Dial(ctx context.Context, name string) (*net.UnixConn, error) {
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "unix", d.name(name))
	if err != nil {
		return nil, err
	}
	uc := c.(*net.UnixConn)
	if err := SameUser(uc); err != nil {
		uc.Close()
		return nil, err
	}
	return uc, nil
}

// Remove removes NAME from the directory; a missing one is no error.
func (d *Dir) Remove(name string) error {
	err := unix.Unlinkat(int(d.f.Fd()), name, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// ReadFile reads NAME from the directory (without following a symlink).
func (d *Dir) ReadFile(name string) ([]byte, error) {
	fd, err := unix.Openat(int(d.f.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(d.path, name), Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var b []byte
	buf := make([]byte, 4096)
	for len(b) < 1<<20 {
		n, err := f.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil {
			break
		}
	}
	return b, nil
}

// WriteFile writes NAME in the directory atomically (a temporary name,
// then a rename), mode 0600.
func (d *Dir) WriteFile(name string, data []byte) error {
	return d.writeVia(name, data, func(tmp string) error {
		return unix.Renameat(int(d.f.Fd()), tmp, int(d.f.Fd()), name)
	})
}

// WriteFileNew writes NAME in the directory, mode 0600, unless it exists:
// written under a temporary name, then linked to NAME (which fails when
// NAME exists, with an error wrapping os.ErrExist), so a reader never sees
// it half written and a file there is never replaced.
func (d *Dir) WriteFileNew(name string, data []byte) error {
	return d.writeVia(name, data, func(tmp string) error {
		err := unix.Linkat(int(d.f.Fd()), tmp, int(d.f.Fd()), name, 0)
		// Linked or not, the temporary name goes.
		unix.Unlinkat(int(d.f.Fd()), tmp, 0)
		return err
	})
}

// writeVia writes data to a temporary name next to NAME and has place
// put it at NAME; the temporary is removed when that fails.
func (d *Dir) writeVia(name string, data []byte, place func(tmp string) error) error {
	tmp := ".tmp-" + strconv.Itoa(os.Getpid()) + "-" + name
	fd, err := unix.Openat(int(d.f.Fd()), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(d.path, name), err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = place(tmp)
	}
	if err != nil {
		unix.Unlinkat(int(d.f.Fd()), tmp, 0)
		return fmt.Errorf("write %s: %w", filepath.Join(d.path, name), err)
	}
	return nil
}

// Fd is the directory's descriptor (for *at calls next to the sockets).
func (d *Dir) Fd() uintptr { return d.f.Fd() }

// Close releases the directory handle.
func (d *Dir) Close() error { return d.f.Close() }

// PeerUID is the uid of the process at the other end of c (SO_PEERCRED on
// Linux, LOCAL_PEERCRED on macOS and the BSDs).
func PeerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var uid uint32
	var cerr error
	err = raw.Control(func(fd uintptr) {
		uid, cerr = peerUID(int(fd))
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("read the peer's credentials: %w", err)
	}
	return uid, nil
}

// ErrOtherUser is wrapped by SameUser's error.
var ErrOtherUser = errors.New("peer runs as another user")

// SameUser checks that the process at the other end of c runs as this
// user.
func SameUser(c *net.UnixConn) error {
	uid, err := PeerUID(c)
	if err != nil {
		return err
	}
	if uid != uint32(os.Getuid()) {
		return fmt.Errorf("%w: uid %d, not %d", ErrOtherUser, uid, os.Getuid())
	}
	return nil
}

// IsStale reports whether err, from Dial, means that no process listens on
// the socket any more (its owner died without removing it).
func IsStale(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}

// IsMissing reports whether err, from Dial, means there is no such socket.
func IsMissing(err error) bool {
	return errors.Is(err, syscall.ENOENT)
}
