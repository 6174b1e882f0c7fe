package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// TestEncryptedStoreCommands: the inspector reads an encrypted store
// with the keys SESSIONSTORE_KEY_FILE or SESSIONSTORE_KEYS give it, and
// without them (or with another key) refuses its sessions with the key
// error, never printing sealed bytes.
func TestEncryptedStoreCommands(t *testing.T) {
	ctx := context.Background()
	key := bytes.Repeat([]byte{9}, 32)
	keys, err := sessionstore.NewLocalKeys("local:1", map[string][]byte{"local:1": key})
	require.NoError(t, err)
	root := t.TempDir()
	s, err := sessionstore.Open(root, &sessionstore.Options{Keys: keys})
	require.NoError(t, err)
	m, err := s.Create(ctx, sessionstore.Meta{Name: "private"})
	require.NoError(t, err)
	_, err = s.Append(ctx, m.ID, sessionstore.UserText("the secret is 42"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	id := m.ID.String()

	t.Setenv(keyFileEnv, "")
	t.Setenv(keysEnv, "")
	status, stdout, stderr := runCmd("path", root, id)
	assert.Equal(t, exitFail, status)
	assert.NotContains(t, stdout, "the secret is 42")
	assert.Contains(t, stderr, "key unavailable")

	file := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(file, []byte("local:1 "+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600))
	t.Setenv(keyFileEnv, file)
	status, stdout, stderr = runCmd("path", root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "the secret is 42")

	t.Setenv(keyFileEnv, "")
	t.Setenv(keysEnv, "local:1 "+base64.StdEncoding.EncodeToString(key))
	status, stdout, stderr = runCmd("path", root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "the secret is 42")

	t.Setenv(keysEnv, "local:1 "+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{8}, 32)))
	status, _, stderr = runCmd("path", root, id)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "wrong key")

	t.Setenv(keyFileEnv, filepath.Join(t.TempDir(), "missing"))
	status, _, stderr = runCmd("ls", root)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, keyFileEnv)
}

// TestKeysCommand: keys rewrap moves every key record to the first key of
// the key file, after which the old key can go; keys reencrypt seals a
// session again, and it reads as before; bad command lines are usage
// errors.
func TestKeysCommand(t *testing.T) {
	ctx := context.Background()
	oldKey := bytes.Repeat([]byte{9}, 32)
	newKey := bytes.Repeat([]byte{10}, 32)
	keys, err := sessionstore.NewLocalKeys("old", map[string][]byte{"old": oldKey})
	require.NoError(t, err)
	root := t.TempDir()
	s, err := sessionstore.Open(root, &sessionstore.Options{Keys: keys})
	require.NoError(t, err)
	m, err := s.Create(ctx, sessionstore.Meta{Name: "private"})
	require.NoError(t, err)
	_, err = s.Append(ctx, m.ID, sessionstore.UserText("the secret is 42"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	id := m.ID.String()
	enc := base64.StdEncoding.EncodeToString
	t.Setenv(keyFileEnv, "")

	t.Setenv(keysEnv, "new "+enc(newKey)+",old "+enc(oldKey))
	status, stdout, stderr := runCmd("keys", root, "rewrap")
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "rewrapped 1 key records")
	t.Setenv(keysEnv, "new "+enc(newKey))
	status, stdout, stderr = runCmd("path", root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "the secret is 42", "readable with the new key alone")

	status, stdout, stderr = runCmd("keys", root, "reencrypt", id[:8])
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, id+": sealed again")
	status, stdout, stderr = runCmd("path", root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "the secret is 42")

	for _, args := range [][]string{
		{"keys", root},
		{"keys", root, "rotate"},
		{"keys", root, "rewrap", id},
		{"keys", root, "reencrypt"},
		{"keys", root, "reencrypt", "not-an-id"},
	} {
		status, _, _ := runCmd(args...)
		assert.Equal(t, exitUsage, status, "%v", args)
	}
}
