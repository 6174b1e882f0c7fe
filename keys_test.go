package sessionstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func keyB64(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) }

func TestLocalKeysWrapUnwrap(t *testing.T) {
	ctx := context.Background()
	l, err := NewLocalKeys("k2", map[string][]byte{"k1": bytes.Repeat([]byte{1}, 32), "k2": bytes.Repeat([]byte{2}, 32)})
	require.NoError(t, err)
	dataKey := bytes.Repeat([]byte{0xd}, 32)
	id, wrapped, err := l.Wrap(ctx, dataKey, []byte("session A"))
	require.NoError(t, err)
	assert.Equal(t, "k2", id, "the current key")
	assert.False(t, bytes.Contains(wrapped, dataKey))
	got, err := l.Unwrap(ctx, id, wrapped, []byte("session A"))
	require.NoError(t, err)
	assert.Equal(t, dataKey, got)

	_, err = l.Unwrap(ctx, id, wrapped, []byte("session B"))
	assert.ErrorIs(t, err, ErrWrongKey, "another context")
	_, err = l.Unwrap(ctx, "k1", wrapped, []byte("session A"))
	assert.ErrorIs(t, err, ErrWrongKey, "another key")
	_, err = l.Unwrap(ctx, "k3", wrapped, []byte("session A"))
	assert.ErrorIs(t, err, ErrKeyUnavailable)
	assert.Contains(t, err.Error(), "k3")
	for i := range wrapped {
		bad := bytes.Clone(wrapped)
		bad[i] ^= 0x10
		_, err := l.Unwrap(ctx, id, bad, []byte("session A"))
		require.ErrorIs(t, err, ErrWrongKey, "byte %d", i)
	}

	// After a rotation the old key still unwraps what it wrapped.
	rotated, err := NewLocalKeys("k3", map[string][]byte{"k2": bytes.Repeat([]byte{2}, 32), "k3": bytes.Repeat([]byte{3}, 32)})
	require.NoError(t, err)
	got, err = rotated.Unwrap(ctx, id, wrapped, []byte("session A"))
	require.NoError(t, err)
	assert.Equal(t, dataKey, got)
	id3, _, err := rotated.Wrap(ctx, dataKey, nil)
	require.NoError(t, err)
	assert.Equal(t, "k3", id3)

	for name, keys := range map[string]map[string][]byte{
		"no current":     {"k1": bytes.Repeat([]byte{1}, 32)},
		"short key":      {"k2": bytes.Repeat([]byte{1}, 16)},
		"bad id":         {"k2": bytes.Repeat([]byte{1}, 32), "a b": bytes.Repeat([]byte{1}, 32)},
		"no keys at all": nil,
	} {
		_, err := NewLocalKeys("k2", keys)
		assert.Error(t, err, name)
	}
}

func TestLoadKeyFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name, content string, perm os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), perm))
		require.NoError(t, os.Chmod(p, perm))
		return p
	}
	good := write("keys", "# keys of the store\n\nlocal:new "+keyB64(2)+"\nlocal:old "+keyB64(1)+"\n", 0o600)
	l, err := LoadKeyFile(good)
	require.NoError(t, err)
	id, wrapped, err := l.Wrap(ctx, []byte("data key"), nil)
	require.NoError(t, err)
	assert.Equal(t, "local:new", id, "the first key is current")
	old, err := NewLocalKeys("local:old", map[string][]byte{"local:old": bytes.Repeat([]byte{1}, 32)})
	require.NoError(t, err)
	_, w2, err := old.Wrap(ctx, []byte("older"), nil)
	require.NoError(t, err)
	got, err := l.Unwrap(ctx, "local:old", w2, nil)
	require.NoError(t, err)
	assert.Equal(t, "older", string(got))
	got, err = l.Unwrap(ctx, id, wrapped, nil)
	require.NoError(t, err)
	assert.Equal(t, "data key", string(got))

	for name, tc := range map[string]struct {
		content string
		perm    os.FileMode
		want    string
	}{
		"readable by others": {"k " + keyB64(1) + "\n", 0o644, "chmod 600"},
		"no key":             {"# nothing\n", 0o600, "no key"},
		"not base64":         {"k not-base64\n", 0o600, "entry 1 (k): the key is not base64"},
		"short key":          {"k " + base64.StdEncoding.EncodeToString([]byte("short")) + "\n", 0o600, "not base64 of 32 bytes"},
		"no id":              {keyB64(1) + "\n", 0o600, "entry 1"},
		"twice":              {"k " + keyB64(1) + "\nk " + keyB64(2) + "\n", 0o600, "given twice"},
		"too big":            {strings.Repeat("#", 70<<10), 0o600, "more than"},
	} {
		_, err := LoadKeyFile(write(strings.ReplaceAll(name, " ", "_"), tc.content, tc.perm))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
		assert.NotContains(t, err.Error(), keyB64(1), "%s: no key in an error", name)
	}
	_, err = LoadKeyFile(filepath.Join(dir, "absent"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = LoadKeyFile(dir)
	assert.Error(t, err, "a directory")
}

func TestKeysFromEnv(t *testing.T) {
	t.Setenv("SESSIONSTORE_TEST_KEYS", "env:b "+keyB64(2)+", env:a "+keyB64(1))
	l, err := KeysFromEnv("SESSIONSTORE_TEST_KEYS")
	require.NoError(t, err)
	id, _, err := l.Wrap(context.Background(), []byte("k"), nil)
	require.NoError(t, err)
	assert.Equal(t, "env:b", id)
	assert.Len(t, l.keys, 2)
	_, err = KeysFromEnv("SESSIONSTORE_TEST_UNSET")
	assert.ErrorContains(t, err, "is not set")
	t.Setenv("SESSIONSTORE_TEST_KEYS", "env:a "+keyB64(1)+",bad")
	_, err = KeysFromEnv("SESSIONSTORE_TEST_KEYS")
	assert.ErrorContains(t, err, "entry 2")
}
