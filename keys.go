package sessionstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sessionstore/sessionstore/internal/seal"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Keys for encryption at rest
//
// Each encrypted session has its own data key (encrypt.go,
// docs/encryption.md): 32 random bytes that seal its records with
// AES-256-GCM (internal/seal). The data key is stored only wrapped under
// a key-encryption key that a KeyProvider holds: a local key file, an
// environment variable, or a key management service (the awskms
// module). Rotating the key-encryption key rewraps each session's data
// key (Store.Rewrap) and rewrites no data; deleting a session for good
// destroys its wrapped data key first, which leaves every copy of its
// data unreadable.
var (
	// ErrKeyUnavailable reports a key-encryption key the KeyProvider does
	// not have: a key id it does not know, or one it may not use.
	ErrKeyUnavailable = errors.New("sessionstore: key unavailable")
	// ErrWrongKey reports a wrapped data key that does not unwrap under
	// the key it names with its context: another key of the same id, or
	// damage.
	ErrWrongKey = errors.New("sessionstore: wrong key")
)

// KeyProvider wraps and unwraps data keys under key-encryption keys it
// holds. Its methods are called with the session's id and purpose as
// context (binding a wrapped key to its session: it does not unwrap under
// another), once per session opened or created, never per event. They
// must be safe for concurrent use.
//
// A provider for a key management service maps Wrap to its encrypt call
// under the current key (the context as the service's additional
// authenticated data or encryption context) and Unwrap to its decrypt
// call; README.md, "Encryption at rest", shows one.
type KeyProvider interface {
	// Wrap encrypts dataKey under the current key-encryption key, bound
	// to context, and returns that key's id (at most 200 bytes of
	// printable ASCII other than " \ < > &) with the result (at most 512
	// bytes).
	Wrap(ctx context.Context, dataKey, context []byte) (keyID string, wrapped []byte, err error)
	// Unwrap returns the data key that Wrap wrapped under keyID with
	// context. Errors: ErrKeyUnavailable when the provider does not have
	// keyID; ErrWrongKey when wrapped does not unwrap under it with
	// context; or the provider's own (a network error, say).
	Unwrap(ctx context.Context, keyID string, wrapped, context []byte) ([]byte, error)
}

// LocalKeys is a KeyProvider over key-encryption keys held in memory:
// read from a key file (LoadKeyFile), from an environment variable
// (KeysFromEnv), or given (NewLocalKeys). It wraps with the current key
// and unwraps with any of them, so that after a rotation the old keys
// stay until every session is rewrapped.
type LocalKeys struct {
	current string
	keys    map[string]*seal.Cipher
}

// NewLocalKeys returns a LocalKeys that wraps under keys[current] and
// unwraps under any of keys. Each key is 32 bytes; each id is as Wrap's
// contract says.
func NewLocalKeys(current string, keys map[string][]byte) (*LocalKeys, error) {
	l := &LocalKeys{current: current, keys: map[string]*seal.Cipher{}}
	for id, k := range keys {
		if err := seal.CheckKeyID(id); err != nil {
			return nil, fmt.Errorf("sessionstore: local keys: %w", err)
		}
		c, err := seal.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("sessionstore: local key %s: %w", id, err)
		}
		l.keys[id] = c
	}
	if _, ok := l.keys[current]; !ok {
		return nil, fmt.Errorf("sessionstore: local keys: the current key %q is not among them", current)
	}
	return l, nil
}

// wrapAAD is the associated data of a data key wrapped under keyID.
func wrapAAD(keyID string, context []byte) []byte {
	b := make([]byte, 0, 32+len(keyID)+len(context))
	b = append(b, "sessionstore wrap\x00"...)
	b = append(b, keyID...)
	b = append(b, 0)
	return append(b, context...)
}

// Wrap seals dataKey under the current key (AES-256-GCM, a random nonce),
// with the key's id and context as associated data.
func (l *LocalKeys) Wrap(_ context.Context, dataKey, context []byte) (string, []byte, error) {
	return l.current, l.keys[l.current].Seal(nil, dataKey, wrapAAD(l.current, context)), nil
}

// Unwrap opens wrapped under the key keyID.
func (l *LocalKeys) Unwrap(_ context.Context, keyID string, wrapped, context []byte) ([]byte, error) {
	c, ok := l.keys[keyID]
	if !ok {
		return nil, fmt.Errorf("%w: no local key %q", ErrKeyUnavailable, keyID)
	}
	k, err := c.Open(nil, wrapped, wrapAAD(keyID, context))
	if err != nil {
		return nil, fmt.Errorf("%w: %q does not unwrap this data key: %v", ErrWrongKey, keyID, err)
	}
	return k, nil
}

// Limits of a key file.
const (
	maxKeyFileSize = 64 << 10
	maxLocalKeys   = 1000
)

// LoadKeyFile reads a key file: one key a line, "<id> <key>" (the key
// base64 of 32 bytes, standard encoding), the first line the current key;
// blank lines and lines starting with # are skipped. The file must not
// be readable or writable by group or others (mode 0600 or narrower), and
// at most 64 KiB. A new key:
//
//	printf 'local:2026-12 %s\n' "$(head -c 32 /dev/urandom | base64)" >> keys
//
// (put the new line first to make it current).
func LoadKeyFile(path string) (*LocalKeys, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("sessionstore: key file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("sessionstore: key file %s: not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("sessionstore: key file %s: mode %04o lets others read or write it (chmod 600)", path, perm)
	}
	// vfs reads without blocking on a FIFO put in the file's place
	// meanwhile, and never more than the limit.
	b, err := vfs.ReadFileLimit(vfs.Default, path, maxKeyFileSize)
	if errors.Is(err, vfs.ErrTooLarge) {
		return nil, fmt.Errorf("sessionstore: key file %s: more than %d bytes", path, maxKeyFileSize)
	}
	if err != nil {
		return nil, fmt.Errorf("sessionstore: key file: %w", err)
	}
	l, err := parseKeys(b, "\n")
	if err != nil {
		return nil, fmt.Errorf("sessionstore: key file %s: %w", path, err)
	}
	return l, nil
}

// KeysFromEnv reads keys from the environment variable name: entries
// "<id> <key>" as in a key file, separated by commas, the first current.
func KeysFromEnv(name string) (*LocalKeys, error) {
	v, ok := os.LookupEnv(name)
	if !ok || strings.TrimSpace(v) == "" {
		return nil, fmt.Errorf("sessionstore: keys from the environment: %s is not set", name)
	}
	if len(v) > maxKeyFileSize {
		return nil, fmt.Errorf("sessionstore: keys from the environment: %s holds more than %d bytes", name, maxKeyFileSize)
	}
	l, err := parseKeys([]byte(v), ",")
	if err != nil {
		return nil, fmt.Errorf("sessionstore: keys from the environment variable %s: %w", name, err)
	}
	return l, nil
}

// parseKeys parses entries "<id> <key>" separated by sep. Errors name the
// entry by its number and id, never a key's bytes.
func parseKeys(b []byte, sep string) (*LocalKeys, error) {
	keys := map[string][]byte{}
	current := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1024), maxKeyFileSize+1)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.Index(data, []byte(sep)); i >= 0 {
			return i + len(sep), data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	n := 0
	for sc.Scan() {
		n++
		entry := strings.TrimSpace(sc.Text())
		if entry == "" || strings.HasPrefix(entry, "#") {
			continue
		}
		id, enc, ok := strings.Cut(entry, " ")
		if !ok {
			return nil, fmt.Errorf("entry %d: not \"<id> <key>\"", n)
		}
		if err := seal.CheckKeyID(id); err != nil {
			return nil, fmt.Errorf("entry %d: %w", n, err)
		}
		k, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(enc))
		if err != nil || len(k) != seal.KeySize {
			return nil, fmt.Errorf("entry %d (%s): the key is not base64 of %d bytes", n, id, seal.KeySize)
		}
		if _, dup := keys[id]; dup {
			return nil, fmt.Errorf("entry %d: key id %s given twice", n, id)
		}
		if len(keys) == maxLocalKeys {
			return nil, fmt.Errorf("more than %d keys", maxLocalKeys)
		}
		keys[id] = k
		if current == "" {
			current = id
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if current == "" {
		return nil, errors.New("no key")
	}
	return NewLocalKeys(current, keys)
}
