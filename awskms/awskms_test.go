package awskms_test

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/awskms"
	"github.com/sessionstore/sessionstore/awskms/kmstest"
)

var server *kmstest.Server

func TestMain(m *testing.M) { os.Exit(kmstest.Main(m, &server)) }

// TestWrapUnwrap: a data key wrapped under a KMS key unwraps under it
// with the same context, and not with another context, under another
// key, or changed.
func TestWrapUnwrap(t *testing.T) {
	ctx := context.Background()
	arn := server.CreateKey(t)
	p := awskms.New(server.Client(), arn)
	dataKey := bytes.Repeat([]byte{0x42}, 32)
	keyID, wrapped, err := p.Wrap(ctx, dataKey, []byte("session A"))
	require.NoError(t, err)
	assert.Equal(t, arn, keyID, "the key's ARN")
	assert.False(t, bytes.Contains(wrapped, dataKey), "the data key does not show")
	assert.LessOrEqual(t, len(wrapped), 512, "fits a key record")
	got, err := p.Unwrap(ctx, keyID, wrapped, []byte("session A"))
	require.NoError(t, err)
	assert.Equal(t, dataKey, got)

	_, err = p.Unwrap(ctx, keyID, wrapped, []byte("session B"))
	assert.ErrorIs(t, err, sessionstore.ErrWrongKey, "another context: %v", err)
	other := server.CreateKey(t)
	_, err = p.Unwrap(ctx, other, wrapped, []byte("session A"))
	assert.ErrorIs(t, err, sessionstore.ErrWrongKey, "another key: %v", err)
	bad := bytes.Clone(wrapped)
	bad[len(bad)-1] ^= 1
	_, err = p.Unwrap(ctx, keyID, bad, []byte("session A"))
	assert.ErrorIs(t, err, sessionstore.ErrWrongKey, "changed: %v", err)
}

// TestKeyUnavailable: an unknown key, and a disabled one, are
// ErrKeyUnavailable, naming the key.
func TestKeyUnavailable(t *testing.T) {
	ctx := context.Background()
	missing := "arn:aws:kms:" + kmstest.Region + ":" + kmstest.Account + ":key/00000000-0000-0000-0000-000000000000"
	_, _, err := awskms.New(server.Client(), missing).Wrap(ctx, make([]byte, 32), nil)
	require.ErrorIs(t, err, sessionstore.ErrKeyUnavailable, "%v", err)
	assert.Contains(t, err.Error(), missing)

	arn := server.CreateKey(t)
	p := awskms.New(server.Client(), arn)
	keyID, wrapped, err := p.Wrap(ctx, make([]byte, 32), []byte("s"))
	require.NoError(t, err)
	_, err = server.Client().DisableKey(ctx, &kms.DisableKeyInput{KeyId: &arn})
	require.NoError(t, err)
	_, err = p.Unwrap(ctx, keyID, wrapped, []byte("s"))
	assert.ErrorIs(t, err, sessionstore.ErrKeyUnavailable, "a disabled key: %v", err)
	_, _, err = p.Wrap(ctx, make([]byte, 32), []byte("s"))
	assert.ErrorIs(t, err, sessionstore.ErrKeyUnavailable, "a disabled key: %v", err)
	_, err = server.Client().EnableKey(ctx, &kms.EnableKeyInput{KeyId: &arn})
	require.NoError(t, err)
	got, err := p.Unwrap(ctx, keyID, wrapped, []byte("s"))
	require.NoError(t, err, "enabled again")
	assert.Len(t, got, 32)
}

// TestRotation: after the Provider moves to a new KMS key, what the old
// one wrapped still unwraps, and new wraps name the new key.
func TestRotation(t *testing.T) {
	ctx := context.Background()
	oldKey, newKey := server.CreateKey(t), server.CreateKey(t)
	oldID, wrapped, err := awskms.New(server.Client(), oldKey).Wrap(ctx, bytes.Repeat([]byte{1}, 32), []byte("s"))
	require.NoError(t, err)
	p := awskms.New(server.Client(), newKey)
	got, err := p.Unwrap(ctx, oldID, wrapped, []byte("s"))
	require.NoError(t, err)
	assert.Equal(t, bytes.Repeat([]byte{1}, 32), got)
	id, _, err := p.Wrap(ctx, got, []byte("s"))
	require.NoError(t, err)
	assert.Equal(t, newKey, id)
}

// TestConcurrent: a Provider serves goroutines at once.
func TestConcurrent(t *testing.T) {
	ctx := context.Background()
	p := awskms.New(server.Client(), server.CreateKey(t))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			dk := bytes.Repeat([]byte{byte(i)}, 32)
			c := []byte{byte(i)}
			id, w, err := p.Wrap(ctx, dk, c)
			if err == nil {
				var got []byte
				got, err = p.Unwrap(ctx, id, w, c)
				if err == nil && !bytes.Equal(got, dk) {
					err = assert.AnError
				}
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
}

// TestLocalAndKMSAgree: the Provider and sessionstore.LocalKeys keep the
// KeyProvider contract the same way (a context mismatch is ErrWrongKey,
// an unknown key ErrKeyUnavailable), so the Store treats them alike.
func TestLocalAndKMSAgree(t *testing.T) {
	ctx := context.Background()
	local, err := sessionstore.NewLocalKeys("k", map[string][]byte{"k": bytes.Repeat([]byte{9}, 32)})
	require.NoError(t, err)
	providers := map[string]sessionstore.KeyProvider{
		"local": local,
		"kms":   awskms.New(server.Client(), server.CreateKey(t)),
	}
	for name, p := range providers {
		id, w, err := p.Wrap(ctx, bytes.Repeat([]byte{7}, 32), []byte("ctx"))
		require.NoError(t, err, name)
		_, err = p.Unwrap(ctx, id, w, []byte("other"))
		assert.ErrorIs(t, err, sessionstore.ErrWrongKey, name)
		_, err = p.Unwrap(ctx, "arn:aws:kms:"+kmstest.Region+":"+kmstest.Account+":key/11111111-1111-1111-1111-111111111111", w, []byte("ctx"))
		assert.ErrorIs(t, err, sessionstore.ErrKeyUnavailable, name)
	}
}
