package rexd

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/cas"
	"github.com/rexconsole/rex/internal/protocol"
)

// TestPutChunksOfOneSessionRunAtOnce: a put_chunk of one blob completes
// (committed, with its fsync) while another blob's chunk of the same
// session is held in its write. The session's cas lock was held across
// every write and commit, so one slow disk write or fsync held up all
// the session's streamed puts.
func TestPutChunksOfOneSessionRunAtOnce(t *testing.T) {
	st, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	req := &request{session: &session{}}
	cs := &req.session.cas
	a, b := []byte("the held blob"), []byte("the other blob")
	da, db := cas.DigestOf(a), cas.DigestOf(b)
	held, release := make(chan struct{}), make(chan struct{})
	cs.writing = func(digest string) {
		if digest == da.String() {
			close(held)
			<-release
		}
	}
	c := &conn{}
	type answer struct {
		res  protocol.CASPutChunkResult
		perr *protocol.Error
	}
	first := make(chan answer, 1)
	go func() {
		res, perr := c.storeChunk(req, st, protocol.CASPutChunkParams{Digest: da.String(), Final: true}, da, a)
		first <- answer{res, perr}
	}()
	<-held

	other := make(chan answer, 1)
	go func() {
		res, perr := c.storeChunk(req, st, protocol.CASPutChunkParams{Digest: db.String(), Final: true}, db, b)
		other <- answer{res, perr}
	}()
	select {
	case got := <-other:
		if got.perr != nil || !got.res.Committed {
			t.Fatalf("the other blob: %+v %v", got.res, got.perr)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("a put_chunk waited for another blob's write")
	}
	close(release)
	if got := <-first; got.perr != nil || !got.res.Committed {
		t.Fatalf("the held blob: %+v %v", got.res, got.perr)
	}
	if missing, err := st.Has(t.Context(), []cas.Digest{da, db}); err != nil || len(missing) > 0 {
		t.Fatalf("not in the store: %v %v", missing, err)
	}
}
