package cas

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// The stat cache lets a scan skip reading files that have not changed since
// the last scan of the same directory, as git's index does: a file whose
// size, modification and change times, inode and mode all match its cached
// entry keeps its cached digest. An entry is recorded only when the file's
// times are older than racyWindow at the moment it was looked at, so a file
// changed again within one tick of the file system's clock is read again
// next time. The cache is advisory: losing it costs one re-read.
//
// Each cache also names its directory, so together the caches of a store
// say where on this machine a blob can be found (see locator): a
// destination's own files are a target's store of blobs.

// racyWindow is how old a file's times must be before its entry is cached:
// longer than a tick of the kernel's coarse clock, which stamps file times
// (1 to 10 ms), so a later write always moves them. A file system that
// keeps whole seconds only (no nanoseconds in either time) gets
// racyWindowCoarse instead.
const (
	racyWindow       = 20 * time.Millisecond
	racyWindowCoarse = 2 * time.Second
)

// statKey is what identifies an unchanged file.
type statKey struct {
	Size  int64
	Mtime int64
	Ctime int64
	Ino   uint64
	Dev   uint64
	Mode  uint32
}

type statEntry struct {
	Key  statKey
	Hash [32]byte
	// Racy entries were written too soon after the file changed to vouch
	// for it: a scan reads such a file again. They still tell the locator
	// where a blob may be, since what it reads there is verified.
	Racy bool
}

type statCache struct {
	path string // the cache file
	dir  string // the directory it describes
	now  func() time.Time
	memo *statMemo

	mu      sync.Mutex
	old     map[string]statEntry
	fresh   map[string]statEntry
	changed bool // fresh differs from old
}

// racy reports whether a file of key k, looked at after seen, could
// change again unseen within the same tick of the file system's clock.
func (k statKey) racy(seen time.Time) bool {
	window := racyWindow
	if k.Mtime%int64(time.Second) == 0 && k.Ctime%int64(time.Second) == 0 {
		window = racyWindowCoarse
	}
	limit := seen.Add(-window).UnixNano()
	return k.Mtime > limit || k.Ctime > limit
}

func keyOf(fi fs.FileInfo) (statKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return statKey{}, false
	}
	return statKey{
		Size:  fi.Size(),
		Mtime: fi.ModTime().UnixNano(),
		Ctime: ctime(st),
		Ino:   uint64(st.Ino),
		Dev:   uint64(st.Dev),
		Mode:  uint32(fi.Mode()),
	}, true
}

// statCacheFile is where the cache of the directory abs lives.
func (s *Store) statCacheFile(abs string) string {
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(s.root, "statcache", hex.EncodeToString(sum[:12]))
}

// openStatCache loads the cache of the directory dir.
func (s *Store) openStatCache(dir string) *statCache {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	c := &statCache{path: s.statCacheFile(abs), dir: abs, now: s.now, memo: s.stats, old: map[string]statEntry{}, fresh: map[string]statEntry{}}
	if f, err := os.Open(c.path); err == nil {
		id, idOK := fileIDOf(f)
		if entries, ok := s.stats.get(c.path, id); idOK && ok {
			c.old = entries
		} else if d, entries, err := readStatCache(bufio.NewReaderSize(f, 64<<10)); err == nil && d == abs {
			c.old = entries
			if idOK {
				s.stats.put(c.path, id, entries)
			}
		}
		c.fresh = make(map[string]statEntry, len(c.old)) // a scan records about as many
		f.Close()
	}
	return c
}

// fileID tells one version of a cache file from another: each save writes a
// new file (a new inode) and renames it into place.
type fileID struct {
	ino, size uint64
	mtime     int64
}

func fileIDOf(f *os.File) (fileID, bool) {
	fi, err := f.Stat()
	if err != nil {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{ino: uint64(st.Ino), size: uint64(fi.Size()), mtime: fi.ModTime().UnixNano()}, true
}

// statMemo keeps the entries of the cache files a long-lived process (rexd,
// the console) read or wrote last, so a scan of the same directory soon
// after does not read and decode its cache file again. The maps it holds
// are never written to: a scan records into a fresh map.
type statMemo struct {
	mu    sync.Mutex
	order []string // cache files, least recently used first
	m     map[string]memoEntry
	held  int // entries held in all
}

type memoEntry struct {
	id      fileID
	entries map[string]statEntry
}

const (
	maxMemoFiles   = 8
	maxMemoEntries = 1 << 17
)

func (m *statMemo) get(file string, id fileID) (map[string]statEntry, bool) {
	if m == nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[file]
	if !ok || e.id != id {
		return nil, false
	}
	m.touch(file)
	return e.entries, true
}

func (m *statMemo) put(file string, id fileID, entries map[string]statEntry) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]memoEntry{}
	}
	if e, ok := m.m[file]; ok {
		m.held -= len(e.entries)
		delete(m.m, file)
		m.order = removeString(m.order, file)
	}
	if len(entries) > maxMemoEntries {
		return
	}
	for len(m.order) > 0 && (len(m.order) >= maxMemoFiles || m.held+len(entries) > maxMemoEntries) {
		old := m.order[0]
		m.order = m.order[1:]
		m.held -= len(m.m[old].entries)
		delete(m.m, old)
	}
	m.m[file] = memoEntry{id: id, entries: entries}
	m.order = append(m.order, file)
	m.held += len(entries)
}

func (m *statMemo) touch(file string) {
	m.order = append(removeString(m.order, file), file)
}

func removeString(list []string, s string) []string {
	for i, o := range list {
		if o == s {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

// lookup returns the cached digest of rel when fi still matches.
func (c *statCache) lookup(rel string, fi fs.FileInfo) (Digest, bool) {
	if c == nil || fi == nil {
		return Digest{}, false
	}
	k, ok := keyOf(fi)
	if !ok {
		return Digest{}, false
	}
	e, ok := c.old[rel]
	if !ok || e.Racy || e.Key != k {
		return Digest{}, false
	}
	return Digest{Hash: hex.EncodeToString(e.Hash[:]), Size: k.Size}, true
}

// keep notes for the next scan that rel is as lookup found it: its entry
// stands as it was, without being made again.
func (c *statCache) keep(rel string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.fresh[rel] = c.old[rel]
	c.mu.Unlock()
}

// record notes rel's digest for the next scan. seen is when fi was taken
// (before the lstat), which is what decides whether it is racy.
func (c *statCache) record(rel string, fi fs.FileInfo, d Digest, seen time.Time) {
	if c == nil || fi == nil {
		return
	}
	k, ok := keyOf(fi)
	if !ok {
		return
	}
	e := statEntry{Key: k, Racy: k.racy(seen)}
	if _, err := hex.Decode(e.Hash[:], []byte(d.Hash)); err != nil {
		return
	}
	c.mu.Lock()
	c.fresh[rel] = e
	if !c.changed {
		if o, ok := c.old[rel]; !ok || o != e {
			c.changed = true
		}
	}
	c.mu.Unlock()
}

// save replaces the cache file with this scan's entries, when they differ
// from what was loaded.
func (c *statCache) save() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.changed && len(c.fresh) == len(c.old) {
		return
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".statcache-*")
	if err != nil {
		return
	}
	w := bufio.NewWriterSize(tmp, 64<<10)
	werr := writeStatCache(w, c.dir, c.fresh)
	if werr == nil {
		werr = w.Flush()
	}
	// The file's identity survives the rename (inode, size, mtime).
	id, idOK := fileIDOf(tmp)
	if cerr := tmp.Close(); werr == nil && cerr == nil {
		if os.Rename(tmp.Name(), c.path) == nil {
			if idOK {
				c.memo.put(c.path, id, c.fresh)
			}
			c.old, c.changed = c.fresh, false
			c.fresh = map[string]statEntry{}
			return
		}
	}
	os.Remove(tmp.Name())
}

// The cache file: a magic line, the directory, then one record per file
// (its path relative to the directory, the stat key, the SHA-256), with
// lengths and numbers as uvarints. A few MB for 100,000 files, read in
// milliseconds: the file is read on every scan.
const statCacheMagic = "rex-statcache-3\n"

// maxStatCacheEntries bounds what a damaged or hostile cache file can make
// a reader allocate.
const maxStatCacheEntries = 1 << 24

func writeStatCache(w *bufio.Writer, dir string, entries map[string]statEntry) error {
	w.WriteString(statCacheMagic)
	var buf [binary.MaxVarintLen64]byte
	uv := func(v uint64) { w.Write(buf[:binary.PutUvarint(buf[:], v)]) }
	str := func(s string) { uv(uint64(len(s))); w.WriteString(s) }
	str(dir)
	uv(uint64(len(entries)))
	for rel, e := range entries {
		str(rel)
		uv(uint64(e.Key.Size))
		uv(uint64(e.Key.Mtime))
		uv(uint64(e.Key.Ctime))
		uv(e.Key.Ino)
		uv(e.Key.Dev)
		uv(uint64(e.Key.Mode))
		w.Write(e.Hash[:])
		racy := byte(0)
		if e.Racy {
			racy = 1
		}
		w.WriteByte(racy)
	}
	return nil
}

var errBadStatCache = errors.New("damaged stat cache")

func readStatCache(r *bufio.Reader) (string, map[string]statEntry, error) {
	magic := make([]byte, len(statCacheMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != statCacheMagic {
		return "", nil, errBadStatCache
	}
	var err error
	uv := func() uint64 {
		if err != nil {
			return 0
		}
		var v uint64
		v, err = binary.ReadUvarint(r)
		return v
	}
	str := func() string {
		n := uv()
		if err != nil {
			return ""
		}
		if n > 1<<16 {
			err = errBadStatCache
			return ""
		}
		b := make([]byte, n)
		_, err = io.ReadFull(r, b)
		return string(b)
	}
	dir := str()
	n := uv()
	if err != nil || n > maxStatCacheEntries {
		return "", nil, errBadStatCache
	}
	entries := make(map[string]statEntry, n)
	for range n {
		rel := str()
		var e statEntry
		e.Key.Size = int64(uv())
		e.Key.Mtime = int64(uv())
		e.Key.Ctime = int64(uv())
		e.Key.Ino = uv()
		e.Key.Dev = uv()
		e.Key.Mode = uint32(uv())
		if err == nil {
			_, err = io.ReadFull(r, e.Hash[:])
		}
		if err == nil {
			var racy byte
			if racy, err = r.ReadByte(); err == nil && racy > 1 {
				err = errBadStatCache
			}
			e.Racy = racy == 1
		}
		if err != nil {
			return "", nil, fmt.Errorf("%w: %v", errBadStatCache, err)
		}
		entries[rel] = e
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return "", nil, errBadStatCache
	}
	return dir, entries, nil
}

// statCacheDirs lists the directories the store holds caches of, with
// their entries: where blobs may be found on this machine.
func (s *Store) statCaches() map[string]map[string]statEntry {
	out := map[string]map[string]statEntry{}
	dir := filepath.Join(s.root, "statcache")
	list, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, de := range list {
		if !de.Type().IsRegular() || bytes.HasPrefix([]byte(de.Name()), []byte(".")) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, de.Name()))
		if err != nil {
			continue
		}
		d, entries, err := readStatCache(bufio.NewReaderSize(f, 64<<10))
		f.Close()
		if err == nil && filepath.IsAbs(d) {
			out[d] = entries
		}
	}
	return out
}
