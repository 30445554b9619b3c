package cas

import (
	"strings"
	"testing"
)

// checkProgress asserts what a sync's reports must hold: totals appear
// only once the walk ends and never change after, the counts never go
// back, and the last report is the final Stats with everything moved.
func checkProgress(t *testing.T, what string, reports []Progress, final Stats) {
	t.Helper()
	if len(reports) == 0 {
		t.Fatalf("%s: no progress reported", what)
	}
	walked := false
	var prev Progress
	for i, p := range reports {
		if p.Walking && walked {
			t.Fatalf("%s: report %d walks again after the totals were known", what, i)
		}
		if !p.Walking {
			if walked && (p.TotalObjects != prev.TotalObjects || p.TotalBytes != prev.TotalBytes) {
				t.Fatalf("%s: totals changed from %d/%d to %d/%d", what, prev.TotalObjects, prev.TotalBytes, p.TotalObjects, p.TotalBytes)
			}
			walked = true
		}
		if p.Blobs+p.Trees < prev.Blobs+prev.Trees || p.Bytes < prev.Bytes || p.Queries < prev.Queries {
			t.Fatalf("%s: report %d went back: %+v after %+v", what, i, p, prev)
		}
		if !p.Walking && (p.Blobs+p.Trees > p.TotalObjects || p.Bytes > p.TotalBytes) {
			t.Fatalf("%s: report %d moved more than its totals: %+v", what, i, p)
		}
		prev = p
	}
	if !walked {
		t.Fatalf("%s: the totals were never reported", what)
	}
	if prev.Stats != final {
		t.Errorf("%s: last report %+v, final stats %+v", what, prev.Stats, final)
	}
	if prev.TotalObjects != final.Blobs+final.Trees || prev.TotalBytes != final.Bytes {
		t.Errorf("%s: totals %d objects / %d bytes, moved %d / %d", what, prev.TotalObjects, prev.TotalBytes, final.Blobs+final.Trees, final.Bytes)
	}
}

func TestSyncReportsProgress(t *testing.T) {
	ctx := t.Context()
	spec := projectSpec()
	// A streamed object reports within the stream, not only at its end.
	spec["big"] = strings.Repeat("0123456789abcdef", 3*MaxInlineSize/16)
	// More bytes than one batch holds: objects just under the inline cap.
	for i := range 5 {
		spec["many/f"+string(rune('a'+i))] = strings.Repeat(string(rune('a'+i)), MaxInlineSize-1)
	}
	local := newStore(t)
	remote := &countingRemote{LocalRemote: LocalRemote{Store: newStore(t)}, t: t}
	root := ingestSpec(t, local, spec)

	var pushed []Progress
	st, err := PushWith(ctx, local, remote, root, SyncOptions{Progress: func(p Progress) { pushed = append(pushed, p) }})
	if err != nil {
		t.Fatal(err)
	}
	checkProgress(t, "push", pushed, st)
	if st.Batches < 2 {
		t.Fatalf("push took %d batches; the test wants several", st.Batches)
	}
	// Bytes that grew while no object completed were counted mid-stream.
	midStream := false
	for i := 1; i < len(pushed); i++ {
		a, b := pushed[i-1], pushed[i]
		if !a.Walking && b.Bytes > a.Bytes && b.Blobs+b.Trees == a.Blobs+a.Trees {
			midStream = true
		}
	}
	if st.Streams != 1 || !midStream {
		t.Errorf("push streamed %d objects and reported mid-stream: %v; want one, reported", st.Streams, midStream)
	}

	// Unchanged: the walk ends at once with nothing to move.
	var again []Progress
	st, err = PushWith(ctx, local, remote, root, SyncOptions{Progress: func(p Progress) { again = append(again, p) }})
	if err != nil {
		t.Fatal(err)
	}
	checkProgress(t, "re-push", again, st)
	if last := again[len(again)-1]; last.TotalObjects != 0 || last.Queries != 1 {
		t.Errorf("unchanged push reported %+v, want nothing to move after one query", last)
	}

	var fetched []Progress
	back := newStore(t)
	st, err = FetchWith(ctx, back, remote, root, SyncOptions{Progress: func(p Progress) { fetched = append(fetched, p) }})
	if err != nil {
		t.Fatal(err)
	}
	checkProgress(t, "fetch", fetched, st)
	if st.Blobs == 0 || st.Streams != 1 {
		t.Errorf("fetch stats %+v", st)
	}

	// Push and PushWith without a callback agree.
	plain, err := Push(ctx, local, &countingRemote{LocalRemote: LocalRemote{Store: newStore(t)}, t: t}, root)
	if err != nil {
		t.Fatal(err)
	}
	if first := pushed[len(pushed)-1].Stats; plain != first {
		t.Errorf("Push %+v, PushWith %+v", plain, first)
	}
}
