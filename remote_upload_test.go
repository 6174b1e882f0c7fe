package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/seam"
)

// TestRemoteSealedUploadRetried: a sealed chunk whose upload failed stays
// recorded as plain in the log (its data objects kept, nothing lost) and
// is uploaded again at the next sealing (a later full chunk, or Close
// sealing the active one; the release tries too); a Store restoring the
// session elsewhere then reads it from its sealed object.
func TestRemoteSealedUploadRetried(t *testing.T) {
	ctx := context.Background()
	for _, retry := range []string{"next sealing", "close"} {
		t.Run(retry, func(t *testing.T) {
			obj := newMemObjects()
			failing, failed := true, 0
			obj.fail = func(op, key string) (error, bool) {
				if op == "create" && strings.Contains(key, "/chunks/") && failing {
					failed++
					return fmt.Errorf("create %s: %w", key, errors.New("503 slow down")), false
				}
				return nil, false
			}
			a := memRemoteStore(t, obj, func(o *Options) { o.ChunkSize = 2 << 10 })
			m, err := a.Create(ctx, Meta{})
			require.NoError(t, err)
			var want []string
			fill := func(k int) {
				for range k {
					want = append(want, fmt.Sprintf("e%d %s", len(want), strings.Repeat("x", 200)))
					apiAppend(t, a, m.ID, textEv(want[len(want)-1]))
				}
				require.NoError(t, a.Flush(ctx, m.ID)) // seals the full chunks now
			}
			fill(12)
			require.Positive(t, failed, "precondition: the sealed chunks' uploads failed")
			assert.Empty(t, logObjects(t, obj, m.ID, seam.KindSeal, -1), "no seal record for a chunk not stored")
			assert.NotEmpty(t, logObjects(t, obj, m.ID, seam.KindData, 0), "chunk 0's data objects stay")
			obj.mu.Lock()
			failing = false // the object store is back
			obj.mu.Unlock()
			if retry == "next sealing" {
				fill(12)
				seals := logObjects(t, obj, m.ID, seam.KindSeal, -1)
				require.GreaterOrEqual(t, len(seals), 2, "the next sealing stored both chunks")
			}
			require.NoError(t, a.Close())
			assert.NotEmpty(t, obj.keys(seam.SessionPrefix(m.ID)+"chunks/"), "sealed chunk objects")
			got := map[uint32]bool{}
			for _, k := range logObjects(t, obj, m.ID, seam.KindSeal, -1) {
				b, err := obj.Get(ctx, k, 0, -1)
				require.NoError(t, err)
				h, _, err := seam.DecodeObject(k, b)
				require.NoError(t, err)
				got[h.Chunk] = true
			}
			assert.True(t, got[0], "chunk 0's seal record, after its upload was retried")
			b := memRemoteStore(t, obj)
			assert.Equal(t, want, loadTexts(t, b, m.ID))
		})
	}
}
