// Package awskms is a sessionstore.KeyProvider over AWS Key Management
// Service: a session's data key is wrapped by KMS Encrypt under a KMS key
// and unwrapped by KMS Decrypt, the session's context bound as the
// encryption context. The KMS key never leaves KMS; the Store holds only
// the wrapped data keys (in its key records) and, while a session is
// open, the session's unwrapped data key in memory.
//
// It is its own module, so that the core pulls none of the AWS SDK:
//
//	go get github.com/sessionstore/sessionstore/awskms
//
// One Encrypt call per session created, one Decrypt per session opened
// (a Store caches the unwrapped key while the session is open), never one
// per event.
package awskms

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"

	"github.com/sessionstore/sessionstore"
)

// API is the part of *kms.Client the Provider calls.
type API interface {
	Encrypt(ctx context.Context, in *kms.EncryptInput, opts ...func(*kms.Options)) (*kms.EncryptOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// ContextKey is the key of the encryption context entry that binds a
// wrapped data key to its session (its value the context, base64 without
// padding, URL alphabet). An IAM policy can name it in a condition
// (kms:EncryptionContextKeys).
const ContextKey = "sessionstore"

// Provider wraps under one KMS key and unwraps under whichever key a
// wrapped data key names. It is safe for concurrent use.
type Provider struct {
	api   API
	keyID string
}

// New returns a Provider that wraps under keyID (a key id, key ARN, alias
// name or alias ARN) through api, usually a *kms.Client. Unwrap asks KMS
// for the key each wrapped data key was wrapped under (the key ARN Wrap
// returned), so after a rotation to another key the old one still
// unwraps while KMS lets this caller use it.
func New(api API, keyID string) *Provider {
	return &Provider{api: api, keyID: keyID}
}

func encryptionContext(context []byte) map[string]string {
	return map[string]string{ContextKey: base64.RawURLEncoding.EncodeToString(context)}
}

// Wrap encrypts dataKey under the Provider's key and returns the key's
// ARN, as KMS reports it, with the ciphertext blob.
func (p *Provider) Wrap(ctx context.Context, dataKey, context []byte) (string, []byte, error) {
	out, err := p.api.Encrypt(ctx, &kms.EncryptInput{
		KeyId:             &p.keyID,
		Plaintext:         dataKey,
		EncryptionContext: encryptionContext(context),
	})
	if err != nil {
		return "", nil, mapError("wrap a data key under", p.keyID, err)
	}
	if out.KeyId == nil || *out.KeyId == "" {
		return "", nil, fmt.Errorf("awskms: wrap a data key under %s: KMS named no key", p.keyID)
	}
	return *out.KeyId, out.CiphertextBlob, nil
}

// Unwrap decrypts wrapped, asking KMS to use keyID only.
func (p *Provider) Unwrap(ctx context.Context, keyID string, wrapped, context []byte) ([]byte, error) {
	out, err := p.api.Decrypt(ctx, &kms.DecryptInput{
		KeyId:             &keyID,
		CiphertextBlob:    wrapped,
		EncryptionContext: encryptionContext(context),
	})
	if err != nil {
		return nil, mapError("unwrap a data key under", keyID, err)
	}
	return out.Plaintext, nil
}

// mapError turns KMS's errors into the KeyProvider's: a key KMS does not
// have or will not use is sessionstore.ErrKeyUnavailable, a ciphertext
// that does not decrypt under it (another key, another context, damage)
// sessionstore.ErrWrongKey; anything else (the network, throttling) is
// returned wrapped as it is.
func mapError(doing, keyID string, err error) error {
	var (
		notFound   *types.NotFoundException
		disabled   *types.DisabledException
		invalid    *types.KMSInvalidStateException
		unavail    *types.KeyUnavailableException
		badCipher  *types.InvalidCiphertextException
		incorrect  *types.IncorrectKeyException
		invalidArn *types.InvalidArnException
		api        smithy.APIError
	)
	switch {
	case errors.As(err, &notFound), errors.As(err, &disabled), errors.As(err, &invalid),
		errors.As(err, &unavail), errors.As(err, &invalidArn):
		return fmt.Errorf("awskms: %s %s: %w: %w", doing, keyID, sessionstore.ErrKeyUnavailable, err)
	case errors.As(err, &badCipher), errors.As(err, &incorrect):
		return fmt.Errorf("awskms: %s %s: %w: %w", doing, keyID, sessionstore.ErrWrongKey, err)
	case errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException":
		return fmt.Errorf("awskms: %s %s: %w: %w", doing, keyID, sessionstore.ErrKeyUnavailable, err)
	}
	return fmt.Errorf("awskms: %s %s: %w", doing, keyID, err)
}
