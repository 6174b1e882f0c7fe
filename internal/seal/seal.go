package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// Algorithm is the name key records give the AEAD.
const Algorithm = "AES-256-GCM"

// Sizes of a key and of the parts Seal adds.
const (
	KeySize   = 32
	NonceSize = 12
	TagSize   = 16
	Overhead  = NonceSize + TagSize
)

var (
	// ErrAuth reports sealed bytes that do not open: damaged, sealed
	// under another key, or for another place.
	ErrAuth = errors.New("seal: message authentication failed")
	// ErrShort reports fewer bytes than a sealed piece's Overhead.
	ErrShort = errors.New("seal: sealed piece too short")
)

// Cipher seals and opens pieces under one data key. It is safe for
// concurrent use.
type Cipher struct {
	aead cipher.AEAD
}

// NewKey returns a new random data key.
func NewKey() ([]byte, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("seal: new key: %w", err)
	}
	return k, nil
}

// NewCipher returns the Cipher of key, which must be KeySize bytes.
func NewCipher(key []byte) (*Cipher, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("seal: a key is %d bytes, not %d", KeySize, len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	return &Cipher{aead: aead}, nil
}

// Seal appends to dst the sealed form of plaintext with associated data
// aad (nonce, ciphertext, tag) and returns the result. dst and plaintext
// must not overlap.
func (c *Cipher) Seal(dst, plaintext, aad []byte) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, NonceSize)...)
	nonce := dst[n : n+NonceSize]
	if _, err := rand.Read(nonce); err != nil {
		// crypto/rand.Read never fails on the systems Go supports (Go
		// 1.24 and later crash the program instead).
		panic(err)
	}
	return c.aead.Seal(dst, nonce, plaintext, aad)
}

// Open appends to dst the plaintext of sealed, which must have been
// sealed by this key with associated data aad, and returns the result;
// else ErrShort or ErrAuth, dst unchanged.
func (c *Cipher) Open(dst, sealed, aad []byte) ([]byte, error) {
	if len(sealed) < Overhead {
		return dst, ErrShort
	}
	out, err := c.aead.Open(dst, sealed[:NonceSize], sealed[NonceSize:], aad)
	if err != nil {
		return dst, ErrAuth
	}
	return out, nil
}

// Kind is what a sealed piece is, the first byte of its associated data.
type Kind byte

// The kinds of sealed pieces.
const (
	KindRecord  Kind = 1 // an event's record in a chunk line
	KindBlock   Kind = 2 // a block of a sealed chunk
	KindBlob    Kind = 3 // a blob
	KindMeta    Kind = 4 // the encrypted fields of session.json
	KindPreview Kind = 5 // a preview in an index line
	KindWrap    Kind = 6 // a data key wrapped under a key-encryption key
)

// AADSize is the size of AAD's result.
const AADSize = 1 + 16 + 8 + 8

// AAD returns the associated data of a piece of kind k of session at
// place (a, b): what the kind makes of them (a chunk and an offset, a
// block's chunk and index, an event id's halves), so that a piece opens
// only where it was sealed.
func AAD(k Kind, session uuid.UUID, a, b uint64) []byte {
	out := make([]byte, AADSize)
	out[0] = byte(k)
	copy(out[1:17], session[:])
	binary.BigEndian.PutUint64(out[17:25], a)
	binary.BigEndian.PutUint64(out[25:33], b)
	return out
}
