package cas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// The stat cache lets Ingest skip reading files that have not changed since
// the last ingest of the same directory, as git's index does: a file whose
// size, modification and change times, inode and mode all match its cached
// entry keeps its cached digest (once the object is confirmed present).
// Entries younger than racyWindow when the cache is written are left out,
// so a file changed again within one tick of the file system's clock is
// read again next time. The cache is advisory: losing it costs one re-read.

// racyWindow is how old a file's times must be before its entry is cached:
// longer than a tick of the kernel's coarse clock, which stamps file times
// (a few ms), so a later write always moves them. File systems with coarser
// timestamps (FAT's 2 s) are not a place rex syncs to.
const racyWindow = 100 * time.Millisecond

// statKey is what identifies an unchanged file.
type statKey struct {
	Size  int64  `json:"s"`
	Mtime int64  `json:"m"`
	Ctime int64  `json:"c"`
	Ino   uint64 `json:"i"`
	Dev   uint64 `json:"d"`
	Mode  uint32 `json:"o"`
}

type statEntry struct {
	Key  statKey `json:"k"`
	Hash string  `json:"h"`
}

type statCache struct {
	path    string
	mu      sync.Mutex
	old     map[string]statEntry
	fresh   map[string]statEntry
	started time.Time
}

func keyOf(fi fs.FileInfo) (statKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return statKey{}, false
	}
	return statKey{
		Size:  fi.Size(),
		Mtime: fi.ModTime().UnixNano(),
		Ctime: time.Unix(st.Ctim.Unix()).UnixNano(),
		Ino:   uint64(st.Ino),
		Dev:   uint64(st.Dev),
		Mode:  uint32(fi.Mode()),
	}, true
}

// openStatCache loads the cache of the ingested directory dir.
func (s *Store) openStatCache(dir string) *statCache {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	sum := sha256.Sum256([]byte(abs))
	c := &statCache{
		path:    filepath.Join(s.root, "statcache", hex.EncodeToString(sum[:12])+".json"),
		old:     map[string]statEntry{},
		fresh:   map[string]statEntry{},
		started: time.Now(),
	}
	if b, err := os.ReadFile(c.path); err == nil {
		json.Unmarshal(b, &c.old) // a damaged cache is simply empty
	}
	return c
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
	if !ok || e.Key != k || ValidateHash(e.Hash) != nil {
		return Digest{}, false
	}
	return Digest{Hash: e.Hash, Size: k.Size}, true
}

// record notes rel's digest for the next ingest.
func (c *statCache) record(rel string, fi fs.FileInfo, d Digest) {
	if c == nil || fi == nil {
		return
	}
	k, ok := keyOf(fi)
	if !ok {
		return
	}
	limit := c.started.Add(-racyWindow).UnixNano()
	if k.Mtime > limit || k.Ctime > limit {
		return // racy: it could change again unseen within the same tick
	}
	c.mu.Lock()
	c.fresh[rel] = statEntry{Key: k, Hash: d.Hash}
	c.mu.Unlock()
}

// save replaces the cache file with this ingest's entries.
func (c *statCache) save() {
	if c == nil {
		return
	}
	b, err := json.Marshal(c.fresh)
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".statcache-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr == nil && cerr == nil {
		if os.Rename(tmp.Name(), c.path) == nil {
			return
		}
	}
	os.Remove(tmp.Name())
}
