package commands

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/protocol"
)

// A target refusing a blob that does not match its digest is reported as
// a source file that changed while it was sent; other errors pass as they
// are.
func TestChangedWhileSent(t *testing.T) {
	mismatch := protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "digest_mismatch"}, "cas.put: content does not match its digest; nothing was stored")
	other := protocol.Errorf(protocol.CodeInvalidParams, map[string]string{"reason": "invalid_digest"}, "cas.put: bad")
	for _, c := range []struct {
		err     error
		changed bool
	}{
		{fmt.Errorf("send: %w", mismatch), true},
		{other, false},
		{errors.New("digest_mismatch"), false},
	} {
		got := changedWhileSent(c.err)
		if changed := strings.HasPrefix(got.Error(), "a source file changed while it was being sent"); changed != c.changed {
			t.Errorf("%v became %q", c.err, got)
		}
		if !errors.Is(got, c.err) {
			t.Errorf("%v is no longer in %v", c.err, got)
		}
	}
}
