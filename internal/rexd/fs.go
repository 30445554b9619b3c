package rexd

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// Listing and globbing bounds: a request may ask for less, never more.
const (
	defaultMaxEntries = 10000
	hardMaxEntries    = 100000
	defaultMaxMatches = 1000
	hardMaxMatches    = 100000
	// globWalkBudget bounds the entries a glob may visit.
	globWalkBudget = 1_000_000
	// maxGlobSegments bounds a glob pattern's segments below its literal
	// directory (runs of "**" counted once).
	maxGlobSegments = 256
)

func mtimeString(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return protocol.TypeFile
	case m.IsDir():
		return protocol.TypeDir
	case m&fs.ModeSymlink != 0:
		return protocol.TypeSymlink
	default:
		return protocol.TypeOther
	}
}

func (c *conn) fsRead(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.FSReadParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	if e := c.session(req, p.SessionID); e != nil {
		return nil, e
	}
	s := req.session
	if p.Encoding != "" && p.Encoding != protocol.EncodingUTF8 && p.Encoding != protocol.EncodingBase64 {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "encoding must be utf8 or base64")
	}
	if p.Offset < 0 || (p.Length != nil && *p.Length < 0) {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "offset and length must not be negative")
	}
	rp, perr := s.roots.resolve(p.Path, s.cwd)
	if perr != nil {
		return nil, perr
	}
	f, fi, perr := openRegular(s, rp, "read")
	if perr != nil {
		return nil, perr
	}
	defer f.Close()
	limit := int64(maxReadChunk)
	if want := s.limits.MaxFileReadBytes; want > 0 && want < limit {
		limit = want
	}
	if p.Length != nil && *p.Length < limit {
		limit = *p.Length
	}
	buf, more, err := readChunked(ctx, f, p.Offset, limit, fi.Size())
	if err != nil {
		if ctx.Err() != nil {
			return nil, c.cancelled(req)
		}
		return nil, s.roots.fsError("read", rp, err)
	}
	res := protocol.FSReadResult{
		Path:      rp.abs,
		Size:      fi.Size(),
		Mtime:     mtimeString(fi.ModTime()),
		Truncated: more,
	}
	if p.Encoding == protocol.EncodingBase64 {
		res.Content, res.Encoding = encodeBase64(buf), protocol.EncodingBase64
	} else {
		res.Content, res.Encoding = protocol.EncodeData(buf)
	}
	return res, nil
}

// maxReadChunk is the most one fs.read returns, whatever the limits say: in
// base64 it still fits a 16 MiB line. A client reads on from offset while
// truncated is true, so a large file streams through in pieces and rexd
// never holds more than a piece of it.
const maxReadChunk = 8 << 20

// readStep is how much one read system call asks for.
const readStep = 256 << 10

// openRegular opens rp for reading without ever blocking (O_NONBLOCK: a
// FIFO or a device inside the roots would otherwise hang the open until
// someone writes) and checks, on the opened file, that it is a regular
// file.
func openRegular(s *session, rp resolved, op string) (*os.File, fs.FileInfo, *protocol.Error) {
	f, err := rp.root.dir.OpenFile(relOrDot(rp.rel), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, s.roots.fsError(op, rp, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, s.roots.fsError(op, rp, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"path": rp.abs, "type": fileType(fi.Mode())},
			"%s %s: not a regular file", op, rp.abs)
	}
	return f, fi, nil
}

// readChunked reads up to limit bytes from offset in steps, stopping early
// when ctx ends. It trusts EOF rather than the size (files grow; /proc
// files report 0). more says whether bytes remain past what was read.
func readChunked(ctx context.Context, f *os.File, offset, limit, size int64) ([]byte, bool, error) {
	capHint := limit
	if rest := size - offset; size > 0 && rest >= 0 && rest < capHint {
		capHint = rest
	}
	buf := make([]byte, 0, max(capHint, 0))
	for int64(len(buf)) < limit {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		step := min(limit-int64(len(buf)), readStep)
		// No file reaches past the largest offset, and the kernel refuses
		// a read whose end would overflow it.
		if end := math.MaxInt64 - (offset + int64(len(buf))); step > end {
			if step = end; step == 0 {
				return buf, false, nil
			}
		}
		if free := int64(cap(buf) - len(buf)); free < step {
			buf = append(buf, make([]byte, step)...)[:len(buf)]
		}
		n, err := f.ReadAt(buf[len(buf):len(buf)+int(step)], offset+int64(len(buf)))
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
	// At the limit: is there more? One byte says.
	var probe [1]byte
	n, _ := f.ReadAt(probe[:], offset+int64(len(buf)))
	return buf, n > 0, nil
}

// openDir opens a directory without blocking on whatever else the name
// may turn out to be.
func openDir(root *os.Root, rel string) (*os.File, error) {
	return root.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
}

// openSubRoot opens the directory rel of root as a Root without ever
// blocking: Root.OpenRoot opens its last component with neither
// O_DIRECTORY nor O_NONBLOCK, so a FIFO there would hang the open until
// someone writes. A trailing slash makes the kernel refuse anything but a
// directory (or a link to one, still followed within the root) before it
// opens: no check to race with.
func openSubRoot(root *os.Root, rel string) (*os.Root, error) {
	return root.OpenRoot(rel + "/")
}

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func (c *conn) fsWrite(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.FSWriteParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	if e := c.session(req, p.SessionID); e != nil {
		return nil, e
	}
	s := req.session
	mode := p.Mode
	if mode == "" {
		mode = protocol.WriteReplace
	}
	if mode != protocol.WriteCreate && mode != protocol.WriteReplace && mode != protocol.WriteAppend {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "mode must be create, replace or append")
	}
	if strings.HasSuffix(p.Path, "/") {
		// A trailing slash names a directory: without this check the
		// path is cleaned and a file made where a directory was meant.
		return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"path": p.Path},
			"fs.write: %s ends in '/', which names a directory; name the file to write", p.Path)
	}
	atomic := p.Atomic == nil || *p.Atomic
	perm := fs.FileMode(0o644)
	if p.Perm != "" {
		v, err := strconv.ParseUint(p.Perm, 8, 32)
		// Permission bits only: os.Root refuses to create a file with
		// setuid, setgid or sticky (an internal error otherwise).
		if err != nil || v > 0o777 {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "perm must be an octal mode from 0000 to 0777 such as 0644 (no setuid, setgid or sticky bits)")
		}
		perm = fs.FileMode(v)
	}
	content, err := protocol.DecodeData(p.Content, p.Encoding)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "content: %v", err)
	}
	rp, perr := s.roots.resolve(p.Path, s.cwd)
	if perr != nil {
		return nil, perr
	}
	if rp.rel == "." {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "write %s: that is a root directory", rp.abs)
	}
	root := rp.root.dir
	dir := filepath.Dir(rp.rel)
	if p.MkdirParents && dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return nil, s.roots.fsError("create parent directories of", rp, err)
		}
	}
	// A write to a symlink writes the file it names, as open(2) would and
	// as a non-atomic write does: renaming over the link would replace it.
	// (create keeps O_EXCL's rule: an existing name, link or not, is a
	// conflict.)
	if mode != protocol.WriteCreate {
		if rp, perr = s.roots.followLink(rp); perr != nil {
			return nil, perr
		}
	}
	root = rp.root.dir
	old, statErr := root.Stat(rp.rel)
	exists := statErr == nil
	if statErr != nil && !errors.Is(statErr, fs.ErrNotExist) {
		return nil, s.roots.fsError("write", rp, statErr)
	}
	if exists && c.srv.isAuditLog(old) {
		return nil, c.srv.auditLogRefused("fs.write", rp.abs)
	}
	if exists && !old.Mode().IsRegular() {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"path": rp.abs, "type": fileType(old.Mode())},
			"write %s: not a regular file", rp.abs)
	}
	if p.ExpectedMtime != "" {
		actual := ""
		if exists {
			actual = mtimeString(old.ModTime())
		}
		if actual != p.ExpectedMtime {
			return nil, protocol.Errorf(protocol.CodeConcurrencyConflict,
				protocol.ConflictData{Path: rp.abs, ExpectedMtime: p.ExpectedMtime, ActualMtime: actual, Reason: "mtime_mismatch"},
				"write %s: the file changed since it was read (mtime %s, expected %s); read it again", rp.abs, orNone(actual), p.ExpectedMtime)
		}
	}
	if mode == protocol.WriteCreate && exists {
		return nil, protocol.Errorf(protocol.CodeConcurrencyConflict,
			protocol.ConflictData{Path: rp.abs, Reason: "exists"},
			"write %s: the file already exists and mode is create; use replace to overwrite it", rp.abs)
	}

	switch {
	case mode == protocol.WriteAppend || !atomic:
		flags := os.O_WRONLY | os.O_CREATE
		switch mode {
		case protocol.WriteAppend:
			flags |= os.O_APPEND
		case protocol.WriteCreate:
			flags |= os.O_EXCL
		}
		// A replace truncates once the file is known to be the one meant
		// (not O_TRUNC, which would empty whatever is opened).
		// O_NONBLOCK: a FIFO swapped in after the check above must not
		// hang the open; the fstat below refuses it.
		f, err := root.OpenFile(rp.rel, flags|syscall.O_NONBLOCK, perm)
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				return nil, protocol.Errorf(protocol.CodeConcurrencyConflict, protocol.ConflictData{Path: rp.abs, Reason: "exists"},
					"write %s: the file already exists and mode is create; use replace to overwrite it", rp.abs)
			}
			if errors.Is(err, syscall.ENXIO) {
				return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"path": rp.abs, "type": protocol.TypeOther},
					"write %s: not a regular file", rp.abs)
			}
			return nil, s.roots.fsError("write", rp, err)
		}
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			f.Close()
			return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"path": rp.abs, "type": protocol.TypeOther},
				"write %s: not a regular file", rp.abs)
		}
		if c.srv.isAuditLog(fi) { // linked in after the check above
			f.Close()
			return nil, c.srv.auditLogRefused("fs.write", rp.abs)
		}
		var werr error
		if mode == protocol.WriteReplace {
			werr = f.Truncate(0)
		}
		if werr == nil {
			_, werr = f.Write(content)
		}
		if werr == nil {
			werr = f.Sync()
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil && exists {
			werr = bumpMtime(root, rp.rel, old)
		}
		if werr != nil {
			return nil, s.roots.fsError("write", rp, werr)
		}
	default:
		if perr := writeAtomic(root, rp, content, perm, old, mode == protocol.WriteCreate, s.roots); perr != nil {
			return nil, perr
		}
	}
	fi, err := root.Stat(rp.rel)
	if err != nil {
		return nil, s.roots.fsError("stat", rp, err)
	}
	return protocol.FSWriteResult{Path: rp.abs, BytesWritten: int64(len(content)), Mtime: mtimeString(fi.ModTime()), Created: !exists}, nil
}

func orNone(s string) string {
	if s == "" {
		return "none: missing"
	}
	return s
}

// writeAtomic writes a temp file beside the target, syncs it and moves it
// into place: readers see the old file or the new one, never a mix. Create
// links instead of renaming so an existing file is never replaced.
func writeAtomic(root *os.Root, rp resolved, content []byte, perm fs.FileMode, old fs.FileInfo, create bool, rs rootSet) *protocol.Error {
	var rnd [6]byte
	rand.Read(rnd[:])
	// The temp name is the target's, cut so the whole stays within a
	// file name's 255 bytes (NAME_MAX) for a target that uses them all.
	const suffix = len(".rexd-") + 2*len(rnd) + len(".tmp")
	base := filepath.Base(rp.rel)
	if len(base) > 255-1-suffix {
		base = base[:255-1-suffix]
	}
	tmp := filepath.Join(filepath.Dir(rp.rel), "."+base+".rexd-"+hex.EncodeToString(rnd[:])+".tmp")
	// A replace gives the temp file the old file's mode once it is written:
	// until then it is the owner's only, so the new content of a private
	// file is never open to others (who could keep it open past the chmod).
	tmpPerm := perm
	if old != nil {
		tmpPerm = 0o600
	}
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, tmpPerm)
	if err != nil {
		return rs.fsError("write", rp, err)
	}
	cleanup := func() { root.Remove(tmp) }
	_, werr := f.Write(content)
	if werr == nil && old != nil {
		// The new file replaces the old one: it keeps its owner and group
		// (a rexd running as root must not hand a user's file to root),
		// as far as this user may give them (EPERM: not root, and the
		// file was another's), and then its mode, setuid and setgid
		// included, which chown clears.
		if st, ok := old.Sys().(*syscall.Stat_t); ok {
			if err := f.Chown(int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, syscall.EPERM) {
				werr = err
			}
		}
		if werr == nil {
			werr = f.Chmod(old.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky))
		}
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil && old != nil {
		werr = bumpMtime(root, tmp, old)
	}
	if werr != nil {
		cleanup()
		return rs.fsError("write", rp, werr)
	}
	if create {
		err = root.Link(tmp, rp.rel)
		cleanup()
		if errors.Is(err, fs.ErrExist) {
			return protocol.Errorf(protocol.CodeConcurrencyConflict, protocol.ConflictData{Path: rp.abs, Reason: "exists"},
				"write %s: the file already exists and mode is create; use replace to overwrite it", rp.abs)
		}
	} else {
		err = root.Rename(tmp, rp.rel)
		if err != nil {
			cleanup()
		}
	}
	if err != nil {
		return rs.fsError("write", rp, err)
	}
	// The rename is durable only once the directory is. openDir: a FIFO
	// switched in for the directory meanwhile must not hang the open.
	if d, err := openDir(root, filepath.Dir(rp.rel)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// bumpMtime makes sure a write changes the file's mtime even when it lands
// in the same clock tick as the previous one (file times come from a coarse
// kernel clock), so expected_mtime always notices a write made through rexd.
func bumpMtime(root *os.Root, rel string, old fs.FileInfo) error {
	fi, err := root.Stat(rel)
	if err != nil {
		return err
	}
	if fi.ModTime().After(old.ModTime()) {
		return nil
	}
	t := old.ModTime().Add(time.Microsecond)
	return root.Chtimes(rel, t, t)
}

func (c *conn) fsStat(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.FSStatParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	if e := c.session(req, p.SessionID); e != nil {
		return nil, e
	}
	s := req.session
	rp, perr := s.roots.resolve(p.Path, s.cwd)
	if perr != nil {
		return nil, perr
	}
	res := protocol.FSStatResult{Path: rp.abs}
	root := rp.root.dir
	lfi, err := root.Lstat(relOrDot(rp.rel))
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return nil, s.roots.fsError("stat", rp, err)
	}
	fi := lfi
	if lfi.Mode()&fs.ModeSymlink != 0 {
		target, err := root.Readlink(rp.rel)
		if err != nil {
			return nil, s.roots.fsError("stat", rp, err)
		}
		res.SymlinkTarget = target
		// Follow it, within the roots only.
		fi, err = root.Stat(rp.rel)
		if errors.Is(err, fs.ErrNotExist) {
			fi = lfi // a dangling link: report the link itself
		} else if err != nil {
			return nil, s.roots.fsError("stat", rp, err)
		}
	}
	res.Exists = true
	res.Type = fileType(fi.Mode())
	if fi == lfi && lfi.Mode()&fs.ModeSymlink != 0 {
		res.Type = protocol.TypeSymlink
	}
	res.Size = fi.Size()
	res.Mtime = mtimeString(fi.ModTime())
	res.Mode = "0" + strconv.FormatUint(uint64(fi.Mode().Perm()), 8)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid, gid := int(st.Uid), int(st.Gid)
		res.UID, res.GID = &uid, &gid
	}
	return res, nil
}

func (c *conn) fsList(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.FSListParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	if e := c.session(req, p.SessionID); e != nil {
		return nil, e
	}
	s := req.session
	max := p.MaxEntries
	if max <= 0 {
		max = defaultMaxEntries
	}
	if max > hardMaxEntries {
		max = hardMaxEntries
	}
	rp, perr := s.roots.resolve(p.Path, s.cwd)
	if perr != nil {
		return nil, perr
	}
	root := rp.root.dir
	rel := relOrDot(rp.rel)
	// Open the directory through the root first: a symlinked directory that
	// leads outside fails here.
	d, err := openDir(root, rel)
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"path": rp.abs}, "list %s: not a directory", rp.abs)
	}
	if err != nil {
		return nil, s.roots.fsError("list", rp, err)
	}
	fi, err := d.Stat()
	d.Close()
	if err != nil {
		return nil, s.roots.fsError("list", rp, err)
	}
	if !fi.IsDir() {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"path": rp.abs}, "list %s: not a directory", rp.abs)
	}
	// Walk a root opened at the directory itself, so that a symlink on the
	// way in is resolved once, inside the roots.
	sub, err := openSubRoot(root, rel)
	if err != nil {
		return nil, s.roots.fsError("list", rp, err)
	}
	defer sub.Close()
	res := protocol.FSListResult{Path: rp.abs, Entries: []protocol.FSEntry{}}
	fsys := sub.FS()
	add := func(name string, de fs.DirEntry) bool {
		if len(res.Entries) >= max {
			res.Truncated = true
			return false
		}
		e := protocol.FSEntry{Name: de.Name(), Path: filepath.Join(rp.abs, filepath.FromSlash(name)), Type: fileType(de.Type())}
		if info, err := de.Info(); err == nil {
			m := mtimeString(info.ModTime())
			e.Mtime = &m
			if info.Mode().IsRegular() {
				sz := info.Size()
				e.Size = &sz
			}
		}
		res.Entries = append(res.Entries, e)
		return true
	}
	err = listDir(ctx, fsys, ".", p.Recursive, func() int { return max - len(res.Entries) }, add)
	if errors.Is(err, errListFull) {
		err = nil
	}
	if err != nil {
		return nil, s.roots.fsError("list", rp, err)
	}
	sort.Slice(res.Entries, func(i, j int) bool { return res.Entries[i].Path < res.Entries[j].Path })
	return res, nil
}

// listDir calls add for the entries of dir in the order a walk by name
// meets them (depth-first when recursive) until add refuses one, which
// tells add the answer is cut. room says how many more add can take: each
// directory is read in pieces keeping only the names that could still be
// answered with (one more, to see whether there are more), so a huge
// directory costs its reading, not its size in memory. An unreadable
// subdirectory is skipped, as before.
func listDir(ctx context.Context, fsys fs.FS, dir string, recursive bool, room func() int, add func(string, fs.DirEntry) bool) error {
	f, err := fsys.Open(dir)
	if err != nil {
		return err
	}
	d, ok := f.(fs.ReadDirFile)
	if !ok {
		f.Close()
		return &fs.PathError{Op: "readdir", Path: dir, Err: syscall.ENOTDIR}
	}
	ents, err := smallestEntries(ctx, d, room()+1)
	f.Close()
	if err != nil {
		return err
	}
	for _, de := range ents {
		name := path.Join(dir, de.Name())
		if !add(name, de) {
			return errListFull
		}
		if recursive && de.IsDir() {
			err := listDir(ctx, fsys, name, true, room, add)
			if errors.Is(err, errListFull) || ctx.Err() != nil {
				return err
			}
		}
	}
	return nil
}

// errListFull ends a listing whose answer is full.
var errListFull = errors.New("the listing is full")

// smallestEntries reads d in pieces and returns, sorted by name, its n
// entries that sort first.
func smallestEntries(ctx context.Context, d fs.ReadDirFile, n int) ([]fs.DirEntry, error) {
	h := &entryHeap{}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		batch, err := d.ReadDir(256)
		for _, de := range batch {
			if h.Len() < n {
				heap.Push(h, de)
			} else if n > 0 && de.Name() < (*h)[0].Name() {
				(*h)[0] = de
				heap.Fix(h, 0)
			}
		}
		if err == io.EOF || err == nil && len(batch) == 0 {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	out := []fs.DirEntry(*h)
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// entryHeap is a max-heap of directory entries by name: its top is the
// one to drop when a smaller name comes.
type entryHeap []fs.DirEntry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].Name() > h[j].Name() }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)        { *h = append(*h, x.(fs.DirEntry)) }
func (h *entryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (c *conn) fsGlob(ctx context.Context, req *request) (any, *protocol.Error) {
	var p protocol.FSGlobParams
	if e := decode(req.msg.Params, &p); e != nil {
		return nil, e
	}
	if e := c.session(req, p.SessionID); e != nil {
		return nil, e
	}
	s := req.session
	if p.Pattern == "" {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "pattern is required")
	}
	max := p.MaxMatches
	if max <= 0 {
		max = defaultMaxMatches
	}
	if max > hardMaxMatches {
		max = hardMaxMatches
	}
	cwd := s.cwd
	if p.Cwd != "" {
		rp, perr := s.roots.resolve(p.Cwd, s.cwd)
		if perr != nil {
			return nil, perr
		}
		cwd = rp.abs
	}
	pattern := expandHome(p.Pattern)
	if !filepath.IsAbs(pattern) {
		pattern = filepath.Join(cwd, pattern)
	}
	pattern = filepath.Clean(pattern)
	// The literal leading directories locate the walk; the rest is matched.
	segs := strings.Split(strings.TrimPrefix(pattern, "/"), "/")
	lit := 0
	for lit < len(segs) && !hasMeta(segs[lit]) {
		lit++
	}
	if lit == len(segs) { // no wildcard at all: a plain existence check
		lit = len(segs) - 1
	}
	base := "/" + strings.Join(segs[:lit], "/")
	// "**/**" is "**": a run of them is one, and the matcher's work (per
	// entry, pattern segments × path depth) stays bounded by what a path
	// could match, not by the size of the request.
	var rest []string
	for _, seg := range segs[lit:] {
		if seg == "**" && len(rest) > 0 && rest[len(rest)-1] == "**" {
			continue
		}
		rest = append(rest, seg)
	}
	if len(rest) > maxGlobSegments {
		return nil, protocol.Errorf(protocol.CodeInvalidParams, map[string]int{"max_segments": maxGlobSegments},
			"pattern has %d segments after its directory; at most %d are taken", len(rest), maxGlobSegments)
	}
	for _, seg := range rest {
		if _, err := path.Match(seg, ""); err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidParams, nil, "pattern %q: %v", p.Pattern, err)
		}
	}
	rp, perr := s.roots.resolve(base, "/")
	if perr != nil {
		return nil, perr
	}
	res := protocol.FSGlobResult{Matches: []string{}}
	sub, err := openSubRoot(rp.root.dir, relOrDot(rp.rel))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return res, nil // nothing below a missing directory or a file
	}
	if err != nil {
		return nil, s.roots.fsError("glob", rp, err)
	}
	defer sub.Close()
	budget := globWalkBudget
	err = globDir(ctx, sub.FS(), ".", rest, &budget, func(name string) bool {
		if len(res.Matches) >= max {
			return false
		}
		res.Matches = append(res.Matches, filepath.Join(rp.abs, filepath.FromSlash(name)))
		return true
	}, func() int { return max - len(res.Matches) })
	if errors.Is(err, errListFull) {
		res.Truncated, err = true, nil
	}
	if err != nil {
		return nil, s.roots.fsError("glob", rp, err)
	}
	sort.Strings(res.Matches)
	return res, nil
}

// globDir walks dir for fs.glob as fs.WalkDir would, in name order and
// depth first, calling match for each entry that matches pat until it
// refuses one or the walk has visited budget entries (both end it with
// errListFull). Each directory is read in pieces keeping only what counts:
// the directories a match could lie below, and of the entries that match,
// the room() + 1 that sort first (the rest could never be answered), so a
// huge directory costs its reading, not its size in memory. An unreadable
// directory is skipped, as before.
func globDir(ctx context.Context, fsys fs.FS, dir string, pat []string, budget *int, match func(string) bool, room func() int) error {
	all, full, err := globRead(ctx, fsys, dir, pat, budget, room)
	if err != nil {
		return err
	}
	for _, k := range all {
		name := path.Join(dir, k.de.Name())
		if k.match && !match(name) {
			return errListFull
		}
		if k.below {
			if err := globDir(ctx, fsys, name, pat, budget, match, room); err != nil {
				return err
			}
		}
	}
	if full {
		return errListFull
	}
	return nil
}

// globEntry is an entry of a directory that a glob walk keeps.
type globEntry struct {
	de           fs.DirEntry
	match, below bool // it matches; a match could lie below it
}

// globRead reads dir for globDir: what it keeps, in name order, and
// whether the budget ran out on the way.
func globRead(ctx context.Context, fsys fs.FS, dir string, pat []string, budget *int, room func() int) ([]globEntry, bool, error) {
	f, err := fsys.Open(dir)
	if err != nil {
		return nil, false, nil
	}
	defer f.Close()
	d, ok := f.(fs.ReadDirFile)
	if !ok {
		return nil, false, nil
	}
	var prefix []string
	if dir != "." {
		prefix = strings.Split(dir, "/")
	}
	var kept []globEntry
	files := &entryHeap{} // matches with nothing below: the room()+1 first by name
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		batch, rerr := d.ReadDir(256)
		for _, de := range batch {
			if *budget--; *budget < 0 {
				return sortGlob(kept, files), true, nil
			}
			p := append(slices.Clip(prefix), de.Name())
			m := matchSegments(pat, p)
			switch {
			case de.IsDir() && couldMatchBelow(pat, p):
				kept = append(kept, globEntry{de, m, true})
			case !m:
			case files.Len() < room()+1:
				heap.Push(files, de)
			case de.Name() < (*files)[0].Name():
				(*files)[0] = de
				heap.Fix(files, 0)
			}
		}
		if rerr != nil || len(batch) == 0 {
			return sortGlob(kept, files), false, nil // io.EOF, or unreadable from here on
		}
	}
}

// sortGlob joins a directory's kept directories and matches in name order.
func sortGlob(kept []globEntry, files *entryHeap) []globEntry {
	for _, de := range *files {
		kept = append(kept, globEntry{de: de, match: true})
	}
	slices.SortFunc(kept, func(a, b globEntry) int { return strings.Compare(a.de.Name(), b.de.Name()) })
	return kept
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// matchSegments matches path segments against pattern segments, where "**"
// stands for any number of segments (zero included). Each pair of
// positions is tried once: by plain recursion, a pattern of many **s
// tries every way of spreading the path over them, exponentially many.
func matchSegments(pat, parts []string) bool {
	// tried[i*(len(parts)+1)+j]: pat[i:] against parts[j:] was tried and
	// failed (a success ends the whole match at once).
	tried := make([]bool, (len(pat)+1)*(len(parts)+1))
	var match func(i, j int) bool
	match = func(i, j int) bool {
		if i == len(pat) {
			return j == len(parts)
		}
		k := i*(len(parts)+1) + j
		if tried[k] {
			return false
		}
		tried[k] = true
		if pat[i] == "**" {
			for n := j; n <= len(parts); n++ {
				if match(i+1, n) {
					return true
				}
			}
			return false
		}
		if j == len(parts) {
			return false
		}
		if ok, _ := path.Match(pat[i], parts[j]); !ok {
			return false
		}
		return match(i+1, j+1)
	}
	return match(0, 0)
}

// couldMatchBelow reports whether some path below the directory parts could
// still match, so that the walk skips subtrees that cannot.
func couldMatchBelow(pat, parts []string) bool {
	for i, seg := range pat {
		if seg == "**" {
			return true
		}
		if i >= len(parts) {
			return true
		}
		if ok, _ := path.Match(seg, parts[i]); !ok {
			return false
		}
	}
	return len(parts) < len(pat)
}
