package export

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// TestExportEncrypted: an encrypted session exports its records
// decrypted, blobs included, and the lanes and branches it has; a Store
// without the key exports nothing and fails with the key error.
func TestExportEncrypted(t *testing.T) {
	ctx := context.Background()
	keys, err := sessionstore.NewLocalKeys("local:1", map[string][]byte{"local:1": bytes.Repeat([]byte{5}, 32)})
	require.NoError(t, err)
	dir := t.TempDir()
	st, err := sessionstore.Open(dir, &sessionstore.Options{Keys: keys, BlobThreshold: 1024})
	require.NoError(t, err)
	m, err := st.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	first, err := st.Append(ctx, m.ID, sessionstore.UserText("first secret"))
	require.NoError(t, err)
	_, err = st.Append(ctx, m.ID, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c", Output: "blob secret " + strings.Repeat("ab", 2000)}))
	require.NoError(t, err)
	require.NoError(t, st.CreateLane(ctx, m.ID, "alt", first.ID))
	require.NoError(t, st.SwitchLane(ctx, m.ID, "alt"))
	_, err = st.Append(ctx, m.ID, sessionstore.UserText("lane secret"))
	require.NoError(t, err)
	var out bytes.Buffer
	_, err = JSONL(ctx, &out, st, m.ID, Options{})
	require.NoError(t, err)
	for _, s := range []string{"first secret", "blob secret", "lane secret"} {
		assert.Contains(t, out.String(), s)
	}
	_, evs := readAll(t, out.Bytes()) // each line's size is its record's, opened
	require.Len(t, evs, 3)
	path, err := st.Load(ctx, m.ID)
	require.NoError(t, err)
	require.Len(t, path, 2, "the lane's path: the first event and the lane's own")
	require.NoError(t, st.Close())

	plain, err := sessionstore.Open(dir, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer plain.Close()
	out.Reset()
	_, err = JSONL(ctx, &out, plain, m.ID, Options{})
	var ke *sessionstore.KeyError
	require.ErrorAs(t, err, &ke)
	assert.NotContains(t, out.String(), "secret")
}
