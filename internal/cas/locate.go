package cas

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"
)

// A blob need not sit in the store's objects/ to be read: the files of the
// directories this store has scanned (the destinations a daemon wrote, the
// trees it ingested for a pull) hold blobs too, and their stat caches say
// which. The locator keeps that map. A location is used only while the
// file's stat still matches what was recorded, and what is read from it is
// verified like any object, so a stale location costs a miss, never wrong
// bytes.

type blobLoc struct {
	dir, rel string
	key      statKey
}

type locator struct {
	mu     sync.Mutex
	byHash map[string][]blobLoc
	loaded bool // every stat cache of the store was read in
}

func (s *Store) locator() *locator { return s.loc }

// maxLocations bounds the places remembered for one blob.
const maxLocations = 4

func (l *locator) add(hash string, loc blobLoc) {
	locs := l.byHash[hash]
	for _, o := range locs {
		if o.dir == loc.dir && o.rel == loc.rel {
			return
		}
	}
	if len(locs) >= maxLocations {
		locs = locs[1:]
	}
	l.byHash[hash] = append(locs, loc)
}

// note records the hashed files of a walk of dir.
func (l *locator) note(dir string, jobs []*ingestJob) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, j := range jobs {
		if j.err != nil || j.info == nil {
			continue
		}
		if k, ok := keyOf(j.info); ok {
			l.add(j.d.Hash, blobLoc{dir: dir, rel: j.rel, key: k})
		}
	}
}

// noteFile records one file at dir/rel holding d.
func (l *locator) noteFile(dir, rel string, d Digest, k statKey) {
	l.mu.Lock()
	l.add(d.Hash, blobLoc{dir: dir, rel: rel, key: k})
	l.mu.Unlock()
}

// forget drops a location found stale.
func (l *locator) forget(hash string, loc blobLoc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	locs := l.byHash[hash]
	for i, o := range locs {
		if o == loc {
			l.byHash[hash] = append(locs[:i:i], locs[i+1:]...)
			break
		}
	}
}

// loadCaches reads the store's stat caches into the map, once.
func (l *locator) loadCaches(s *Store) {
	l.mu.Lock()
	done := l.loaded
	l.loaded = true
	l.mu.Unlock()
	if done {
		return
	}
	caches := s.statCaches()
	l.mu.Lock()
	defer l.mu.Unlock()
	for dir, entries := range caches {
		for rel, e := range entries {
			l.add(hex.EncodeToString(e.Hash[:]), blobLoc{dir: dir, rel: rel, key: e.Key})
		}
	}
}

// find returns the known locations of d.
func (l *locator) find(d Digest) []blobLoc {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []blobLoc
	for _, loc := range l.byHash[d.Hash] {
		if loc.key.Size == d.Size {
			out = append(out, loc)
		}
	}
	return out
}

// openLocated opens a file known to hold d whose stat still matches, or
// returns nil. With search set, the store's stat caches are read first if
// no location is known in this process. The caller verifies what it reads
// where it matters (Read, Open), or trusts the stat as the scans do.
func (s *Store) openLocated(d Digest, search bool) (*os.File, blobLoc) {
	l := s.locator()
	locs := l.find(d)
	if len(locs) == 0 && search {
		l.loadCaches(s)
		locs = l.find(d)
	}
	for _, loc := range locs {
		f, err := openBeneath(loc.dir, loc.rel)
		if err != nil {
			l.forget(d.Hash, loc)
			continue
		}
		fi, err := f.Stat()
		if k, ok := keyOf(fi); err != nil || !ok || k != loc.key {
			f.Close()
			l.forget(d.Hash, loc)
			continue
		}
		return f, loc
	}
	return nil, blobLoc{}
}

// openBeneath opens dir/rel without following any link out of dir.
func openBeneath(dir, rel string) (*os.File, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Open(filepath.FromSlash(rel))
}
